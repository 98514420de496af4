//! Origin control: an AIMD controller that moves a queue's admission rate
//! between `min_admit_rate_per_second` and `admit_rate_per_second` from
//! what the edge saw of the origin (answer classes and latency per Redis
//! second). Pure: the window and the elapsed time are inputs.

use std::time::Duration;

use queuegate_shared::ops::{Answers, ControlRecord, OriginRead};
use queuegate_shared::Settings;

/// How often the lease holder reads the window and steps the controller.
pub const STEP: Duration = Duration::from_secs(1);

/// The knobs of one queue's controller (from its settings).
#[derive(Debug, Clone, PartialEq)]
pub struct Knobs {
    /// The ceiling: `admit_rate_per_second`.
    pub max_rate: f64,
    /// The floor: `min_admit_rate_per_second`.
    pub min_rate: f64,
    /// Seconds of answers looked at.
    pub window_s: u64,
    /// Answers needed before a cut.
    pub min_samples: u64,
    /// Cut above this share of 5xx and missing answers.
    pub max_error_share: f64,
    /// Cut above this p95 latency.
    pub p95_target_ms: f64,
    /// A cut multiplies the rate by this.
    pub decrease_factor: f64,
    /// Rate gained per second while healthy.
    pub increase_per_s: f64,
}

impl Knobs {
    /// The knobs `settings` give.
    pub fn of(s: &Settings) -> Knobs {
        let (max, min) = (s.admit_rate_per_second, s.min_admit_rate_per_second);
        Knobs {
            max_rate: max,
            min_rate: min.min(max),
            window_s: s.origin_window_ms.div_ceil(1_000).max(1),
            min_samples: s.origin_min_samples,
            max_error_share: s.origin_max_error_share,
            p95_target_ms: s.origin_p95_target_ms as f64,
            decrease_factor: s.origin_decrease_factor,
            increase_per_s: (max - min).max(0.0) / (s.origin_recover_ms as f64 / 1_000.0),
        }
    }
}

/// What one step did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Change {
    /// Cut from `from` to the new target.
    Cut {
        /// The rate before.
        from: f64,
        /// Why.
        why: Trouble,
    },
    /// Raised, and reached the maximum with this step.
    BackToMax,
    /// Raised (or already at the maximum).
    Raised,
    /// Kept: trouble is showing but there are too few answers to act on.
    Held,
}

/// Why the origin looks unhealthy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Trouble {
    /// This share of answers were 5xx or missing.
    Errors(f64),
    /// The p95 latency, in ms.
    Slow(f64),
}

impl std::fmt::Display for Trouble {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Trouble::Errors(share) => write!(f, "{:.0} % of orders failed", share * 100.0),
            Trouble::Slow(ms) => write!(f, "p95 latency {ms:.0} ms"),
        }
    }
}

/// One queue's controller state: the rate in force and the last cut.
#[derive(Debug, Clone, PartialEq)]
pub struct Controller {
    knobs: Knobs,
    target: f64,
    /// The Redis second of the last cut; answers up to it do not count
    /// towards the next cut (they reflect the rate before it).
    cut_at: u64,
    /// Over the whole window, for the metrics and the record.
    error_share: Option<f64>,
    p95_ms: Option<f64>,
}

impl Controller {
    /// A controller at the maximum rate.
    pub fn new(knobs: Knobs) -> Controller {
        Controller {
            target: knobs.max_rate,
            knobs,
            cut_at: 0,
            error_share: None,
            p95_ms: None,
        }
    }

    /// The rate in force.
    pub fn target(&self) -> f64 {
        self.target
    }

    /// 5xx and missing answers' share over the last window.
    pub fn error_share(&self) -> Option<f64> {
        self.error_share
    }

    /// The p95 latency over the last window.
    pub fn p95_ms(&self) -> Option<f64> {
        self.p95_ms
    }

    /// New knobs (a reloaded config): at the old maximum the target
    /// follows the new one; a cut target stays, within the new bounds.
    pub fn retune(&mut self, knobs: Knobs) {
        self.target = if self.target >= self.knobs.max_rate {
            knobs.max_rate
        } else {
            self.target.clamp(knobs.min_rate, knobs.max_rate)
        };
        self.knobs = knobs;
    }

    /// Carries on from the state a previous holder recorded (a fail-over),
    /// within this holder's bounds.
    pub fn resume(&mut self, read: &OriginRead) {
        if let Some(rate) = read.target_rate.filter(|r| r.is_finite()) {
            self.target = rate.clamp(self.knobs.min_rate, self.knobs.max_rate);
        }
        if let Some(at) = read.cut_at {
            self.cut_at = at;
        }
    }

    /// The state to record in Redis.
    pub fn record(&self) -> ControlRecord {
        ControlRecord {
            target_rate: self.target,
            cut_at: self.cut_at,
            error_share: self.error_share,
            p95_ms: self.p95_ms,
        }
    }

