//! One queue's loop: stand by until the lease is free, then admit every
//! tick (each admit call also extends the lease: one round trip a tick). Safety lives in the admit script (free slots, owner
//! fencing); the lease only keeps one scheduler busy per queue.

use std::sync::Arc;
use std::time::{Duration, Instant};

use queuegate_shared::ops::{
    Admit, AdmitCounts, AdmitReply, Configure, LeaseAcquire, LeaseRelease,
};
use queuegate_shared::token::Grant;
use queuegate_shared::{QueueKeys, QueueState, Settings};
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;

use crate::admission::{Backoff, RateEstimate, TokenBucket};
use crate::connect::RedisConn;
use crate::engine::{self, EngineError};
use crate::metrics::Metrics;

/// The admission-rate estimate's time constant.
pub const RATE_WINDOW: Duration = Duration::from_secs(10);
/// Longest wait between retries after a failed tick. Short, so admission
/// resumes within a second of Redis coming back.
pub const MAX_BACKOFF: Duration = Duration::from_millis(500);

/// A tick that did not complete.
#[derive(Debug, thiserror::Error)]
pub enum TickError {
    /// Redis refused or a reply did not decode.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The OS could not provide random bytes for tokens.
    #[error("no randomness for tokens: {0}")]
    Random(getrandom::Error),
}

impl TickError {
    /// True when Redis could not be reached (expected during outages).
    pub fn is_connection(&self) -> bool {
        matches!(self, TickError::Engine(e) if e.is_connection())
    }
}

/// Lease as this process sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Standby,
    /// Held; `valid_until` is conservative (measured from before the
    /// renew was sent).
    Leader {
        valid_until: Instant,
    },
}

/// One queue's scheduler.
#[derive(Debug)]
pub struct QueueWorker {
    keys: QueueKeys,
    settings: Settings,
    owner: Arc<str>,
    conn: RedisConn,
    metrics: Arc<Metrics>,
    role: Role,
    bucket: TokenBucket,
    rate: RateEstimate,
    last_tick: Option<Instant>,
    holder: Option<String>,
}

impl QueueWorker {
    /// A worker for one queue; it starts as a standby.
    pub fn new(
        keys: QueueKeys,
        settings: Settings,
        owner: Arc<str>,
        conn: RedisConn,
        metrics: Arc<Metrics>,
    ) -> Self {
        let tick = Duration::from_millis(settings.tick_ms);
        QueueWorker {
            bucket: TokenBucket::new(settings.admit_rate_per_second, tick),
            rate: RateEstimate::new(RATE_WINDOW),
            keys,
            settings,
            owner,
            conn,
            metrics,
            role: Role::Standby,
            last_tick: None,
            holder: None,
        }
    }

    fn queue(&self) -> &str {
        self.keys.queue().as_str()
    }

    /// Ticks until `cancel` fires, then finishes the tick in progress and
    /// releases the lease.
    pub async fn run(mut self, cancel: CancellationToken) {
        let tick = Duration::from_millis(self.settings.tick_ms);
        let mut interval = tokio::time::interval(tick);
        // A slow tick delays the next one instead of firing a catch-up
        // burst: the bucket already counts the time that passed.
        interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut backoff = Backoff::new(tick, MAX_BACKOFF.max(tick));
        let mut failing = false;
        loop {
            tokio::select! {
                biased;
                () = cancel.cancelled() => break,
                _ = interval.tick() => {}
            }
            match self.tick().await {
                Ok(()) => {
                    if failing {
                        tracing::info!(queue = self.queue(), "redis reachable again");
                        failing = false;
                    }
                    backoff.reset();
                    self.metrics.redis_ok(self.queue());
                }
                Err(e) => {
                    self.metrics.redis_error(self.queue());
                    if !failing {
                        if e.is_connection() {
                            tracing::warn!(queue = self.queue(), error = %e, "tick failed; retrying with backoff");
                        } else {
                            tracing::error!(queue = self.queue(), error = %e, "tick failed; retrying with backoff");
                        }
                        failing = true;
                    }
                    let wait = backoff.fail();
                    tokio::select! {
                        biased;
                        () = cancel.cancelled() => break,
                        () = tokio::time::sleep(wait) => {}
                    }
                }
            }
        }
        self.release().await;
    }

