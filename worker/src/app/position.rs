//! `GET /queue/position`: a poll. A visitor far from the head is answered
//! from its place cookie and the isolate's snapshot, without Redis
//! (docs/uncapped-line.md; the choice is `queuegate_shared::snapshot::answer`);
//! everyone else, and whenever the snapshot cannot be trusted, by the
//! position script.

use std::sync::Arc;

use queuegate_edge::place::{self, Held};
use queuegate_shared::ops::Position;
use queuegate_shared::snapshot::answer::{self, EdgeAnswer};
use queuegate_shared::snapshot::{self, Snapshot};
use queuegate_shared::{QueueId, QueueKeys};

use super::reply::Place;
use super::App;
use crate::error::EdgeError;
use crate::http::{self, Request, Response};
use crate::random;

impl App {
    /// The visitor's state: from the snapshot when [`answer::answer`]
    /// gives one, else from Redis.
    pub(super) async fn position(&self, req: &Request) -> Result<Response, EdgeError> {
        let (queue, keys) = self.queue(req)?;
        let visitor = self.identify(req, false).await?;
        // Stamped now: before any Redis request of this poll (the
        // snapshot's refresh included), so never after its mark.
        let place = Place::of(
            self.place_key(),
            req.cookies(),
            &queue,
            &visitor.user,
            crate::clock::now_ms(),
        );
        let exact_front = self.snapshots.exact_front(queue.as_str());
        if let Some(held) = place
            .held
            .filter(|held| answer::reads_snapshot(held, exact_front))
        {
            let now = crate::clock::now_ms();
            if let Some(snap) = self.snapshot(&queue, &keys, now).await {
                // Only a slot's answer may need the spread's random draw.
                let spread = match held {
                    Held::Slot { .. } => random::unit()?,
                    Held::Ticket { .. } => 0.0,
                };
                match answer::answer(&snap, held, now, spread) {
                    Some(EdgeAnswer::State(state)) => return self.reply(&queue, state, None, req),
                    Some(EdgeAnswer::Drawn { state, ticket }) => {
                        let resp = self.reply(&queue, state, None, req)?;
                        let c = self.place_cookie(&place::mint(
                            self.place_key(),
                            &queue,
                            &visitor.user,
                            ticket,
                            0,
                        ));
                        http::append(resp.headers(), "set-cookie", &c)?;
                        return Ok(resp);
                    }
                    None => {}
                }
            }
        }
        // An exact poll reads no snapshot for its answer; the isolate's
        // snapshot is still refreshed on the usual schedule (one HMGET per
        // REFRESH_MS), so the operator's notice reaches these replies too.
        let _ = self.snapshot(&queue, &keys, crate::clock::now_ms()).await;
        let observed = self
            .redis()?
            .run(&Position {
                keys: &keys,
                user: &visitor.user,
            })
            .await?;
        self.state_reply(&queue, observed, None, Some(place), req)
    }

    /// The isolate's snapshot of `queue` at `now`, refreshed with one
    /// `HMGET` when a second old; None when there is none to trust (a
    /// failed read sends the poll to the position script, which reports
    /// the failure).
    async fn snapshot(&self, queue: &QueueId, keys: &QueueKeys, now: u64) -> Option<Arc<Snapshot>> {
        let (cached, refresh) = self.snapshots.get_or_start(queue.as_str(), now);
        if !refresh {
            return cached;
        }
        let read = match self
            .redis()
            .ok()?
            .hmget(&keys.config(), &snapshot::FIELDS)
            .await
        {
            Ok(values) => Snapshot::decode(&values).map(Arc::new),
            Err(e) => {
                self.note_health(&EdgeError::from(e));
                None
            }
        };
        self.snapshots.record(queue.as_str(), read.clone());
        read
    }
}
