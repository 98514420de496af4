//! The figures of one run, computed from the visitors' records, the Redis
//! samples and the gateway's counters (printed by [`super::report`]).

use queuegate_testkit::measure::{mean, percentile};

use super::counters::Counters;
use super::sampler::{self, Sample};
use super::tally::Failure;
use super::throughput::Throughput;
use super::visitor::{Outcome, Polling, Record, Route, Sent};

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

/// Figures of visitors who polled one way.
#[derive(Debug, Clone)]
pub struct Arm {
    /// How they polled.
    pub polling: Polling,
    /// Visitors of this arm.
    pub visitors: usize,
    /// Of them admitted (saw a token).
    pub admitted: usize,
    /// Of those, whose admitting tick was read (lag and wait known).
    pub timed: usize,
    /// Polls until admission per admitted visitor: mean, p50, p95.
    pub polls: [f64; 3],
    /// Admission-notice lag (ms): p50, p95, max.
    pub lag_ms: [f64; 3],
    /// Position requests per second of waiting, over all of the arm's
    /// visitors: polls ÷ seconds from entering to the last poll.
    pub polls_per_waiting_second: f64,
}

/// ETA at entry against the actual wait, over admitted visitors.
#[derive(Debug, Clone, Copy)]
pub struct EtaError {
    /// Visitors with an ETA at entry who were admitted.
    pub samples: usize,
    /// |predicted − actual| seconds: p50, p95.
    pub abs_s: [f64; 2],
    /// predicted − actual seconds, median (positive: the ETA was long).
    pub bias_s: f64,
    /// |predicted − actual| ÷ actual, median, for waits of at least 5 s.
    pub rel_p50: f64,
}

/// Round trips to Redis (counted at the gateway) per edge operation.
#[derive(Debug, Clone, Default)]
pub struct RoundTrips {
    /// Enter requests the crowd sent.
    pub enters: u64,
    /// Position requests.
    pub positions: u64,
    /// Order requests.
    pub orders: u64,
    /// Orders the origin accepted.
    pub ordered: u64,
    /// The gateway's counters over the crowd run.
    pub counters: Counters,
}

impl RoundTrips {
    fn script(&self, name: &str) -> u64 {
        self.counters
            .by_script()
            .get(name)
            .copied()
            .unwrap_or_default()
    }

    /// Round trips of the enter script per enter request.
    pub fn per_enter(&self) -> f64 {
        self.script("enter") as f64 / self.enters.max(1) as f64
    }

    /// Round trips of the position script per position request.
    pub fn per_position(&self) -> f64 {
        self.script("position") as f64 / self.positions.max(1) as f64
    }

    /// consume + settle round trips per order request.
    pub fn per_order(&self) -> f64 {
        (self.script("consume") + self.script("settle")) as f64 / self.orders.max(1) as f64
    }

    /// All gateway round trips per edge request the crowd sent.
    pub fn per_request(&self) -> f64 {
        let sent = self.enters + self.positions + self.orders;
        self.counters.round_trips as f64 / sent.max(1) as f64
    }
}

/// Everything one run measured.
#[derive(Debug, Clone)]
pub struct Report {
    /// `nproc`, CPU model.
    pub machine: String,
    /// The settings that shaped the run, as one line.
    pub settings: String,
    /// Seconds the crowd ran.
    pub crowd_seconds: f64,
    /// The visitors' records.
    pub records: Vec<Record>,
    /// Redis samples over the crowd run.
    pub samples: Vec<Sample>,
    /// Configured admissions per second.
    pub admit_rate: f64,
    /// Configured order slots.
    pub max_active: u64,
    /// Round trips per operation.
    pub round_trips: RoundTrips,
    /// Position throughput, when measured.
    pub throughput: Option<Throughput>,
}

impl Report {
    /// Visitors with this outcome.
    pub fn count(&self, outcome: Outcome) -> usize {
        self.records.iter().filter(|r| r.outcome == outcome).count()
    }

    /// Figures of one polling arm (None when nobody polled that way).
    pub fn arm(&self, polling: Polling) -> Option<Arm> {
        let of_arm: Vec<&Record> = self
            .records
            .iter()
            .filter(|r| r.polling == polling)
            .collect();
        if of_arm.is_empty() {
            return None;
        }
        let admitted: Vec<&&Record> = of_arm
            .iter()
            .filter(|r| r.seen_admitted_ms.is_some())
            .collect();
        let polls = sorted(admitted.iter().map(|r| r.polls as f64).collect());
        let lag = sorted(
            admitted
                .iter()
                .filter_map(|r| Some(r.seen_admitted_ms?.saturating_sub(r.issued_ms?) as f64))
                .collect(),
        );
        let (polls_sent, waited_s) = of_arm.iter().fold((0.0, 0.0), |(n, t), r| {
            let enter = r.sent.iter().find(|s| s.route == Route::Enter);
            let last = r.sent.iter().rev().find(|s| s.route == Route::Position);
            match (enter, last) {
                (Some(e), Some(l)) => (n + f64::from(r.polls), t + f64::from(l.at_s - e.at_s)),
                _ => (n, t),
            }
        });
        Some(Arm {
            polling,
            polls_per_waiting_second: polls_sent / waited_s.max(1e-9),
            visitors: of_arm.len(),
            admitted: admitted.len(),
            timed: lag.len(),
            polls: [
                mean(&polls),
                percentile(&polls, 50.0),
                percentile(&polls, 95.0),
            ],
            lag_ms: [
                percentile(&lag, 50.0),
                percentile(&lag, 95.0),
                lag.last().copied().unwrap_or(f64::NAN),
            ],
        })
    }

