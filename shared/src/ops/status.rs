//! `status`: what the operator's `status` command shows of one queue, read
//! in one script call (one slot, so it works on a cluster too).

use std::collections::BTreeMap;

use crate::fields::{config, stats};
use crate::keys::QueueKeys;
use crate::script::{Invocation, Operation, STATUS};
use crate::settings::QueueState;
use crate::value::{DecodeError, Fields, Value};

/// Read one queue's status.
#[derive(Debug, Clone, Copy)]
pub struct Status<'a> {
    /// The queue.
    pub keys: &'a QueueKeys,
}

/// One queue as the operator sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueStatus {
    /// The config hash: settings, state, measured rate.
    pub config: BTreeMap<String, String>,
    /// Users waiting.
    pub waiting: u64,
    /// Slots in use.
    pub active: u64,
    /// The stats hash: counters.
    pub stats: BTreeMap<String, String>,
    /// The lease holder and its remaining ms, if any.
    pub lease: Option<(String, u64)>,
    /// Visitors in the pre-queue (before a scheduled opening).
    pub pre_queued: u64,
    /// Visitors passed over asleep at the head, holding a claim within
    /// their sleep grace.
    pub claims: u64,
}

impl QueueStatus {
    /// The operator's state, if a scheduler has published settings.
    pub fn state(&self) -> Option<QueueState> {
        QueueState::parse(self.config.get(config::STATE)?)
    }

    /// The scheduler's measured admissions per second.
    pub fn measured_rate(&self) -> Option<f64> {
        self.config.get(config::MEASURED_RATE)?.parse().ok()
    }

    /// A numeric config field (a setting), if present.
    pub fn setting(&self, field: &str) -> Option<u64> {
        self.config.get(field)?.parse().ok()
    }

    /// A counter of the stats hash (0 when never counted).
    pub fn counter(&self, field: &str) -> i64 {
        self.stats
            .get(field)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// A schedule time (epoch ms), if one is set.
    pub fn scheduled(&self, field: &str) -> Option<u64> {
        self.config.get(field)?.parse().ok()
    }

    /// Pre-queued visitors the running draw has still to place (0: none).
    pub fn drawing(&self) -> u64 {
        self.setting(config::DRAW_LEFT).unwrap_or(0)
    }

    /// Every counter of the stats hash (the scan cursors are no counters).
    pub fn counters(&self) -> BTreeMap<String, i64> {
        self.stats
            .iter()
            .filter(|(k, _)| {
                ![stats::SCAN_CURSOR, stats::PRE_CURSOR, stats::CLAIM_CURSOR].contains(&k.as_str())
            })
            .filter_map(|(k, v)| Some((k.clone(), v.parse().ok()?)))
            .collect()
    }
}

impl Operation for Status<'_> {
    type Reply = QueueStatus;

    fn invocation(&self) -> Invocation {
        let k = self.keys;
        Invocation {
            script: &STATUS,
            keys: vec![
                k.config(),
                k.waiting(),
                k.active(),
                k.stats(),
                k.lock(),
                k.pre(),
                k.claims(),
            ],
            args: Vec::new(),
        }
    }

    fn decode(&self, value: Value) -> Result<QueueStatus, DecodeError> {
        let f = Fields::new("status", value)?;
        let holder = f.text(4)?;
        let ttl = f.int(5)?;
        Ok(QueueStatus {
            config: f.pairs(0)?,
            waiting: f.uint(1)?,
            active: f.uint(2)?,
            stats: f.pairs(3)?,
            lease: (!holder.is_empty())
                .then(|| (holder.to_string(), u64::try_from(ttl).unwrap_or(0))),
            pre_queued: f.uint(6)?,
            claims: f.uint(7)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Prefix, QueueId};

    fn data(s: &str) -> Value {
        Value::Data(s.as_bytes().to_vec())
    }

    #[test]
    fn a_reply_decodes_into_the_operator_view() {
        let keys = QueueKeys::new(&Prefix::default(), &QueueId::new("main").unwrap());
        let reply = Value::Array(vec![
            Value::Array(vec![
                data("state"),
                data("paused"),
                data("measured_rate"),
                data("17.5"),
            ]),
            Value::Int(12),
            Value::Int(3),
            Value::Array(vec![
                data("entered"),
                data("40"),
                data("scan_cursor"),
                data("9"),
                data("claim_cursor"),
                data("12"),
            ]),
            data("vm1/1/ab"),
            Value::Int(1800),
            Value::Int(7),
            Value::Int(2),
        ]);
        let s = Status { keys: &keys }.decode(reply).unwrap();
        assert_eq!(s.state(), Some(QueueState::Paused));
        assert_eq!(s.measured_rate(), Some(17.5));
        assert_eq!((s.waiting, s.active), (12, 3));
        assert_eq!(s.counter("entered"), 40);
        assert!(!s.counters().contains_key("scan_cursor"));
        assert!(!s.counters().contains_key("claim_cursor"));
        assert_eq!(s.lease, Some(("vm1/1/ab".into(), 1800)));
        assert_eq!((s.pre_queued, s.claims), (7, 2));
        let odd = Value::Array(vec![
            Value::Array(vec![data("state")]),
            Value::Int(0),
            Value::Int(0),
            Value::Array(vec![]),
            data(""),
            Value::Int(-2),
        ]);
        assert!(Status { keys: &keys }.decode(odd).is_err());
    }
}
