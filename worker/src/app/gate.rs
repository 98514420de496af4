//! The token gate in front of the protected routes: phases over one
//! per-request [`Gate`] (choose the queue and the route's kind, let a
//! bypass through, check the session or spend the token, forward) that end
//! in [`Gate::settle`], the one step that decides from the context what
//! becomes of a token that may have been spent.
//!
//! A browse route passes on the visitor's session (README, *Browse and
//! spend routes*) and spends nothing; a spend route takes the one-time
//! order token. A prefetch never spends or opens anything, and a
//! cross-site request carries no token (`queuegate_edge::visit`).
//!
//! Like pingora's `logging` phase, `settle` runs however the request went:
//! a forwarded order is settled with its outcome, a token spent for a
//! forward that never happened (or whose consume or pass reply was lost)
//! is given back, and a refused one needs nothing.

use queuegate_edge::cookie::{cookie, set_strict_cookie, SESSION_COOKIE, TOKEN_COOKIE};
use queuegate_edge::session;
use queuegate_edge::visit::Intent;
use queuegate_edge::TOKEN_HEADER;
use queuegate_shared::ops::{
    units_from_header, Browse, BrowseReply, Consume, ConsumeReply, Look, Outcome, Pass, PassReply,
    QueueNeeded, RouteKind, Settle, Unconsume,
};
use queuegate_shared::token::EntryToken;
use queuegate_shared::{QueueId, QueueKeys, UserId};
use worker::worker_sys::Context;

use super::App;
use crate::error::EdgeError;
use crate::guard;
use crate::http::{self, Request, Response};
use crate::origin::Forwarded;
use crate::random;
use crate::rest::RestClient;

/// One gated request's context, filled in phase by phase.
struct Gate {
    /// The route's own queue.
    queue: QueueId,
    keys: QueueKeys,
    redis: RestClient,
    /// Browse or spend.
    kind: RouteKind,
    /// Who passed a browse route (signed for the origin; nothing to
    /// settle).
    browser: Option<UserId>,
    /// Who spends which token, once the spend phase chose them.
    spender: Option<Spender>,
    /// How far the token got: what [`Gate::settle`] does with it.
    course: Course,
}

/// The visitor whose token the gate spends.
struct Spender {
    user: UserId,
    token: EntryToken,
}

/// What happened to the request's token so far.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Course {
    /// Not spent: no token yet, or Redis refused it.
    Unspent,
    /// A consume or pass was sent and its reply lost (no answer in time,
    /// a broken connection, a reply we cannot read): the script may have
    /// run and left the visitor in flight.
    InDoubt,
    /// Spent, not forwarded yet.
    Spent,
    /// Forwarded, with what the origin made of it.
    Forwarded {
        outcome: Outcome,
        /// The origin's latency, for the scheduler's origin control.
        latency_ms: u64,
        /// The units of a kept stock the order sold (the origin's
        /// `Queuegate-Units`, else 1).
        units: u64,
    },
}

/// What [`Gate::settle`] does at the end of a request in `course`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Settlement {
    /// Nothing was spent.
    Nothing,
    /// `unconsume`: the token back, a no-op unless it is in flight with
    /// exactly this token.
    GiveBack,
    /// `settle` with the outcome: an order done, or the token back for one
    /// retry window (a passed request's slot freed instead).
    Settle {
        outcome: Outcome,
        latency_ms: u64,
        units: u64,
    },
}

impl Course {
    fn settlement(self) -> Settlement {
        match self {
            Course::Unspent => Settlement::Nothing,
            Course::InDoubt | Course::Spent => Settlement::GiveBack,
            Course::Forwarded {
                outcome,
                latency_ms,
                units,
            } => Settlement::Settle {
                outcome,
                latency_ms,
                units,
            },
        }
    }
}

