//! The audit trail of operator actions: who (the admin token's name, or
//! `cli:<user>` for the command line), what, on which queue, and how it
//! ended, as one log line (target `queuegate::audit`) and, in the running
//! service, a count in the metrics
//! (`queuegate_admin_actions_total{action,outcome}`). Never the token.

use crate::actions::{Action, ActionError};
use crate::metrics::Metrics;

/// The log target of audit lines (`RUST_LOG=queuegate::audit=info`).
pub const TARGET: &str = "queuegate::audit";

/// How an action ended, for the metric's `outcome` label.
pub fn outcome<T>(done: &Result<T, ActionError>) -> &'static str {
    match done {
        Ok(_) => "done",
        Err(
            ActionError::BadInput(_) | ActionError::UnknownQueue(_) | ActionError::UnknownBypass(_),
        ) => "bad_input",
        Err(ActionError::Refused(_) | ActionError::Conflict(_)) => "refused",
        Err(ActionError::Redis(_)) => "failed",
    }
}

/// Records one action: its name ([`Action::get_name`]) is the audit
/// line's `action` and the metric's label.
pub fn record<T>(
    metrics: Option<&Metrics>,
    who: &str,
    action: &Action,
    done: &Result<T, ActionError>,
) {
    let (name, queue) = (action.get_name(), action.queue());
    let outcome = outcome(done);
    // What it asked to change, where that says more than its name (the
    // settings changed, as JSON: never a secret).
    match (done, action.changes()) {
        (Ok(_), None) => {
            tracing::info!(target: TARGET, who, action = name, queue, outcome, "admin action")
        }
        (Err(e), None) => tracing::info!(
            target: TARGET, who, action = name, queue, outcome, error = %e, "admin action"
        ),
        (Ok(_), Some(changes)) => tracing::info!(
            target: TARGET, who, action = name, queue, outcome, changes = changes.as_str(), "admin action"
        ),
        (Err(e), Some(changes)) => tracing::info!(
            target: TARGET, who, action = name, queue, outcome, changes = changes.as_str(), error = %e, "admin action"
        ),
    }
    if let Some(m) = metrics {
        m.admin_action(name, outcome);
    }
}

/// `cli:<user>` for the command line (`$USER`, else `$LOGNAME`, else the
/// uid), so a shared VM's audit lines tell operators apart.
pub fn cli_user() -> String {
    let user = ["USER", "LOGNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|u| !u.is_empty()))
        .or_else(|| {
            std::fs::read_to_string("/proc/self/status")
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find_map(|l| l.strip_prefix("Uid:"))
                        .and_then(|u| u.split_whitespace().next().map(|u| format!("uid {u}")))
                })
        })
        .unwrap_or_else(|| "unknown".into());
    format!("cli:{user}")
}
