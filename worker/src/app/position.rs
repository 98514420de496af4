//! `GET /queue/position`: a poll. A visitor far from the head is answered
//! from its place cookie and the isolate's snapshot, without Redis
//! (docs/uncapped-line.md; the choice is `queuegate_shared::snapshot::answer`);
//! everyone else, and whenever the snapshot cannot be trusted, by the
//! position script.

use std::sync::Arc;

use queuegate_edge::place::Held;
use queuegate_shared::draw::MovedSeats;
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
        // `?receipt=1`: a drawn visitor's proof of its place (app/draw.rs),
        // asked for once (the page asks when it offers the download): it
        // costs up to three Redis reads, which an ordinary poll never pays.
        // Any other value is refused before the poll.
        let own_url = req.inner().url_str();
        let asks_receipt = match queuegate_edge::url::query_param(own_url, "receipt") {
            None => false,
            Some("1") => true,
            Some(_) => return Err(EdgeError::BadRequest("receipt must be 1".into())),
        };
        let resp = self.poll(req).await?;
        if !asks_receipt {
            return Ok(resp);
        }
        let (queue, keys) = self.queue(req)?;
        let visitor = self.identify(req, false).await?;
        // Only a visitor whose place cookie says it was drawn (a slot, or
        // a ticket in the last draw's range) costs a Redis read: anyone
        // else asking gets the plain reply.
        let held =
            queuegate_edge::cookie::cookie(req.cookies(), queuegate_edge::cookie::PLACE_COOKIE)
                .and_then(|v| {
                    let now = crate::clock::now_ms();
                    super::reply::held(self.place_key(), v, &queue, &visitor.user, now)
                });
        let drawn = match held {
            Some(Held::Slot { .. }) => true,
            Some(Held::Ticket { ticket, .. }) => self
                .snapshots
                .last_draw(queue.as_str())
                .is_some_and(|(base, end)| ticket > base && ticket <= end),
            None => false,
        };
        if !drawn {
            return Ok(resp);
        }
        Ok(
            match self.receipt(queue.as_str(), &keys, &visitor.user).await {
                Ok(Some(r)) => resp.with_json_field("receipt", &r),
                Ok(None) => resp,
                Err(e) => {
                    self.note_health(&e);
                    resp
                }
            },
        )
    }

    /// The poll itself.
    async fn poll(&self, req: &Request) -> Result<Response, EdgeError> {
        let (queue, keys) = self.queue(req)?;
        let visitor = self.identify(req, false).await?;
        // Stamped now: before any Redis request of this poll (the
        // snapshot's refresh included), so never after its mark.
        let now = crate::clock::now_ms();
        let place = Place::of(self.place_key(), req.cookies(), &queue, &visitor.user, now);
        let exact_front = self.snapshots.exact_front(queue.as_str());
        if let Some(held) = place
            .held
            .filter(|held| answer::reads_snapshot(held, exact_front))
        {
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
                        let held = Held::Ticket { ticket, seen_ms: 0 };
                        let c = self.place_cookie(&queue, &visitor.user, held, now);
                        http::append(resp.headers(), "set-cookie", &c);
                        return Ok(resp);
                    }
                    None => {}
                }
            }
        }
        // An exact poll reads no snapshot for its answer; the isolate's
        // snapshot is still refreshed on the usual schedule (one HMGET per
        // REFRESH_MS), so the operator's notice reaches these replies too.
        let _ = self.snapshot(&queue, &keys, now).await;
        let observed = self
            .redis()?
            .run(&Position {
                keys: &keys,
                user: &visitor.user,
            })
            .await?;
        self.state_reply(&queue, observed, None, Some(place), req)
    }

    /// A dealt draw's round-1 seats that may have moved
    /// (`queuegate_shared::draw::MovedSeats`), read once per draw and
    /// isolate with one `GET` and carried from snapshot to snapshot: with
    /// them the edge answers the other round-1 slots itself. Unread (a
    /// failed read, a list of another draw), every slot of the draw asks
    /// Redis.
    async fn attach_moved(&self, s: &mut Snapshot, cached: Option<&Snapshot>, keys: &QueueKeys) {
        let sealed = s.sealed;
        let Some(draw) = s.draw.as_mut().filter(|d| d.dealt) else {
            return;
        };
        let kept = cached
            .and_then(|c| c.draw.as_ref())
            .and_then(|d| d.moved.clone())
            .filter(|m| m.draw == sealed);
        draw.moved = match kept {
            Some(m) => Some(m),
            None => match self.redis().ok() {
                Some(redis) => match redis.get(&keys.draw_moved()).await {
                    Ok(Some(text)) => {
                        let round_one = draw.rounds.first().copied().unwrap_or(0);
                        MovedSeats::parse(&text, round_one)
                            .filter(|m| m.draw == sealed)
                            .map(Arc::new)
                    }
                    Ok(None) => None,
                    Err(e) => {
                        self.note_health(&EdgeError::from(e));
                        None
                    }
                },
                None => None,
            },
        };
    }

    /// The isolate's snapshot of `queue` at `now`, refreshed with one
    /// `HMGET` every `REFRESH_MS`; None when there is none to trust (a
    /// failed read sends the poll to the position script, which reports
    /// the failure; a snapshot without a live writer, one whose scheduler
    /// stopped, is not kept).
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
            // A snapshot whose writer has stopped ticking for longer than
            // its lease answers no poll (its line no longer moves); it is
            // kept for the operator's notice.
            Ok(values) => match Snapshot::decode(&values) {
                Some(mut s) => {
                    s.live_writer = s.has_live_writer(crate::clock::now_ms());
                    self.attach_moved(&mut s, cached.as_deref(), keys).await;
                    Some(Arc::new(s))
                }
                None => None,
            },
            Err(e) => {
                self.note_health(&EdgeError::from(e));
                None
            }
        };
        self.snapshots.record(queue.as_str(), read.clone());
        read
    }
}
