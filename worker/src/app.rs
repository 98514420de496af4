//! The worker's own routes (enter, position, health, the page) and the token
//! gate in front of the protected ones; [`crate::routes`] says which runs.
//! Each queue operation is one Redis REST call.

use std::sync::Arc;

use queuegate_edge::cookie::{cookie, set_cookie, PLACE_COOKIE, TOKEN_COOKIE};
use queuegate_edge::identity::Key;
use queuegate_edge::place::{self, Held};
use queuegate_edge::{altcha, navigation, url, TOKEN_HEADER};
use queuegate_shared::guard::{EntryGuard, GuardCheck};
use queuegate_shared::ops::{
    Bypass, BypassCall, BypassReply, ChallengeTerms, Consume, ConsumeReply, Enter, EnterReply,
    Observed, Outcome, Pass, PassReply, Position, QueueNeeded, Refusal, Settle, Unconsume,
};
use queuegate_shared::policy::retry_after_header_seconds;
use queuegate_shared::snapshot::{self, SlotAnswer, Snapshot};
use queuegate_shared::state::{StateReply, UserState};
use queuegate_shared::token::EntryToken;
use queuegate_shared::{QueueId, QueueKeys, Settings, UserId};
use worker::{Context, Date, Env};

use crate::config::{EdgeConfig, IdentityMode, QueueChoiceError};
use crate::error::EdgeError;
use crate::guard;
use crate::health::{Health, HealthCache};
use crate::http::{self, js_err, Request, Response};
use crate::origin::{self, Forwarded};
use crate::rest::{RestClient, RestError};
use crate::routes::{self, Handler, Target};
use crate::snapshots::SnapshotCache;
use crate::visitor::{self, Visitor};

/// The worker: configuration and the Redis client, built once per isolate.
#[derive(Debug)]
pub struct App {
    config: EdgeConfig,
    redis: Option<RestClient>,
    health: HealthCache,
    snapshots: SnapshotCache,
}

impl App {
    /// Reads the configuration from vars and secrets.
    pub fn from_env(env: &Env) -> Result<App, EdgeError> {
        let config = EdgeConfig::from_lookup(|name| {
            env.secret(name)
                .map(|s| s.to_string())
                .or_else(|_| env.var(name).map(|v| v.to_string()))
                .ok()
        })
        .map_err(|e| EdgeError::Misconfigured(e.to_string()))?;
        let redis = config
            .redis
            .clone()
            .map(|r| RestClient::new(r, config.redis_timeout_ms));
        Ok(App {
            config,
            redis,
            health: HealthCache::default(),
            snapshots: SnapshotCache::default(),
        })
    }

    /// Routes one request. A request that found Redis down or over its
    /// plan's limit tells the health answer at once.
    pub async fn handle(&'static self, req: Request, ctx: &Context) -> Result<Response, EdgeError> {
        let result = self.route(req, ctx).await;
        if let Err(e) = &result {
            self.note_health(e);
        }
        result
    }

    /// An outage a request met is the health answer at once.
    fn note_health(&self, e: &EdgeError) {
        let seen = match e {
            EdgeError::RedisUnavailable(_) => Health::Unreachable,
            EdgeError::RedisLimited(_) => Health::Limited,
            _ => return,
        };
        self.health.saw(Date::now().as_millis(), seen);
    }

