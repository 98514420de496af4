//! `settle`: record the origin's answer after a consume.

use crate::keys::{QueueKeys, UserId};
use crate::script::{Invocation, Operation, SETTLE};
use crate::token::EntryToken;
use crate::value::{DecodeError, Fields, Value};

/// How the origin answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// 2xx or 3xx: the order is done, free the slot.
    Success,
    /// 4xx, 5xx or no answer: give the same token back (one retry window).
    Failure,
}

/// Settle a consumed token.
#[derive(Debug, Clone, Copy)]
pub struct Settle<'a> {
    /// The queue.
    pub keys: &'a QueueKeys,
    /// The user.
    pub user: &'a UserId,
    /// The token that was consumed.
    pub token: &'a EntryToken,
    /// The origin's outcome.
    pub outcome: Outcome,
}

/// The outcome of a settle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettleReply {
    /// Recorded as ordered; the slot is free.
    Ordered,
    /// The same token is valid again until `expires_at`.
    Restored {
        /// Epoch ms.
        expires_at: u64,
    },
    /// Failed, and no retry window is left.
    Expired,
    /// Not in flight with this token (a duplicate settle): nothing changed.
    Stale,
    /// No settings are published: nothing changed; the slot lapses.
    Unconfigured,
}

impl Operation for Settle<'_> {
    type Reply = SettleReply;

    fn invocation(&self) -> Invocation {
        let k = self.keys;
        Invocation {
            script: &SETTLE,
            keys: vec![
                k.status(self.user),
                k.token(self.user),
                k.active(),
                k.stats(),
                k.config(),
            ],
            args: vec![
                self.user.as_str().to_string(),
                self.token.expose().to_string(),
                match self.outcome {
                    Outcome::Success => "ok",
                    Outcome::Failure => "fail",
                }
                .to_string(),
            ],
        }
    }

    fn decode(&self, value: Value) -> Result<SettleReply, DecodeError> {
        let f = Fields::new("settle", value)?;
        match f.text(0)? {
            "ordered" => Ok(SettleReply::Ordered),
            "restored" => Ok(SettleReply::Restored {
                expires_at: f.uint(1)?,
            }),
            "expired" => Ok(SettleReply::Expired),
            "stale" => Ok(SettleReply::Stale),
            "unconfigured" => Ok(SettleReply::Unconfigured),
            other => Err(f.error(format!("unknown reply kind {other:?}"))),
        }
    }
}
