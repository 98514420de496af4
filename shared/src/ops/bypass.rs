//! `bypass`: staff and QA links that pass a queue's gate without queueing
//! ([`crate::bypass`]). The edge checks a link when it is opened and uses
//! it on each gated request (counting the use); the operator creates and
//! revokes links.

use crate::bypass::KeyParts;
use crate::keys::QueueKeys;
use crate::script::{Invocation, Operation, BYPASS};
use crate::value::{DecodeError, Fields, Value};

/// What to do with a link.
#[derive(Debug, Clone, Copy)]
pub enum BypassCall<'a> {
    /// Is the link live? (Nothing is written.)
    Check(&'a KeyParts),
    /// Is the link live? If so, count one use.
    Use(&'a KeyParts),
    /// Store a new link: its key's parts, how long it lives, who it is for
    /// (checked with [`crate::bypass::check_name`]).
    Create {
        /// The new key's id and hash.
        key: &'a KeyParts,
        /// Its life (within [`crate::bypass::TTL_MS`]).
        ttl_ms: u64,
        /// Who it is for.
        name: &'a str,
    },
    /// End a link now.
    Revoke {
        /// Its id.
        id: &'a str,
    },
}

/// One call on a queue's bypass links.
#[derive(Debug, Clone, Copy)]
pub struct Bypass<'a> {
    /// The queue.
    pub keys: &'a QueueKeys,
    /// What to do.
    pub call: BypassCall<'a>,
}

/// The script's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BypassReply {
    /// Check/use: the link is live.
    Live {
        /// Who it is for.
        name: String,
        /// When it expires (epoch ms).
        expires_ms: u64,
    },
    /// Create: stored.
    Created {
        /// When (epoch ms, Redis' clock).
        created_ms: u64,
        /// When it expires.
        expires_ms: u64,
    },
    /// Revoke: done.
    Revoked {
        /// Who it was for.
        name: String,
    },
    /// Not done: `unknown`, `revoked`, `expired` (check/use), `full`,
    /// `exists` (create), `unknown` (revoke).
    Refused(String),
}

impl Operation for Bypass<'_> {
    type Reply = BypassReply;

    fn invocation(&self) -> Invocation {
        let args = match self.call {
            BypassCall::Check(k) => vec!["check".into(), k.id.clone(), k.sha.clone()],
            BypassCall::Use(k) => vec!["use".into(), k.id.clone(), k.sha.clone()],
            BypassCall::Create { key, ttl_ms, name } => vec![
                "create".into(),
                key.id.clone(),
                key.sha.clone(),
                ttl_ms.to_string(),
                name.to_string(),
                crate::bypass::MAX_LIVE.to_string(),
            ],
            BypassCall::Revoke { id } => vec!["revoke".into(), id.to_string()],
        };
        Invocation {
            script: &BYPASS,
            keys: vec![self.keys.bypass(), self.keys.stats()],
            args,
        }
    }

    fn decode(&self, value: Value) -> Result<BypassReply, DecodeError> {
        let f = Fields::new("bypass", value)?;
        if f.int(0)? == 0 {
            return Ok(BypassReply::Refused(f.text(1)?.to_string()));
        }
        Ok(match self.call {
            BypassCall::Check(_) | BypassCall::Use(_) => BypassReply::Live {
                name: f.text(1)?.to_string(),
                expires_ms: f.uint(2)?,
            },
            BypassCall::Create { .. } => BypassReply::Created {
                created_ms: f.uint(1)?,
                expires_ms: f.uint(2)?,
            },
            BypassCall::Revoke { .. } => BypassReply::Revoked {
                name: f.text(1)?.to_string(),
            },
        })
    }
}