    async fn route(&'static self, req: Request, ctx: &Context) -> Result<Response, EdgeError> {
        let method = req.method();
        // workers-rs maps a method it does not know to GET: tell them apart.
        let known = req
            .inner()
            .method()
            .eq_ignore_ascii_case(method.as_ref())
            .then_some(&method);
        let target = routes::resolve(&req.path(), known, |m, p| self.config.is_protected(m, p))?;
        match target {
            Target::Queue(Handler::Health) => self.health().await,
            Target::Queue(Handler::Enter) => self.enter(req).await,
            Target::Queue(Handler::Challenge) => self.challenge(&req).await,
            Target::Queue(Handler::Position) => self.position(&req).await,
            Target::Queue(Handler::Page) => self.page(&req).await,
            Target::Queue(Handler::Bypass) => self.open_bypass(&req).await,
            Target::Gate => {
                // A person (a navigation or a form, Accept preferring HTML)
                // whose remedy is the queue is sent to the room with the
                // path they wanted; JSON clients keep the JSON refusal.
                let person =
                    navigation::prefers_html(req.headers().get("accept").ok().flatten().as_deref());
                let wanted = url::path_and_query(&req.inner().url()).to_string();
                let path = req.path();
                match self.gate(req, ctx).await {
                    Err(e) if person && e.sends_to_room() => {
                        let queue = self
                            .config
                            .protecting_queue(method.as_ref(), &path)
                            .ok_or(EdgeError::NotFound)?;
                        http::see_other(&navigation::room_location(queue.as_str(), &wanted))
                    }
                    other => other,
                }
            }
            Target::Forward => self.forward(req).await,
        }
    }

    /// The REST client, or `misconfigured` without its secrets.
    pub(crate) fn redis(&self) -> Result<&RestClient, EdgeError> {
        self.redis.as_ref().ok_or_else(|| {
            EdgeError::Misconfigured(
                "UPSTASH_REDIS_REST_URL / UPSTASH_REDIS_REST_TOKEN are not set".into(),
            )
        })
    }

    async fn page(&self, req: &Request) -> Result<Response, EdgeError> {
        let (queue, _) = self.queue(req)?;
        // Where Continue leads: the path the visitor was sent here from
        // (checked to be a path on this site), else CONTINUE_URL.
        let own_url = req.inner().url();
        let back = url::query_param(&own_url, "return")
            .map(navigation::return_target)
            .transpose()
            .map_err(|e| EdgeError::BadRequest(e.to_string()))?;
        let turnstile = self.config.guard.turnstile.as_ref();
        let accept_language = req.headers().get("accept-language").ok().flatten();
        let choice = queuegate_edge::lang::choose(accept_language.as_deref(), crate::page::CODES);
        let files = crate::page::files(choice.lang).await?;
        let html = crate::page::render(
            &files,
            &self.config.page,
            queue.as_str(),
            back.as_deref(),
            turnstile,
            &choice,
        );
        let resp = Response::from_html(html).map_err(js_err)?;
        let h = resp.headers();
        http::set(h, "cache-control", "no-store")?;
        http::set(
            h,
            "content-security-policy",
            &crate::page::content_security_policy(
                &files.template,
                turnstile.map(|t| t.script_origin()),
            ),
        )?;
        http::set(h, "x-content-type-options", "nosniff")?;
        http::set(h, "referrer-policy", "no-referrer")?;
        http::set(h, "content-language", choice.lang)?;
        http::set(h, "vary", "accept-language")?;
        Ok(resp)
    }

    async fn health(&self) -> Result<Response, EdgeError> {
        let Some(redis) = &self.redis else {
            return http::json(503, &serde_json::json!({ "redis": "not_configured" }));
        };
        let health = match self.health.reuse_or_start(Date::now().as_millis()) {
            Some(known) => known,
            None => {
                let found = match redis.ping().await {
                    Ok(()) => Health::Ok,
                    Err(RestError::Limit(why)) => {
                        worker::console_error!("health: redis plan limit reached: {why}");
                        Health::Limited
                    }
                    Err(e) => {
                        worker::console_error!("health: redis {e:?}");
                        Health::Unreachable
                    }
                };
                self.health.record(found);
                found
            }
        };
        let status = if health == Health::Ok { 200 } else { 503 };
        http::json(status, &serde_json::json!({ "redis": health.as_str() }))
    }

    /// The queue named by `?queue=`, or the default one.
    fn queue(&self, req: &Request) -> Result<(QueueId, QueueKeys), EdgeError> {
        let own_url = req.inner().url();
        let id = self
            .config
            .queue(url::query_param(&own_url, "queue"))
            .map_err(|e| match e {
                QueueChoiceError::Invalid(why) => EdgeError::InvalidQueue(why),
                QueueChoiceError::Unknown => EdgeError::UnknownQueue,
            })?;
        let keys = QueueKeys::new(&self.config.prefix, &id);
        Ok((id, keys))
    }

