//! Issue 24's question in virtual time: Redis requests per second, by kind,
//! when only the visitors near the head poll Redis (docs/uncapped-line.md),
//! for crowds far beyond today's cap. `poll_sim uncapped` prints the tables
//! and draws the chart from these runs.

use std::time::{Duration, Instant};

use super::{run, Fleet, NearZone, Outcome, Polling, Scenario, Sleepers, SteadyLoad};

/// How a crowd is simulated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    /// The uncapped line, every poll an event.
    Full,
    /// The uncapped line, far-back stayers counted in bulk
    /// ([`NearZone::aggregate_far`]).
    Aggregate,
    /// Today's line with its cap lifted: every poll a Redis call, silence
    /// drops a visitor anywhere in the line.
    Old,
}

impl Model {
    /// A short name for tables.
    pub fn label(&self) -> &'static str {
        match self {
            Model::Full => "near zone, every poll simulated",
            Model::Aggregate => "near zone, far back in bulk",
            Model::Old => "old: every poll to Redis",
        }
    }
}

/// The share of its peak the line holds in the steady line.
pub const STEADY_SHARE: f64 = 0.9;

/// Every crowd arrives at the mean rate of 1,000,000 in ten minutes
/// (0.6 ms a visitor; density falling linearly, so twice that at the
/// opening): 50,000 in 30 s, 10,000,000 in 6,000 s.
pub fn window_ms(crowd: u64) -> u64 {
    crowd * 6 / 10
}

/// The scenario of `crowd` under `model`: production defaults, no cap; an
/// exact head of `exact_head_ms` (0: every near poll exact) whose near
/// zone asks Redis every `abandon_after_ms / 2` to stay alive.
pub fn scenario(crowd: u64, model: Model, exact_zone_ms: u64, exact_head_ms: u64) -> Scenario {
    let zone = NearZone {
        exact_zone_ms,
        aggregate_far: model == Model::Aggregate,
        exact_head_ms,
        liveness_ms: queuegate_shared::Settings::default().liveness_ms(),
    };
    let mut s = Scenario::uncapped(crowd, window_ms(crowd), zone);
    if model == Model::Old {
        s.near_zone = None;
    }
    s
}

/// One crowd simulated, with its steady line.
#[derive(Debug, Clone)]
pub struct CrowdRun {
    /// Arrivals.
    pub crowd: u64,
    /// How it was simulated.
    pub model: Model,
    /// What was simulated.
    pub scenario: Scenario,
    /// What came out.
    pub outcome: Outcome,
    /// Wall-clock time of the run.
    pub wall: Duration,
    /// The steady line: seconds after the last arrival with the line at
    /// ≥ [`STEADY_SHARE`] of its peak.
    pub steady: Vec<usize>,
    /// The settled line ([`settled_from_ms`]): every mechanism running,
    /// a far back behind the near zone.
    pub settled: Vec<usize>,
}

/// Where the settled line starts: after the last arrival, and once the
/// first visitors' liveness requests are due (`liveness_ms` after the
/// opening, plus one longest poll interval for the poll that finds it due).
/// Before that the near zone's Redis requests are only those of the head:
/// a start-up transient, not a line's steady cost.
pub fn settled_from_ms(scenario: &Scenario) -> u64 {
    let s = &scenario.settings;
    let liveness = scenario.near_zone.map_or(0, |z| z.liveness_ms);
    scenario.window_ms.max(liveness + s.poll_max_ms)
}

impl CrowdRun {
    /// Simulates `crowd` under `model` (adaptive polling, shared's policy).
    pub fn simulate(crowd: u64, model: Model, exact_zone_ms: u64, exact_head_ms: u64) -> CrowdRun {
        Self::simulate_with(crowd, model, exact_zone_ms, exact_head_ms, None)
    }

    /// [`Self::simulate`] with sleeping phones and the sleep grace (not
    /// for [`Model::Old`]).
    pub fn simulate_with(
        crowd: u64,
        model: Model,
        exact_zone_ms: u64,
        exact_head_ms: u64,
        sleepers: Option<Sleepers>,
    ) -> CrowdRun {
        let mut scenario = scenario(crowd, model, exact_zone_ms, exact_head_ms);
        if model != Model::Old {
            scenario.sleepers = sleepers;
        }
        let started = Instant::now();
        let outcome = run(
            &scenario,
            Polling::Adaptive(scenario.settings.poll_policy()),
        );
        let wall = started.elapsed();
        let steady = outcome.steady_seconds(scenario.window_ms, STEADY_SHARE);
        let settled = outcome.settled_seconds(
            settled_from_ms(&scenario),
            outcome.near_zone_visitors.unwrap_or(0),
        );
        CrowdRun {
            crowd,
            model,
            scenario,
            outcome,
            wall,
            steady,
            settled,
        }
    }

    /// Redis requests/s by kind over the steady line, refreshes for `fleet`.
    pub fn load(&self, fleet: Fleet) -> SteadyLoad {
        self.outcome.load_over(&self.steady, fleet)
    }

    /// Redis requests/s by kind over the settled line.
    pub fn settled_load(&self, fleet: Fleet) -> SteadyLoad {
        self.outcome.load_over(&self.settled, fleet)
    }

    /// The longest line (at the start of a second).
    pub fn peak_waiting(&self) -> u32 {
        self.outcome
            .waiting_per_second
            .iter()
            .copied()
            .max()
            .unwrap_or(0)
    }

    /// Mean line over the steady line.
    pub fn steady_waiting(&self) -> f64 {
        self.mean_waiting(&self.steady)
    }

    /// Mean line over `seconds`.
    pub fn mean_waiting(&self, seconds: &[usize]) -> f64 {
        let w = &self.outcome.waiting_per_second;
        let sum: f64 = seconds.iter().map(|&s| f64::from(w[s])).sum();
        sum / seconds.len().max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_keep_one_mean_arrival_rate() {
        assert_eq!(window_ms(50_000), 30_000);
        assert_eq!(window_ms(1_000_000), 600_000);
        assert_eq!(window_ms(10_000_000), 6_000_000);
        let s = scenario(50_000, Model::Old, 180_000, 0);
        assert!(s.near_zone.is_none() && s.settings.max_waiting > 50_000);
        let s = scenario(50_000, Model::Aggregate, 120_000, 10_000);
        assert_eq!(
            s.near_zone,
            Some(NearZone {
                exact_zone_ms: 120_000,
                aggregate_far: true,
                exact_head_ms: 10_000,
                liveness_ms: 45_000,
            })
        );
    }
}