impl App {
    /// A protected route: spend the token, forward, settle afterwards. A
    /// request without a token passes at once while the room is idle (idle
    /// passthrough); otherwise it is told to join the queue.
    pub(super) async fn gate(
        &'static self,
        req: Request,
        ctx: &Context,
    ) -> Result<Response, EdgeError> {
        let mut gate = self.choose(&req)?;
        let cookies = req
            .headers()
            .get("cookie")
            .ok()
            .flatten()
            .unwrap_or_default();
        // Staff with a live bypass link pass without a token or a slot (so
        // there is nothing to settle); the origin still gets the signed
        // identity (`bypass-<id>`).
        if let Some(id) = self.bypass_in(&gate.redis, &gate.keys, &cookies).await? {
            let user = UserId::new(&format!("bypass-{id}"))
                .map_err(|e| EdgeError::Internal(format!("bypass user: {e}")))?;
            // Staff orders take no unit of a kept stock (docs/drop-day.md).
            return self
                .send(req, Some((&gate.queue, &user)))
                .await
                .reply
                .map(without_units);
        }
        let intent = intent(&req);
        let spent = match gate.kind {
            RouteKind::Browse => gate.browse(self, &req, intent).await,
            // A prefetch never spends a turn, whatever it carries.
            RouteKind::Spend if intent.prefetch => Err(EdgeError::PrefetchDeclined),
            // Another site's request carries no token: it cannot spend one.
            RouteKind::Spend if intent.cross_site => gate.spend(self, &req, None).await,
            RouteKind::Spend => {
                let presented = req
                    .headers()
                    .get(TOKEN_HEADER)
                    .ok()
                    .flatten()
                    .or_else(|| cookie(&cookies, TOKEN_COOKIE).map(str::to_string));
                gate.spend(self, &req, presented).await
            }
        };
        // From here the request ends in `settle`, run in `wait_until`, not
        // in this handler: on the edge a client that hangs up cancels its
        // handler, and an order the shop took must still be settled
        // (ordered, or its token back) rather than left in flight. The
        // reply comes back through a channel; `wait_until` work gets 30 s
        // after a hang-up.
        let (reply_to, reply) = futures_channel::oneshot::channel();
        crate::exec::wait_until(ctx, async move {
            let forwarded = match spent {
                Ok(new_cookies) => gate.forward(self, req, new_cookies).await,
                Err(e) => Err(e),
            };
            // The visitor may be gone: the settle runs all the same.
            let _ = reply_to.send(forwarded);
            gate.settle().await;
        });
        reply.await.unwrap_or_else(|_| {
            Err(EdgeError::Internal(
                "the forward ended without a reply".into(),
            ))
        })
    }

    /// The gate's first phase: the route's own queue, never `?queue=`: a
    /// visitor must not pick the emptiest line to pass through, or use
    /// another line's token. `?queue=` is still checked as on every route
    /// (400 / 404).
    fn choose(&self, req: &Request) -> Result<Gate, EdgeError> {
        self.queue(req)?;
        let (queue, kind) = self
            .config
            .protection(req.method().as_ref(), &req.path())
            .ok_or(EdgeError::NotFound)?;
        let queue = queue.clone();
        Ok(Gate {
            keys: QueueKeys::new(&self.config.prefix, &queue),
            queue,
            redis: self.redis()?.clone(),
            kind,
            browser: None,
            spender: None,
            course: Course::Unspent,
        })
    }
}

/// The request's [`Intent`] from its headers.
fn intent(req: &Request) -> Intent {
    const NAMES: [&str; 6] = [
        "sec-purpose",
        "purpose",
        "x-purpose",
        "x-moz",
        "next-router-prefetch",
        "sec-fetch-site",
    ];
    let values: Vec<(&str, String)> = NAMES
        .iter()
        .filter_map(|n| req.headers().get(n).ok().flatten().map(|v| (*n, v)))
        .collect();
    Intent::of(|name| {
        values
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    })
}

