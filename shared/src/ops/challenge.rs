//! `challenge`: the queue's difficulty and challenge lifetime, and how full
//! the line is, for `GET /queue/challenge` (one read).

use crate::guard::challenge_max_number;
use crate::keys::QueueKeys;
use crate::script::{Invocation, Operation, CHALLENGE};
use crate::value::{DecodeError, Fields, Value};

/// Read the terms of a new challenge.
#[derive(Debug, Clone, Copy)]
pub struct ChallengeTerms<'a> {
    /// The queue.
    pub keys: &'a QueueKeys,
}

/// What a new challenge must carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Terms {
    /// ALTCHA `maxnumber`, raised with the line's fill.
    pub max_number: u64,
    /// How long it may be solved and used.
    pub ttl_ms: u64,
}

impl Operation for ChallengeTerms<'_> {
    /// None when the queue has no published settings.
    type Reply = Option<Terms>;

    fn invocation(&self) -> Invocation {
        Invocation {
            script: &CHALLENGE,
            keys: vec![self.keys.config(), self.keys.waiting()],
            args: Vec::new(),
        }
    }

    fn decode(&self, value: Value) -> Result<Option<Terms>, DecodeError> {
        let f = Fields::new("challenge", value)?;
        if f.len() == 1 && f.text(0)? == "unconfigured" {
            return Ok(None);
        }
        Ok(Some(Terms {
            max_number: challenge_max_number(f.uint(0)?, f.uint(3)?, f.uint(2)?),
            ttl_ms: f.uint(1)?,
        }))
    }
}
