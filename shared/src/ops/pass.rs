//! `pass`: idle passthrough of a protected request that brings no token.

use crate::keys::{QueueKeys, UserId};
use crate::script::{Invocation, Operation, PASS};
use crate::token::EntryToken;
use crate::value::{DecodeError, Fields, Value};

/// Let a token-less protected request through while the room is idle.
#[derive(Debug, Clone, Copy)]
pub struct Pass<'a> {
    /// The queue.
    pub keys: &'a QueueKeys,
    /// The visitor.
    pub user: &'a UserId,
    /// A fresh token: the in-flight record's, for the settle.
    pub token: &'a EntryToken,
}

/// Why a token-less request must go through the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueNeeded {
    /// Idle passthrough is off for this queue.
    Off,
    /// The queue takes no entries now (not open, or past its closing).
    Closed,
    /// Someone waits, or a pre-queue or its draw exists.
    Waiting,
    /// This visitor holds a token or a slot already: they must use it.
    Holds,
    /// No slot is free.
    Full,
    /// The admission rate allows nobody more right now.
    Rate,
}

impl QueueNeeded {
    fn parse(text: &str) -> Option<QueueNeeded> {
        Some(match text {
            "off" => QueueNeeded::Off,
            "closed" => QueueNeeded::Closed,
            "waiting" => QueueNeeded::Waiting,
            "holds" => QueueNeeded::Holds,
            "full" => QueueNeeded::Full,
            "rate" => QueueNeeded::Rate,
            _ => return None,
        })
    }
}

/// The outcome of a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassReply {
    /// The request holds a slot and is in flight: forward it, then settle
    /// with the token given.
    Passed,
    /// Not now; nothing changed.
    Queue(QueueNeeded),
    /// No settings are published for the queue; nothing changed.
    Unconfigured,
}

impl Operation for Pass<'_> {
    type Reply = PassReply;

    fn invocation(&self) -> Invocation {
        let k = self.keys;
        Invocation {
            script: &PASS,
            keys: vec![
                k.waiting(),
                k.pre(),
                k.active(),
                k.config(),
                k.stats(),
                k.token(self.user),
                k.status(self.user),
            ],
            args: vec![
                self.user.as_str().to_string(),
                self.token.expose().to_string(),
            ],
        }
    }

    fn decode(&self, value: Value) -> Result<PassReply, DecodeError> {
        let f = Fields::new("pass", value)?;
        match f.text(0)? {
            "ok" => Ok(PassReply::Passed),
            "unconfigured" => Ok(PassReply::Unconfigured),
            "queue" => {
                let why = f.text(1)?;
                QueueNeeded::parse(why)
                    .map(PassReply::Queue)
                    .ok_or_else(|| f.error(format!("unknown reason {why:?}")))
            }
            other => Err(f.error(format!("unknown reply kind {other:?}"))),
        }
    }
}
