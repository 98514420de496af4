//! Publishing a queue's settings and switching its state.

use crate::keys::QueueKeys;
use crate::script::{Invocation, Operation, CONFIGURE, SET_STATE};
use crate::settings::{QueueState, Settings};
use crate::value::{DecodeError, Fields, Value};

/// Publish the effective settings (the scheduler does, at start and on
/// reload). The queue state is set only if it has none.
#[derive(Debug, Clone, Copy)]
pub struct Configure<'a> {
    /// The queue.
    pub keys: &'a QueueKeys,
    /// Validated settings.
    pub settings: &'a Settings,
    /// State for a queue that has never been configured.
    pub initial_state: QueueState,
}

impl Operation for Configure<'_> {
    /// The state in force after publishing.
    type Reply = QueueState;

    fn invocation(&self) -> Invocation {
        let mut args = vec![self.initial_state.as_str().to_string()];
        for (name, value) in self.settings.to_fields() {
            args.push(name);
            args.push(value);
        }
        Invocation {
            script: &CONFIGURE,
            keys: vec![self.keys.config()],
            args,
        }
    }

    fn decode(&self, value: Value) -> Result<QueueState, DecodeError> {
        let text = value.as_text().unwrap_or_default().to_string();
        QueueState::parse(&text)
            .ok_or_else(|| DecodeError::new("configure", format!("unknown state {text:?}")))
    }
}

/// Switch a queue's state (operator command).
#[derive(Debug, Clone, Copy)]
pub struct SetState<'a> {
    /// The queue.
    pub keys: &'a QueueKeys,
    /// The new state.
    pub state: QueueState,
}

impl Operation for SetState<'_> {
    /// The previous state (None if the queue had none).
    type Reply = Option<QueueState>;

    fn invocation(&self) -> Invocation {
        Invocation {
            script: &SET_STATE,
            keys: vec![self.keys.config()],
            args: vec![self.state.as_str().to_string()],
        }
    }

    fn decode(&self, value: Value) -> Result<Option<QueueState>, DecodeError> {
        let f = Fields::new("set_state", value)?;
        Ok(QueueState::parse(f.text(0)?))
    }
}
