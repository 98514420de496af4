//! Issue 40's drop in virtual time: a line of drawn visitors, a stock, the
//! admit tick's cap on turns ([`margin`], a mirror of the prelude's
//! `stock.tick`), orders that hold and sell units, and every poll answered
//! by Redis or by an isolate's snapshot as the edge decides. It measures
//! how long the line waits after the last unit, what that costs Redis, and
//! how well the chance shown to waiting visitors is calibrated
//! ([`calibration`]). No network, no Redis; a fixed seed repeats a run.

pub mod calibration;
pub mod margin;
mod run;

pub use run::run;

use queuegate_shared::Settings;

use crate::poll_sim::Fleet;
use calibration::Calibration;

/// One drop. Modelled: `visitors` drawn into line at the opening (their
/// first polls spread over `poll_min + opening_spread`, as the pre-queue
/// policy tells them), nobody leaving; a tick every `tick_ms` with the
/// shared rate bucket, `max_active` and the stock's cap; a visitor learns
/// of its turn at its next poll, then orders `order_after_ms` later with
/// probability `conversion` (else its token expires after `token_ttl_ms`);
/// an order holds a unit at its consume and sells 1 or 2 units
/// `settle_ms` later; an order finding no unit is refused. Polls: the
/// interval from shared's `PollPolicy` at the scheduler's measured rate
/// (its `RateEstimate`), cut far back to the time until the near zone,
/// ×U(0.8, 1.2). Left out: leavers and sleepers, failed orders and
/// refunds, network and script time.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Visitors in line at the opening.
    pub visitors: u64,
    /// Units on sale, set at the opening.
    pub stock: u64,
    /// Share of turns that order (the rest are no-shows).
    pub conversion: f64,
    /// Share of orders taking 2 units (the rest take 1).
    pub two_unit_share: f64,
    /// An admitted visitor orders this long after it learns of its turn,
    /// uniform in the range (ms).
    pub order_after_ms: (u64, u64),
    /// Consume to settle (ms).
    pub settle_ms: u64,
    /// The operator's overbooking margin (%); None: measured.
    pub overbook_percent: Option<u64>,
    /// The queue's settings (production defaults).
    pub settings: Settings,
    /// The edge's snapshots: each far-back poll is answered from one
    /// U(0, refresh) old; refreshes counted for this fleet.
    pub fleet: Fleet,
    /// A calibration sample every this often (ms) until the stock is gone.
    pub sample_every_ms: u64,
    /// Every this many positions is sampled...
    pub sample_stride: u64,
    /// ...up to this many times the stock's reach.
    pub sample_reach: u64,
    /// How long the run goes on after the last unit (ms), for the load.
    pub after_ms: u64,
    /// Seed of every draw.
    pub seed: u64,
}

impl Scenario {
    /// The drop: 1,000,000 visitors, 10,000 units, 60 % ordering,
    /// a fifth of the orders 2 units, at the production defaults.
    pub fn production() -> Scenario {
        Scenario {
            visitors: 1_000_000,
            stock: 10_000,
            conversion: 0.6,
            two_unit_share: 0.2,
            order_after_ms: (5_000, 60_000),
            settle_ms: 300,
            overbook_percent: None,
            settings: Settings::default(),
            fleet: Fleet {
                isolates: 1_000,
                locations: 100,
                refresh_s: queuegate_shared::snapshot::REFRESH_MS / 1_000,
            },
            sample_every_ms: 5_000,
            sample_stride: 50,
            sample_reach: 3,
            after_ms: 120_000,
            seed: 0x5eed_0040,
        }
    }
}

/// Redis requests by kind (index into [`Outcome::redis`]'s rows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Polls in the exact head, and admitted visitors' polls.
    ExactPoll,
    /// Near-zone polls to stay alive (the last Redis request too old).
    LivenessPoll,
    /// Admit ticks.
    Tick,
    /// Consume scripts (refused ones included).
    Consume,
    /// Settle scripts.
    Settle,
}

