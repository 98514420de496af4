//! One queue's loop: stand by until the lease is free, then admit every
//! tick (each admit call also extends the lease: one round trip a tick).
//! Safety lives in the admit script (free slots, owner fencing); the lease
//! only keeps one scheduler busy per queue.
//!
//! [`QueueWorker`] only sequences a tick; each concern keeps its own state
//! in its own module: `lease` (standing by or holding), `reload` (reloaded
//! settings and their publishing), `in_force` (the file's, the published
//! and the run-time settings in force), `origin` (origin control's steering),
//! `draw` (the pre-queue's draw) and `admit` (the per-tick request and the
//! rate estimate).

mod admit;
mod draw;
mod idle;
mod in_force;
mod lease;
mod origin;
mod reload;

use std::sync::Arc;
use std::time::{Duration, Instant};

use queuegate_shared::refusal::Refusal;
use queuegate_shared::{QueueKeys, Settings};
use tokio::sync::watch;
use tokio::time::{Interval, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

pub use admit::RATE_WINDOW;

use crate::admission::Backoff;
use crate::config::{FileSchedule, QueueConfig};
use crate::connect::RedisConn;
use crate::engine::EngineError;
use crate::metrics::Metrics;
use crate::runtime::Stored;
use admit::Admission;
use draw::Drawer;
use idle::Idle;
use lease::Lease;
use origin::Steering;
use reload::Reload;

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

    /// Redis refused the tick without running it.
    pub fn refusal(&self) -> Option<Refusal> {
        match self {
            TickError::Engine(e) => e.refusal(),
            TickError::Random(_) => None,
        }
    }

    /// Its `kind` in `queuegate_redis_errors_total`.
    pub fn kind(&self) -> &'static str {
        match self.refusal() {
            Some(refusal) => refusal.as_str(),
            None if self.is_connection() => "connection",
            None => "other",
        }
    }
}

/// One tick's times: when it started (lease deadlines count from before
/// the call that renews) and how long after the last one.
#[derive(Debug, Clone, Copy)]
struct Tick {
    started: Instant,
    elapsed: Duration,
    /// The admit extends the lease by the idle TTL if the queue stays
    /// idle (it has been idle long enough).
    idle_lease: bool,
}