impl Gate {
    /// A browse route: the visitor's live session lets it through, any
    /// number of times: on their session pass (a signed cookie, no Redis
    /// call) while it is fresh, else on Redis's word, which renews the
    /// pass. Without one (a newcomer, a session that ended) it
    /// is a request without a token: while the room is idle the visitor is
    /// admitted at once (`pass`, with a token for their order set as a
    /// cookie), otherwise sent to the line. A prefetch only reads: it
    /// passes on a live session and is declined otherwise. Answers the
    /// `Set-Cookie`s for the origin's reply.
    async fn browse(
        &mut self,
        app: &App,
        req: &Request,
        intent: Intent,
    ) -> Result<Vec<String>, EdgeError> {
        let visitor = app.identify(req, true).await?;
        let mut cookies: Vec<String> = visitor.new_cookie.into_iter().collect();
        let now = crate::clock::now_ms();
        // A visitor minted just now has no session: no call to ask.
        if cookies.is_empty() {
            let pass = cookie(req.cookies(), SESSION_COOKIE)
                .and_then(|v| session::verify(app.place_key(), v, &self.queue, &visitor.user));
            if pass.is_some_and(|p| p.passes(now)) {
                self.browser = Some(visitor.user);
                return Ok(cookies);
            }
            let look = if intent.prefetch {
                Look::Prefetch
            } else {
                Look::Visit
            };
            let browse = Browse {
                keys: &self.keys,
                user: &visitor.user,
                look,
            };
            match self.redis.run(&browse).await? {
                BrowseReply::Pass { ends_at } => {
                    // A prefetch reads only: its reply carries no pass.
                    if !intent.prefetch {
                        cookies.push(app.session_cookie(&self.queue, &visitor.user, ends_at, now));
                    }
                    self.browser = Some(visitor.user);
                    return Ok(cookies);
                }
                BrowseReply::Early { wait_ms } => return Err(EdgeError::NotYetActive { wait_ms }),
                BrowseReply::NoSession => {}
            }
        }
        if intent.prefetch {
            return Err(EdgeError::PrefetchDeclined);
        }
        app.pass_asks_what_a_place_asks(&self.queue)?;
        let token = random::token()?;
        let address = guard::address(req);
        let passed = self
            .redis
            .run(&Pass {
                keys: &self.keys,
                user: &visitor.user,
                token: &token,
                address: Some(&address),
                route: RouteKind::Browse,
            })
            .await?;
        let session_ends_at = passed_or_refused(passed, &self.queue)?;
        cookies.push(app.session_cookie(&self.queue, &visitor.user, session_ends_at, now));
        let max_age = session_ends_at.saturating_sub(now) / 1_000;
        cookies.push(set_strict_cookie(
            TOKEN_COOKIE,
            token.expose(),
            max_age.max(1),
            app.config.cookie_secure,
        ));
        self.browser = Some(visitor.user);
        Ok(cookies)
    }

    /// Spends the presented token (`consume`), or without one passes while
    /// the room is idle (`pass`). Answers the `Set-Cookie` of a visitor it
    /// just minted, for the origin's reply.
    async fn spend(
        &mut self,
        app: &App,
        req: &Request,
        presented: Option<String>,
    ) -> Result<Vec<String>, EdgeError> {
        match presented {
            Some(presented) => {
                let visitor = app.identify(req, false).await?;
                let token = EntryToken::parse(presented.trim()).ok_or(EdgeError::TokenInvalid)?;
                let spender = self.spender.insert(Spender {
                    user: visitor.user,
                    token,
                });
                // Sent: in doubt until its reply is read.
                self.course = Course::InDoubt;
                let consumed = self
                    .redis
                    .run(&Consume {
                        keys: &self.keys,
                        user: &spender.user,
                        token: &spender.token,
                    })
                    .await?;
                self.course = match consumed {
                    ConsumeReply::Accepted => Course::Spent,
                    _ => Course::Unspent,
                };
                match consumed {
                    ConsumeReply::Accepted => Ok(visitor.new_cookie.into_iter().collect()),
                    ConsumeReply::Invalid => Err(EdgeError::TokenInvalid),
                    ConsumeReply::Used => Err(EdgeError::TokenUsed),
                    ConsumeReply::Early { wait_ms } => Err(EdgeError::NotYetActive { wait_ms }),
                    ConsumeReply::Unconfigured => Err(EdgeError::QueueClosed),
                    ConsumeReply::SoldOut => Err(EdgeError::SoldOut),
                }
            }
            None => {
                app.pass_asks_what_a_place_asks(&self.queue)?;
                // A visitor without an identity gets one: the slot and the
                // settle need a user, and the order is theirs (the cookie
                // comes with the origin's reply). The pass spends the
                // address's entry budget (for IPv6 its /56's and /48's
                // too); a failed order frees its slot at once (no one
                // holds its token to retry with).
                let visitor = app.identify(req, true).await?;
                let spender = self.spender.insert(Spender {
                    user: visitor.user,
                    token: random::token()?,
                });
                let address = guard::address(req);
                self.course = Course::InDoubt;
                let passed = self
                    .redis
                    .run(&Pass {
                        keys: &self.keys,
                        user: &spender.user,
                        token: &spender.token,
                        address: Some(&address),
                        route: RouteKind::Spend,
                    })
                    .await?;
                self.course = match passed {
                    PassReply::Passed { .. } => Course::Spent,
                    _ => Course::Unspent,
                };
                passed_or_refused(passed, &self.queue)?;
                Ok(visitor.new_cookie.into_iter().collect())
            }
        }
    }

