//! `GET /queue/challenge`: a fresh ALTCHA challenge for a new place
//! (`queuegate_edge::altcha` makes and checks them).

use queuegate_edge::altcha;
use queuegate_shared::ops::ChallengeTerms;

use super::App;
use crate::error::EdgeError;
use crate::http::{self, Request, Response};
use crate::random;

impl App {
    /// A fresh ALTCHA challenge for this queue, at the difficulty level in
    /// force (raised as the line, pre-queue and draw fill), which it
    /// carries signed.
    pub(super) async fn challenge(&self, req: &Request) -> Result<Response, EdgeError> {
        let (queue, keys) = self.queue(req)?;
        let terms = self
            .redis()?
            .run(&ChallengeTerms { keys: &keys })
            .await?
            .ok_or(EdgeError::QueueClosed)?;
        let challenge = altcha::create(
            &self.config.guard.challenge_secret,
            &queue,
            altcha::Issue {
                level: terms.level,
                max_number: terms.max_number,
                expires_at_ms: crate::clock::now_ms() + terms.ttl_ms,
            },
            random::bytes()?,
            u64::from_le_bytes(random::bytes()?),
        );
        http::json(200, &challenge)
    }
}