/// One queue's scheduler.
#[derive(Debug)]
pub struct QueueWorker {
    keys: QueueKeys,
    /// The settings in force: the file's with the run-time ones over them.
    settings: Settings,
    /// The settings the run-time ones go over: this process's file's, or
    /// the published file's when they differ and this process took over
    /// (it keeps them).
    file: Settings,
    /// This process's config file's settings for this queue.
    own_file: Settings,
    /// The published file's fingerprint last seen (to log a difference
    /// once per published file).
    noted_file: Option<String>,
    /// The run-time settings last read from Redis.
    runtime: Stored,
    /// A run-time version applied and still to be marked as applied once
    /// published.
    runtime_unmarked: Option<u64>,
    /// `[redis] response_timeout_ms`: the lease rule run-time settings are
    /// checked against.
    response_timeout: Duration,
    conn: RedisConn,
    metrics: Arc<Metrics>,
    last_tick: Option<Instant>,
    lease: Lease,
    reload: Reload,
    steering: Steering,
    drawer: Drawer,
    admission: Admission,
    idle: Idle,
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
            lease: Lease::new(owner),
            reload: Reload::default(),
            steering: Steering::new(&settings),
            drawer: Drawer::new(),
            idle: Idle::default(),
            admission: Admission::new(settings.admit_rate_per_second, tick),
            keys,
            file: settings.clone(),
            own_file: settings.clone(),
            noted_file: None,
            runtime: Stored::default(),
            runtime_unmarked: None,
            response_timeout: Duration::from_millis(crate::config::DEFAULT_RESPONSE_TIMEOUT_MS),
            settings,
            conn,
            metrics,
            last_tick: None,
        }
    }

    /// Checks run-time settings against this Redis response timeout (the
    /// lease rule), as the config file's are.
    pub fn with_response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// Waits, while the queue is idle, for the edge to wake it (or
    /// `IDLE_WAIT_MS`) instead of ticking, on a connection of its own to
    /// this Redis.
    pub fn with_idle_waits(mut self, redis: crate::config::RedisConfig) -> Self {
        self.idle = Idle::with_redis(redis);
        self
    }

    /// Publishes this opening and closing where none is published yet,
    /// and compares this file's fingerprint with the published one.
    pub fn with_file(mut self, schedule: FileSchedule, fingerprint: String) -> Self {
        self.reload.set_file(schedule, fingerprint);
        self
    }

    /// Takes new settings (and schedule) from `reloads` as they come (a
    /// reloaded config); the lease is kept.
    pub fn with_reloads(mut self, reloads: watch::Receiver<QueueConfig>) -> Self {
        self.reload.listen(reloads);
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
                Some(q) = self.reload.next() => {
                    if q.settings.tick_ms != self.settings.tick_ms {
                        interval = ticks(q.settings.tick_ms);
                        let tick = Duration::from_millis(q.settings.tick_ms);
                        backoff = Backoff::new(tick, MAX_BACKOFF.max(tick));
                    }
                    // A reloaded file is published at the next tick, not
                    // after an idle wait.
                    self.idle.stop();
                    self.reload.file_reloaded(&q, self.lease.is_held());
                    self.own_file = q.settings.clone();
                    self.file = q.settings;
                    let settings = self.over_file(&self.runtime.values.clone());
                    self.reconfigure(settings);
                    continue;
                }
                _ = interval.tick(), if !self.idle.is_idle() => {}
                reached = self.idle.wait(&self.keys), if self.idle.is_idle() => {
                    if reached {
                        self.metrics.redis_ok(self.keys.queue().as_str());
                    }
                    // Woken (a first visitor, an opening just scheduled):
                    // this tick looks at the pre-queue too, so a new
                    // opening's seed is committed at once (docs/drop-day.md).
                    if self.idle.take_woken() {
                        self.drawer.restart();
                    }
                    interval.reset();
                }
            }
            let result = self.tick().await;
            // Run-time settings may have changed the tick.
            let tick = Duration::from_millis(self.settings.tick_ms);
            if interval.period() != tick {
                interval = ticks(self.settings.tick_ms);
                backoff = Backoff::new(tick, MAX_BACKOFF.max(tick));
            }
            match result {
                Ok(()) => {
                    if failing {
                        tracing::info!(queue = self.queue(), "redis reachable again");
                        failing = false;
                    }
                    backoff.reset();
                    self.metrics.redis_ok(self.queue());
                }
                Err(e) => {
                    self.metrics.redis_error(self.queue(), e.kind());
                    if !failing {
                        if let Some(refusal) = e.refusal() {
                            // Nothing ran: the line is as it was, and the
                            // operator has one thing to fix.
                            tracing::warn!(queue = self.queue(), kind = refusal.as_str(), advice = refusal.advice(), error = %e, "Redis refused the tick; retrying with backoff");
                        } else if e.is_connection() {
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
    /// the lease first when we are standing by or it may have run out;
    /// steer and draw in between when due.
    pub async fn tick(&mut self) -> Result<(), TickError> {
        let started = Instant::now();
        let elapsed = self
            .last_tick
            .map_or(Duration::ZERO, |t| started.duration_since(t));
        self.last_tick = Some(started);
        let tick = Tick {
            started,
            elapsed,
            idle_lease: self.idle.idle_lease(started),
        };

        if self.lease.valid_at(started) {
            if self.reload.file_is_pending() {
                self.publish_reloaded_file().await?;
            }
            if self.reload.is_pending() {
                self.publish().await?;
                tracing::info!(queue = self.queue(), "reloaded settings published");
            }
        } else {
            // Standing by: nothing to ask Redis until the holder's lease
            // would run out (as its last reply said).
            if !self.lease.is_held() && !self.lease.may_try(started) {
                return Ok(());
            }
            self.idle.stop();
            if !self.take_lease(tick).await? {
                return Ok(());
            }
        }
        // Idle: no origin answers to read (no slot in use).
        if !self.idle.is_idle() {
            self.steer(started).await?;
        }
        if self.drawer.is_due() {
            self.draw(started).await?;
        }
        self.admit(tick).await
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
            self.note_file(got.published_file.as_deref());
            if let Some(ttl) = got.holder_ttl_ms {
                self.lease.retry_in(
                    tick.started,
                    Duration::from_millis(ttl),
                    Duration::from_millis(self.settings.lease_ttl_ms),
                );
            }
            if self.lease.seen(&got.holder) {
                tracing::debug!(queue = self.queue(), holder = %got.holder, "standing by");
            }
            return Ok(false);
        }
        let was_held = self.lease.taken(tick.started, self.lease_for());
        // A new holder publishes its file only where none is published
        // (else it keeps the published one); re-taking its own lease after
        // a stall publishes no file, and never the file's schedule over a
        // newer one (issue 37).
        if !was_held || got.published_file.is_none() {
            self.take_over_file().await?;
        }
        // Publish before the first admission, so the edge reads what this
        // holder enforces (the run-time settings over the file's). The
        // operator's state is kept.
        self.load_runtime().await?;
        let state = self.publish().await?;
        if !was_held {
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

    /// The pre-queue: sealed at its opening, then drawn batch by batch.
    async fn draw(&mut self, started: Instant) -> Result<(), TickError> {
        let (conn, keys, owner) = (&mut self.conn, &self.keys, self.lease.owner());
        self.drawer
            .draw(conn, keys, owner, &self.settings, &self.metrics, started)
            .await
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
        // The admit extended the lease (by the idle TTL when it left the
        // queue idle); count from before it was sent.
        self.idle.saw(&counts, tick.idle_lease, tick.started);
        self.metrics
            .idle(self.keys.queue().as_str(), self.idle.is_idle());
        self.lease.renewed(tick.started, self.lease_for());
        self.drawer.saw(&counts);
        if counts.settings_version != self.runtime.version_number() {
            // An operator changed the run-time settings: in force and
            // published within this tick.
            self.load_runtime().await?;
            if self.reload.is_pending() || self.runtime_unmarked.is_some() {
                self.publish().await?;
            }
        }
        Ok(())
    }

    fn tick_length(&self) -> Duration {
        Duration::from_millis(self.settings.tick_ms)
    }

    fn lease_for(&self) -> Duration {
        Duration::from_millis(if self.idle.is_idle() {
            self.settings.idle_lease_ttl_ms()
        } else {
            self.settings.lease_ttl_ms
        })
    }

    fn lose(&mut self, why: &str) {
        tracing::warn!(queue = self.queue(), "lease lost: {why}");
        self.idle.stop();
        self.metrics.idle(self.keys.queue().as_str(), false);
        self.lease.stand_by();
        self.metrics.lease(self.queue(), false);
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
/// catch-up burst: the shared rate bucket already counts the time that
/// passed.
fn ticks(tick_ms: u64) -> Interval {
    let mut interval = tokio::time::interval(Duration::from_millis(tick_ms));
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    interval
}
