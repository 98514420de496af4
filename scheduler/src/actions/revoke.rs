//! `visitor --revoke` / `--lift`: end a visitor's place or token and keep
//! them out for a while, or lift that (one script, `revoke`).

use queuegate_shared::ops::{Revoke, RevokeCall, RevokeReply, MAX_REVOKE_MS};
use queuegate_shared::QueueKeys;
use serde::Serialize;

use super::{pick, visitor_id, ActionError, Done};
use crate::config::Config;
use crate::connect::RedisConn;
use crate::engine;

/// Revoke a visitor, or lift a revocation.
#[derive(Debug, Clone)]
pub struct Revocation {
    /// The queue (None: the only one).
    pub queue: Option<String>,
    /// The visitor's id.
    pub user: String,
    /// Which.
    pub call: RevocationCall,
}

/// What to do to the visitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RevocationCall {
    /// Keep them out for this many minutes (1 to 10080; None: the queue's
    /// `status_ttl_ms`, as long as a visit's records live).
    Revoke {
        /// How long.
        minutes: Option<u64>,
    },
    /// Let them enter again, anew.
    Lift,
}

/// A revocation done (`visitor --revoke` / `PUT …/visitors/{id}/revocation`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VisitorRevoked {
    /// The queue.
    pub queue: String,
    /// The visitor.
    pub user: String,
    /// What the visitor had: `waiting`, `pre_queued`, `drawing`,
    /// `admitted`, `in_flight`, `revoked` (revoked again: the time starts
    /// over), `ordered`, `expired`, `abandoned` or `not_in_queue`.
    pub was: String,
    /// How long the visitor is kept out (ms).
    pub for_ms: u64,
}

/// A revocation lifted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Lifted {
    /// The queue.
    pub queue: String,
    /// The visitor.
    pub user: String,
    /// Always true.
    pub lifted: bool,
}

impl Revocation {
    /// `visitor_revoke` or `visitor_lift`.
    pub(super) fn name(&self) -> &'static str {
        match self.call {
            RevocationCall::Revoke { .. } => "visitor_revoke",
            RevocationCall::Lift => "visitor_lift",
        }
    }

    /// Revoking removes a place in line, deletes a token and frees its
    /// slot, and a pre-queued place is never drawn; an order already at
    /// the origin is not recalled. Lifting gives no place back.
    pub(super) async fn apply(
        &self,
        config: &Config,
        conn: &mut RedisConn,
    ) -> Result<Done, ActionError> {
        let q = pick(config, self.queue.as_deref())?;
        let uid = visitor_id(&self.user)?;
        let call = match self.call {
            RevocationCall::Revoke { minutes } => RevokeCall::Revoke {
                for_ms: match minutes {
                    None => q.settings.status_ttl_ms.min(MAX_REVOKE_MS),
                    Some(m) if (1..=MAX_REVOKE_MS / 60_000).contains(&m) => m * 60_000,
                    Some(m) => {
                        return Err(ActionError::BadInput(format!(
                            "a revocation lasts 1 to {} minutes (7 days), not {m}",
                            MAX_REVOKE_MS / 60_000
                        )))
                    }
                },
            },
            RevocationCall::Lift => RevokeCall::Lift,
        };
        let keys = QueueKeys::new(&config.prefix, &q.id);
        let reply = engine::run(
            conn,
            &Revoke {
                keys: &keys,
                user: &uid,
                call,
            },
        )
        .await?;
        let (queue, user) = (q.id.to_string(), uid.as_str().to_string());
        match (call, reply) {
            (RevokeCall::Revoke { for_ms }, RevokeReply::Revoked { was }) => {
                Ok(Done::Revoked(VisitorRevoked {
                    queue,
                    user,
                    was,
                    for_ms,
                }))
            }
            (RevokeCall::Lift, RevokeReply::Lifted) => Ok(Done::Lifted(Lifted {
                queue,
                user,
                lifted: true,
            })),
            (RevokeCall::Lift, _) => Err(ActionError::Conflict(format!(
                "visitor {} of queue {queue} is not revoked",
                self.user
            ))),
            (_, other) => Err(ActionError::Conflict(format!(
                "the revoke script answered {other:?}"
            ))),
        }
    }
}