    async fn identify(&self, req: &Request, mint: bool) -> Result<Visitor, EdgeError> {
        visitor::identify(&self.config.identity, self.config.cookie_secure, req, mint).await
    }

    /// Joins the line. What a new place must pass is read and checked here
    /// where no Redis is needed; the script applies it only to a visitor
    /// without a place, in the same round trip.
    async fn enter(&self, mut req: Request) -> Result<Response, EdgeError> {
        let (queue, keys) = self.queue(&req)?;
        let visitor = self.identify(&req, true).await?;
        let brought = guard::read(&mut req).await?;
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
        let token = fresh_token()?;
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
                let resp =
                    http::error_response(&e).map_err(|e| EdgeError::Internal(e.to_string()))?;
                http::append(resp.headers(), "set-cookie", cookie)?;
                return Ok(resp);
            }
            (Err(e), None) => return Err(e),
        };
        match reply {
            EnterReply::Entered(observed) => {
                let place = Place::of(self.place_key(), req.cookies(), &queue, &visitor.user);
                self.state_reply(&queue, observed, visitor.new_cookie, Some(place))
            }
            EnterReply::Full { .. } => Err(EdgeError::QueueFull),
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

    /// A fresh ALTCHA challenge for this queue, at the difficulty level in
    /// force (raised as the line, pre-queue and draw fill), which it
    /// carries signed.
    async fn challenge(&self, req: &Request) -> Result<Response, EdgeError> {
        let (queue, keys) = self.queue(req)?;
        let terms = self
            .redis()?
            .run(&ChallengeTerms { keys: &keys })
            .await?
            .ok_or(EdgeError::QueueClosed)?;
        let mut random = [0u8; 20];
        getrandom::getrandom(&mut random)
            .map_err(|e| EdgeError::Internal(format!("getrandom: {e}")))?;
        let (salt, number) = random.split_at(12);
        let mut n = [0u8; 8];
        n.copy_from_slice(number);
        let mut salt_bytes = [0u8; 12];
        salt_bytes.copy_from_slice(salt);
        let challenge = altcha::create(
            &self.config.guard.challenge_secret,
            &queue,
            altcha::Issue {
                level: terms.level,
                max_number: terms.max_number,
                expires_at_ms: Date::now().as_millis() + terms.ttl_ms,
            },
            salt_bytes,
            u64::from_le_bytes(n),
        );
        http::json(200, &challenge)
    }

    /// A visitor far from the head is answered from its place cookie and
    /// the isolate's snapshot, without Redis (docs/uncapped-line.md);
    /// everyone else, and whenever the snapshot cannot be trusted, by the
    /// position script.
    async fn position(&self, req: &Request) -> Result<Response, EdgeError> {
        let (queue, keys) = self.queue(req)?;
        let visitor = self.identify(req, false).await?;
        let place = Place::of(self.place_key(), req.cookies(), &queue, &visitor.user);
        match place.held {
            // A ticket in the exact head is exact for good: no snapshot is
            // read for it. Behind the head the snapshot answers, but near
            // the head only while the visitor's last Redis request is
            // recent (it must prove it is alive).
            Some(Held::Ticket { ticket, seen_ms })
                if self
                    .snapshots
                    .exact_front(queue.as_str())
                    .is_none_or(|front| ticket > front) =>
            {
                let now = Date::now().as_millis();
                if let Some(state) = self.snapshot(&queue, &keys, now).await.and_then(|s| {
                    s.far_back(ticket, now)
                        .or_else(|| s.near(ticket, seen_ms, now))
                }) {
                    return self.reply(&queue, state, None);
                }
            }
            // A pre-queued visitor learns its drawn place from the draw's
            // seed, not from Redis; once the draw is over it holds the
            // ticket the scheduler placed it on, signed into its cookie.
            Some(Held::Slot { draw, slot }) => {
                let now = Date::now().as_millis();
                if let Some(snap) = self.snapshot(&queue, &keys, now).await {
                    match snap.slot(draw, slot, now, random_unit()?) {
                        Some(SlotAnswer::State(state)) => return self.reply(&queue, state, None),
                        Some(SlotAnswer::Ticket(ticket)) => {
                            if let Some(state) = snap.far_back(ticket, now) {
                                let resp = self.reply(&queue, state, None)?;
                                // Never asked Redis with this ticket: seen 0,
                                // so near the head it does at once.
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
                        }
                        None => {}
                    }
                }
            }
            _ => {}
        }
        // An exact poll reads no snapshot for its answer; the isolate's
        // snapshot is still refreshed on the usual schedule (one HMGET per
        // REFRESH_MS), so the operator's notice reaches these replies too.
        let _ = self.snapshot(&queue, &keys, Date::now().as_millis()).await;
        let observed = self
            .redis()?
            .run(&Position {
                keys: &keys,
                user: &visitor.user,
            })
            .await?;
        self.state_reply(&queue, observed, None, Some(place))
    }

    /// The `Set-Cookie` of a place cookie holding `value`.
    fn place_cookie(&self, value: &str) -> String {
        set_cookie(
            PLACE_COOKIE,
            value,
            crate::visitor::VISITOR_COOKIE_MAX_AGE_S,
            self.config.cookie_secure,
        )
    }

    /// The key place cookies are signed with: the identity secret.
    fn place_key(&self) -> &Key {
        match &self.config.identity {
            IdentityMode::Anonymous { secret } | IdentityMode::Jwt { secret, .. } => secret,
        }
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

    /// 200 with the state JSON; `Retry-After` while waiting; the token as
    /// an HttpOnly cookie once admitted.
    /// A waiting visitor's ticket is signed into its place cookie, when
    /// the cookie does not hold it already.
    fn state_reply(
        &self,
        queue: &QueueId,
        observed: Observed,
        visitor_cookie: Option<String>,
        place: Option<Place<'_>>,
    ) -> Result<Response, EdgeError> {
        let place_cookie = match (&observed, place) {
            // Every exact reply re-signs the place with the time of this
            // Redis request: near the head, the edge answers from its
            // snapshot until that is liveness_ms old.
            (Observed::Waiting(w), Some(p)) => Some(self.place_cookie(&place::mint(
                self.place_key(),
                queue,
                p.user,
                w.ticket,
                Date::now().as_millis(),
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
            Observed::PreQueue(_) => random_unit()?,
            _ => 0.0,
        };
        let state = observed.into_user_state(&Settings::default(), spread);
        let resp = self.reply(queue, state, visitor_cookie)?;
        if let Some(c) = place_cookie {
            http::append(resp.headers(), "set-cookie", &c)?;
        }
        Ok(resp)
    }

    /// 200 with a state's JSON, its `Retry-After` and cookies.
    fn reply(
        &self,
        queue: &QueueId,
        state: UserState,
        visitor_cookie: Option<String>,
    ) -> Result<Response, EdgeError> {
        let reply = StateReply {
            state,
            queue: queue.to_string(),
            notice: self.snapshots.notice(queue.as_str()),
        };
        let resp = http::json(200, &reply)?;
        let state = reply.state;
        let headers = resp.headers();
        if let Some(c) = visitor_cookie {
            http::append(headers, "set-cookie", &c)?;
        }
        match &state {
            UserState::Waiting { retry_after_ms, .. }
            | UserState::PreQueue { retry_after_ms, .. } => {
                http::set(
                    headers,
                    "retry-after",
                    &retry_after_header_seconds(*retry_after_ms).to_string(),
                )?;
            }
            UserState::Admitted {
                token, expires_at, ..
            } => {
                let now = Date::now().as_millis();
                let max_age = expires_at.saturating_sub(now) / 1_000;
                let c = set_cookie(
                    TOKEN_COOKIE,
                    token,
                    max_age.max(1),
                    self.config.cookie_secure,
                );
                http::append(headers, "set-cookie", &c)?;
            }
            _ => {}
        }
        Ok(resp)
    }

    /// A protected route: spend the token, forward, settle afterwards. A
    /// request without a token passes at once while the room is idle (idle
    /// passthrough); otherwise it is told to join the queue.
    /// `GET /queue/bypass?queue=&key=[&return=]`: a live bypass link sets
    /// its cookie and leads on (to `return`, else `CONTINUE_URL`); any
    /// other is 403 `bypass_invalid`, and a key that is not a key's shape
    /// is refused before Redis is asked.
    async fn open_bypass(&self, req: &Request) -> Result<Response, EdgeError> {
        let (queue, _) = self.queue(req)?;
        let own_url = req.inner().url();
        let back = url::query_param(&own_url, "return")
            .map(navigation::return_target)
            .transpose()
            .map_err(|e| EdgeError::BadRequest(e.to_string()))?;
        let key = url::query_param(&own_url, "key").unwrap_or_default();
        let parts = queuegate_shared::bypass::parts(key).ok_or_else(|| {
            EdgeError::BadRequest("`key` is not a bypass key (qgb_ and 64 hex digits)".into())
        })?;
        let keys = QueueKeys::new(&self.config.prefix, &queue);
        let reply = self
            .redis()?
            .run(&Bypass {
                keys: &keys,
                call: BypassCall::Check(&parts),
            })
            .await?;
        let BypassReply::Live { expires_ms, .. } = reply else {
            return Err(EdgeError::BypassInvalid(format!("{reply:?}")));
        };
        let max_age = expires_ms.saturating_sub(Date::now().as_millis()) / 1000;
        let cookie = queuegate_edge::cookie::set_cookie(
            queuegate_edge::cookie::BYPASS_COOKIE,
            &format!("{}.{key}", queue.as_str()),
            max_age.max(1),
            self.config.cookie_secure,
        );
        let location = back.unwrap_or_else(|| self.config.page.continue_url.clone());
        let resp = Response::text(303, "text/plain; charset=utf-8", "See Other\n".into());
        http::set(resp.headers(), "location", &location)?;
        http::set(resp.headers(), "cache-control", "no-store")?;
        http::set(resp.headers(), "referrer-policy", "no-referrer")?;
        http::append(resp.headers(), "set-cookie", &cookie)?;
        Ok(resp)
    }

    /// A live bypass cookie for `queue` in `cookies`: the link's id after
    /// counting this use, or None (no cookie, another queue's, or a link
    /// no longer live: the request then goes through the gate as any).
    async fn bypass_in(
        &self,
        redis: &RestClient,
        keys: &QueueKeys,
        cookies: &str,
    ) -> Result<Option<String>, EdgeError> {
        let Some(value) = cookie(cookies, queuegate_edge::cookie::BYPASS_COOKIE) else {
            return Ok(None);
        };
        let Some(parts) = value
            .split_once('.')
            .filter(|(q, _)| *q == keys.queue().as_str())
            .and_then(|(_, key)| queuegate_shared::bypass::parts(key))
        else {
            return Ok(None);
        };
        let reply = redis
            .run(&Bypass {
                keys,
                call: BypassCall::Use(&parts),
            })
            .await?;
        Ok(matches!(reply, BypassReply::Live { .. }).then_some(parts.id))
    }

    async fn gate(&'static self, req: Request, ctx: &Context) -> Result<Response, EdgeError> {
        // The route's own queue, never `?queue=`: a visitor must not pick
        // the emptiest line to pass through, or use another line's token.
        // `?queue=` is still checked as on every route (400 / 404).
        self.queue(&req)?;
        let queue = self
            .config
            .protecting_queue(req.method().as_ref(), &req.path())
            .ok_or(EdgeError::NotFound)?
            .clone();
        let keys = QueueKeys::new(&self.config.prefix, &queue);
        let cookies = req
            .headers()
            .get("cookie")
            .ok()
            .flatten()
            .unwrap_or_default();
        let presented = req
            .headers()
            .get(TOKEN_HEADER)
            .ok()
            .flatten()
            .or_else(|| cookie(&cookies, TOKEN_COOKIE).map(str::to_string));
        let redis = self.redis()?.clone();
        // Staff with a live bypass link pass without a token or a slot; the
        // origin still gets the signed identity (`bypass-<id>`).
        if let Some(id) = self.bypass_in(&redis, &keys, &cookies).await? {
            let user = UserId::new(&format!("bypass-{id}"))
                .map_err(|e| EdgeError::Internal(format!("bypass user: {e}")))?;
            return self
                .send(req, Some((&queue, &user)))
                .await
                .reply
                .map(Response::from);
        }
        let (visitor, token) = match presented {
            Some(presented) => {
                let visitor = self.identify(&req, false).await?;
                let token = EntryToken::parse(presented.trim()).ok_or(EdgeError::TokenInvalid)?;
                let consumed = redis
                    .run(&Consume {
                        keys: &keys,
                        user: &visitor.user,
                        token: &token,
                    })
                    .await;
                match consumed
                    .inspect_err(|_| give_back(ctx, &redis, &keys, &visitor.user, &token))?
                {
                    ConsumeReply::Accepted => {}
                    ConsumeReply::Invalid => return Err(EdgeError::TokenInvalid),
                    ConsumeReply::Used => return Err(EdgeError::TokenUsed),
                    ConsumeReply::Early { wait_ms } => {
                        return Err(EdgeError::NotYetActive { wait_ms })
                    }
                    ConsumeReply::Unconfigured => return Err(EdgeError::QueueClosed),
                }
                (visitor, token)
            }
            None => {
                // A visitor without an identity gets one: the slot and the
                // settle need a user, and the order is theirs (the cookie
                // comes with the origin's reply). The pass spends the
                // address's entry budget; a failed order frees its slot at
                // once (no one holds its token to retry with).
                let visitor = self.identify(&req, true).await?;
                let token = fresh_token()?;
                let address = guard::address(&req);
                let passed = redis
                    .run(&Pass {
                        keys: &keys,
                        user: &visitor.user,
                        token: &token,
                        address: Some(&address),
                    })
                    .await;
                match passed
                    .inspect_err(|_| give_back(ctx, &redis, &keys, &visitor.user, &token))?
                {
                    PassReply::Passed => {}
                    PassReply::TooManyEntries { retry_after_ms } => {
                        return Err(EdgeError::TooManyEntries { retry_after_ms })
                    }
                    PassReply::Queue(why) => {
                        return Err(EdgeError::QueueRequired {
                            page: page_url(&queue),
                            holds: why == QueueNeeded::Holds,
                        })
                    }
                    PassReply::Unconfigured => return Err(EdgeError::QueueClosed),
                }
                (visitor, token)
            }
        };
        // The forward and the settle run in `wait_until`, not in this
        // handler: on the edge a client that hangs up cancels its handler,
        // and an order the shop took must still be settled (ordered, or
        // its token back) rather than left in flight. The reply comes back
        // through a channel; `wait_until` work gets 30 s after a hang-up.
        let (reply_to, reply) = futures_channel::oneshot::channel();
        let (user, new_cookie) = (visitor.user, visitor.new_cookie);
        let app = self;
        ctx.wait_until(async move {
            let Forwarded {
                reply,
                in_hand,
                sent,
            } = app.send(req, Some((&queue, &user))).await;
            // The clock moves across I/O in Workers, so this is the origin's
            // latency from the moment it could have the whole request (settle
            // counts it for the scheduler's origin control; a slow upload is
            // the visitor's, not the origin's). An origin that answered before
            // the body was read whole is timed from sending.
            let answered = Date::now().as_millis();
            let latency_ms = in_hand.or(sent).map_or(0, |at| answered.saturating_sub(at));
            // 2xx/3xx: the order is done. 4xx/5xx or no answer: the same token
            // comes back for one retry window (see docs/edge.md); a passed
            // request's slot is freed instead. No answer to a body that never
            // arrived whole is the visitor's failure (a 4xx for the origin
            // control: not counted).
            let outcome = match (&reply, in_hand) {
                (Ok(resp), _) => Outcome::of_status(resp.status_code()),
                (Err(_), Some(_)) => Outcome::NoAnswer,
                (Err(_), None) => Outcome::ClientError,
            };
            let forwarded = reply.map(Response::from);
            let forwarded = match (forwarded, &new_cookie) {
                (Ok(resp), Some(c)) => http::append(resp.headers(), "set-cookie", c).map(|()| resp),
                (other, _) => other,
            };
            // The visitor may be gone: the settle runs all the same.
            let _ = reply_to.send(forwarded);
            let settle = Settle {
                keys: &keys,
                user: &user,
                token: &token,
                outcome,
                latency_ms,
            };
            if let Err(e) = redis.run(&settle).await {
                worker::console_error!("settle failed: {e}");
            }
        });
        reply.await.unwrap_or_else(|_| {
            Err(EdgeError::Internal(
                "the forward ended without a reply".into(),
            ))
        })
    }

    async fn forward(&self, req: Request) -> Result<Response, EdgeError> {
        self.send(req, None).await.reply.map(Response::from)
    }

    async fn send(&self, req: Request, passed: Option<(&QueueId, &UserId)>) -> Forwarded {
        let config = &self.config;
        origin::forward(
            config.origin.as_deref(),
            &config.origin_secret,
            config.origin_timeout_ms,
            req.into_worker(),
            passed,
        )
        .await
    }
}

/// After a consume or pass whose reply was lost (no answer in time, a
/// broken connection, a reply we cannot read), the script may still have
/// run and left the visitor in flight for a request we never forward:
/// `unconsume` gives the token back (a no-op unless it is in flight with
/// exactly this token), after the reply, in `wait_until`. The visitor
/// gets the error (503 `unavailable`, Retry-After) and retries with the
/// same token. Nothing secret is logged: only the error's class.
fn give_back(
    ctx: &Context,
    redis: &RestClient,
    keys: &QueueKeys,
    user: &UserId,
    token: &EntryToken,
) {
    let (redis, keys, user, token) = (redis.clone(), keys.clone(), user.clone(), token.clone());
    ctx.wait_until(async move {
        let back = Unconsume {
            keys: &keys,
            user: &user,
            token: &token,
        };
        if let Err(e) = redis.run(&back).await {
            worker::console_error!("unconsume failed: {e}");
        }
    });
}

/// A fresh entry token from the runtime's CSPRNG.
fn fresh_token() -> Result<EntryToken, EdgeError> {
    let mut bytes = [0u8; 16];
    getrandom::getrandom(&mut bytes).map_err(|e| EdgeError::Internal(format!("getrandom: {e}")))?;
    Ok(EntryToken::from_random(bytes))
}

/// A uniform draw in `[0, 1)` from the runtime's CSPRNG.
fn random_unit() -> Result<f64, EdgeError> {
    let mut bytes = [0u8; 8];
    getrandom::getrandom(&mut bytes).map_err(|e| EdgeError::Internal(format!("getrandom: {e}")))?;
    // 53 random bits: every value is exact in an f64.
    Ok((u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64)
}

/// The waiting-room page of `queue` (ids are URL-safe by construction).
fn page_url(queue: &QueueId) -> String {
    format!("/queue?queue={queue}")
}

/// The place cookie a request brought, checked once: the visitor it must
/// belong to, and what it holds if it is this visitor's, for this queue,
/// and signed by us.
struct Place<'a> {
    user: &'a UserId,
    held: Option<Held>,
}

impl<'a> Place<'a> {
    fn of(key: &Key, cookies: &str, queue: &QueueId, user: &'a UserId) -> Place<'a> {
        Place {
            user,
            held: cookie(cookies, PLACE_COOKIE).and_then(|v| place::verify(key, v, queue, user)),
        }
    }
}
