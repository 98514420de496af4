//! `settle`: record the origin's answer after a consume.

use crate::fields::origin;
use crate::keys::{QueueKeys, UserId};
use crate::reply::ReplyKind;
use crate::script::{Invocation, Operation, SETTLE};
use crate::token::EntryToken;
use crate::value::{DecodeError, Fields, Value};

/// How the origin answered. Anything but a success gives the same token
/// back (one retry window). Success, 5xx and no answer are also counted
/// (one a second per user) for the scheduler's origin control; a 4xx is
/// the visitor's and counts nowhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// 2xx or 3xx: the order is done, free the slot.
    Success,
    /// 4xx: the request was refused (the visitor may fix it and retry);
    /// also the visitor's own failure, a request body that never arrived
    /// whole (the origin is not to blame).
    ClientError,
    /// 5xx: the origin failed.
    ServerError,
    /// No answer at all (network error, timeout).
    NoAnswer,
}

impl Outcome {
    /// The class of an HTTP status the origin answered with.
    pub fn of_status(status: u16) -> Outcome {
        match status {
            0..=399 => Outcome::Success,
            400..=499 => Outcome::ClientError,
            _ => Outcome::ServerError,
        }
    }

    /// The field it is counted under in `origin:<second>`.
    pub fn field(self) -> &'static str {
        match self {
            Outcome::Success => origin::OK,
            Outcome::ClientError => origin::CLIENT_ERROR,
            Outcome::ServerError => origin::SERVER_ERROR,
            Outcome::NoAnswer => origin::NO_ANSWER,
        }
    }
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
    /// How long the origin took to answer (or to fail), in ms: from the
    /// request leaving the edge with its body in hand to the response
    /// headers (the visitor's upload is not the origin's latency).
    pub latency_ms: u64,
    /// The units the order sold (`units_from_header`; counted on success
    /// only, against a kept stock).
    pub units: u64,
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
                k.sampled(self.user),
                k.session(self.user),
                k.stock_held(),
            ],
            args: vec![
                self.user.as_str().to_string(),
                self.token.expose().to_string(),
                self.outcome.field().to_string(),
                self.latency_ms.to_string(),
                k.base().to_string(),
                self.units.to_string(),
            ],
        }
    }

    fn decode(&self, value: Value) -> Result<SettleReply, DecodeError> {
        SettleReply::decode(&Fields::new("settle", value)?)
    }
}

impl SettleReply {
    /// The reply of `settle`, and of `unconsume`, which answers the same
    /// kinds (never `ordered`).
    pub(crate) fn decode(f: &Fields) -> Result<SettleReply, DecodeError> {
        match f.kind(0)? {
            ReplyKind::Ordered => Ok(SettleReply::Ordered),
            ReplyKind::Restored => Ok(SettleReply::Restored {
                expires_at: f.uint(1)?,
            }),
            ReplyKind::Expired => Ok(SettleReply::Expired),
            ReplyKind::Stale => Ok(SettleReply::Stale),
            ReplyKind::Unconfigured => Ok(SettleReply::Unconfigured),
            other => Err(f.unexpected(other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_fall_into_their_classes() {
        let classes: Vec<Outcome> = [200, 302, 400, 429, 500, 503]
            .into_iter()
            .map(Outcome::of_status)
            .collect();
        use Outcome::*;
        assert_eq!(
            classes,
            [
                Success,
                Success,
                ClientError,
                ClientError,
                ServerError,
                ServerError
            ]
        );
        assert_eq!(NoAnswer.field(), "none");
    }
}