    /// One step over `read` (seconds newest first), `elapsed` after the last.
    pub fn step(&mut self, read: &OriginRead, elapsed: Duration) -> Change {
        let k = &self.knobs;
        let mut window = Answers::default();
        let mut since_cut = Answers::default();
        for (age, answers) in read.seconds.iter().enumerate().take(k.window_s as usize) {
            window.add(answers);
            if read.now_second.saturating_sub(age as u64) > self.cut_at {
                since_cut.add(answers);
            }
        }
        self.error_share = window.error_share();
        self.p95_ms = window.p95_ms();
        let enough = since_cut.total() >= k.min_samples;
        match trouble(k, &since_cut) {
            Some(why) if enough => {
                let from = self.target;
                self.target = (from * k.decrease_factor).max(k.min_rate);
                self.cut_at = read.now_second;
                return Change::Cut { from, why };
            }
            // Too few answers since the last cut to judge by them: hold
            // while trouble shows, in them or anywhere in the window.
            Some(_) => return Change::Held,
            None if !enough && trouble(k, &window).is_some() => return Change::Held,
            None => {}
        }
        let was_below = self.target < k.max_rate;
        // A late step earns at most two steps' worth.
        let dt = elapsed.min(STEP * 2).as_secs_f64();
        self.target = (self.target + k.increase_per_s * dt).min(k.max_rate);
        if was_below && self.target >= k.max_rate {
            Change::BackToMax
        } else {
            Change::Raised
        }
    }
}

fn trouble(k: &Knobs, answers: &Answers) -> Option<Trouble> {
    if let Some(share) = answers.error_share().filter(|s| *s > k.max_error_share) {
        return Some(Trouble::Errors(share));
    }
    answers
        .p95_ms()
        .filter(|p| *p > k.p95_target_ms)
        .map(Trouble::Slow)
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuegate_shared::ops::LATENCY_BUCKETS;

    fn knobs() -> Knobs {
        Knobs::of(&Settings {
            admit_rate_per_second: 100.0,
            min_admit_rate_per_second: 10.0,
            origin_recover_ms: 9_000,
            origin_min_samples: 10,
            ..Settings::default()
        })
    }

    /// `per_second` answers each second for the last `n` seconds up to
    /// `now`: `failed` of them 5xx, all at `latency_slot`.
    fn window(now: u64, n: usize, per_second: u64, failed: u64, latency_slot: usize) -> OriginRead {
        let mut a = Answers {
            ok: per_second - failed,
            server_errors: failed,
            ..Answers::default()
        };
        a.latency = [0; LATENCY_BUCKETS];
        a.latency[latency_slot] = per_second;
        OriginRead {
            now_second: now,
            target_rate: None,
            cut_at: None,
            seconds: vec![a; n],
        }
    }

    #[test]
    fn failing_orders_cut_multiplicatively_down_to_the_floor() {
        let mut c = Controller::new(knobs());
        let change = c.step(&window(100, 10, 20, 20, 0), STEP);
        assert!(
            matches!(change, Change::Cut { from, why: Trouble::Errors(s) } if from == 100.0 && s == 1.0)
        );
        assert_eq!(c.target(), 50.0);
        assert_eq!(c.error_share(), Some(1.0));
        // The same seconds again: nothing after the cut yet, so no second
        // cut from old evidence — and no raise while the window is bad.
        let mut same = window(100, 10, 20, 20, 0);
        assert_eq!(c.step(&same, STEP), Change::Held);
        // New failures after the cut cut again.
        same.now_second = 101;
        assert!(matches!(c.step(&same, STEP), Change::Cut { .. }));
        assert_eq!(c.target(), 25.0);
        for now in 102..120 {
            c.step(&window(now, 10, 20, 20, 0), STEP);
        }
        assert_eq!(c.target(), 10.0, "never below the floor");
    }

    #[test]
    fn a_slow_origin_cuts_and_a_healthy_one_recovers_linearly_to_the_max() {
        let mut c = Controller::new(knobs());
        // All answers in (2500, 5000] ms: p95 above the 2 s target.
        let change = c.step(&window(50, 10, 20, 0, 6), STEP);
        assert!(
            matches!(change, Change::Cut { why: Trouble::Slow(p), .. } if p > 2_000.0),
            "{change:?}"
        );
        assert_eq!(c.target(), 50.0);
        // Healthy (fast, no errors): +10/s (90/s over 9 s) up to the max.
        let mut changes = Vec::new();
        for now in 51..60 {
            changes.push(c.step(&window(now, 10, 20, 0, 0), STEP));
        }
        assert_eq!(c.target(), 100.0);
        assert_eq!(
            changes.iter().filter(|c| **c == Change::BackToMax).count(),
            1
        );
        assert_eq!(changes[4], Change::BackToMax, "50 + 5 × 10");
        assert_eq!(c.step(&window(61, 10, 20, 0, 0), STEP), Change::Raised);
        assert_eq!(c.target(), 100.0, "never above the max");
    }

    #[test]
    fn few_answers_hold_and_no_answers_raise() {
        let mut c = Controller::new(knobs());
        c.target = 40.0;
        assert_eq!(c.step(&window(10, 1, 5, 5, 0), STEP), Change::Held);
        assert_eq!(c.target(), 40.0);
        let empty = window(11, 3, 0, 0, 0);
        assert_eq!(c.step(&empty, STEP), Change::Raised);
        assert_eq!(c.target(), 50.0);
        assert_eq!(c.error_share(), None);
    }

    #[test]
    fn a_new_holder_resumes_the_recorded_state_within_its_bounds() {
        let mut c = Controller::new(knobs());
        let mut read = window(200, 10, 20, 0, 0);
        read.target_rate = Some(12.5);
        read.cut_at = Some(199);
        c.resume(&read);
        assert_eq!(c.target(), 12.5);
        assert_eq!(c.record().cut_at, 199);
        read.target_rate = Some(1.0);
        c.resume(&read);
        assert_eq!(c.target(), 10.0, "clamped to this holder's floor");
        c.retune(Knobs {
            max_rate: 5.0,
            min_rate: 1.0,
            ..knobs()
        });
        assert_eq!(c.target(), 5.0, "a cut target within the new bounds");
        c.retune(knobs());
        assert_eq!(c.target(), 100.0, "at the maximum it follows a new one");
    }
}
