//! `origin_window`: the origin's answers over the last seconds, as the
//! edge's settles counted them, and the origin control's stored state.

use crate::fields::{config, ORIGIN_LATENCY_EDGES_MS};
use crate::keys::QueueKeys;
use crate::script::{Invocation, Operation, ORIGIN_WINDOW};
use crate::value::{DecodeError, Fields, Value};

/// Latency buckets: one per edge, and one for slower answers.
pub const LATENCY_BUCKETS: usize = ORIGIN_LATENCY_EDGES_MS.len() + 1;
/// Counts per second in the reply: three classes, then the latency buckets.
const PER_SECOND: usize = 3 + LATENCY_BUCKETS;

/// What the origin answered over some seconds: at most one answer a
/// second per visitor, and never a 4xx (the visitor's doing, not the
/// origin's: settle does not count them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Answers {
    /// 2xx/3xx.
    pub ok: u64,
    /// 5xx.
    pub server_errors: u64,
    /// No answer.
    pub no_answer: u64,
    /// Answers by latency bucket (see [`ORIGIN_LATENCY_EDGES_MS`]).
    pub latency: [u64; LATENCY_BUCKETS],
}

impl Answers {
    /// Every answer counted (and every missing one).
    pub fn total(&self) -> u64 {
        self.ok + self.server_errors + self.no_answer
    }

    /// The share of 5xx and missing answers, if there were any answers.
    pub fn error_share(&self) -> Option<f64> {
        let total = self.total();
        (total > 0).then(|| (self.server_errors + self.no_answer) as f64 / total as f64)
    }

    /// The 95th percentile latency in ms, interpolated inside its bucket
    /// (the slowest, open bucket reports its lower bound).
    pub fn p95_ms(&self) -> Option<f64> {
        let n: u64 = self.latency.iter().sum();
        if n == 0 {
            return None;
        }
        let rank = (0.95 * n as f64).ceil().max(1.0);
        let mut below = 0.0;
        for (i, &count) in self.latency.iter().enumerate() {
            let count = count as f64;
            if below + count >= rank {
                let lo = if i == 0 {
                    0
                } else {
                    ORIGIN_LATENCY_EDGES_MS[i - 1]
                } as f64;
                let Some(&hi) = ORIGIN_LATENCY_EDGES_MS.get(i) else {
                    return Some(lo);
                };
                return Some(lo + (hi as f64 - lo) * (rank - below) / count);
            }
            below += count;
        }
        None
    }

    /// These answers and `other`'s.
    pub fn add(&mut self, other: &Answers) {
        self.ok += other.ok;
        self.server_errors += other.server_errors;
        self.no_answer += other.no_answer;
        for (a, b) in self.latency.iter_mut().zip(other.latency) {
            *a += b;
        }
    }
}

/// Read the last seconds' answers; record the holder's control state.
#[derive(Debug, Clone, Copy)]
pub struct OriginWindow<'a> {
    /// The queue.
    pub keys: &'a QueueKeys,
    /// The caller's lease owner id: only the holder reads and records.
    pub owner: &'a str,
    /// Seconds to read, the current one included.
    pub seconds: u64,
    /// The control state to record first, if any.
    pub record: Option<&'a ControlRecord>,
}

/// The origin control's state, as kept in the config hash.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ControlRecord {
    /// Admissions per second in force.
    pub target_rate: f64,
    /// The Redis second of the last cut (0: none).
    pub cut_at: u64,
    /// The error share over the window, if any answers.
    pub error_share: Option<f64>,
    /// The p95 latency over the window, if any answers.
    pub p95_ms: Option<f64>,
}

/// What the holder read.
#[derive(Debug, Clone, PartialEq)]
pub struct OriginRead {
    /// The current Redis second (the newest, partial bucket).
    pub now_second: u64,
    /// The stored control state: the rate in force, if any was recorded.
    pub target_rate: Option<f64>,
    /// The stored second of the last cut, if any.
    pub cut_at: Option<u64>,
    /// Answers per second, newest first: `seconds[i]` is `now_second - i`.
    pub seconds: Vec<Answers>,
}

/// The outcome of an `origin_window` call.
#[derive(Debug, Clone, PartialEq)]
pub enum OriginReply {
    /// The caller does not hold the lease: nothing read or written.
    NotOwner,
    /// The window.
    Read(OriginRead),
}

fn number(v: Option<f64>) -> String {
    v.filter(|x| x.is_finite())
        .map(|x| format!("{x:.3}"))
        .unwrap_or_default()
}

