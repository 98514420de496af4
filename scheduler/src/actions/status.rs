//! `status`: what an operator sees of a queue — its state, line, slots,
//! rate, lease holder, schedule, origin control and counters.

use std::collections::BTreeMap;

use queuegate_shared::fields::config as cf;
use queuegate_shared::ops;
use queuegate_shared::QueueKeys;

use super::{pick, ActionError};
use crate::config::{self, Config, QueueConfig};
use crate::connect::RedisConn;
use crate::engine;

/// Show one queue, or every configured queue (`queue: None`).
#[derive(Debug, Clone)]
pub struct Status {
    /// The queue, or None for all.
    pub queue: Option<String>,
}

impl Status {
    /// The status of the queue, or of every configured queue.
    pub(super) async fn apply(
        &self,
        config: &Config,
        conn: &mut RedisConn,
    ) -> Result<Vec<QueueStatus>, ActionError> {
        let queues: Vec<&QueueConfig> = match &self.queue {
            Some(id) => vec![pick(config, Some(id))?],
            None => config.queues.iter().collect(),
        };
        let mut all = Vec::new();
        for q in queues {
            let mut status = read(conn, &QueueKeys::new(&config.prefix, &q.id)).await?;
            status.file = FileStatus::new(status.file.published, q.fingerprint());
            all.push(status);
        }
        Ok(all)
    }
}

/// What `status` shows of one queue (the JSON of `status --json`).
#[derive(Debug, serde::Serialize)]
pub struct QueueStatus {
    pub queue: String,
    pub state: Option<String>,
    pub waiting: u64,
    pub active: u64,
    pub max_active: Option<u64>,
    pub admitted_per_second: Option<f64>,
    pub lease_holder: Option<String>,
    pub lease_ttl_ms: Option<u64>,
    pub opens_at: Option<String>,
    pub closes_at: Option<String>,
    pub pre_queued: u64,
    pub drawing: u64,
    /// Visitors passed over asleep at the head, holding a claim (not in
    /// `waiting`).
    pub claims: u64,
    pub origin: OriginStatus,
    pub stats: BTreeMap<String, i64>,
    pub notice: Option<String>,
    /// The notice's texts per language (`notice --lang`).
    pub notice_texts: BTreeMap<String, String>,
    /// The schedule's version (one more for every write of it).
    pub schedule_version: u64,
    /// The config file whose settings are published, against this one.
    pub file: FileStatus,
    /// A kept stock's units left (None: no stock kept; 0: sold out).
    pub stock_left: Option<u64>,
    /// A kept stock's units sold.
    pub stock_sold: Option<u64>,
    /// The draw's commitment and seal (docs/drop-day.md, *A draw anyone
    /// can verify*).
    pub draw: DrawStatus,
}

/// The next draw's commitment, or the last one's reveal, and the seals.
#[derive(Debug, Default, serde::Serialize)]
pub struct DrawStatus {
    /// `pending` (committed, not revealed) or `revealed`; None: no
    /// commitment was ever made.
    pub commitment_state: Option<String>,
    /// `SHA-256(seed)`, hex.
    pub commitment: Option<String>,
    /// When it was made.
    pub committed_at: Option<String>,
    /// The draw it was revealed for.
    pub revealed_draw: Option<u64>,
    /// Pre-queues sealed so far (the last draw's number).
    pub sealed: u64,
}

impl DrawStatus {
    /// One line of `status`.
    pub fn line(&self) -> String {
        let sealed = format!("{} sealed", self.sealed);
        match (&self.commitment_state, &self.commitment) {
            (Some(state), Some(c)) => {
                let at = self.committed_at.as_deref().unwrap_or("?");
                let revealed = self
                    .revealed_draw
                    .filter(|_| state == queuegate_shared::fields::COMMIT_REVEALED)
                    .map_or(String::new(), |n| format!(" for draw {n}"));
                format!("{sealed} · commitment {c} ({state}{revealed}, made {at})")
            }
            _ => format!("{sealed} · no commitment"),
        }
    }
}

/// Which config file's settings are published (its fingerprint, beside
/// the lease) and whether this configuration's file differs: schedulers
/// with different files keep the published settings on take-over.
#[derive(Debug, Default, serde::Serialize)]
pub struct FileStatus {
    /// The published file's fingerprint (None: none published yet).
    pub published: Option<String>,
    /// This configuration's fingerprint for the queue.
    pub this_config: String,
    /// True when a file is published and this one differs.
    pub mismatch: bool,
}

impl FileStatus {
    /// The published fingerprint against this configuration's.
    pub fn new(published: Option<String>, this_config: String) -> FileStatus {
        let mismatch = published.as_ref().is_some_and(|p| *p != this_config);
        FileStatus {
            published,
            this_config,
            mismatch,
        }
    }

