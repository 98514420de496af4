//! The label sets of the scheduler's metrics.

use prometheus_client::encoding::EncodeLabelSet;

/// The label set of every queue metric.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabel {
    /// The queue id.
    pub queue: String,
}

/// The label set of `queuegate_redis_errors_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RedisErrorLabel {
    /// The queue id.
    pub queue: String,
    /// `connection` (no answer), a refusal Redis answered in place of
    /// running the tick (`oom`, `busy`, `loading`, `readonly`,
    /// `masterdown`, `cluster`: `queuegate_shared::refusal`), or `other`
    /// (a script or decode fault).
    pub kind: String,
}

/// The label set of `queuegate_entries_refused_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusalLabel {
    /// The queue id.
    pub queue: String,
    /// budget, challenge, reused, stale or turnstile.
    pub reason: String,
}

/// The label set of `queuegate_admin_actions_total`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AdminLabel {
    /// The action: status, pause, …, or `auth` for a refused token.
    pub action: String,
    /// done, bad_input, refused, failed (or unauthorized for `auth`).
    pub outcome: String,
}

/// The label set of `queuegate_build_info`.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct BuildLabel {
    pub(super) version: String,
}

/// The label of a queue's metrics.
pub(super) fn label(queue: &str) -> QueueLabel {
    QueueLabel {
        queue: queue.to_string(),
    }
}