    /// ETA error over admitted visitors who were told an ETA at entry.
    pub fn eta_error(&self) -> Option<EtaError> {
        let pairs: Vec<(f64, f64)> = self
            .records
            .iter()
            .filter_map(|r| {
                let actual = r.issued_ms?.saturating_sub(r.entered_ms?) as f64 / 1e3;
                Some((r.eta_at_entry_s? as f64, actual))
            })
            .collect();
        if pairs.is_empty() {
            return None;
        }
        let abs = sorted(pairs.iter().map(|(p, a)| (p - a).abs()).collect());
        let signed = sorted(pairs.iter().map(|(p, a)| p - a).collect());
        let rel = sorted(
            pairs
                .iter()
                .filter(|(_, a)| *a >= 5.0)
                .map(|(p, a)| (p - a).abs() / a)
                .collect(),
        );
        Some(EtaError {
            samples: pairs.len(),
            abs_s: [percentile(&abs, 50.0), percentile(&abs, 95.0)],
            bias_s: percentile(&signed, 50.0),
            rel_p50: percentile(&rel, 50.0),
        })
    }

    /// Realized admissions per second while at least one second's worth of
    /// visitors waited, and the window's length.
    pub fn realized_rate(&self) -> Option<(f64, f64)> {
        sampler::realized_rate(&self.samples, self.admit_rate.ceil() as u64)
    }

    /// Client-side latency (ms) of answered requests to `route`: p50, p99, count.
    pub fn latency(&self, route: Route) -> (f64, f64, usize) {
        let v = sorted(
            self.records
                .iter()
                .flat_map(|r| &r.sent)
                .filter(|s| s.route == route && s.latency_ms.is_finite())
                .map(|s| f64::from(s.latency_ms))
                .collect(),
        );
        (percentile(&v, 50.0), percentile(&v, 99.0), v.len())
    }

    /// Every request sent, and the failed ones by kind (kinds in the
    /// order of [`Failure`], only those seen).
    pub fn failures(&self) -> (usize, Vec<(Failure, usize)>) {
        let sent: Vec<&Sent> = self.records.iter().flat_map(|r| &r.sent).collect();
        let kinds = Failure::ALL
            .into_iter()
            .map(|k| (k, sent.iter().filter(|s| s.failure == Some(k)).count()))
            .filter(|(_, n)| *n > 0)
            .collect();
        (sent.len(), kinds)
    }

    /// Client-side latency (ms) of every answered request: p50, p90, p99,
    /// max.
    pub fn latency_all(&self) -> [f64; 4] {
        let v = sorted(
            self.records
                .iter()
                .flat_map(|r| &r.sent)
                .filter(|s| s.latency_ms.is_finite())
                .map(|s| f64::from(s.latency_ms))
                .collect(),
        );
        [
            percentile(&v, 50.0),
            percentile(&v, 90.0),
            percentile(&v, 99.0),
            v.last().copied().unwrap_or(f64::NAN),
        ]
    }

    /// Requests per second (1 s buckets, at each bucket's middle) of the
    /// requests `keep` selects.
    pub fn per_second(&self, keep: impl Fn(&Record, Route) -> bool) -> Vec<(f64, f64)> {
        let mut buckets: Vec<f64> = Vec::new();
        for r in &self.records {
            for s in r.sent.iter().filter(|s| keep(r, s.route)) {
                let i = s.at_s.max(0.0) as usize;
                if buckets.len() <= i {
                    buckets.resize(i + 1, 0.0);
                }
                buckets[i] += 1.0;
            }
        }
        buckets
            .into_iter()
            .enumerate()
            .map(|(i, n)| (i as f64 + 0.5, n))
            .collect()
    }

    /// The deepest line and the most slots in use.
    pub fn peaks(&self) -> (u64, u64) {
        let waiting = self.samples.iter().map(|s| s.waiting).max().unwrap_or(0);
        let active = self.samples.iter().map(|s| s.active).max().unwrap_or(0);
        (waiting, active)
    }
}
