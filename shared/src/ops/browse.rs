//! `browse`: a browse route's check of the visitor's session (README,
//! *Browse and spend routes*).

use crate::keys::{QueueKeys, UserId};
use crate::reply::ReplyKind;
use crate::script::{Invocation, Operation, BROWSE};
use crate::value::{DecodeError, Fields, Value};

/// Does the visitor hold a live session?
#[derive(Debug, Clone, Copy)]
pub struct Browse<'a> {
    /// The queue.
    pub keys: &'a QueueKeys,
    /// The visitor.
    pub user: &'a UserId,
    /// Whether the visitor asked (a visit) or the browser guessed (a
    /// prefetch): only a visit writes anything.
    pub look: Look,
}

/// Who asked for the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Look {
    /// The visitor: the first visit makes the turn last the session, and
    /// a renewing queue moves the session's end.
    Visit,
    /// A prefetch or prerender: read only.
    Prefetch,
}

/// The outcome of a browse check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrowseReply {
    /// The session is live: forward.
    Pass {
        /// Epoch ms at which it ends.
        ends_at: u64,
    },
    /// The turn has not started yet; nothing changed.
    Early {
        /// Milliseconds until it does.
        wait_ms: u64,
    },
    /// No live session; nothing changed.
    NoSession,
}

impl Operation for Browse<'_> {
    type Reply = BrowseReply;

    fn invocation(&self) -> Invocation {
        let k = self.keys;
        Invocation {
            script: &BROWSE,
            keys: vec![
                k.session(self.user),
                k.token(self.user),
                k.active(),
                k.config(),
            ],
            args: vec![
                self.user.as_str().to_string(),
                match self.look {
                    Look::Visit => "visit",
                    Look::Prefetch => "look",
                }
                .to_string(),
            ],
        }
    }

    fn decode(&self, value: Value) -> Result<BrowseReply, DecodeError> {
        let f = Fields::new("browse", value)?;
        match f.kind(0)? {
            ReplyKind::Ok => Ok(BrowseReply::Pass {
                ends_at: f.uint(1)?,
            }),
            ReplyKind::Early => Ok(BrowseReply::Early {
                wait_ms: f.uint(1)?,
            }),
            ReplyKind::NoSession => Ok(BrowseReply::NoSession),
            other => Err(f.unexpected(other)),
        }
    }
}
