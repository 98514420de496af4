//! `unconsume`: give back a token whose consume's reply was lost.
//!
//! A consume (or a pass) that gets no answer in time may still have run:
//! the visitor is then in flight, without a token, for a request the edge
//! never forwarded, until the slot lapses and the status expires minutes
//! later. The edge answers such a call with this one: a no-op unless the
//! visitor is in flight with exactly that token, otherwise the token comes
//! back as it was (a passthrough's record, which holds no retry, ends
//! `expired` and frees its slot). No origin answer is counted: the origin
//! never saw the request.

use super::settle::SettleReply;
use crate::keys::{QueueKeys, UserId};
use crate::script::{Invocation, Operation, UNCONSUME};
use crate::token::EntryToken;
use crate::value::{DecodeError, Fields, Value};

/// Give back a token the edge spent but never forwarded.
#[derive(Debug, Clone, Copy)]
pub struct Unconsume<'a> {
    /// The queue.
    pub keys: &'a QueueKeys,
    /// The user.
    pub user: &'a UserId,
    /// The token the lost call spent.
    pub token: &'a EntryToken,
}

impl Operation for Unconsume<'_> {
    /// `Restored`, `Expired`, `Stale` or `Unconfigured` (never `Ordered`).
    type Reply = SettleReply;

    fn invocation(&self) -> Invocation {
        let k = self.keys;
        Invocation {
            script: &UNCONSUME,
            keys: vec![
                k.status(self.user),
                k.token(self.user),
                k.active(),
                k.stats(),
                k.config(),
                k.session(self.user),
                k.stock_held(),
            ],
            args: vec![
                self.user.as_str().to_string(),
                self.token.expose().to_string(),
            ],
        }
    }

    fn decode(&self, value: Value) -> Result<SettleReply, DecodeError> {
        let f = Fields::new("unconsume", value)?;
        match SettleReply::decode(&f)? {
            SettleReply::Ordered => Err(f.error("unconsume never orders")),
            reply => Ok(reply),
        }
    }
}
