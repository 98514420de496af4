//! One queue's loop: stand by until the lease is free, then admit every
//! tick (each admit call also extends the lease: one round trip a tick).
//! Safety lives in the admit script (free slots, owner fencing); the lease
//! only keeps one scheduler busy per queue.
//!
//! [`QueueWorker`] sequences a tick; the concerns split out so far keep
//! their own state: [`lease`] (standing by or holding), [`origin`] (origin
//! control's steering), [`draw`] (the pre-queue's draw) and [`admit`] (the
//! bucket and the rate estimate).

mod admit;
mod draw;
mod lease;
mod origin;

use std::sync::Arc;
use std::time::{Duration, Instant};

use queuegate_shared::ops::{Configure, Schedule};
use queuegate_shared::{QueueKeys, QueueState, Settings};
use tokio::sync::watch;
use tokio::time::{Interval, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::admission::Backoff;
use crate::config::{FileSchedule, QueueConfig};
use crate::connect::RedisConn;
use crate::engine::{self, EngineError};
use crate::metrics::Metrics;
pub use admit::RATE_WINDOW;

use admit::Admission;
use draw::Drawer;
use lease::Lease;
use origin::Steering;
use queuegate_shared::ops::Change as ScheduleChange;

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

/// One tick's times: when it started (lease deadlines count from before
/// the call that renews) and how long after the last one.
#[derive(Debug, Clone, Copy)]
struct Tick {
    started: Instant,
    elapsed: Duration,
}

/// One queue's scheduler.
#[derive(Debug)]
pub struct QueueWorker {
    keys: QueueKeys,
    settings: Settings,
    conn: RedisConn,
    metrics: Arc<Metrics>,
    lease: Lease,
    admission: Admission,
    last_tick: Option<Instant>,
    steering: Steering,
    /// Settings from a reloaded config (SIGHUP).
    reloads: Option<watch::Receiver<QueueConfig>>,
    /// Settings changed while holding the lease: publish them next tick.
    publish: bool,
    /// The opening and closing the config file sets, published with the
    /// settings.
    schedule: FileSchedule,
    drawer: Drawer,
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
            steering: Steering::new(&settings),
            admission: Admission::new(settings.admit_rate_per_second, tick),
            keys,
            settings,
            conn,
            metrics,
            lease: Lease::new(owner),
            last_tick: None,
            reloads: None,
            publish: false,
            schedule: FileSchedule::default(),
            drawer: Drawer::new(),
        }
    }

    /// Publishes this opening and closing with the settings.
    pub fn with_schedule(mut self, schedule: FileSchedule) -> Self {
        self.schedule = schedule;
        self
    }

    /// Takes new settings (and schedule) from `reloads` as they come (a
    /// reloaded config); the lease is kept.
    pub fn with_reloads(mut self, reloads: watch::Receiver<QueueConfig>) -> Self {
        self.reloads = Some(reloads);
        self
    }

    fn queue(&self) -> &str {
        self.keys.queue().as_str()
    }

    /// Ticks until `cancel` fires, then finishes the tick in progress and
    /// releases the lease.
    pub async fn run(mut self, cancel: CancellationToken) {
        let mut interval = ticks(self.settings.tick_ms);
        let tick = Duration::from_millis(self.settings.tick_ms);
        let mut backoff = Backoff::new(tick, MAX_BACKOFF.max(tick));
        let mut failing = false;
        loop {
            tokio::select! {
                biased;
                () = cancel.cancelled() => break,
                Some(q) = reloaded(&mut self.reloads) => {
                    if q.settings.tick_ms != self.settings.tick_ms {
                        interval = ticks(q.settings.tick_ms);
                        let tick = Duration::from_millis(q.settings.tick_ms);
                        backoff = Backoff::new(tick, MAX_BACKOFF.max(tick));
                    }
                    if q.schedule != self.schedule {
                        self.schedule = q.schedule;
                        self.publish = self.lease.is_held();
                    }
                    self.reconfigure(q.settings);
                    continue;
                }
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
        let tick = Tick { started, elapsed };

        if self.lease.valid_at(started) {
            self.admission.refill(elapsed);
            if self.publish {
                self.publish_settings().await?;
            }
        } else if !self.take_lease(tick).await? {
            return Ok(());
        }
        self.steer(started).await?;
        if self.drawer.is_due() {
            self.draw(started).await?;
        }
        self.admit(tick).await
    }

    /// New settings from a reloaded config: the rate, the controller's
    /// knobs and the metrics follow at once; the lease is kept, and a
    /// holder publishes them on its next tick.
    fn reconfigure(&mut self, settings: Settings) {
        if settings == self.settings {
            return;
        }
        tracing::info!(
            queue = self.queue(),
            admit_rate_per_second = settings.admit_rate_per_second,
            max_active = settings.max_active,
            origin_control = settings.origin_control,
            "settings reloaded"
        );
        self.settings = settings;
        self.steering.retune(&self.settings);
        let rate = self.steering.rate_in_force(&self.settings);
        self.admission.set_rate(rate, self.tick_length());
        self.metrics.settings(self.queue(), &self.settings);
        self.publish = self.lease.is_held();
    }

    async fn publish_settings(&mut self) -> Result<(), TickError> {
        self.configure().await?;
        tracing::info!(queue = self.queue(), "reloaded settings published");
        Ok(())
    }

    /// Publishes the settings this holder enforces, and the file's
    /// schedule if it sets one; the operator's state is kept (a new queue
    /// starts open). Returns the queue's state.
    async fn configure(&mut self) -> Result<QueueState, TickError> {
        let state = engine::run(
            &mut self.conn,
            &Configure {
                keys: &self.keys,
                settings: &self.settings,
                initial_state: QueueState::Open,
            },
        )
        .await?;
        if self.schedule.is_set() {
            let set = |t: Option<u64>| t.map_or(ScheduleChange::Keep, ScheduleChange::Set);
            engine::run(
                &mut self.conn,
                &Schedule {
                    keys: &self.keys,
                    opens_at: set(self.schedule.opens_at),
                    closes_at: set(self.schedule.closes_at),
                },
            )
            .await?;
        }
        self.publish = false;
        Ok(state)
    }

    /// The pre-queue: sealed at its opening, then drawn batch by batch.
    async fn draw(&mut self, started: Instant) -> Result<(), TickError> {
        let (conn, keys, owner) = (&mut self.conn, &self.keys, self.lease.owner());
        self.drawer
            .draw(conn, keys, owner, &self.settings, &self.metrics, started)
            .await
    }

    fn tick_length(&self) -> Duration {
        Duration::from_millis(self.settings.tick_ms)
    }

    /// Origin control (when a step is due) sets the rate to admit at.
    async fn steer(&mut self, now: Instant) -> Result<(), TickError> {
        let (conn, keys, owner) = (&mut self.conn, &self.keys, self.lease.owner());
        let steered = self
            .steering
            .steer(conn, keys, owner, &self.settings, &self.metrics, now)
            .await?;
        if let Some(rate) = steered {
            self.admission.set_rate(rate, self.tick_length());
        }
        Ok(())
    }

    fn lease_for(&self) -> Duration {
        Duration::from_millis(self.settings.lease_ttl_ms)
    }

    /// Standby, or our lease may have run out during an outage: acquire
    /// (which also extends a lease that is still ours). False when another
    /// scheduler holds it.
    async fn take_lease(&mut self, tick: Tick) -> Result<bool, TickError> {
        let got = self
            .lease
            .acquire(&mut self.conn, &self.keys, self.settings.lease_ttl_ms)
            .await?;
        if !got.acquired {
            if self.lease.is_held() {
                self.lose("lease expired and was taken over");
            }
            if self.lease.seen(&got.holder) {
                tracing::debug!(queue = self.queue(), holder = %got.holder, "standing by");
            }
            return Ok(false);
        }
        let was_held = self.lease.taken(tick.started, self.lease_for());
        // Publish before the first admission, so the edge reads what this
        // holder enforces. The operator's state is kept.
        let state = self.configure().await?;
        if was_held {
            // Our own lease, extended after an outage: carry on.
            self.admission.refill(tick.elapsed);
        } else {
            self.admission.start();
            self.steering.restart();
            self.drawer.restart();
            self.metrics.lease(self.queue(), true);
        }
        self.lease.seen_ours();
        tracing::info!(
            queue = self.queue(),
            owner = %self.lease.owner(),
            state = state.as_str(),
            "lease acquired; settings published"
        );
        Ok(true)
    }

    fn lose(&mut self, why: &str) {
        tracing::warn!(queue = self.queue(), "lease lost: {why}");
        self.lease.stand_by();
        self.admission.stop();
        self.metrics.lease(self.queue(), false);
    }

    /// The admit (which renews the lease); fenced, the lease is lost.
    async fn admit(&mut self, tick: Tick) -> Result<(), TickError> {
        let (conn, keys, owner) = (&mut self.conn, &self.keys, self.lease.owner());
        let admitted = self
            .admission
            .admit(conn, keys, owner, &self.settings, &self.metrics, tick)
            .await?;
        let Some(counts) = admitted else {
            self.lose("admit fenced: another scheduler holds the lease");
            return Ok(());
        };
        // The admit extended the lease; count from before it was sent.
        self.lease.renewed(tick.started, self.lease_for());
        self.drawer.saw(&counts);
        Ok(())
    }

    async fn release(&mut self) {
        let queue = self.keys.queue().as_str();
        match self.lease.release(&mut self.conn, &self.keys).await {
            None => return,
            Some(Ok(true)) => tracing::info!(queue, "lease released"),
            Some(Ok(false)) => tracing::info!(queue, "lease was no longer ours"),
            Some(Err(e)) => {
                tracing::warn!(queue, error = %e, "could not release the lease; it expires by itself")
            }
        }
        self.metrics.lease(queue, false);
    }
}

/// A tick interval. A slow tick delays the next one instead of firing a
/// catch-up burst: the bucket already counts the time that passed.
fn ticks(tick_ms: u64) -> Interval {
    let mut interval = tokio::time::interval(Duration::from_millis(tick_ms));
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    interval
}

/// The next queue config from a reloaded file; never resolves without a
/// sender (or once it is gone).
async fn reloaded(reloads: &mut Option<watch::Receiver<QueueConfig>>) -> Option<QueueConfig> {
    let Some(rx) = reloads else {
        return std::future::pending().await;
    };
    if rx.changed().await.is_err() {
        *reloads = None;
        return std::future::pending().await;
    }
    Some(rx.borrow_and_update().clone())
}
