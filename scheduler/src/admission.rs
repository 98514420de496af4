//! The pure arithmetic of a tick: the token bucket that turns a rate into a
//! per-tick allowance, and the measured admission rate the ETA uses. Time
//! is an input, so both are tested without a clock.

use std::time::Duration;

/// A token bucket refilled from the time that really passed, so a late tick
/// catches up and the realized rate stays at the configured one; fractions
/// carry (175/s at 100 ms admits 17, 18, 17, 18, …).
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: f64,
    per_tick: f64,
    cap: f64,
    tokens: f64,
}

impl TokenBucket {
    /// A bucket for `rate` admissions per second at `tick`. It holds at
    /// most two ticks' worth (at least one token): a tick up to a whole
    /// tick late loses nothing, and a stall cannot build a burst.
    pub fn new(rate_per_second: f64, tick: Duration) -> Self {
        let per_tick = rate_per_second * tick.as_secs_f64();
        TokenBucket {
            rate: rate_per_second,
            per_tick,
            cap: (2.0 * per_tick).max(1.0),
            tokens: 0.0,
        }
    }

    /// A new rate (origin control, a reloaded config): what the bucket
    /// holds stays, within the new cap.
    pub fn set_rate(&mut self, rate_per_second: f64, tick: Duration) {
        let tokens = self.tokens;
        *self = TokenBucket::new(rate_per_second, tick);
        self.tokens = tokens.min(self.cap);
    }

    /// The rate it is refilled at.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// The most tokens the bucket holds.
    pub fn cap(&self) -> f64 {
        self.cap
    }

    /// One tick's worth, for a scheduler that just took the lease: it admits
    /// at once, with no burst.
    pub fn prime(&mut self) {
        self.tokens = self.per_tick.min(self.cap);
    }

    /// Empties the bucket (lease lost: the next holder starts fresh).
    pub fn clear(&mut self) {
        self.tokens = 0.0;
    }

    /// Adds the tokens `elapsed` earns.
    pub fn refill(&mut self, elapsed: Duration) {
        self.tokens = (self.tokens + self.rate * elapsed.as_secs_f64()).min(self.cap);
    }

    /// Whole tokens available: this tick's allowance.
    pub fn allowance(&self) -> u64 {
        // Non-negative and at most `cap` (≤ 2 × 100000 × 10 s), so the cast
        // neither wraps nor saturates.
        self.tokens.floor().max(0.0) as u64
    }

    /// Spends what the tick admitted.
    pub fn spend(&mut self, admitted: u64) {
        self.tokens = (self.tokens - admitted as f64).max(0.0);
    }

    /// Nothing to admit (empty line or paused queue): keep at most one tick's
    /// worth, so idle time never turns into a burst.
    pub fn idle(&mut self) {
        self.tokens = self.tokens.min(self.per_tick.max(1.0));
    }
}

/// Admissions per second, exponentially weighted over a time constant
/// (10 s by default): the sum of admissions and the sum of observed time,
/// both decayed, so early estimates are not biased towards zero.
#[derive(Debug, Clone)]
pub struct RateEstimate {
    tau_s: f64,
    admitted: f64,
    seconds: f64,
}

/// How long to observe before reporting a rate.
const MIN_OBSERVED_S: f64 = 1.0;

impl RateEstimate {
    /// An estimate with time constant `tau`.
    pub fn new(tau: Duration) -> Self {
        RateEstimate {
            tau_s: tau.as_secs_f64().max(0.001),
            admitted: 0.0,
            seconds: 0.0,
        }
    }

    /// Records `admitted` users over `elapsed`.
    pub fn observe(&mut self, admitted: u64, elapsed: Duration) {
        let dt = elapsed.as_secs_f64();
        if dt <= 0.0 {
            return;
        }
        let decay = (-dt / self.tau_s).exp();
        self.admitted = self.admitted * decay + admitted as f64;
        self.seconds = self.seconds * decay + dt;
    }

    /// Forgets everything (a new lease holder starts its own measurement;
    /// until it has one, the last published rate stays in Redis).
    pub fn reset(&mut self) {
        self.admitted = 0.0;
        self.seconds = 0.0;
    }

