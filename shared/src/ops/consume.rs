//! `consume`: compare-and-delete of an entry token on a protected route.

use crate::keys::{QueueKeys, UserId};
use crate::reply::ReplyKind;
use crate::script::{Invocation, Operation, CONSUME};
use crate::token::EntryToken;
use crate::value::{DecodeError, Fields, Value};

/// Spend a token.
#[derive(Debug, Clone, Copy)]
pub struct Consume<'a> {
    /// The queue.
    pub keys: &'a QueueKeys,
    /// The user presenting the token.
    pub user: &'a UserId,
    /// The presented token.
    pub token: &'a EntryToken,
}

/// The outcome of a consume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumeReply {
    /// The token was spent: forward the request, then settle.
    Accepted,
    /// Wrong, unknown or lapsed token; nothing changed.
    Invalid,
    /// This token was already spent.
    Used,
    /// Valid but not active yet; it survives.
    Early {
        /// Milliseconds until it activates.
        wait_ms: u64,
    },
    /// No settings are published for the queue; nothing changed.
    Unconfigured,
    /// The queue's kept stock is gone; the token survives for a restock.
    SoldOut,
}

impl Operation for Consume<'_> {
    type Reply = ConsumeReply;

    fn invocation(&self) -> Invocation {
        let k = self.keys;
        Invocation {
            script: &CONSUME,
            keys: vec![
                k.token(self.user),
                k.status(self.user),
                k.active(),
                k.config(),
                k.stock_held(),
            ],
            args: vec![
                self.user.as_str().to_string(),
                self.token.expose().to_string(),
            ],
        }
    }

    fn decode(&self, value: Value) -> Result<ConsumeReply, DecodeError> {
        let f = Fields::new("consume", value)?;
        match f.kind(0)? {
            ReplyKind::Ok => Ok(ConsumeReply::Accepted),
            ReplyKind::Invalid => Ok(ConsumeReply::Invalid),
            ReplyKind::Used => Ok(ConsumeReply::Used),
            ReplyKind::Unconfigured => Ok(ConsumeReply::Unconfigured),
            ReplyKind::SoldOut => Ok(ConsumeReply::SoldOut),
            ReplyKind::Early => Ok(ConsumeReply::Early {
                wait_ms: f.uint(1)?,
            }),
            other => Err(f.unexpected(other)),
        }
    }
}
