//! The state reply every queue route answers with: the state's JSON, its
//! `Retry-After`, the token cookie once admitted, and the place cookie that
//! lets the edge answer later polls from its snapshot.

use std::cell::RefCell;

use queuegate_edge::cookie::{
    cookie, set_cookie, set_strict_cookie, PLACE_COOKIE, SESSION_COOKIE, TOKEN_COOKIE,
};
use queuegate_edge::identity::Key;
use queuegate_edge::place::{self, Held};
use queuegate_edge::session;
use queuegate_shared::ops::Observed;
use queuegate_shared::policy::retry_after_header_seconds;
use queuegate_shared::state::{StateReply, UserState};
use queuegate_shared::{QueueId, Settings, UserId};

use super::App;
use crate::config::IdentityMode;
use crate::error::EdgeError;
use crate::http::{self, Request, Response};
use crate::random;
use crate::verified::{Verified, KEEP_S};

/// The place cookie a request brought, checked once: the visitor it must
/// belong to, and what it holds if it is this visitor's, for this queue,
/// and signed by us.
pub(super) struct Place<'a> {
    pub(super) user: &'a UserId,
    pub(super) held: Option<Held>,
    /// When the request that this reply answers left for Redis (the
    /// edge's clock, read before it was sent): the time signed into the
    /// place cookie. Never a time read after the reply came back, which
    /// would add the round trip (seconds, when Redis or the edge is slow)
    /// to the visitor's liveness and let the edge answer its polls past
    /// the moment the Redis mark runs out.
    pub(super) asked_ms: u64,
}

impl<'a> Place<'a> {
    /// Reads and checks the place cookie among `cookies`, for a reply to
    /// a Redis request sent at `asked_ms`.
    pub(super) fn of(
        key: &Key,
        cookies: &str,
        queue: &QueueId,
        user: &'a UserId,
        asked_ms: u64,
    ) -> Place<'a> {
        Place {
            user,
            held: cookie(cookies, PLACE_COOKIE).and_then(|v| held(key, v, queue, user, asked_ms)),
            asked_ms,
        }
    }
}

thread_local! {
    // The place cookies this isolate verified or signed, and for whom
    // (wasm has one thread; never borrowed across an await), each kept
    // for `KEEP_S` from then.
    static PLACES: RefCell<Verified<(UserId, Held)>> = RefCell::new(Verified::default());
}

/// What the place cookie `value` holds for `user` in `queue` at `now_ms`
/// ([`place::verify`]); its MAC is checked once per isolate and value,
/// and a value this isolate signed is not checked at all.
pub(super) fn held(
    key: &Key,
    value: &str,
    queue: &QueueId,
    user: &UserId,
    now_ms: u64,
) -> Option<Held> {
    let now_s = now_ms as f64 / 1_000.0;
    PLACES.with(|places| {
        let mut places = places.borrow_mut();
        if let Some((owner, held)) = places.get(value, now_s) {
            // As `verify` does: another visitor's cookie, or another
            // queue's (the value names its queue first), holds nothing.
            let its_queue = value.split('.').next() == Some(queue.as_str());
            return (owner == *user && its_queue).then_some(held);
        }
        let held = place::verify(key, value, queue, user)?;
        places.keep(value, (user.clone(), held), now_s + KEEP_S);
        Some(held)
    })
}

impl App {
    /// The `Set-Cookie` of a place cookie holding `user`'s `held` place in
    /// `queue`, signed at `now_ms` and known to this isolate, so that the
    /// visitor's next poll here does not check its MAC.
    pub(super) fn place_cookie(
        &self,
        queue: &QueueId,
        user: &UserId,
        held: Held,
        now_ms: u64,
    ) -> String {
        let (value, reads) = place::sign(self.place_key(), queue, user, held);
        let until = now_ms as f64 / 1_000.0 + KEEP_S;
        PLACES.with(|p| p.borrow_mut().keep(&value, (user.clone(), reads), until));
        set_cookie(
            PLACE_COOKIE,
            &value,
            crate::visitor::VISITOR_COOKIE_MAX_AGE_S,
            self.config.cookie_secure,
        )
    }

    /// The `Set-Cookie` of `user`'s session pass in `queue`: the session
    /// ends at `ends_at`, Redis confirmed it at `now_ms`.
    pub(super) fn session_cookie(
        &self,
        queue: &QueueId,
        user: &UserId,
        ends_at: u64,
        now_ms: u64,
    ) -> String {
        let value = session::mint(self.place_key(), queue, user, ends_at, now_ms);
        let max_age = ends_at.saturating_sub(now_ms) / 1_000;
        set_cookie(
            SESSION_COOKIE,
            &value,
            max_age.max(1),
            self.config.cookie_secure,
        )
    }

    /// The key place cookies are signed with: the identity secret.
    pub(super) fn place_key(&self) -> &Key {
        match &self.config.identity {
            IdentityMode::Anonymous { secret } | IdentityMode::Jwt { secret, .. } => secret,
        }
    }