/// Kinds of Redis request counted per second.
pub const KINDS: usize = 5;

/// What a drop did.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// When the units left reached 0 (ms); None: the stock outlived the line.
    pub t0_ms: Option<u64>,
    /// Turns let out.
    pub admitted: u64,
    /// Orders that sold.
    pub ordered: u64,
    /// Orders refused: no unit left.
    pub refused: u64,
    /// Turns expired unused.
    pub expired: u64,
    /// Units sold.
    pub sold: u64,
    /// When half, 90 % and 99 % of the units had gone (ms; tick time).
    pub gone_at: [Option<u64>; 3],
    /// The margin in force at T0 (per mille).
    pub margin_at_t0: u64,
    /// The measured conversion at T0 (per mille).
    pub conversion_at_t0: Option<u64>,
    /// Visitors waiting at T0.
    pub waiting_at_t0: u64,
    /// For each of them, T0 to being told `sold_out` (ms, sorted).
    pub told_after_ms: Vec<u64>,
    /// Of them, told within the poll interval they had at T0.
    pub told_within_interval: u64,
    /// Of them, never told before the run ended.
    pub never_told: u64,
    /// Redis requests per second of virtual time, by [`Kind`].
    pub redis: Vec<[u32; KINDS]>,
    /// Polls answered at the edge per second (they cost refreshes).
    pub edge_polls: Vec<u32>,
    /// The chance against "had a turn and, if it ordered, got a unit".
    pub calibration: Calibration,
    /// The chance against "had a turn and a unit was left when it
    /// ordered, or would have" (a no-show judged at its drawn order time).
    pub calibration_unit_left: Calibration,
    /// The same, predictions made before the conversion was measured.
    pub calibration_unmeasured: Calibration,
    /// A diagnostic: the chance as if no turn were out (`out` 0), against
    /// the first outcome.
    pub calibration_without_out: Calibration,
    /// A diagnostic: the chance without the turns out and with the drop's
    /// true conversion and units per order (what the inputs could give at
    /// best), against the first outcome.
    pub calibration_oracle: Calibration,
    /// Of the visitors told, those told by a snapshot (the rest by Redis).
    pub told_by_snapshot: u64,
    /// The tick's measurements now and then before T0: (ms, conversion
    /// per mille, margin per mille, turns out, units left).
    pub measured: Vec<(u64, Option<u64>, u64, u64, u64)>,
    /// Polls simulated.
    pub polls: u64,
    /// The last virtual millisecond.
    pub end_ms: u64,
}

/// Mean Redis requests/s by kind over seconds `from..to`, and the
/// snapshot refreshes (per isolate) and edge polls.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Load {
    /// Seconds averaged.
    pub seconds: u64,
    /// Requests/s per [`Kind`].
    pub by_kind: [f64; KINDS],
    /// Snapshot refreshes/s, one per isolate.
    pub refreshes: f64,
    /// Polls answered at the edge per second (no Redis request).
    pub edge_polls: f64,
}

impl Load {
    /// All Redis requests/s.
    pub fn total(&self) -> f64 {
        self.by_kind.iter().sum::<f64>() + self.refreshes
    }
}

impl Outcome {
    /// Mean load over seconds `from..to` of virtual time.
    pub fn load(&self, from: u64, to: u64, fleet: Fleet) -> Load {
        let to = to.min(self.redis.len() as u64);
        let mut l = Load {
            seconds: to.saturating_sub(from),
            ..Load::default()
        };
        for s in from..to {
            let s = s as usize;
            for (k, n) in self.redis[s].iter().enumerate() {
                l.by_kind[k] += f64::from(*n);
            }
            let edge = f64::from(self.edge_polls.get(s).copied().unwrap_or(0));
            l.edge_polls += edge;
            l.refreshes += fleet.isolate_refreshes(edge);
        }
        let n = l.seconds.max(1) as f64;
        l.by_kind.iter_mut().for_each(|x| *x /= n);
        l.refreshes /= n;
        l.edge_polls /= n;
        l
    }
}
