//! `challenge`: the queue's difficulty and challenge lifetime, and how full
//! the line is, for `GET /queue/challenge` (one read). The fill counts the
//! waiting line, the pre-queue and a running draw's places still to give
//! out (as `enter` does), so a crowd gathering before an opening raises the
//! difficulty before the opening.

use crate::guard::{challenge_max_number, MAX_LEVEL};
use crate::keys::QueueKeys;
use crate::records::{at, challenge_reply};
use crate::reply::ReplyKind;
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
    /// The difficulty level in force (the script's, by
    /// [`challenge_level`](crate::guard::challenge_level)); the challenge
    /// carries it, signed, and `enter` refuses it once a higher one is.
    pub level: u8,
    /// ALTCHA `maxnumber` of that level.
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
            keys: vec![self.keys.config(), self.keys.waiting(), self.keys.pre()],
            args: Vec::new(),
        }
    }

    fn decode(&self, value: Value) -> Result<Option<Terms>, DecodeError> {
        let f = Fields::new("challenge", value)?;
        if f.len() == 1 && f.kind(0)? == ReplyKind::Unconfigured {
            return Ok(None);
        }
        let level = f.uint(at(challenge_reply::LEVEL))?;
        let level = u8::try_from(level)
            .ok()
            .filter(|l| *l <= MAX_LEVEL)
            .ok_or_else(|| f.error(format!("level {level} is not one")))?;
        Ok(Some(Terms {
            level,
            max_number: challenge_max_number(f.uint(at(challenge_reply::MAX_NUMBER))?, level),
            ttl_ms: f.uint(at(challenge_reply::TTL_MS))?,
        }))
    }
}
