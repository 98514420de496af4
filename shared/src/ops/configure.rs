//! Publishing a queue's settings and switching its state.

use crate::keys::QueueKeys;
use crate::script::{Invocation, Operation, CONFIGURE, SET_NOTICE, SET_STATE};
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

/// Switch a queue's state (operator command), optionally only from an
/// expected state: the comparison runs in the same script as the switch.
#[derive(Debug, Clone, Copy)]
pub struct SetState<'a> {
    /// The queue.
    pub keys: &'a QueueKeys,
    /// The new state.
    pub state: QueueState,
    /// Switch only if the queue is in this state now (None: from any).
    pub expect: Option<QueueState>,
}

/// The outcome of a [`SetState`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateSwitch {
    /// Switched; the state before (None if the queue had none).
    Switched(Option<QueueState>),
    /// The queue was not in the expected state; nothing changed.
    Refused(Option<QueueState>),
}

impl Operation for SetState<'_> {
    type Reply = StateSwitch;

    fn invocation(&self) -> Invocation {
        Invocation {
            script: &SET_STATE,
            keys: vec![self.keys.config()],
            args: vec![
                self.state.as_str().to_string(),
                self.expect.map_or("", QueueState::as_str).to_string(),
            ],
        }
    }

    fn decode(&self, value: Value) -> Result<StateSwitch, DecodeError> {
        let f = Fields::new("set_state", value)?;
        let state = QueueState::parse(f.text(1)?);
        match f.int(0)? {
            1 => Ok(StateSwitch::Switched(state)),
            0 => Ok(StateSwitch::Refused(state)),
            code => Err(f.error(format!("unknown code {code}"))),
        }
    }
}

/// Set (or, with `None`, clear) the operator's notice to the line; the
/// text is checked with [`crate::notice::check`] first, the texts per
/// language with [`crate::notice::check_texts`].
#[derive(Debug, Clone, Copy)]
pub struct SetNotice<'a> {
    /// The queue.
    pub keys: &'a QueueKeys,
    /// The checked notice (its default text), or None to clear it.
    pub notice: Option<&'a str>,
    /// Its checked texts per language (ignored when clearing).
    pub texts: &'a [(String, String)],
}

/// A notice as it was before a [`SetNotice`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NoticeBefore {
    /// Its default text ('' none).
    pub text: String,
    /// Its texts per language.
    pub texts: Vec<(String, String)>,
}

impl Operation for SetNotice<'_> {
    type Reply = NoticeBefore;

    fn invocation(&self) -> Invocation {
        let texts = match self.notice {
            Some(_) => crate::notice::encode_texts(self.texts),
            None => String::new(),
        };
        Invocation {
            script: &SET_NOTICE,
            keys: vec![self.keys.config()],
            args: vec![self.notice.unwrap_or_default().to_string(), texts],
        }
    }

    fn decode(&self, value: Value) -> Result<NoticeBefore, DecodeError> {
        let items = value.into_array("set_notice")?;
        let text = |i: usize| {
            items
                .get(i)
                .and_then(Value::as_text)
                .unwrap_or_default()
                .to_string()
        };
        Ok(NoticeBefore {
            text: text(0),
            texts: crate::notice::decode_texts(&text(1)),
        })
    }
}
