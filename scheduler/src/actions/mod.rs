//! What an operator can do to a queue, once, for both faces: the command
//! line ([`crate::cli`]) and the admin API ([`crate::admin`]) only parse
//! into an [`Action`] and render its [`Done`]. Each action lives in its own
//! file, checks its input before Redis is asked, and is named once
//! ([`Action::get_name`]) for the audit line and the metric label.

mod bypass;
mod notice;
mod reset;
mod revoke;
mod schedule;
mod settings;
mod status;
mod stock;
mod switch;
mod visitor;

use queuegate_shared::UserId;
use serde::Serialize;

use crate::audit;
use crate::config::{Config, QueueConfig};
use crate::connect::RedisConn;
use crate::engine::EngineError;
use crate::metrics::Metrics;

pub use bypass::{Bypass, BypassCall, BypassCreated, BypassListed, BypassRevoked};
pub use notice::{Notice, NoticeNow};
pub use queuegate_shared::ops::Change;
pub use reset::{Reset, ResetDone};
pub use revoke::{Lifted, Revocation, RevocationCall, VisitorRevoked};
pub use schedule::{Names, Schedule, ScheduleNow, FIELDS, FLAGS};
pub use settings::{Settings, SettingsCall, SettingsView};
pub use status::{DrawStatus, FileStatus, OriginStatus, QueueStatus, Status};
pub use stock::{Stock, StockNow};
pub use switch::{Switch, SwitchState, Switched};
pub use visitor::{LastChange, TokenView, Visitor, VisitorView};

/// Why an action did nothing.
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    /// The input is not valid (a time, a notice, a missing queue name).
    #[error("{0}")]
    BadInput(String),
    /// The queue is not one this scheduler is configured for.
    #[error("{0}")]
    UnknownQueue(String),
    /// No bypass link with that id.
    #[error("{0}")]
    UnknownBypass(String),
    /// The queue is not in a state the action applies to.
    #[error("{0}")]
    Refused(String),
    /// The inputs are valid one by one but not together (a closing before
    /// the opening).
    #[error("{0}")]
    Conflict(String),
    /// Redis could not be asked or answered with an error.
    #[error(transparent)]
    Redis(#[from] EngineError),
}

impl From<redis::RedisError> for ActionError {
    fn from(e: redis::RedisError) -> Self {
        ActionError::Redis(EngineError::Redis(e))
    }
}

/// One operator action, as either face asks for it.
#[derive(Debug, Clone)]
pub enum Action {
    /// Show queues.
    Status(Status),
    /// Pause, resume, close, open or drain a queue.
    Switch(SwitchState),
    /// Set or clear the opening and closing.
    Schedule(Schedule),
    /// Set or clear the notice to the line.
    Notice(Notice),
    /// Empty a closed queue.
    Reset(Reset),
    /// Show or change the run-time settings.
    Settings(Settings),
    /// Look a visitor up.
    Visitor(Visitor),
    /// Revoke a visitor, or lift that.
    Revocation(Revocation),
    /// Create, list or revoke bypass links.
    Bypass(Bypass),
    /// Set, add to, refund, clear or show the stock.
    Stock(Stock),
}

/// What an action did, as data: the CLI prints it, the API answers it as
/// JSON (each variant serializes as what it holds).
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Done {
    /// `status`: one queue, or every configured one.
    Status(Vec<QueueStatus>),
    /// A state switch.
    Switched(Switched),
    /// The schedule now.
    Schedule(ScheduleNow),
    /// The notice now.
    Notice(NoticeNow),
    /// What a reset removed.
    Reset(ResetDone),
    /// The settings now (boxed: the two `Settings` in it are large).
    Settings(Box<SettingsView>),
    /// One visitor.
    Visitor(VisitorView),
    /// A revocation done.
    Revoked(VisitorRevoked),
    /// A revocation lifted.
    Lifted(Lifted),
    /// A new bypass link.
    BypassCreated(BypassCreated),
    /// A queue's bypass links.
    Bypasses(Vec<BypassListed>),
    /// A revoked bypass link.
    BypassRevoked(BypassRevoked),
    /// The stock now.
    Stock(StockNow),
}

