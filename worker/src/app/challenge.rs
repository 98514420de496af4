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
    /// carries signed. The terms come from the isolate's copy, read at
    /// most once a second (crate::terms): a flood of challenge requests
    /// costs Redis nothing more.
    pub(super) async fn challenge(&self, req: &Request) -> Result<Response, EdgeError> {
        let (queue, keys) = self.queue(req)?;
        let now = crate::clock::now_ms();
        let terms = match self.terms.get(queue.as_str(), now) {
            Some(terms) => terms,
            None => {
                let terms = self.redis()?.run(&ChallengeTerms { keys: &keys }).await?;
                self.terms.put(queue.as_str(), now, terms);
                terms
            }
        }
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
