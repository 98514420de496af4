//! `POST /queue/enter`: join the line. What a new place must pass (the
//! proof of work, Turnstile, the address's budget) is checked here where
//! no Redis is needed; the `enter` script applies it in the same round
//! trip as the place.

use queuegate_edge::url;
use queuegate_shared::guard::{EntryGuard, GuardCheck};
use queuegate_shared::ops::{Enter, EnterReply, Refusal};

use super::reply::Place;
use super::App;
use crate::error::EdgeError;
use crate::guard;
use crate::http::{self, Request, Response};
use crate::random;

impl App {
    /// Joins the line. What a new place must pass is read and checked here
    /// where no Redis is needed; the script applies it only to a visitor
    /// without a place, in the same round trip.
    pub(super) async fn enter(&self, req: Request) -> Result<Response, EdgeError> {
        let (queue, keys) = self.queue(&req)?;
        let visitor = self.identify(&req, true).await?;
        let brought = guard::read(&req).await?;
        let config = &self.config.guard;
        let solution = guard::verify_solution(config, &queue, brought.altcha.as_deref())?;
        let address = guard::address(&req);
        let turnstile_passed = match (&config.turnstile, &brought.turnstile) {
            (Some(t), Some(token)) => {
                let own_url = req.inner().url();
                let remote_ip = guard::remote_ip(&req);
                guard::turnstile(t, token, remote_ip.as_deref(), url::host(&own_url)).await?;
                true
            }
            _ => false,
        };
        // Used only if the room is idle and admits this visitor at once.
        let token = random::token()?;
        let asked_ms = crate::clock::now_ms();
        let reply = self
            .redis()?
            .run(&Enter {
                keys: &keys,
                user: &visitor.user,
                guard: EntryGuard {
                    address: Some(&address),
                    solution: solution.as_ref(),
                    missing: guard::missing(config, solution.as_ref(), turnstile_passed),
                },
                token: Some(&token),
            })
            .await;
        let reply = match (reply, &visitor.new_cookie) {
            (Ok(reply), _) => reply,
            // The call failed, but the script may have run: a place taken,
            // the address's budget and the solution spent. The new
            // visitor's identity comes with the error, so the retry is a
            // refresh that finds that place and pays nothing again.
            (Err(e), Some(cookie)) => {
                self.note_health(&e);
                let resp = http::error_response(&e)?;
                http::append(resp.headers(), "set-cookie", cookie);
                return Ok(resp);
            }
            (Err(e), None) => return Err(e),
        };
        // A place taken (the line grew) or a stale solution: this
        // isolate's next challenge reads the level in force.
        if matches!(
            reply,
            EnterReply::Entered(_) | EnterReply::Refused(Refusal::SolutionStale)
        ) {
            self.terms.forget(queue.as_str());
        }
        match reply {
            EnterReply::Entered(observed) => {
                let place = Place::of(
                    self.place_key(),
                    req.cookies(),
                    &queue,
                    &visitor.user,
                    asked_ms,
                );
                self.state_reply(&queue, observed, visitor.new_cookie, Some(place), &req)
            }
            EnterReply::Full { .. } => Err(EdgeError::QueueFull),
            // No place: told so like a poll is (the page keeps asking, a
            // restock lets it in).
            EnterReply::SoldOut => self.state_reply(
                &queue,
                queuegate_shared::ops::Observed::SoldOut,
                visitor.new_cookie,
                None,
                &req,
            ),
            EnterReply::Closed(_) => Err(EdgeError::QueueClosed),
            EnterReply::Refused(Refusal::Missing(GuardCheck::Challenge)) => {
                Err(EdgeError::ChallengeRequired)
            }
            EnterReply::Refused(Refusal::Missing(GuardCheck::Turnstile)) => {
                Err(EdgeError::TurnstileRequired)
            }
            EnterReply::Refused(Refusal::TooManyEntries { retry_after_ms }) => {
                Err(EdgeError::TooManyEntries { retry_after_ms })
            }
            EnterReply::Refused(Refusal::SolutionReused) => Err(EdgeError::ChallengeReused),
            EnterReply::Refused(Refusal::SolutionStale) => Err(EdgeError::ChallengeStale),
            EnterReply::Refused(Refusal::AddressFull { cap }) => {
                Err(EdgeError::AddressFull { cap })
            }
        }
    }
}