impl Action {
    /// The action's name in the audit log and the
    /// `queuegate_admin_actions_total{action}` label.
    pub fn get_name(&self) -> &'static str {
        match self {
            Action::Status(_) => "status",
            Action::Switch(a) => a.switch.name(),
            Action::Schedule(_) => "schedule",
            Action::Notice(_) => "notice",
            Action::Reset(a) => a.name(),
            Action::Settings(a) => a.name(),
            Action::Visitor(_) => "visitor",
            Action::Revocation(a) => a.name(),
            Action::Bypass(a) => a.name(),
            Action::Stock(a) => a.name(),
        }
    }

    /// The queue it names, as the audit line shows it (`*`: every queue).
    pub fn queue(&self) -> &str {
        let queue = match self {
            Action::Status(a) => &a.queue,
            Action::Switch(a) => &a.queue,
            Action::Schedule(a) => &a.queue,
            Action::Notice(a) => &a.queue,
            Action::Reset(a) => &a.queue,
            Action::Settings(a) => &a.queue,
            Action::Visitor(a) => &a.queue,
            Action::Revocation(a) => &a.queue,
            Action::Bypass(a) => &a.queue,
            Action::Stock(a) => &a.queue,
        };
        queue.as_deref().unwrap_or("*")
    }

    /// What it asks to change, for the audit line, where that is more
    /// than its name says (the settings changed, as JSON; never a secret).
    pub fn changes(&self) -> Option<String> {
        match self {
            Action::Settings(a) => a.changes(),
            Action::Stock(a) => a.changes(),
            _ => None,
        }
    }

    /// Does it: checks its input, asks Redis, and says what it did. A
    /// refusal changed nothing.
    pub async fn apply(&self, config: &Config, conn: &mut RedisConn) -> Result<Done, ActionError> {
        Ok(match self {
            Action::Status(a) => Done::Status(a.apply(config, conn).await?),
            Action::Switch(a) => Done::Switched(a.apply(config, conn).await?),
            Action::Schedule(a) => Done::Schedule(a.apply(config, conn).await?),
            Action::Notice(a) => Done::Notice(a.apply(config, conn).await?),
            Action::Reset(a) => Done::Reset(a.apply(config, conn).await?),
            Action::Settings(a) => Done::Settings(Box::new(a.apply(config, conn).await?)),
            Action::Visitor(a) => Done::Visitor(a.apply(config, conn).await?),
            Action::Revocation(a) => a.apply(config, conn).await?,
            Action::Bypass(a) => a.apply(config, conn).await?,
            Action::Stock(a) => Done::Stock(a.apply(config, conn).await?),
        })
    }

    /// Applies it for `who` and records it in the audit trail (and, in the
    /// running service, its metric).
    pub async fn perform(
        &self,
        config: &Config,
        conn: &mut RedisConn,
        who: &str,
        metrics: Option<&Metrics>,
    ) -> Result<Done, ActionError> {
        let done = self.apply(config, conn).await;
        audit::record(metrics, who, self, &done);
        done
    }
}

