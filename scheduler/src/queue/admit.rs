//! Admission, each tick: the token bucket turns the rate in force into an
//! allowance, one `admit` call (which also extends the lease) admits that
//! many, and the bucket and rate estimate account for what it did.

use std::time::Duration;

use queuegate_shared::ops::{Admit, AdmitCounts, AdmitReply};
use queuegate_shared::token::Grant;
use queuegate_shared::{QueueKeys, Settings};

use super::{Tick, TickError};
use crate::admission::{RateEstimate, TokenBucket};
use crate::connect::RedisConn;
use crate::engine;
use crate::metrics::Metrics;

/// The admission-rate estimate's time constant.
pub const RATE_WINDOW: Duration = Duration::from_secs(10);

/// What admission keeps between ticks: the bucket and the measured rate.
#[derive(Debug)]
pub(super) struct Admission {
    bucket: TokenBucket,
    rate: RateEstimate,
}

impl Admission {
    /// An empty bucket at `rate_per_second`, refilled per `tick`.
    pub(super) fn new(rate_per_second: f64, tick: Duration) -> Self {
        Admission {
            bucket: TokenBucket::new(rate_per_second, tick),
            rate: RateEstimate::new(RATE_WINDOW),
        }
    }

    /// A new rate in force (origin control, a reloaded config).
    pub(super) fn set_rate(&mut self, rate_per_second: f64, tick: Duration) {
        self.bucket.set_rate(rate_per_second, tick);
    }

    /// Adds what `elapsed` earns.
    pub(super) fn refill(&mut self, elapsed: Duration) {
        self.bucket.refill(elapsed);
    }

    /// A new lease: one tick's worth at once, and a fresh measurement.
    pub(super) fn start(&mut self) {
        self.bucket.prime();
        self.rate.reset();
    }

    /// The lease is lost: the next holder starts fresh.
    pub(super) fn stop(&mut self) {
        self.bucket.clear();
    }

    /// One `admit` call as `owner` in `tick`. `None` when another
    /// scheduler holds the lease (fenced: nothing changed).
    pub(super) async fn admit(
        &mut self,
        conn: &mut RedisConn,
        keys: &QueueKeys,
        owner: &str,
        settings: &Settings,
        metrics: &Metrics,
        tick: Tick,
    ) -> Result<Option<AdmitCounts>, TickError> {
        let allowance = self.bucket.allowance();
        let grants = grants(allowance.min(settings.max_active), settings)?;
        let rate = self.rate.per_second();
        let reply = engine::run(
            conn,
            &Admit {
                keys,
                owner,
                allowance,
                settings,
                rate_estimate: rate,
                rate_in_force: self.bucket.rate(),
                grants: &grants,
                idle_lease: tick.idle_lease,
            },
        )
        .await?;
        let counts = match reply {
            AdmitReply::NotOwner => return Ok(None),
            AdmitReply::Ran(c) => c,
        };
        self.account(&counts, tick.elapsed);
        let queue = keys.queue().as_str();
        metrics.admit(queue, &counts, tick.started.elapsed(), rate);
        if counts.admitted > 0 || counts.abandoned > 0 || counts.expired > 0 {
            tracing::trace!(
                queue,
                admitted = counts.admitted,
                abandoned = counts.abandoned,
                expired = counts.expired,
                lapsed = counts.lapsed,
                waiting = counts.waiting,
                active = counts.active,
                "tick"
            );
        }
        Ok(Some(counts))
    }

    /// What a tick's admit did, `elapsed` after the last tick: spend the
    /// admitted tokens, measure the line's pace, keep no idle tokens.
    fn account(&mut self, c: &AdmitCounts, elapsed: Duration) {
        self.bucket.spend(c.admitted);
        // The ETA wants the pace of the line: count ticks where someone was
        // waiting (slot-starved ticks count as zero), skip idle ones.
        let busy = c.admitting && (c.waiting > 0 || c.admitted > 0);
        if busy {
            self.rate.observe(c.admitted, elapsed);
        }
        if !c.admitting || c.waiting == 0 {
            self.bucket.idle();
        }
    }
}

