//! The scheduler lease: acquire and release, compared by owner id (each
//! admit tick extends it too, see [`Admit`](super::Admit)).

use crate::keys::QueueKeys;
use crate::script::{Invocation, Operation, LEASE_ACQUIRE, LEASE_RELEASE};
use crate::value::{DecodeError, Fields, Value};

/// Take the lease, or extend it if already ours.
#[derive(Debug, Clone, Copy)]
pub struct LeaseAcquire<'a> {
    /// The queue.
    pub keys: &'a QueueKeys,
    /// Our owner id.
    pub owner: &'a str,
    /// Lease lifetime.
    pub ttl_ms: u64,
}

/// The outcome of an acquire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseAcquired {
    /// True when we hold the lease now.
    pub acquired: bool,
    /// Who holds it.
    pub holder: String,
    /// When someone else holds it: for how many more ms (a standby need
    /// not try again before).
    pub holder_ttl_ms: Option<u64>,
    /// The fingerprint of the config file whose settings are published
    /// (None: none yet), to compare with ours.
    pub published_file: Option<String>,
}

impl Operation for LeaseAcquire<'_> {
    type Reply = LeaseAcquired;

    fn invocation(&self) -> Invocation {
        Invocation {
            script: &LEASE_ACQUIRE,
            keys: vec![self.keys.lock(), self.keys.config()],
            args: vec![self.owner.to_string(), self.ttl_ms.to_string()],
        }
    }

    fn decode(&self, value: Value) -> Result<LeaseAcquired, DecodeError> {
        let f = Fields::new("lease_acquire", value)?;
        let acquired = f.int(0)? == 1;
        Ok(LeaseAcquired {
            acquired,
            holder: f.text(1)?.to_string(),
            holder_ttl_ms: if acquired || f.len() < 3 {
                None
            } else {
                u64::try_from(f.int(2)?).ok()
            },
            published_file: match f.len() {
                4.. => Some(f.text(3)?.to_string()).filter(|t| !t.is_empty()),
                _ => None,
            },
        })
    }
}

/// Drop the lease if ours.
#[derive(Debug, Clone, Copy)]
pub struct LeaseRelease<'a> {
    /// The queue.
    pub keys: &'a QueueKeys,
    /// Our owner id.
    pub owner: &'a str,
}

impl Operation for LeaseRelease<'_> {
    /// True when released; false when it was not ours.
    type Reply = bool;

    fn invocation(&self) -> Invocation {
        Invocation {
            script: &LEASE_RELEASE,
            keys: vec![self.keys.lock()],
            args: vec![self.owner.to_string()],
        }
    }

    fn decode(&self, value: Value) -> Result<bool, DecodeError> {
        decode_flag("lease_release", value)
    }
}

fn decode_flag(script: &'static str, value: Value) -> Result<bool, DecodeError> {
    match value.as_i64() {
        Some(0) => Ok(false),
        Some(1) => Ok(true),
        _ => Err(DecodeError::new(
            script,
            format!("expected 0 or 1, got {value:?}"),
        )),
    }
}