    /// The rate, once at least a second has been observed.
    pub fn per_second(&self) -> Option<f64> {
        (self.seconds >= MIN_OBSERVED_S).then(|| self.admitted / self.seconds)
    }
}

/// Exponential backoff between failed ticks: doubles from `min` to `max`.
#[derive(Debug, Clone)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    /// Backoff from `min` to `max`.
    pub fn new(min: Duration, max: Duration) -> Self {
        Backoff {
            min,
            max,
            next: min,
        }
    }

    /// The wait after one more failure.
    pub fn fail(&mut self) -> Duration {
        let wait = self.next;
        self.next = (self.next * 2).min(self.max);
        wait
    }

    /// A success: the next failure waits `min` again.
    pub fn reset(&mut self) {
        self.next = self.min;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TICK: Duration = Duration::from_millis(100);

    #[test]
    fn fractions_carry_to_the_configured_rate() {
        let mut b = TokenBucket::new(175.0, TICK);
        let mut total = 0;
        let mut per_tick = Vec::new();
        for _ in 0..100 {
            b.refill(TICK);
            let n = b.allowance();
            b.spend(n);
            per_tick.push(n);
            total += n;
        }
        // 10 s at 175/s, less at most the fraction still in the bucket.
        assert!((1749..=1750).contains(&total), "{total}");
        assert!(
            per_tick.iter().all(|n| *n == 17 || *n == 18),
            "{per_tick:?}"
        );
    }

    #[test]
    fn a_late_tick_catches_up_but_a_stall_does_not_burst() {
        let mut b = TokenBucket::new(175.0, TICK);
        b.refill(TICK * 2);
        assert_eq!(b.allowance(), 35);
        b.spend(35);
        b.refill(Duration::from_secs(60));
        assert_eq!(b.allowance(), 35, "capped at two ticks");
        assert_eq!(b.cap(), 35.0);
        b.idle();
        assert_eq!(b.allowance(), 17);
    }

    #[test]
    fn a_new_rate_keeps_what_fits_under_its_cap() {
        let mut b = TokenBucket::new(175.0, TICK);
        b.refill(TICK * 2);
        b.set_rate(50.0, TICK);
        assert_eq!(b.allowance(), 10, "capped at two ticks of the new rate");
        assert_eq!(b.rate(), 50.0);
        b.spend(10);
        b.refill(TICK);
        assert_eq!(b.allowance(), 5);
    }

    #[test]
    fn slow_rates_still_earn_whole_tokens() {
        let mut b = TokenBucket::new(0.5, TICK);
        let mut total = 0;
        for _ in 0..40 {
            b.refill(TICK);
            let n = b.allowance();
            b.spend(n);
            total += n;
        }
        assert_eq!(total, 2, "4 s at 0.5/s");
    }

    #[test]
    fn priming_admits_one_tick_at_once() {
        let mut b = TokenBucket::new(175.0, TICK);
        b.prime();
        assert_eq!(b.allowance(), 17);
        b.clear();
        assert_eq!(b.allowance(), 0);
    }

    #[test]
    fn the_rate_estimate_is_unbiased_and_follows_changes() {
        let mut r = RateEstimate::new(Duration::from_secs(10));
        r.observe(17, TICK);
        assert_eq!(r.per_second(), None, "too early");
        for i in 0..20 {
            r.observe(if i % 2 == 0 { 18 } else { 17 }, TICK);
        }
        let early = r.per_second().unwrap();
        assert!((early - 175.0).abs() < 3.0, "{early}");
        for _ in 0..300 {
            r.observe(0, TICK);
        }
        assert!(
            r.per_second().unwrap() < 10.0,
            "decays when nobody is admitted"
        );
        r.reset();
        assert_eq!(r.per_second(), None);
    }

    #[test]
    fn backoff_doubles_to_its_cap_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(500));
        let waits: Vec<u128> = (0..5).map(|_| b.fail().as_millis()).collect();
        assert_eq!(waits, [100, 200, 400, 500, 500]);
        b.reset();
        assert_eq!(b.fail().as_millis(), 100);
    }
}