/// `n` tokens with activation jitter, from the OS CSPRNG.
fn grants(n: u64, settings: &Settings) -> Result<Vec<Grant>, TickError> {
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    if n == 0 {
        return Ok(Vec::new());
    }
    let mut bytes = vec![0u8; n * 24];
    getrandom::getrandom(&mut bytes).map_err(TickError::Random)?;
    Ok(bytes
        .chunks_exact(24)
        .map(|chunk| {
            let mut seed = [0u8; 24];
            seed.copy_from_slice(chunk);
            Grant::from_random(seed, settings.activation_jitter_ms)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TICK: Duration = Duration::from_millis(100);

    /// Counts of a tick that admitted `admitted` with `waiting` left.
    fn counts(admitting: bool, admitted: u64, waiting: u64) -> AdmitCounts {
        AdmitCounts {
            admitting,
            admitted,
            waiting,
            ..AdmitCounts::default()
        }
    }

    #[test]
    fn grants_are_distinct_and_jittered_in_the_window() {
        let s = Settings::default();
        let g = grants(50, &s).unwrap();
        assert_eq!(g.len(), 50);
        let mut tokens: Vec<&str> = g.iter().map(|g| g.token.expose()).collect();
        tokens.sort_unstable();
        tokens.dedup();
        assert_eq!(tokens.len(), 50);
        assert!(g.iter().all(|g| g.jitter_ms <= s.activation_jitter_ms));
        assert!(grants(0, &s).unwrap().is_empty());
    }

    #[test]
    fn a_busy_tick_spends_its_admissions_and_counts_towards_the_rate() {
        let mut a = Admission::new(100.0, TICK);
        a.start();
        a.refill(TICK);
        assert_eq!(a.bucket.allowance(), 20, "primed + one tick");
        // 10 s of ticks admitting 10 each, someone still waiting.
        for _ in 0..100 {
            a.account(&counts(true, 10, 5), TICK);
        }
        assert_eq!(a.bucket.allowance(), 0, "spent");
        let rate = a.rate.per_second().expect("observed 10 s");
        assert!((rate - 100.0).abs() < 1e-6, "{rate}");
    }

    #[test]
    fn slot_starved_ticks_count_as_zero_and_idle_ones_not_at_all() {
        let mut a = Admission::new(100.0, TICK);
        for _ in 0..20 {
            a.account(&counts(true, 10, 5), TICK);
        }
        let busy = a.rate.per_second().expect("2 s observed");
        // An empty line: no pace to measure, the estimate stays.
        for _ in 0..50 {
            a.account(&counts(true, 0, 0), TICK);
        }
        assert_eq!(a.rate.per_second(), Some(busy));
        // Paused: not admitting, nothing measured either.
        a.account(&counts(false, 0, 5), TICK);
        assert_eq!(a.rate.per_second(), Some(busy));
        // People waiting but nobody admitted (no free slots): the pace drops.
        for _ in 0..20 {
            a.account(&counts(true, 0, 5), TICK);
        }
        assert!(a.rate.per_second().unwrap() < busy);
    }

    #[test]
    fn idle_ticks_keep_no_burst() {
        let mut a = Admission::new(100.0, TICK);
        a.refill(TICK * 2);
        assert_eq!(a.bucket.allowance(), 20);
        a.account(&counts(true, 0, 5), TICK);
        assert_eq!(a.bucket.allowance(), 20, "people waiting: tokens kept");
        a.account(&counts(true, 0, 0), TICK);
        assert_eq!(a.bucket.allowance(), 10, "empty line: one tick's worth");
        a.refill(TICK);
        a.account(&counts(false, 0, 5), TICK);
        assert_eq!(a.bucket.allowance(), 10, "paused: one tick's worth");
        a.stop();
        assert_eq!(a.bucket.allowance(), 0);
    }
}
