//! The counter identities every run must keep, read from Redis in one
//! MULTI/EXEC: for the system tests' `assert_conserved` and the chaos
//! run's checks alike.
//!
//! With drop day's terms: a pre-queued visitor is entered until drawn (in
//! `pre`, or in the draw while unplaced) and takes no ticket until its
//! pre-queue is sealed (the seal reserves one for each); idle passthrough
//! admits without a ticket (`passed`); a visitor passed over asleep keeps
//! its ticket in `claims` until it returns to the line or is dropped:
//!
//! ```text
//! seq      = entered − pre
//! entered  = waiting + claims + pre + unplaced + abandoned + withdrawn + admitted − passed
//! admitted = active + ordered + expired + lapsed
//! ```

use queuegate_shared::fields::{config, stats};
use queuegate_shared::QueueKeys;

/// One reading of a queue's counters and sets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Places taken (`stats.entered`).
    pub entered: i64,
    /// Tokens issued.
    pub admitted: i64,
    /// Admitted by idle passthrough, without a ticket.
    pub passed: i64,
    /// Taken out of line by an operator.
    pub withdrawn: i64,
    /// Dropped for silence.
    pub abandoned: i64,
    /// Orders the origin settled.
    pub ordered: i64,
    /// Tokens never used.
    pub expired: i64,
    /// Consumes whose origin never settled.
    pub lapsed: i64,
    /// In line.
    pub waiting: i64,
    /// Pre-queued.
    pub pre: i64,
    /// Holding an order slot.
    pub active: i64,
    /// The ticket sequence.
    pub seq: i64,
    /// Drawn visitors not placed yet.
    pub unplaced: i64,
    /// Passed over asleep, holding their tickets.
    pub claims: i64,
}

impl Counters {
    /// Reads them, atomically: a tick of a live scheduler (one script,
    /// atomic too) lands before or after the reading, never inside it.
    pub async fn read<C: redis::aio::ConnectionLike>(
        conn: &mut C,
        keys: &QueueKeys,
    ) -> redis::RedisResult<Counters> {
        let fields = [
            stats::ENTERED,
            stats::ADMITTED,
            stats::PASSED,
            stats::WITHDRAWN,
            stats::ABANDONED,
            stats::ORDERED,
            stats::EXPIRED,
            stats::LAPSED,
        ];
        type Read = (
            Vec<Option<i64>>,
            i64,
            i64,
            i64,
            Option<i64>,
            Option<i64>,
            i64,
        );
        let (counts, waiting, pre, active, seq, unplaced, claims): Read = redis::pipe()
            .atomic()
            .cmd("HMGET")
            .arg(keys.stats())
            .arg(&fields[..])
            .zcard(keys.waiting())
            .zcard(keys.pre())
            .zcard(keys.active())
            .get(keys.seq())
            .hget(keys.config(), config::DRAW_LEFT)
            .zcard(keys.claims())
            .query_async(conn)
            .await?;
        let count = |i: usize| counts.get(i).copied().flatten().unwrap_or(0);
        Ok(Counters {
            entered: count(0),
            admitted: count(1),
            passed: count(2),
            withdrawn: count(3),
            abandoned: count(4),
            ordered: count(5),
            expired: count(6),
            lapsed: count(7),
            waiting,
            pre,
            active,
            seq: seq.unwrap_or(0),
            unplaced: unplaced.unwrap_or(0),
            claims,
        })
    }

    /// The identities this reading breaks, each said with its figures
    /// (empty: all kept).
    pub fn broken(&self) -> Vec<String> {
        let c = self;
        let mut broken = Vec::new();
        if c.seq != c.entered - c.pre {
            broken.push(format!(
                "seq {} ≠ entered {} − pre-queued {}: a ticket not counted as entered",
                c.seq, c.entered, c.pre
            ));
        }
        let held =
            c.waiting + c.claims + c.pre + c.unplaced + c.abandoned + c.withdrawn + c.admitted
                - c.passed;
        if c.entered != held {
            broken.push(format!(
                "entered {} ≠ waiting {} + claims {} + pre-queued {} + unplaced {} + abandoned {} \
                 + withdrawn {} + admitted {} − passed {}",
                c.entered,
                c.waiting,
                c.claims,
                c.pre,
                c.unplaced,
                c.abandoned,
                c.withdrawn,
                c.admitted,
                c.passed
            ));
        }
        if c.admitted != c.active + c.ordered + c.expired + c.lapsed {
            broken.push(format!(
                "admitted {} ≠ active {} + ordered {} + expired {} + lapsed {}",
                c.admitted, c.active, c.ordered, c.expired, c.lapsed
            ));
        }
        broken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_identity_is_checked_on_its_own() {
        let kept = Counters {
            entered: 10,
            admitted: 4,
            waiting: 3,
            pre: 2,
            abandoned: 1,
            active: 1,
            ordered: 3,
            seq: 8,
            ..Counters::default()
        };
        assert!(kept.broken().is_empty(), "{:?}", kept.broken());
        let lost = Counters { waiting: 2, ..kept };
        assert_eq!(lost.broken().len(), 1, "{:?}", lost.broken());
        let twice = Counters {
            admitted: 5,
            ..kept
        };
        assert_eq!(twice.broken().len(), 2, "{:?}", twice.broken());
        let unticketed = Counters { seq: 9, ..kept };
        assert_eq!(unticketed.broken().len(), 1);
    }
}