    /// One line for `status`.
    pub fn line(&self) -> String {
        match &self.published {
            None => format!("none published (this file {})", self.this_config),
            Some(p) if self.mismatch => format!(
                "{p} published · this file {} DIFFERS: a scheduler taking over keeps the published settings",
                self.this_config
            ),
            Some(p) => format!("{p} published (this file)"),
        }
    }
}

/// Origin control as the lease holder last recorded it.
#[derive(Debug, Default, serde::Serialize)]
pub struct OriginStatus {
    pub control: Option<bool>,
    pub target_rate_per_second: Option<f64>,
    pub max_rate_per_second: Option<f64>,
    pub min_rate_per_second: Option<f64>,
    pub error_share: Option<f64>,
    pub p95_ms: Option<f64>,
}

impl OriginStatus {
    /// From the queue's config hash.
    pub fn of(config: &BTreeMap<String, String>) -> OriginStatus {
        let num = |field: &str| config.get(field).and_then(|v| v.parse::<f64>().ok());
        OriginStatus {
            control: config.get(cf::ORIGIN_CONTROL).and_then(|v| v.parse().ok()),
            target_rate_per_second: num(cf::TARGET_RATE),
            max_rate_per_second: num(cf::ADMIT_RATE_PER_SECOND),
            min_rate_per_second: num(cf::MIN_ADMIT_RATE_PER_SECOND),
            error_share: num(cf::ORIGIN_ERROR_SHARE),
            p95_ms: num(cf::ORIGIN_P95_MS),
        }
    }

    /// One line for `status`.
    pub fn line(&self) -> String {
        let max = self
            .max_rate_per_second
            .map_or("?".to_string(), |m| format!("{m:.1}"));
        if self.control == Some(false) {
            return format!("control off: fixed {max}/s");
        }
        let target = self
            .target_rate_per_second
            .map_or("not measured yet".to_string(), |t| format!("{t:.1}/s"));
        let min = self
            .min_rate_per_second
            .map_or("?".to_string(), |m| format!("{m:.1}"));
        let errors = self
            .error_share
            .map_or("no answers".to_string(), |e| format!("{:.1} %", e * 100.0));
        let p95 = self
            .p95_ms
            .map_or("-".to_string(), |p| format!("{p:.0} ms"));
        format!("target {target} (min {min}, max {max}) · errors {errors} · p95 {p95}")
    }
}

async fn read(conn: &mut RedisConn, keys: &QueueKeys) -> Result<QueueStatus, ActionError> {
    let s = engine::run(conn, &ops::Status { keys }).await?;
    use queuegate_shared::fields::commit as dc;
    let commit: Vec<Option<String>> = redis::cmd("HMGET")
        .arg(keys.draw_commit())
        .arg(&[dc::STATE, dc::COMMITMENT, dc::COMMITTED_AT, dc::DRAW])
        .query_async(conn)
        .await?;
    let [state, commitment, committed_at, revealed] =
        <[Option<String>; 4]>::try_from(commit).unwrap_or_default();
    let draw = DrawStatus {
        commitment_state: state,
        commitment,
        committed_at: committed_at
            .and_then(|t| t.parse().ok())
            .map(config::format_time),
        revealed_draw: revealed.and_then(|n| n.parse().ok()),
        sealed: s
            .config
            .get(cf::DRAW_NUMBER)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
    };
    Ok(QueueStatus {
        queue: keys.queue().to_string(),
        state: s.config.get(cf::STATE).cloned(),
        waiting: s.waiting,
        active: s.active,
        max_active: s.setting(cf::MAX_ACTIVE),
        admitted_per_second: s.measured_rate(),
        lease_ttl_ms: s.lease.as_ref().map(|(_, ttl)| *ttl),
        lease_holder: s.lease.as_ref().map(|(holder, _)| holder.clone()),
        opens_at: s.scheduled(cf::OPENS_AT).map(config::format_time),
        closes_at: s.scheduled(cf::CLOSES_AT).map(config::format_time),
        pre_queued: s.pre_queued,
        drawing: s.drawing(),
        claims: s.claims,
        origin: OriginStatus::of(&s.config),
        stats: s.counters(),
        notice: s.config.get(cf::NOTICE).cloned(),
        notice_texts: s
            .config
            .get(cf::NOTICE_TEXTS)
            .map(|t| {
                queuegate_shared::notice::decode_texts(t)
                    .into_iter()
                    .collect()
            })
            .unwrap_or_default(),
        schedule_version: s
            .config
            .get(cf::SCHEDULE_VERSION)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        file: FileStatus {
            published: s.config.get(cf::FILE_FINGERPRINT).cloned(),
            ..FileStatus::default()
        },
        stock_left: s.config.get(cf::STOCK_LEFT).and_then(|v| v.parse().ok()),
        stock_sold: s.config.get(cf::STOCK_LEFT).map(|_| {
            s.config
                .get(cf::STOCK_SOLD)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        }),
        draw,
    })
}
