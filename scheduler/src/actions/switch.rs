//! `pause`, `resume`, `close`, `open`, `drain`: the operator's switches of
//! a queue's state, each named after itself in the audit log.

use queuegate_shared::ops::{SetState, StateSwitch};
use queuegate_shared::{QueueKeys, QueueState};
use serde::Serialize;

use super::{pick, ActionError};
use crate::config::Config;
use crate::connect::RedisConn;
use crate::engine;

/// A state switch an operator asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Switch {
    /// Stop admitting; visitors can still enter.
    Pause,
    /// Admit again, from paused only.
    Resume,
    /// Refuse new visitors and stop admitting.
    Close,
    /// Accept visitors and admit, whatever the state was.
    Open,
    /// Refuse new visitors, admit the line until it is empty.
    Drain,
}

impl Switch {
    /// Every switch, by its name in the CLI and the API's paths.
    pub const ALL: [(&'static str, Switch); 5] = [
        ("pause", Switch::Pause),
        ("resume", Switch::Resume),
        ("close", Switch::Close),
        ("open", Switch::Open),
        ("drain", Switch::Drain),
    ];

    /// Its name.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, s)| *s == self)
            .map_or("", |(n, _)| n)
    }

    /// The state it sets and the state it requires, if any. `resume` only
    /// leaves paused, compared inside the script: a `close` that lands
    /// meanwhile is never undone.
    fn target(self) -> (QueueState, Option<QueueState>) {
        match self {
            Switch::Pause => (QueueState::Paused, None),
            Switch::Resume => (QueueState::Open, Some(QueueState::Paused)),
            Switch::Close => (QueueState::Closed, None),
            Switch::Open => (QueueState::Open, None),
            Switch::Drain => (QueueState::Draining, None),
        }
    }
}

/// Switch a queue's state.
#[derive(Debug, Clone)]
pub struct SwitchState {
    /// The queue (None: the only one).
    pub queue: Option<String>,
    /// The switch.
    pub switch: Switch,
}

/// What a state switch did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Switched {
    /// The queue.
    pub queue: String,
    /// Its state now.
    pub state: &'static str,
    /// Its state before (`unconfigured` when no scheduler had published).
    pub previous: String,
    /// False when it already was in that state.
    pub changed: bool,
}

impl SwitchState {
    /// Switches the queue's state.
    pub(super) async fn apply(
        &self,
        config: &Config,
        conn: &mut RedisConn,
    ) -> Result<Switched, ActionError> {
        let q = pick(config, self.queue.as_deref())?;
        let keys = QueueKeys::new(&config.prefix, &q.id);
        let (state, expect) = self.switch.target();
        let name = |s: Option<QueueState>| s.map_or("unconfigured", QueueState::as_str);
        let reply = engine::run(
            conn,
            &SetState {
                keys: &keys,
                state,
                expect,
            },
        )
        .await?;
        match reply {
            StateSwitch::Switched(previous) => Ok(Switched {
                queue: q.id.to_string(),
                state: state.as_str(),
                previous: name(previous).to_string(),
                changed: previous != Some(state),
            }),
            StateSwitch::Refused(Some(current)) if current == state => Ok(Switched {
                queue: q.id.to_string(),
                state: state.as_str(),
                previous: state.as_str().to_string(),
                changed: false,
            }),
            StateSwitch::Refused(current) => Err(ActionError::Refused(format!(
                "queue {} is {}, not {}; use `open` to reopen it",
                q.id,
                name(current),
                name(expect),
            ))),
        }
    }
}
