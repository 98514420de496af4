//! Prometheus metrics (prometheus-client), one label `queue`, and the
//! per-queue health that `/healthz` reports. The dashboard and alert rules
//! in `deploy/` use these names; `tests/system/tests/scheduler/observability.rs`
//! keeps them in step.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use queuegate_shared::ops::{AdmitCounts, Refused};
use queuegate_shared::Settings;

mod health;
mod labels;

use health::QueueHealth;
use labels::{label, BuildLabel};
pub use labels::{AdminLabel, QueueLabel, RedisErrorLabel, RefusalLabel};

type HistogramFamily = Family<QueueLabel, Histogram, fn() -> Histogram>;
type FloatGauge = Gauge<f64, std::sync::atomic::AtomicU64>;

/// Every metric the scheduler exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    waiting: Family<QueueLabel, Gauge>,
    active: Family<QueueLabel, Gauge>,
    admitted: Family<QueueLabel, Counter>,
    abandoned: Family<QueueLabel, Counter>,
    expired: Family<QueueLabel, Counter>,
    lapsed: Family<QueueLabel, Counter>,
    tick_seconds: HistogramFamily,
    lease_held: Family<QueueLabel, Gauge>,
    file_mismatch: Family<QueueLabel, Gauge>,
    lease_acquired: Family<QueueLabel, Counter>,
    admitting: Family<QueueLabel, Gauge>,
    rate: Family<QueueLabel, FloatGauge>,
    errors: Family<RedisErrorLabel, Counter>,
    refused: Family<RefusalLabel, Counter>,
    max_waiting: Family<QueueLabel, Gauge>,
    max_active: Family<QueueLabel, Gauge>,
    lease_ttl: Family<QueueLabel, FloatGauge>,
    tick_interval: Family<QueueLabel, FloatGauge>,
    rate_limit: Family<QueueLabel, FloatGauge>,
    target_rate: Family<QueueLabel, FloatGauge>,
    origin_errors: Family<QueueLabel, FloatGauge>,
    origin_p95: Family<QueueLabel, FloatGauge>,
    rate_cuts: Family<QueueLabel, Counter>,
    pre_queued: Family<QueueLabel, Gauge>,
    claims: Family<QueueLabel, Gauge>,
    stock_left: Family<QueueLabel, Gauge>,
    stock_sold: Family<QueueLabel, Gauge>,
    stock_overbooking: Family<QueueLabel, FloatGauge>,
    claimed: Family<QueueLabel, Counter>,
    draw_left: Family<QueueLabel, Gauge>,
    drawn: Family<QueueLabel, Counter>,
    bypassed: Family<QueueLabel, Counter>,
    revoked: Family<QueueLabel, Counter>,
    admin: Family<AdminLabel, Counter>,
    health: Mutex<BTreeMap<String, QueueHealth>>,
}

fn tick_histogram() -> Histogram {
    // 0.5 ms … ~8 s: a healthy tick is a millisecond or two; the top is past
    // any sane lease TTL, so the "tick near the lease TTL" alert can see it.
    Histogram::new(exponential_buckets(0.0005, 2.0, 15))
}