    /// 200 with the state JSON; `Retry-After` while waiting; the token as
    /// an HttpOnly cookie once admitted.
    /// A waiting visitor's ticket is signed into its place cookie, when
    /// the cookie does not hold it already.
    pub(super) fn state_reply(
        &self,
        queue: &QueueId,
        observed: Observed,
        visitor_cookie: Option<String>,
        place: Option<Place<'_>>,
        req: &Request,
    ) -> Result<Response, EdgeError> {
        let place_cookie = match (&observed, place) {
            // Every exact reply re-signs the place with the time this
            // Redis request was sent: near the head, the edge answers from
            // its snapshot while the next poll still reaches Redis in time
            // (settings::edge_may_answer).
            (Observed::Waiting(w), Some(p)) => Some(self.place_cookie(
                queue,
                p.user,
                Held::Ticket {
                    ticket: w.ticket,
                    seen_ms: p.asked_ms,
                },
                p.asked_ms,
            )),
            (Observed::PreQueue(f), Some(p)) => match (f.draw, f.slot) {
                (Some(draw), Some(slot)) if p.held != Some(Held::Slot { draw, slot }) => {
                    let held = Held::Slot { draw, slot };
                    Some(self.place_cookie(queue, p.user, held, p.asked_ms))
                }
                _ => None,
            },
            _ => None,
        };
        // Settings are published to Redis by the scheduler; the defaults
        // only fill in before a scheduler has run. A pre-queued visitor's
        // next poll lands at a random point of the opening's spread window.
        let spread = match observed {
            Observed::PreQueue(_) => random::unit()?,
            _ => 0.0,
        };
        let state = observed.into_user_state(&Settings::default(), spread);
        let resp = self.reply(queue, state, visitor_cookie, req)?;
        if let Some(c) = place_cookie {
            http::append(resp.headers(), "set-cookie", &c);
        }
        Ok(resp)
    }

    /// 200 with a state's JSON, its `Retry-After` and cookies.
    pub(super) fn reply(
        &self,
        queue: &QueueId,
        state: UserState,
        visitor_cookie: Option<String>,
        req: &Request,
    ) -> Result<Response, EdgeError> {
        // The notice in the page's language (the same choice the page
        // made from Accept-Language), when it has texts per language.
        let lang = || {
            let accept_language = req.headers().get("accept-language").ok().flatten();
            queuegate_edge::lang::choose(accept_language.as_deref(), crate::i18n::CODES).lang
        };
        // A kept stock: a waiting visitor's chance that it lasts to its
        // turn, from the isolate's snapshot (no Redis call).
        let chance_percent = match &state {
            UserState::Waiting { position, .. } => self
                .snapshots
                .stock(queue.as_str())
                .map(|s| queuegate_shared::chance::chance_percent(*position, &s)),
            _ => None,
        };
        let reply = StateReply {
            state,
            queue: queue.to_string(),
            notice: self.snapshots.notice(queue.as_str(), lang),
            chance_percent,
        };
        let resp = http::json(200, &reply)?;
        let state = reply.state;
        let headers = resp.headers();
        if let Some(c) = visitor_cookie {
            http::append(headers, "set-cookie", &c);
        }
        match &state {
            UserState::Waiting { retry_after_ms, .. }
            | UserState::PreQueue { retry_after_ms, .. }
            | UserState::SoldOut { retry_after_ms } => {
                http::set(
                    headers,
                    "retry-after",
                    &retry_after_header_seconds(*retry_after_ms).to_string(),
                );
            }
            UserState::Admitted {
                token, expires_at, ..
            } => {
                let now = crate::clock::now_ms();
                let max_age = expires_at.saturating_sub(now) / 1_000;
                let c = set_strict_cookie(
                    TOKEN_COOKIE,
                    token,
                    max_age.max(1),
                    self.config.cookie_secure,
                );
                http::append(headers, "set-cookie", &c);
            }
            _ => {}
        }
        Ok(resp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

    fn ids(queue: &str, user: &str) -> (QueueId, UserId) {
        (QueueId::new(queue).unwrap(), UserId::new(user).unwrap())
    }

    #[test]
    fn a_known_place_holds_for_its_visitor_and_queue_only() {
        let key = Key::new(KEY);
        let (main, alice) = ids("main", "alice");
        let (other, bob) = ids("other", "bob");
        let ticket = Held::Ticket {
            ticket: 7,
            seen_ms: 1_800_000_000_000,
        };
        let value = place::mint(KEY, &main, &alice, 7, 1_800_000_000_000);
        let held = |value: &str, queue: &QueueId, user: &UserId| {
            held(&key, value, queue, user, 1_800_000_001_000)
        };
        // Checked, then known: the same answer both times.
        assert_eq!(held(&value, &main, &alice), Some(ticket));
        assert_eq!(held(&value, &main, &alice), Some(ticket));
        // Known to the isolate, and still nobody else's, nor another
        // queue's: as `place::verify` answers.
        assert_eq!(held(&value, &main, &bob), None);
        assert_eq!(held(&value, &other, &alice), None);
        assert_eq!(held(&value, &main, &alice), Some(ticket), "kept");
        // Signed by another key: never held, before or after.
        let forged = place::mint(b"another-key-0123456789abcdef0123", &main, &alice, 3, 0);
        assert_eq!(held(&forged, &main, &alice), None);
        assert_eq!(held(&forged, &main, &alice), None);
        // An edited ticket is another text: checked, and refused.
        let edited = value.replacen(".7-", ".8-", 1);
        assert_eq!(held(&edited, &main, &alice), None, "edited");
    }
}