/// The named queue, or the only one.
pub fn pick<'a>(config: &'a Config, queue: Option<&str>) -> Result<&'a QueueConfig, ActionError> {
    let ids = || {
        config
            .queues
            .iter()
            .map(|q| q.id.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match queue {
        Some(id) => config.queue(id).ok_or_else(|| {
            ActionError::UnknownQueue(format!(
                "queue {id:?} is not in {}; configured: {}",
                config.origin,
                ids()
            ))
        }),
        None if config.queues.len() == 1 => Ok(&config.queues[0]),
        None => Err(ActionError::BadInput(format!(
            "name a queue; configured: {}",
            ids()
        ))),
    }
}

/// A visitor's id, checked.
fn visitor_id(user: &str) -> Result<UserId, ActionError> {
    UserId::new(user)
        .map_err(|e| ActionError::BadInput(format!("{user:?} is not a visitor id: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names are the audit log's `action` and the metric's label:
    /// dashboards and alerts read them, so they only change on purpose.
    #[test]
    fn every_action_keeps_its_audit_name() {
        let q = || Some("main".to_string());
        let user = || "u1".to_string();
        let settings = |call| Action::Settings(Settings { queue: q(), call });
        let revocation = |call| {
            Action::Revocation(Revocation {
                queue: q(),
                user: user(),
                call,
            })
        };
        let bypass = |call| Action::Bypass(Bypass { queue: q(), call });
        let mut all = vec![
            Action::Status(Status { queue: None }),
            Action::Schedule(Schedule {
                queue: q(),
                opens_at: None,
                closes_at: None,
                clear: true,
                beacon: None,
                names: FIELDS,
            }),
            Action::Notice(Notice {
                queue: q(),
                text: None,
                texts: Vec::new(),
                input: "notice",
                texts_input: "texts",
            }),
            Action::Reset(Reset {
                queue: q(),
                force: false,
            }),
            Action::Reset(Reset {
                queue: q(),
                force: true,
            }),
            settings(SettingsCall::Show),
            settings(SettingsCall::Change(crate::runtime::Values::new())),
            settings(SettingsCall::Clear),
            Action::Visitor(Visitor {
                queue: q(),
                user: user(),
            }),
            revocation(RevocationCall::Revoke { minutes: None }),
            revocation(RevocationCall::Lift),
            bypass(BypassCall::Create {
                name: "qa".into(),
                ttl_minutes: 5,
            }),
            bypass(BypassCall::List),
            bypass(BypassCall::Revoke { id: "x".into() }),
        ];
        use queuegate_shared::ops::StockChange;
        all.extend(
            [
                StockChange::Show,
                StockChange::Set(10),
                StockChange::Add(-2),
                StockChange::Refund(1),
                StockChange::Overbook(None),
                StockChange::Clear,
            ]
            .map(|change| Action::Stock(Stock { queue: q(), change })),
        );
        all.extend(Switch::ALL.iter().map(|(_, switch)| {
            Action::Switch(SwitchState {
                queue: q(),
                switch: *switch,
            })
        }));
        let names: Vec<&str> = all.iter().map(Action::get_name).collect();
        assert_eq!(
            names,
            [
                "status",
                "schedule",
                "notice",
                "reset",
                "reset_forced",
                "settings",
                "settings_change",
                "settings_clear",
                "visitor",
                "visitor_revoke",
                "visitor_lift",
                "bypass_create",
                "bypass_list",
                "bypass_revoke",
                "stock",
                "stock_set",
                "stock_add",
                "stock_refund",
                "stock_overbook",
                "stock_clear",
                "pause",
                "resume",
                "close",
                "open",
                "drain",
            ]
        );
        assert_eq!(all[0].queue(), "*", "status of every queue");
        assert_eq!(all[1].queue(), "main");
        assert_eq!(all[6].changes().as_deref(), Some("{}"));
        assert_eq!(all[5].changes(), None);
    }

    /// Each result answers as what it holds, as before the enum.
    #[test]
    fn a_result_serializes_as_what_it_holds() {
        let lifted = Done::Lifted(Lifted {
            queue: "main".into(),
            user: "u1".into(),
            lifted: true,
        });
        assert_eq!(
            serde_json::to_value(&lifted).unwrap(),
            serde_json::json!({ "queue": "main", "user": "u1", "lifted": true })
        );
        assert_eq!(
            serde_json::to_value(Done::Bypasses(Vec::new())).unwrap(),
            serde_json::json!([])
        );
    }
}