impl Operation for OriginWindow<'_> {
    type Reply = OriginReply;

    fn invocation(&self) -> Invocation {
        let k = self.keys;
        let mut args = vec![
            self.owner.to_string(),
            k.base().to_string(),
            self.seconds.max(1).to_string(),
        ];
        if let Some(r) = self.record {
            for (field, value) in [
                (config::TARGET_RATE, number(Some(r.target_rate))),
                (config::ORIGIN_CUT_AT, r.cut_at.to_string()),
                (config::ORIGIN_ERROR_SHARE, number(r.error_share)),
                (config::ORIGIN_P95_MS, number(r.p95_ms)),
            ] {
                args.push(field.to_string());
                args.push(value);
            }
        }
        Invocation {
            script: &ORIGIN_WINDOW,
            keys: vec![k.lock(), k.config()],
            args,
        }
    }

    fn decode(&self, value: Value) -> Result<OriginReply, DecodeError> {
        let f = Fields::new("origin_window", value)?;
        match f.int(0)? {
            0 => return Ok(OriginReply::NotOwner),
            1 => {}
            code => return Err(f.error(format!("unknown code {code}"))),
        }
        let counts = f.len().saturating_sub(4);
        if counts % PER_SECOND != 0 {
            return Err(f.error(format!("{counts} counts is no whole number of seconds")));
        }
        let mut seconds = Vec::with_capacity(counts / PER_SECOND);
        for s in 0..counts / PER_SECOND {
            let at = 4 + s * PER_SECOND;
            let mut a = Answers {
                ok: f.uint(at)?,
                server_errors: f.uint(at + 1)?,
                no_answer: f.uint(at + 2)?,
                latency: [0; LATENCY_BUCKETS],
            };
            for (i, slot) in a.latency.iter_mut().enumerate() {
                *slot = f.uint(at + 3 + i)?;
            }
            seconds.push(a);
        }
        Ok(OriginReply::Read(OriginRead {
            now_second: f.uint(1)?,
            target_rate: f.opt_f64(2),
            cut_at: f.opt_f64(3).map(|s| s.max(0.0) as u64),
            seconds,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_latencies(counts: [u64; LATENCY_BUCKETS]) -> Answers {
        Answers {
            ok: counts.iter().sum(),
            latency: counts,
            ..Answers::default()
        }
    }

    #[test]
    fn p95_is_interpolated_inside_its_bucket() {
        // 100 answers: 90 within 50 ms, 10 within 250–500 ms → rank 95 is
        // the 5th of 10 in (250, 500].
        let a = with_latencies([90, 0, 0, 10, 0, 0, 0, 0, 0]);
        assert_eq!(a.p95_ms(), Some(375.0));
        let slow = with_latencies([0, 0, 0, 0, 0, 0, 0, 0, 3]);
        assert_eq!(slow.p95_ms(), Some(10_000.0), "the open bucket");
        assert_eq!(Answers::default().p95_ms(), None);
    }

    #[test]
    fn the_error_share_counts_5xx_and_silence() {
        let a = Answers {
            ok: 8,
            server_errors: 1,
            no_answer: 1,
            ..Answers::default()
        };
        assert_eq!(a.error_share(), Some(0.2));
        assert_eq!(Answers::default().error_share(), None);
        let mut sum = a;
        sum.add(&a);
        assert_eq!(sum.total(), 20);
    }

    #[test]
    fn replies_decode_by_second_newest_first() {
        let keys = QueueKeys::new(
            &crate::Prefix::default(),
            &crate::QueueId::new("main").unwrap(),
        );
        let op = OriginWindow {
            keys: &keys,
            owner: "me",
            seconds: 2,
            record: None,
        };
        let mut items = vec![
            Value::Int(1),
            Value::Int(100),
            Value::Data(b"12.5".to_vec()),
            Value::Data(Vec::new()),
        ];
        for s in 0..2 {
            items.extend((0..PER_SECOND).map(|i| Value::Int(if i == 1 { s + 1 } else { 0 })));
        }
        let OriginReply::Read(r) = op.decode(Value::Array(items)).unwrap() else {
            panic!("not read");
        };
        assert_eq!(
            (r.now_second, r.target_rate, r.cut_at),
            (100, Some(12.5), None)
        );
        assert_eq!(r.seconds[1].server_errors, 2);
        assert_eq!(
            op.decode(Value::Array(vec![Value::Int(0)])).unwrap(),
            OriginReply::NotOwner
        );
        assert_eq!(op.invocation().args.len(), 3, "nothing to record");
    }
}