    /// Forwards the request signed with the identity that passed and notes
    /// the outcome for [`Gate::settle`]; `new_cookies` (a visitor just
    /// minted, a token just issued) come with the origin's reply.
    async fn forward(
        &mut self,
        app: &App,
        req: Request,
        new_cookies: Vec<String>,
    ) -> Result<Response, EdgeError> {
        let user = self
            .spender
            .as_ref()
            .map(|s| &s.user)
            .or(self.browser.as_ref());
        let passed = user.map(|u| (&self.queue, u));
        let Forwarded {
            reply,
            in_hand,
            sent,
        } = app.send(req, passed).await;
        // The clock moves across I/O in Workers, so this is the origin's
        // latency from the moment it could have the whole request (settle
        // counts it for the scheduler's origin control; a slow upload is
        // the visitor's, not the origin's). An origin that answered before
        // the body was read whole is timed from sending.
        let answered = crate::clock::now_ms();
        let latency_ms = in_hand.or(sent).map_or(0, |at| answered.saturating_sub(at));
        // 2xx/3xx: the order is done. 4xx/5xx or no answer: the same token
        // comes back for one retry window (see docs/edge.md); a passed
        // request's slot is freed instead. No answer to a body that never
        // arrived whole is the visitor's failure (a 4xx for the origin
        // control: not counted).
        let outcome = match (&reply, in_hand) {
            (Ok(resp), _) => Outcome::of_status(resp.status()),
            (Err(_), Some(_)) => Outcome::NoAnswer,
            (Err(_), None) => Outcome::ClientError,
        };
        // The units a kept stock's order sold: the origin's word only,
        // read and taken off every forwarded reply (a visitor's own
        // header never reaches this: it is the origin's reply).
        let resp = reply.map(Response::from);
        let units = match &resp {
            Ok(resp) => units_from_header(resp.take_origin_header(UNITS_HEADER).as_deref()),
            Err(_) => 0,
        };
        // A browse route's request has nothing to settle.
        if self.spender.is_some() {
            self.course = Course::Forwarded {
                outcome,
                latency_ms,
                units,
            };
        }
        let resp = resp?;
        for c in &new_cookies {
            http::append(resp.headers(), "set-cookie", c);
        }
        Ok(resp)
    }

    /// The last step, after the reply: settles a forwarded order, gives
    /// back a token spent (or maybe spent) for a forward that never
    /// happened, and leaves a refused one alone. The visitor who got an
    /// error (503 `unavailable`, Retry-After) retries with the same token.
    ///
    /// A settle or give-back that cannot reach Redis (the gateway
    /// restarting, Redis paused or failing over) is tried again after
    /// each of [`SETTLE_RETRY_MS`] (16 s in all, inside `wait_until`'s
    /// 30 s): without it the token stayed in flight, the visitor's retry
    /// was refused as `token_used` and the order lapsed (found by the
    /// chaos run, issue #37). Both scripts are idempotent: a call that ran
    /// but whose reply was lost answers `stale` the second time.
    /// Nothing secret is logged: only the error's class.
    async fn settle(self) {
        let Some(Spender { user, token }) = &self.spender else {
            return;
        };
        let keys = &self.keys;
        let settlement = self.course.settlement();
        let mut waits = SETTLE_RETRY_MS.iter();
        loop {
            let (what, result) = match settlement {
                Settlement::Nothing => return,
                Settlement::GiveBack => (
                    "unconsume",
                    self.redis
                        .run(&Unconsume { keys, user, token })
                        .await
                        .map(drop),
                ),
                Settlement::Settle {
                    outcome,
                    latency_ms,
                    units,
                } => {
                    let settle = Settle {
                        keys,
                        user,
                        token,
                        outcome,
                        latency_ms,
                        units,
                    };
                    ("settle", self.redis.run(&settle).await.map(drop))
                }
            };
            let e = match result {
                Ok(()) => return,
                Err(e) => e,
            };
            match waits.next() {
                Some(&ms) if e.is_transient() => crate::clock::sleep(ms).await,
                _ => {
                    worker::console_error!("{what} failed: {e}");
                    return;
                }
            }
        }
    }
}