impl Metrics {
    /// A registry with every metric under the `queuegate_` prefix.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("queuegate");
        let m = Metrics {
            waiting: Family::default(),
            active: Family::default(),
            admitted: Family::default(),
            abandoned: Family::default(),
            expired: Family::default(),
            lapsed: Family::default(),
            tick_seconds: HistogramFamily::new_with_constructor(tick_histogram),
            lease_held: Family::default(),
            file_mismatch: Family::default(),
            lease_acquired: Family::default(),
            admitting: Family::default(),
            rate: Family::default(),
            errors: Family::default(),
            refused: Family::default(),
            max_waiting: Family::default(),
            max_active: Family::default(),
            lease_ttl: Family::default(),
            tick_interval: Family::default(),
            rate_limit: Family::default(),
            target_rate: Family::default(),
            origin_errors: Family::default(),
            origin_p95: Family::default(),
            rate_cuts: Family::default(),
            pre_queued: Family::default(),
            claims: Family::default(),
            stock_left: Family::default(),
            stock_sold: Family::default(),
            stock_overbooking: Family::default(),
            claimed: Family::default(),
            draw_left: Family::default(),
            drawn: Family::default(),
            bypassed: Family::default(),
            revoked: Family::default(),
            admin: Family::default(),
            health: Mutex::new(BTreeMap::new()),
            registry: Registry::default(),
        };
        let build = Family::<BuildLabel, Gauge>::default();
        build
            .get_or_create(&BuildLabel {
                version: env!("CARGO_PKG_VERSION").to_string(),
            })
            .set(1);
        registry.register(
            "build_info",
            "Always 1; labels name the running version",
            build,
        );
        // The holder's view of the line: only the lease holder exports these.
        registry.register("waiting", "Users in line", m.waiting.clone());
        registry.register("active_slots", "Order slots in use", m.active.clone());
        registry.register(
            "pre_queued",
            "Visitors in the pre-queue before a scheduled opening",
            m.pre_queued.clone(),
        );
        registry.register(
            "claims",
            "Visitors passed over asleep at the head, holding a claim within their sleep grace",
            m.claims.clone(),
        );
        registry.register(
            "stock_units_left",
            "A kept stock's units left for sale, not counting those held by orders in flight (no series: no stock kept)",
            m.stock_left.clone(),
        );
        registry.register(
            "stock_units_sold",
            "A kept stock's units sold since it was first set (refunds taken off)",
            m.stock_sold.clone(),
        );
        registry.register(
            "stock_overbooking_ratio",
            "The overbooking margin in force: turns let out beyond the units left, as a share of them",
            m.stock_overbooking.clone(),
        );
        registry.register(
            "claimed",
            "Visitors passed over asleep at the head (each then held a claim)",
            m.claimed.clone(),
        );
        registry.register(
            "draw_left",
            "Pre-queued visitors the running draw has still to place",
            m.draw_left.clone(),
        );
        registry.register(
            "drawn",
            "Pre-queued visitors the draw placed in line",
            m.drawn.clone(),
        );
        registry.register(
            "bypassed",
            "Requests bypass links passed without queueing (counted while holding the lease)",
            m.bypassed.clone(),
        );
        registry.register(
            "revoked",
            "Visitors operators revoked (counted while holding the lease)",
            m.revoked.clone(),
        );
        registry.register("admitted", "Users given an entry token", m.admitted.clone());
        registry.register(
            "abandoned",
            "Waiting users dropped for not polling",
            m.abandoned.clone(),
        );
        registry.register(
            "expired",
            "Slots freed from tokens never used",
            m.expired.clone(),
        );
        registry.register(
            "lapsed",
            "Slots freed from consumes the origin never settled",
            m.lapsed.clone(),
        );
        registry.register(
            "tick_duration_seconds",
            "Time of one admission tick (lease renew + admit script)",
            m.tick_seconds.clone(),
        );
        registry.register(
            "lease_held",
            "1 while this process holds the queue's lease",
            m.lease_held.clone(),
        );
        registry.register(
            "config_file_mismatch",
            "1 while this process's config file differs from the one whose settings are published (the fingerprint beside the lease)",
            m.file_mismatch.clone(),
        );
        registry.register(
            "lease_acquisitions",
            "Times this process took the queue's lease",
            m.lease_acquired.clone(),
        );
        registry.register(
            "admitting",
            "1 while the queue state lets the scheduler admit (open or draining)",
            m.admitting.clone(),
        );
        registry.register(
            "admission_rate_per_second",
            "Measured admissions per second (the ETA's rate)",
            m.rate.clone(),
        );
        registry.register(
            "redis_errors",
            "Failed ticks (Redis unreachable or erroring)",
            m.errors.clone(),
        );
        registry.register(
            "entries_refused",
            "New places the entry guard refused, by reason (counted while holding the lease)",
            m.refused.clone(),
        );
        // This process's settings, so rules can compare against them.
        registry.register(
            "config_max_waiting",
            "Longest line (max_waiting)",
            m.max_waiting.clone(),
        );
        registry.register(
            "config_max_active_slots",
            "Order slots at most (max_active)",
            m.max_active.clone(),
        );
        registry.register(
            "config_lease_ttl_seconds",
            "Lease lifetime (lease_ttl_ms)",
            m.lease_ttl.clone(),
        );
        registry.register(
            "config_tick_interval_seconds",
            "Admission tick (tick_ms)",
            m.tick_interval.clone(),
        );
        registry.register(
            "config_admit_rate_per_second",
            "Configured admission rate (admit_rate_per_second)",
            m.rate_limit.clone(),
        );
        // Origin control (lease holder only, like the line's gauges).
        registry.register(
            "target_admit_rate_per_second",
            "Admission rate in force: the configured rate, or less while origin control has cut it",
            m.target_rate.clone(),
        );
        registry.register(
            "origin_error_share",
            "Share of gated orders the origin answered 5xx or not at all over the control window, as the edge saw them",
            m.origin_errors.clone(),
        );
        registry.register(
            "origin_latency_p95_seconds",
            "The origin's p95 latency over the control window, as the edge saw it",
            m.origin_p95.clone(),
        );
        registry.register(
            "admit_rate_cuts",
            "Times origin control cut the admission rate (by this process)",
            m.rate_cuts.clone(),
        );
        registry.register(
            "admin_actions",
            "Admin API and operator actions by this process, by action and outcome (action auth: refused tokens)",
            m.admin.clone(),
        );
        // Present from the start (0), so a dashboard's rate has a series
        // before the first refusal.
        let _ = m.admin.get_or_create(&AdminLabel {
            action: "auth".into(),
            outcome: "unauthorized".into(),
        });
        Metrics { registry, ..m }
    }

    /// Counts one admin action (see [`crate::audit`]).
    pub fn admin_action(&self, action: &str, outcome: &str) {
        self.admin
            .get_or_create(&AdminLabel {
                action: action.to_string(),
                outcome: outcome.to_string(),
            })
            .inc();
    }

    /// Registers a queue so it shows in `/metrics` and `/healthz` from the
    /// start, with the settings this process runs it with.
    pub fn add_queue(&self, queue: &str, settings: &Settings, stale_after: Duration) {
        let l = label(queue);
        self.lease_held.get_or_create(&l).set(0);
        self.file_mismatch.get_or_create(&l).set(0);
        self.settings(queue, settings);
        let _ = self.rate_cuts.get_or_create(&l);
        let _ = self.admitted.get_or_create(&l);
        let _ = self.bypassed.get_or_create(&l);
        let _ = self.revoked.get_or_create(&l);
        let _ = self.errors.get_or_create(&RedisErrorLabel {
            queue: queue.to_string(),
            kind: "connection".into(),
        });
        self.lock_health().insert(
            queue.to_string(),
            QueueHealth {
                last_ok: None,
                stale_after,
                leader: false,
                refused_seen: None,
                operator_seen: None,
                idle: false,
            },
        );
    }

    /// A queue this process no longer runs (removed by a reload): it
    /// leaves `/healthz`, and its line's gauges go (its counters stay, as
    /// Prometheus expects of counters).
    pub fn remove_queue(&self, queue: &str) {
        self.lease(queue, false);
        let l = label(queue);
        self.lease_held.remove(&l);
        self.file_mismatch.remove(&l);
        self.lock_health().remove(queue);
    }

    /// The queue's holder went idle (or busy again).
    pub fn idle(&self, queue: &str, idle: bool) {
        if let Some(h) = self.lock_health().get_mut(queue) {
            h.idle = idle;
        }
    }

    /// A tick that reached Redis.
    pub fn redis_ok(&self, queue: &str) {
        if let Some(h) = self.lock_health().get_mut(queue) {
            h.last_ok = Some(Instant::now());
        }
    }

    /// A tick that failed, of `kind` ([`RedisErrorLabel::kind`]).
    pub fn redis_error(&self, queue: &str, kind: &str) {
        self.errors
            .get_or_create(&RedisErrorLabel {
                queue: queue.to_string(),
                kind: kind.to_string(),
            })
            .inc();
    }

    /// Lease state changed. A process that lost the lease stops exporting
    /// the line's gauges: its last values would go stale beside the new
    /// holder's.
    /// Whether this process's config file differs from the published one.
    pub fn file_mismatch(&self, queue: &str, differs: bool) {
        self.file_mismatch
            .get_or_create(&label(queue))
            .set(i64::from(differs));
    }

    /// The lease taken or lost.
    pub fn lease(&self, queue: &str, held: bool) {
        let l = label(queue);
        self.lease_held.get_or_create(&l).set(i64::from(held));
        if held {
            self.lease_acquired.get_or_create(&l).inc();
        } else {
            self.waiting.remove(&l);
            self.active.remove(&l);
            self.pre_queued.remove(&l);
            self.claims.remove(&l);
            self.stock_left.remove(&l);
            self.stock_sold.remove(&l);
            self.stock_overbooking.remove(&l);
            self.draw_left.remove(&l);
            self.admitting.remove(&l);
            self.rate.remove(&l);
            self.target_rate.remove(&l);
            self.origin_errors.remove(&l);
            self.origin_p95.remove(&l);
        }
        if let Some(h) = self.lock_health().get_mut(queue) {
            h.leader = held;
            h.refused_seen = None;
            h.operator_seen = None;
        }
    }

    /// What an admit tick reported.
    pub fn admit(&self, queue: &str, c: &AdmitCounts, took: Duration, rate: Option<f64>) {
        let l = label(queue);
        self.waiting.get_or_create(&l).set(gauge(c.waiting));
        self.active.get_or_create(&l).set(gauge(c.active));
        self.pre_queued.get_or_create(&l).set(gauge(c.pre_queued));
        self.claims.get_or_create(&l).set(gauge(c.claims));
        self.claimed.get_or_create(&l).inc_by(c.claimed);
        match c.stock_left {
            Some(left) => {
                self.stock_left.get_or_create(&l).set(gauge(left));
                self.stock_sold.get_or_create(&l).set(gauge(c.stock_sold));
                self.stock_overbooking
                    .get_or_create(&l)
                    .set(c.stock_margin as f64 / 1000.0);
            }
            None => {
                self.stock_left.remove(&l);
                self.stock_sold.remove(&l);
                self.stock_overbooking.remove(&l);
            }
        }
        if !c.drawing {
            self.draw_left.get_or_create(&l).set(0);
        }
        self.admitting.get_or_create(&l).set(i64::from(c.admitting));
        self.admitted.get_or_create(&l).inc_by(c.admitted);
        self.abandoned.get_or_create(&l).inc_by(c.abandoned);
        self.expired.get_or_create(&l).inc_by(c.expired);
        self.lapsed.get_or_create(&l).inc_by(c.lapsed);
        self.tick_seconds
            .get_or_create(&l)
            .observe(took.as_secs_f64());
        self.count_refusals(queue, c.refused);
        self.count_operator_totals(queue, c.bypassed, c.revoked);
        if let Some(r) = rate {
            self.rate.get_or_create(&l).set(r);
        }
    }

    /// The admission rate in force, and what origin control last saw of
    /// the origin (None: no answers in the window, or control is off).
    pub fn origin(
        &self,
        queue: &str,
        target_rate: f64,
        error_share: Option<f64>,
        p95_ms: Option<f64>,
    ) {
        let l = label(queue);
        self.target_rate.get_or_create(&l).set(target_rate);
        match error_share {
            Some(e) => {
                self.origin_errors.get_or_create(&l).set(e);
            }
            None => {
                self.origin_errors.remove(&l);
            }
        }
        match p95_ms {
            Some(p) => {
                self.origin_p95.get_or_create(&l).set(p / 1_000.0);
            }
            None => {
                self.origin_p95.remove(&l);
            }
        }
    }

    /// The pre-queue and a running draw, as the draw step saw them.
    pub fn draw(&self, queue: &str, pre_queued: u64, left: u64) {
        let l = label(queue);
        self.pre_queued.get_or_create(&l).set(gauge(pre_queued));
        self.draw_left.get_or_create(&l).set(gauge(left));
    }

    /// A draw batch placed `placed` visitors and dropped `dropped` who had
    /// stopped polling (counted as abandoned).
    pub fn drawn(&self, queue: &str, placed: u64, dropped: u64) {
        let l = label(queue);
        self.drawn.get_or_create(&l).inc_by(placed);
        self.abandoned.get_or_create(&l).inc_by(dropped);
    }

    /// Origin control cut the rate.
    pub fn rate_cut(&self, queue: &str) {
        self.rate_cuts.get_or_create(&label(queue)).inc();
    }

    /// This process's settings changed (a reloaded config).
    pub fn settings(&self, queue: &str, settings: &Settings) {
        let l = label(queue);
        self.max_waiting
            .get_or_create(&l)
            .set(gauge(settings.max_waiting));
        self.max_active
            .get_or_create(&l)
            .set(gauge(settings.max_active));
        self.lease_ttl
            .get_or_create(&l)
            .set(seconds(settings.lease_ttl_ms));
        self.tick_interval
            .get_or_create(&l)
            .set(seconds(settings.tick_ms));
        self.rate_limit
            .get_or_create(&l)
            .set(settings.admit_rate_per_second);
    }

    /// Grows the refusal counter by what Redis's totals gained since the
    /// last tick; the first tick of a lease only records where they stand.
    fn count_refusals(&self, queue: &str, now: Refused) {
        let before = self
            .lock_health()
            .get_mut(queue)
            .and_then(|h| h.refused_seen.replace(now));
        for (i, (reason, total)) in now.by_reason().into_iter().enumerate() {
            let counter = self.refused.get_or_create(&RefusalLabel {
                queue: queue.to_string(),
                reason: reason.to_string(),
            });
            if let Some(b) = before {
                counter.inc_by(total.saturating_sub(b.by_reason()[i].1));
            }
        }
    }

    /// Grows the bypass and revocation counters by what Redis's totals
    /// gained since the last tick, as [`Self::count_refusals`].
    fn count_operator_totals(&self, queue: &str, bypassed: u64, revoked: u64) {
        let before = self
            .lock_health()
            .get_mut(queue)
            .and_then(|h| h.operator_seen.replace((bypassed, revoked)));
        if let Some((b, r)) = before {
            let l = label(queue);
            self.bypassed
                .get_or_create(&l)
                .inc_by(bypassed.saturating_sub(b));
            self.revoked
                .get_or_create(&l)
                .inc_by(revoked.saturating_sub(r));
        }
    }

    /// The text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

fn gauge(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn seconds(ms: u64) -> f64 {
    Duration::from_millis(ms).as_secs_f64()
}