    /// One tick: admit (which extends our lease in the same call), or take
    /// the lease first when we are standing by or it may have run out.
    pub async fn tick(&mut self) -> Result<(), TickError> {
        let started = Instant::now();
        let elapsed = self
            .last_tick
            .map_or(Duration::ZERO, |t| started.duration_since(t));
        self.last_tick = Some(started);

        match self.role {
            Role::Leader { valid_until } if started < valid_until => {
                self.bucket.refill(elapsed);
            }
            _ => {
                // Standby, or our lease may have run out during an outage:
                // acquire (which also extends a lease that is still ours).
                let got = engine::run(
                    &mut self.conn,
                    &LeaseAcquire {
                        keys: &self.keys,
                        owner: &self.owner,
                        ttl_ms: self.settings.lease_ttl_ms,
                    },
                )
                .await?;
                if !got.acquired {
                    if self.role != Role::Standby {
                        self.lose("lease expired and was taken over");
                    }
                    if self.holder.as_deref() != Some(got.holder.as_str()) {
                        tracing::debug!(queue = self.queue(), holder = %got.holder, "standing by");
                        self.holder = Some(got.holder);
                    }
                    return Ok(());
                }
                let was_leader = self.role != Role::Standby;
                self.role = Role::Leader {
                    valid_until: started + self.lease_for(),
                };
                self.on_acquired(was_leader, elapsed).await?;
            }
        }
        self.admit(started, elapsed).await
    }

    fn lease_for(&self) -> Duration {
        Duration::from_millis(self.settings.lease_ttl_ms)
    }

    async fn on_acquired(&mut self, was_leader: bool, elapsed: Duration) -> Result<(), TickError> {
        // Publish before the first admission, so the edge reads what this
        // holder enforces. The operator's state is kept.
        let state = engine::run(
            &mut self.conn,
            &Configure {
                keys: &self.keys,
                settings: &self.settings,
                initial_state: QueueState::Open,
            },
        )
        .await?;
        if was_leader {
            // Our own lease, extended after an outage: carry on.
            self.bucket.refill(elapsed);
        } else {
            self.bucket.prime();
            self.rate.reset();
            self.metrics.lease(self.queue(), true);
        }
        self.holder = Some(self.owner.to_string());
        tracing::info!(
            queue = self.queue(),
            owner = %self.owner,
            state = state.as_str(),
            "lease acquired; settings published"
        );
        Ok(())
    }

    fn lose(&mut self, why: &str) {
        tracing::warn!(queue = self.queue(), "lease lost: {why}");
        self.role = Role::Standby;
        self.bucket.clear();
        self.metrics.lease(self.queue(), false);
    }

    async fn admit(&mut self, started: Instant, elapsed: Duration) -> Result<(), TickError> {
        let allowance = self.bucket.allowance();
        let grants = grants(allowance.min(self.settings.max_active), &self.settings)?;
        let rate = self.rate.per_second();
        let reply = engine::run(
            &mut self.conn,
            &Admit {
                keys: &self.keys,
                owner: &self.owner,
                allowance,
                settings: &self.settings,
                rate_estimate: rate,
                grants: &grants,
            },
        )
        .await?;
        let counts = match reply {
            AdmitReply::NotOwner => {
                self.lose("admit fenced: another scheduler holds the lease");
                return Ok(());
            }
            AdmitReply::Ran(c) => c,
        };
        // The admit extended the lease; count from before it was sent.
        self.role = Role::Leader {
            valid_until: started + self.lease_for(),
        };
        self.account(&counts, elapsed);
        self.metrics
            .admit(self.queue(), &counts, started.elapsed(), rate);
        if counts.admitted > 0 || counts.abandoned > 0 || counts.expired > 0 {
            tracing::trace!(
                queue = self.queue(),
                admitted = counts.admitted,
                abandoned = counts.abandoned,
                expired = counts.expired,
                lapsed = counts.lapsed,
                waiting = counts.waiting,
                active = counts.active,
                "tick"
            );
        }
        Ok(())
    }

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

    async fn release(&mut self) {
        if self.role == Role::Standby {
            return;
        }
        let released = engine::run(
            &mut self.conn,
            &LeaseRelease {
                keys: &self.keys,
                owner: &self.owner,
            },
        )
        .await;
        match released {
            Ok(true) => tracing::info!(queue = self.queue(), "lease released"),
            Ok(false) => tracing::info!(queue = self.queue(), "lease was no longer ours"),
            Err(e) => {
                tracing::warn!(queue = self.queue(), error = %e, "could not release the lease; it expires by itself")
            }
        }
        self.role = Role::Standby;
        self.metrics.lease(self.queue(), false);
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
}