/// The origin's reply header stating how many units of a kept stock the
/// order sold (docs/drop-day.md, *Stock*); never passed to the visitor.
pub const UNITS_HEADER: &str = "queuegate-units";

/// The origin's reply without its `Queuegate-Units` (where nothing
/// counts it: a bypass, an unprotected route).
pub(super) fn without_units(resp: worker::web_sys::Response) -> Response {
    let resp = Response::from(resp);
    resp.take_origin_header(UNITS_HEADER);
    resp
}

/// The pauses between tries of a settle or a give-back that could not
/// reach Redis (ms): 15.75 s in all.
const SETTLE_RETRY_MS: [u32; 6] = [250, 500, 1_000, 2_000, 4_000, 8_000];

impl App {
    /// Idle passthrough asks what a place asks: while the room demands a
    /// proof of work or Turnstile for a new place, a request without a
    /// token or a session does not pass on its own. It is sent to the
    /// room (a person: 303 there; an API client: 403 `queue_required`
    /// naming it), whose page solves the check and, the room being idle,
    /// is admitted at once by `enter`. Before this, a token-less order
    /// skipped both checks (issue #38). No Redis call, no identity minted.
    fn pass_asks_what_a_place_asks(&self, queue: &QueueId) -> Result<(), EdgeError> {
        match guard::missing(&self.config.guard, None, false) {
            Some(_) => Err(EdgeError::QueueRequired {
                page: page_url(queue),
                holds: false,
            }),
            None => Ok(()),
        }
    }
}

/// A pass's reply as the session's end, or the refusal the visitor gets.
fn passed_or_refused(passed: PassReply, queue: &QueueId) -> Result<u64, EdgeError> {
    match passed {
        PassReply::Passed { session_ends_at } => Ok(session_ends_at),
        PassReply::TooManyEntries { retry_after_ms } => {
            Err(EdgeError::TooManyEntries { retry_after_ms })
        }
        PassReply::Queue(why) => Err(EdgeError::QueueRequired {
            page: page_url(queue),
            holds: why == QueueNeeded::Holds,
        }),
        PassReply::Unconfigured => Err(EdgeError::QueueClosed),
        PassReply::SoldOut => Err(EdgeError::SoldOut),
    }
}

/// The waiting-room page of `queue` (ids are URL-safe by construction).
fn page_url(queue: &QueueId) -> String {
    format!("/queue?queue={queue}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_given_back_unless_refused_or_forwarded() {
        assert_eq!(Course::Unspent.settlement(), Settlement::Nothing);
        assert_eq!(Course::InDoubt.settlement(), Settlement::GiveBack);
        assert_eq!(Course::Spent.settlement(), Settlement::GiveBack);
        let forwarded = Course::Forwarded {
            outcome: Outcome::NoAnswer,
            latency_ms: 12,
            units: 0,
        };
        assert_eq!(
            forwarded.settlement(),
            Settlement::Settle {
                outcome: Outcome::NoAnswer,
                latency_ms: 12,
                units: 0,
            }
        );
    }

    #[test]
    fn the_room_is_named_by_its_queue() {
        let queue = QueueId::new("drop-1").unwrap();
        assert_eq!(page_url(&queue), "/queue?queue=drop-1");
    }
}
