//! `pass`: idle passthrough of a protected request that brings no token.
//!
//! A pass spends the client address's entry budget like a new place, and
//! its slot holds no retry: nobody holds the in-flight token, so a failed
//! order frees the slot at once (its settle answers `expired`).

use crate::guard::ClientAddress;
use crate::keys::{QueueKeys, UserId};
use crate::reply::ReplyKind;
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
    /// The client's address group: its entry budget pays for the pass
    /// (`None`: no budget).
    pub address: Option<&'a ClientAddress>,
    /// What the request is: an order, in flight at once, or a page of the
    /// checkout, which admits the visitor with `token` for their order.
    pub route: RouteKind,
}

/// The two kinds of protected route (README, *Browse and spend routes*).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteKind {
    /// Passes any number of times during the visitor's session.
    Browse,
    /// Takes the one-time order token.
    Spend,
}

impl RouteKind {
    /// Its name in `PROTECTED_ROUTES` and in the scripts.
    pub fn as_str(self) -> &'static str {
        match self {
            RouteKind::Browse => "browse",
            RouteKind::Spend => "spend",
        }
    }
}

/// Why a token-less request must go through the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueNeeded {
    /// Idle passthrough is off for this queue.
    Off,
    /// The queue takes no entries now (not open, or past its closing).
    Closed,
    /// Someone waits, or a pre-queue or its draw exists, or this visitor
    /// holds a claim (its place in line: the page takes it up).
    Waiting,
    /// This visitor holds a token or a slot already: they must use it.
    Holds,
    /// No slot is free.
    Full,
    /// The admission rate allows nobody more right now.
    Rate,
    /// An operator revoked this visitor: the queue's page says so.
    Revoked,
}

impl QueueNeeded {
    fn parse(kind: ReplyKind) -> Option<QueueNeeded> {
        Some(match kind {
            ReplyKind::Off => QueueNeeded::Off,
            ReplyKind::Closed => QueueNeeded::Closed,
            ReplyKind::Waiting => QueueNeeded::Waiting,
            ReplyKind::Holds => QueueNeeded::Holds,
            ReplyKind::Full => QueueNeeded::Full,
            ReplyKind::Rate => QueueNeeded::Rate,
            ReplyKind::Revoked => QueueNeeded::Revoked,
            _ => return None,
        })
    }
}

/// The outcome of a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassReply {
    /// Passed: a spend route's request holds a slot and is in flight
    /// (forward it, then settle with the token given); a browse route's
    /// visitor is admitted with the token given. Either opened a session.
    Passed {
        /// Epoch ms at which the visitor's session ends.
        session_ends_at: u64,
    },
    /// Not now; nothing changed.
    Queue(QueueNeeded),
    /// The client address spent its entry budget; only the
    /// `refused_budget` counter was written. It may try again after this.
    TooManyEntries {
        /// Milliseconds until the budget holds a pass again.
        retry_after_ms: u64,
    },
    /// No settings are published for the queue; nothing changed.
    Unconfigured,
    /// The queue's kept stock is gone; nothing changed.
    SoldOut,
}

impl Operation for Pass<'_> {
    type Reply = PassReply;

    fn invocation(&self) -> Invocation {
        let k = self.keys;
        let wider = self.address.and_then(|a| a.wider()).unwrap_or_default();
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
                k.guard(),
                k.claims(),
                k.session(self.user),
                k.stock_held(),
            ],
            args: vec![
                self.user.as_str().to_string(),
                self.token.expose().to_string(),
                self.address
                    .map(|a| a.as_str().to_string())
                    .unwrap_or_default(),
                self.route.as_str().to_string(),
                wider.0,
                wider.1,
            ],
        }
    }

    fn decode(&self, value: Value) -> Result<PassReply, DecodeError> {
        let f = Fields::new("pass", value)?;
        match f.kind(0)? {
            ReplyKind::Ok => Ok(PassReply::Passed {
                session_ends_at: f.uint(1)?,
            }),
            ReplyKind::Unconfigured => Ok(PassReply::Unconfigured),
            ReplyKind::SoldOut => Ok(PassReply::SoldOut),
            ReplyKind::TooMany => Ok(PassReply::TooManyEntries {
                retry_after_ms: f.uint(1)?,
            }),
            ReplyKind::Queue => {
                let why = f.kind(1)?;
                QueueNeeded::parse(why)
                    .map(PassReply::Queue)
                    .ok_or_else(|| f.error(format!("unknown reason {why}")))
            }
            other => Err(f.unexpected(other)),
        }
    }
}
