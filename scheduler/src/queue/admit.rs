//! Admission, each tick: one `admit` call (which also extends the lease)
//! asks for as many admissions as the shared rate bucket in Redis can hold;
//! that bucket, which idle passthrough spends from too, is the one rate
//! limit. The measured rate accounts for what the tick did.

use std::time::Duration;

use queuegate_shared::ops::{rate_bucket_cap, Admit, AdmitCounts, AdmitReply};
use queuegate_shared::token::Grant;
use queuegate_shared::{QueueKeys, Settings};

use super::{Tick, TickError};
use crate::admission::RateEstimate;
use crate::connect::RedisConn;
use crate::engine;
use crate::metrics::Metrics;

/// The admission-rate estimate's time constant.
pub const RATE_WINDOW: Duration = Duration::from_secs(10);

/// What admission keeps between ticks: the rate in force and the measured
/// rate.
#[derive(Debug)]
pub(super) struct Admission {
    rate: f64,
    tick: Duration,
    measured: RateEstimate,
}

impl Admission {
    /// Admission at `rate_per_second`, ticking every `tick`.
    pub(super) fn new(rate_per_second: f64, tick: Duration) -> Self {
        Admission {
            rate: rate_per_second,
            tick,
            measured: RateEstimate::new(RATE_WINDOW),
        }
    }

    /// A new rate in force (origin control, a reloaded config): the shared
    /// bucket refills at it from the next tick on, keeping what it holds
    /// within its new cap.
    pub(super) fn set_rate(&mut self, rate_per_second: f64, tick: Duration) {
        self.rate = rate_per_second;
        self.tick = tick;
    }

    /// A new lease: a fresh measurement (the bucket is Redis', so a new
    /// holder admits at once from what it holds).
    pub(super) fn start(&mut self) {
        self.measured.reset();
    }

    /// How many admissions a tick asks for: what the shared rate bucket
    /// holds at most. The bucket decides how many of them it allows.
    fn allowance(&self) -> u64 {
        let tick_ms = u64::try_from(self.tick.as_millis()).unwrap_or(u64::MAX);
        // Finite, at least 1 and at most 2 × 100000/s × 10 s, so the cast
        // neither wraps nor saturates.
        rate_bucket_cap(self.rate, tick_ms).floor() as u64
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
        let allowance = self.allowance();
        let grants = grants(allowance.min(settings.max_active), settings)?;
        let rate = self.measured.per_second();
        let reply = engine::run(
            conn,
            &Admit {
                keys,
                owner,
                allowance,
                settings,
                rate_estimate: rate,
                rate_in_force: self.rate,
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
        if counts.admitted > 0 || counts.abandoned > 0 || counts.expired > 0 || counts.claimed > 0 {
            tracing::trace!(
                queue,
                admitted = counts.admitted,
                abandoned = counts.abandoned,
                claimed = counts.claimed,
                expired = counts.expired,
                lapsed = counts.lapsed,
                waiting = counts.waiting,
                active = counts.active,
                "tick"
            );
        }
        Ok(Some(counts))
    }

    /// What a tick's admit did, `elapsed` after the last tick: measure the
    /// line's pace.
    fn account(&mut self, c: &AdmitCounts, elapsed: Duration) {
        // The ETA wants the pace of the line: count ticks where someone was
        // waiting (slot-starved ticks count as zero), skip idle ones.
        let busy = c.admitting && (c.waiting > 0 || c.admitted > 0);
        if busy {
            self.measured.observe(c.admitted, elapsed);
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
    fn a_tick_asks_for_what_the_shared_bucket_holds_at_most() {
        // Two ticks' worth: the shared bucket's cap (a late tick loses
        // nothing), whatever happened before; Redis allows what it holds.
        let mut a = Admission::new(175.0, TICK);
        assert_eq!(a.allowance(), 35);
        a.start();
        assert_eq!(a.allowance(), 35);
        a.set_rate(50.0, TICK);
        assert_eq!(a.allowance(), 10, "two ticks of the new rate");
        a.set_rate(0.5, TICK);
        assert_eq!(a.allowance(), 1, "at least one");
        assert_eq!(
            a.allowance() as f64,
            rate_bucket_cap(0.5, 100).floor(),
            "the cap the scripts' rate_tokens applies"
        );
    }

    #[test]
    fn a_busy_tick_counts_towards_the_rate() {
        let mut a = Admission::new(100.0, TICK);
        a.start();
        // 10 s of ticks admitting 10 each, someone still waiting.
        for _ in 0..100 {
            a.account(&counts(true, 10, 5), TICK);
        }
        let rate = a.measured.per_second().expect("observed 10 s");
        assert!((rate - 100.0).abs() < 1e-6, "{rate}");
        a.start();
        assert_eq!(a.measured.per_second(), None, "a new lease measures anew");
    }

    #[test]
    fn slot_starved_ticks_count_as_zero_and_idle_ones_not_at_all() {
        let mut a = Admission::new(100.0, TICK);
        for _ in 0..20 {
            a.account(&counts(true, 10, 5), TICK);
        }
        let busy = a.measured.per_second().expect("2 s observed");
        // An empty line: no pace to measure, the estimate stays.
        for _ in 0..50 {
            a.account(&counts(true, 0, 0), TICK);
        }
        assert_eq!(a.measured.per_second(), Some(busy));
        // Paused: not admitting, nothing measured either.
        a.account(&counts(false, 0, 5), TICK);
        assert_eq!(a.measured.per_second(), Some(busy));
        // People waiting but nobody admitted (no free slots): the pace drops.
        for _ in 0..20 {
            a.account(&counts(true, 0, 5), TICK);
        }
        assert!(a.measured.per_second().unwrap() < busy);
    }
}
