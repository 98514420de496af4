//! The pure arithmetic of a tick: the measured admission rate the ETA uses
//! and the backoff after failed ticks. Time is an input, so both are tested
//! without a clock. (The rate limit itself is the shared rate bucket in
//! Redis: `rate_tokens` in shared/lua/prelude.lua.)

use std::time::Duration;

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
