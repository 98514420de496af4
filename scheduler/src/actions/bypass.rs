//! `bypass create|list|revoke`: links for staff and QA that pass the
//! queue's gate without queueing until they expire or are revoked.

use std::collections::BTreeMap;

use queuegate_shared::bypass::{self, Link};
use queuegate_shared::ops::{self, BypassReply};
use queuegate_shared::QueueKeys;
use serde::Serialize;

use super::{pick, ActionError, Done};
use crate::config::{self, Config};
use crate::connect::RedisConn;
use crate::engine;

/// Create, list or revoke a queue's bypass links.
#[derive(Debug, Clone)]
pub struct Bypass {
    /// The queue (None: the only one).
    pub queue: Option<String>,
    /// Which.
    pub call: BypassCall,
}

/// What to do with the links.
#[derive(Debug, Clone)]
pub enum BypassCall {
    /// Mint a link for `name`, living `ttl_minutes`.
    Create {
        /// Who it is for.
        name: String,
        /// How long it lives (1 minute to 7 days).
        ttl_minutes: u64,
    },
    /// Every link: live, expired within the last day, or revoked.
    List,
    /// End a link now: its next request queues like anyone's.
    Revoke {
        /// Its id, as listed.
        id: String,
    },
}

/// A new bypass link. `key` is shown once: only its hash is kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BypassCreated {
    /// The queue it passes.
    pub queue: String,
    /// Its id (lists, revocation).
    pub id: String,
    /// Who it is for.
    pub name: String,
    /// The secret key (give it to its holder only).
    pub key: String,
    /// The path to open on the shop's site (the edge's
    /// `GET /queue/bypass`): it sets the bypass cookie.
    pub link: String,
    /// Created (RFC 3339).
    pub created_at: String,
    /// Expires (RFC 3339).
    pub expires_at: String,
}

/// One link as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BypassListed {
    /// Its id.
    pub id: String,
    /// Who it is for.
    pub name: String,
    /// Created (RFC 3339).
    pub created_at: String,
    /// Expires (RFC 3339).
    pub expires_at: String,
    /// `live`, `expired` or `revoked`.
    pub status: &'static str,
    /// Requests it passed.
    pub uses: u64,
    /// Its last use (RFC 3339), if any.
    pub last_used_at: Option<String>,
}

/// A revoked link.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BypassRevoked {
    /// The queue.
    pub queue: String,
    /// Its id.
    pub id: String,
    /// Who it was for.
    pub name: String,
}

impl Bypass {
    /// `bypass_create`, `bypass_list` or `bypass_revoke`.
    pub(super) fn name(&self) -> &'static str {
        match self.call {
            BypassCall::Create { .. } => "bypass_create",
            BypassCall::List => "bypass_list",
            BypassCall::Revoke { .. } => "bypass_revoke",
        }
    }

    /// Creates, lists or revokes.
    pub(super) async fn apply(
        &self,
        config: &Config,
        conn: &mut RedisConn,
    ) -> Result<Done, ActionError> {
        let q = pick(config, self.queue.as_deref())?;
        let keys = QueueKeys::new(&config.prefix, &q.id);
        Ok(match &self.call {
            BypassCall::Create { name, ttl_minutes } => {
                Done::BypassCreated(create(conn, &keys, name, *ttl_minutes).await?)
            }
            BypassCall::List => Done::Bypasses(list(conn, &keys).await?),
            BypassCall::Revoke { id } => Done::BypassRevoked(revoke(conn, &keys, id).await?),
        })
    }
}

async fn create(
    conn: &mut RedisConn,
    keys: &QueueKeys,
    name: &str,
    ttl_minutes: u64,
) -> Result<BypassCreated, ActionError> {
    let name = bypass::check_name(name).map_err(|e| ActionError::BadInput(format!("name: {e}")))?;
    let ttl_ms = ttl_minutes.saturating_mul(60_000);
    if !bypass::TTL_MS.contains(&ttl_ms) {
        return Err(ActionError::BadInput(
            "a bypass lives 1 minute to 7 days (10080 minutes)".into(),
        ));
    }
    let mut random = [0u8; 32];
    getrandom::getrandom(&mut random)
        .map_err(|e| ActionError::BadInput(format!("no randomness from the OS: {e}")))?;
    let key = bypass::mint(random);
    let parts = bypass::parts(&key).ok_or_else(|| ActionError::BadInput("minted key".into()))?;
    let call = ops::BypassCall::Create {
        key: &parts,
        ttl_ms,
        name,
    };
    let queue = keys.queue();
    match engine::run(conn, &ops::Bypass { keys, call }).await? {
        BypassReply::Created {
            created_ms,
            expires_ms,
        } => Ok(BypassCreated {
            queue: queue.to_string(),
            id: parts.id,
            name: name.to_string(),
            link: format!("/queue/bypass?queue={queue}&key={key}"),
            key,
            created_at: config::format_time(created_ms),
            expires_at: config::format_time(expires_ms),
        }),
        BypassReply::Refused(why) if why == "full" => Err(ActionError::Refused(format!(
            "queue {queue} has {} live bypass links already: revoke some first",
            bypass::MAX_LIVE
        ))),
        other => Err(ActionError::Refused(format!(
            "bypass not created: {other:?}"
        ))),
    }
}

/// Newest first.
async fn list(conn: &mut RedisConn, keys: &QueueKeys) -> Result<Vec<BypassListed>, ActionError> {
    let all: BTreeMap<String, String> = redis::cmd("HGETALL")
        .arg(keys.bypass())
        .query_async(conn)
        .await?;
    let now: (u64, u64) = redis::cmd("TIME").query_async(conn).await?;
    let now_ms = now.0 * 1000 + now.1 / 1000;
    let mut links: Vec<Link> = all
        .iter()
        .filter_map(|(id, rec)| Link::parse(id, rec))
        .collect();
    links.sort_by(|a, b| b.created_ms.cmp(&a.created_ms).then(a.id.cmp(&b.id)));
    Ok(links
        .into_iter()
        .map(|l| BypassListed {
            status: if l.revoked {
                "revoked"
            } else if l.expires_ms <= now_ms {
                "expired"
            } else {
                "live"
            },
            id: l.id,
            name: l.name,
            created_at: config::format_time(l.created_ms),
            expires_at: config::format_time(l.expires_ms),
            uses: l.uses,
            last_used_at: l.last_used_ms.map(config::format_time),
        })
        .collect())
}

async fn revoke(
    conn: &mut RedisConn,
    keys: &QueueKeys,
    id: &str,
) -> Result<BypassRevoked, ActionError> {
    if !bypass::is_id(id) {
        return Err(ActionError::BadInput(
            "a bypass id is 12 hex digits, as `bypass list` shows".into(),
        ));
    }
    let call = ops::BypassCall::Revoke { id };
    match engine::run(conn, &ops::Bypass { keys, call }).await? {
        BypassReply::Revoked { name } => Ok(BypassRevoked {
            queue: keys.queue().to_string(),
            id: id.to_string(),
            name,
        }),
        _ => Err(ActionError::UnknownBypass(format!(
            "queue {} has no bypass {id}",
            keys.queue()
        ))),
    }
}
