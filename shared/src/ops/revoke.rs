//! `revoke`: an operator ends a visitor's place or token (and keeps them
//! out for a while), or lifts that. The edge sees the revocation in the
//! visitor's status record: enter, position and the gate's passthrough
//! answer `revoked`.

use crate::keys::{QueueKeys, UserId};
use crate::script::{Invocation, Operation, REVOKE};
use crate::value::{DecodeError, Fields, Value};

/// Longest a revocation may keep a visitor out: a week.
pub const MAX_REVOKE_MS: u64 = 7 * 24 * 3_600_000;

/// What to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RevokeCall {
    /// Revoke, keeping the visitor out for this many ms (1 to
    /// [`MAX_REVOKE_MS`]).
    Revoke {
        /// How long.
        for_ms: u64,
    },
    /// End a revocation.
    Lift,
}

/// One revoke call.
#[derive(Debug, Clone, Copy)]
pub struct Revoke<'a> {
    /// The visitor's queue.
    pub keys: &'a QueueKeys,
    /// The visitor.
    pub user: &'a UserId,
    /// What to do.
    pub call: RevokeCall,
}

/// The script's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RevokeReply {
    /// Revoked; what the visitor had (`waiting`, `pre_queued`, `drawing`,
    /// `admitted`, `in_flight`, `revoked`, `ordered`, `expired`,
    /// `abandoned`, `not_in_queue`).
    Revoked {
        /// The visitor's state before.
        was: String,
    },
    /// The revocation ended.
    Lifted,
    /// Lift: the visitor is not revoked.
    NotRevoked,
}

impl Operation for Revoke<'_> {
    type Reply = RevokeReply;

    fn invocation(&self) -> Invocation {
        let (mode, for_ms) = match self.call {
            RevokeCall::Revoke { for_ms } => ("revoke", for_ms.to_string()),
            RevokeCall::Lift => ("lift", String::new()),
        };
        Invocation {
            script: &REVOKE,
            keys: vec![
                self.keys.waiting(),
                self.keys.pre(),
                self.keys.draw(),
                self.keys.token(self.user),
                self.keys.status(self.user),
                self.keys.active(),
                self.keys.stats(),
                self.keys.claims(),
                self.keys.session(self.user),
            ],
            args: vec![mode.into(), self.user.as_str().to_string(), for_ms],
        }
    }

    fn decode(&self, value: Value) -> Result<RevokeReply, DecodeError> {
        let f = Fields::new("revoke", value)?;
        if f.int(0)? == 0 {
            return Ok(RevokeReply::NotRevoked);
        }
        let what = f.text(1)?;
        Ok(match self.call {
            RevokeCall::Lift => RevokeReply::Lifted,
            RevokeCall::Revoke { .. } => RevokeReply::Revoked {
                was: what.to_string(),
            },
        })
    }
}
