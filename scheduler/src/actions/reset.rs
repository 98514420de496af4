//! `reset`: empty a closed queue for a rehearsal, keeping what the
//! operator set (settings, state, schedule, notice, bypass links, lease).

use queuegate_shared::fields::config as cf;
use queuegate_shared::{QueueKeys, QueueState};
use serde::Serialize;

use super::{pick, ActionError};
use crate::config::Config;
use crate::connect::RedisConn;

/// Empty a closed queue; `force` even while admitted visitors hold slots.
#[derive(Debug, Clone)]
pub struct Reset {
    /// The queue (None: the only one).
    pub queue: Option<String>,
    /// Reset even while tokens are in flight (they stop working).
    pub force: bool,
}

/// What a reset removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResetDone {
    /// The queue.
    pub queue: String,
    /// Keys removed: the line, the pre-queue, the statistics, every
    /// visitor's status and token, the guard's budgets.
    pub removed_keys: u64,
    /// Slots that were still held (admitted visitors whose order had not
    /// settled): non-zero only when forced.
    pub tokens_dropped: u64,
}

impl Reset {
    /// `reset`, or `reset_forced`: a forced one stands out in the audit.
    pub(super) fn name(&self) -> &'static str {
        if self.force {
            "reset_forced"
        } else {
            "reset"
        }
    }

    /// Empties a closed queue: its line, pre-queue and draw, statistics,
    /// visitors' statuses and tokens, the guard's budgets and the origin's
    /// recent answers. Refused unless the queue is closed (visitors
    /// entering or being admitted meanwhile would leave half a line), and
    /// while admitted visitors hold slots (tokens in flight) unless forced.
    pub(super) async fn apply(
        &self,
        config: &Config,
        conn: &mut RedisConn,
    ) -> Result<ResetDone, ActionError> {
        let q = pick(config, self.queue.as_deref())?;
        let keys = QueueKeys::new(&config.prefix, &q.id);
        let state: Option<String> = redis::cmd("HGET")
            .arg(keys.config())
            .arg(cf::STATE)
            .query_async(conn)
            .await?;
        if state.as_deref() != Some(QueueState::Closed.as_str()) {
            return Err(ActionError::Refused(format!(
                "queue {} is {}: close it first (`close {}`), so nobody enters or is admitted while it is emptied",
                q.id,
                state.as_deref().unwrap_or("unconfigured"),
                q.id
            )));
        }
        let held: u64 = redis::cmd("ZCARD")
            .arg(keys.active())
            .query_async(conn)
            .await?;
        if held > 0 && !self.force {
            return Err(ActionError::Refused(format!(
                "queue {} has {held} admitted visitors holding a slot (tokens in flight); wait until they order or their slots expire, or force the reset",
                q.id
            )));
        }
        let removed_keys = unlink_all_but_kept(conn, &keys).await?;
        // A rehearsal's stock goes with its orders (the holds just went
        // with the other keys): the drop sets its own.
        let clear = queuegate_shared::ops::Stock {
            keys: &keys,
            change: queuegate_shared::ops::StockChange::Clear,
        };
        crate::engine::run(conn, &clear).await?;
        Ok(ResetDone {
            queue: q.id.to_string(),
            removed_keys,
            tokens_dropped: held,
        })
    }
}

/// Unlinks every key of the queue but the operator's own: settings, state,
/// schedule and notice (config), the run-time settings, the lease, and the
/// staff's bypass links (a rehearsal keeps them). Returns how many.
async fn unlink_all_but_kept(conn: &mut RedisConn, keys: &QueueKeys) -> Result<u64, ActionError> {
    let keep = [keys.config(), keys.lock(), keys.bypass(), keys.settings()];
    // Glob specials cannot occur in a prefix or a queue id; the hash tag's
    // braces are not special.
    let pattern = format!("{}*", keys.base());
    let mut cursor = 0u64;
    let mut removed = 0u64;
    loop {
        let mut scan = redis::cmd("SCAN");
        scan.arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000);
        let reply = conn.on_slot_of(&keys.config(), &scan).await?;
        let (next, found): (u64, Vec<String>) = redis::from_redis_value(reply)
            .map_err(|e| ActionError::from(redis::RedisError::from(e)))?;
        let doomed: Vec<&String> = found.iter().filter(|k| !keep.contains(k)).collect();
        if !doomed.is_empty() {
            let n: u64 = redis::cmd("UNLINK").arg(&doomed).query_async(conn).await?;
            removed += n;
        }
        cursor = next;
        if cursor == 0 {
            return Ok(removed);
        }
    }
}
