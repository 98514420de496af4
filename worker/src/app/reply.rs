//! The state reply every queue route answers with: the state's JSON, its
//! `Retry-After`, the token cookie once admitted, and the place cookie that
//! lets the edge answer later polls from its snapshot.

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
            held: cookie(cookies, PLACE_COOKIE).and_then(|v| place::verify(key, v, queue, user)),
            asked_ms,
        }
    }
}

impl App {
    /// The `Set-Cookie` of a place cookie holding `value`.
    pub(super) fn place_cookie(&self, value: &str) -> String {
        set_cookie(
            PLACE_COOKIE,
            value,
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
            (Observed::Waiting(w), Some(p)) => Some(self.place_cookie(&place::mint(
                self.place_key(),
                queue,
                p.user,
                w.ticket,
                p.asked_ms,
            ))),
            (Observed::PreQueue(f), Some(p)) => match (f.draw, f.slot) {
                (Some(draw), Some(slot)) if p.held != Some(Held::Slot { draw, slot }) => {
                    Some(self.place_cookie(&place::mint_slot(
                        self.place_key(),
                        queue,
                        p.user,
                        draw,
                        slot,
                    )))
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
