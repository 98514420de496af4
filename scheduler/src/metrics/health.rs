//! The per-queue health that `/healthz` reports.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use queuegate_shared::ops::Refused;

use super::Metrics;

/// One queue's health as the scheduler last saw it.
#[derive(Debug, Clone, Copy)]
pub(super) struct QueueHealth {
    pub(super) last_ok: Option<Instant>,
    pub(super) stale_after: Duration,
    pub(super) leader: bool,
    /// The refusal totals Redis reported last while we held the lease: the
    /// counter grows by what was added since (a new holder starts here).
    pub(super) refused_seen: Option<Refused>,
    /// The bypassed and revoked totals seen last, likewise.
    pub(super) operator_seen: Option<(u64, u64)>,
    /// The holder waits for a wake-up instead of ticking: its ticks come
    /// `IDLE_WAIT_MS` apart, so health allows that much more.
    pub(super) idle: bool,
}

impl Metrics {
    /// Per queue: healthy (reached Redis recently) and whether it leads.
    pub fn health(&self) -> Vec<(String, bool, bool)> {
        let now = Instant::now();
        self.lock_health()
            .iter()
            .map(|(q, h)| {
                let idle = if h.idle {
                    Duration::from_millis(queuegate_shared::settings::IDLE_WAIT_MS)
                } else {
                    Duration::ZERO
                };
                let ok = h
                    .last_ok
                    .is_some_and(|t| now.duration_since(t) <= h.stale_after + idle);
                (q.clone(), ok, h.leader)
            })
            .collect()
    }

    pub(super) fn lock_health(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, QueueHealth>> {
        // A panic while holding this lock leaves plain data behind: use it.
        self.health.lock().unwrap_or_else(|e| e.into_inner())
    }
}
