//! `enter`: take a ticket, or report the place or token the user has.

use super::observed::Observed;
use crate::keys::{QueueKeys, UserId};
use crate::script::{Invocation, Operation, ENTER};
use crate::settings::QueueState;
use crate::value::{DecodeError, Fields, Value};

/// Enter a queue.
#[derive(Debug, Clone, Copy)]
pub struct Enter<'a> {
    /// The queue.
    pub keys: &'a QueueKeys,
    /// The user.
    pub user: &'a UserId,
}

/// The outcome of an enter.
#[derive(Debug, Clone, PartialEq)]
pub enum EnterReply {
    /// In line (new or kept ticket), or already admitted / in flight.
    Entered(Observed),
    /// The line is at its maximum size.
    Full {
        /// Users waiting now.
        waiting: u64,
        /// The configured maximum.
        max_waiting: u64,
    },
    /// Not accepting entries: closed or draining, or `None` when no
    /// scheduler has published settings for this queue yet.
    Closed(Option<QueueState>),
}

impl Operation for Enter<'_> {
    type Reply = EnterReply;

    fn invocation(&self) -> Invocation {
        let k = self.keys;
        Invocation {
            script: &ENTER,
            keys: vec![
                k.waiting(),
                k.seq(),
                k.token(self.user),
                k.status(self.user),
                k.active(),
                k.config(),
                k.stats(),
            ],
            args: vec![self.user.as_str().to_string(), k.base().to_string()],
        }
    }

    fn decode(&self, value: Value) -> Result<EnterReply, DecodeError> {
        let f = Fields::new("enter", value)?;
        if let Some(observed) = Observed::decode(&f)? {
            return Ok(EnterReply::Entered(observed));
        }
        match f.text(0)? {
            "full" => Ok(EnterReply::Full {
                waiting: f.uint(1)?,
                max_waiting: f.uint(2)?,
            }),
            "closed" => Ok(EnterReply::Closed(QueueState::parse(f.text(1)?))),
            "unconfigured" => Ok(EnterReply::Closed(None)),
            other => Err(f.error(format!("unknown reply kind {other:?}"))),
        }
    }
}
