//! One simulated visitor: arrives on the spike's schedule, enters, polls
//! (obeying `retryAfterMs`, or every 2 s for comparison), may leave, and
//! orders once admitted. Everything it saw is kept in a [`Record`]; a
//! [`Tally`] shared by a crowd counts it live.
//!
//! It behaves like the waiting-room page (`worker/assets/waiting-room.html`)
//! where load is concerned: one request in flight at a time, a browser's
//! patience for an answer ([`REQUEST_TIMEOUT`]), the page's backoff after a
//! failed request ([`backoff`]: 2, 4, 8, 16, then every 30 s) and the
//! server's `Retry-After` after a refusal. An overloaded stack therefore
//! sees fewer requests, not a retry storm, and the failures and slow
//! answers show in the figures.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use queuegate_edge::altcha;
use queuegate_edge::cookie::{PLACE_COOKIE, VISITOR_COOKIE};
use queuegate_edge::{CLIENT_IP_HEADER, TOKEN_HEADER};
use queuegate_shared::guard::MAX_LEVEL;
use queuegate_shared::{QueueKeys, UserId};
use queuegate_testkit::{now_ms, set_cookie_pair};
use redis::aio::MultiplexedConnection;
use reqwest::{Client, Method, StatusCode};
use serde_json::Value as Json;

use super::tally::{Failure, Tally};

/// How a visitor paces its polls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Polling {
    /// Waits `retryAfterMs` (±10 % jitter, as the waiting-room page does).
    Adaptive,
    /// Waits a fixed interval whatever the server says.
    Fixed,
}

impl Polling {
    /// Label for figures and charts.
    pub fn label(self) -> &'static str {
        match self {
            Polling::Adaptive => "adaptive (retryAfter)",
            Polling::Fixed => "fixed 2 s",
        }
    }
}

/// What one visitor will do.
#[derive(Debug, Clone)]
pub struct Plan {
    /// When it arrives, after the spike starts.
    pub arrive_after: Duration,
    /// Its polling.
    pub polling: Polling,
    /// `Some(n)`: it gives up after `n` polls while still waiting.
    pub leave_after_polls: Option<u32>,
    /// Seed of its poll jitter.
    pub seed: u64,
}

/// Settings every visitor shares.
#[derive(Debug, Clone)]
pub struct Shared {
    /// The worker's URL.
    pub base: String,
    /// Where to read the tick time that admitted a visitor (None: its
    /// `issued_ms` stays unknown).
    pub status: Option<StatusReader>,
    /// Interval of [`Polling::Fixed`].
    pub fixed_interval: Duration,
    /// Nobody sends anything after this.
    pub end: Instant,
    /// Live counters to bump as visitors go (None: the records suffice).
    pub tally: Option<Arc<Tally>>,
}

/// Redis straight over TCP (not through the gateway), to read the tick time
/// that admitted a visitor: the status key says `ISSUED|<ms>` until the
/// token is consumed, and `activateAt` is that time plus jitter.
#[derive(Debug, Clone)]
pub struct StatusReader {
    /// The connection.
    pub redis: MultiplexedConnection,
    /// The queue's keys.
    pub keys: QueueKeys,
}

/// Which edge route a request went to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `POST /queue/enter`.
    Enter,
    /// `GET /queue/position`.
    Position,
    /// `POST /orders`.
    Order,
    /// `GET /queue/challenge`, when a new place needs a proof of work.
    Challenge,
}

/// One request a visitor sent.
#[derive(Debug, Clone, Copy)]
pub struct Sent {
    /// Seconds after the spike began.
    pub at_s: f32,
    /// Until the reply's body was read (ms); NaN when it failed.
    pub latency_ms: f32,
    /// The route.
    pub route: Route,
    /// Why it failed, if it did.
    pub failure: Option<Failure>,
}

/// How a visitor's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Still running at the deadline.
    Deadline,
    /// The origin accepted its order.
    Ordered,
    /// Gave up while waiting, on purpose.
    Left,
    /// Refused at entry (line or address share full, budget spent, queue
    /// closed) [`REFUSAL_PATIENCE`] times in a row.
    Refused,
    /// Ended in another state (expired, abandoned, …) or an order failed.
    Other,
}

/// What one visitor saw.
#[derive(Debug, Clone)]
pub struct Record {
    /// Its polling.
    pub polling: Polling,
    /// Whether it was planned to leave.
    pub leaver: bool,
    /// Epoch ms of the first enter reply.
    pub entered_ms: Option<u64>,
    /// Position in the first enter reply (when waiting).
    pub position_at_entry: Option<u64>,
    /// The first enter reply was `pre_queue` (before a scheduled opening).
    pub pre_queued: bool,
    /// `etaSeconds` in the first enter reply.
    pub eta_at_entry_s: Option<u64>,
    /// `POST /queue/enter` requests answered.
    pub enters: u32,
    /// `GET /queue/position` requests answered while waiting for admission.
    pub polls: u32,
    /// Of those, the ones answered at the edge far from the head
    /// (`approximate`, no Redis call).
    pub approximate_polls: u32,
    /// Epoch ms of the tick that issued its token (from its status key).
    pub issued_ms: Option<u64>,
    /// Epoch ms when it first saw "admitted".
    pub seen_admitted_ms: Option<u64>,
    /// `POST /orders` requests answered.
    pub order_requests: u32,
    /// Requests that failed (see [`Failure`]), and orders the origin
    /// failed.
    pub errors: u32,
    /// Of those, the ones that timed out.
    pub timeouts: u32,
    /// Every request sent, in order.
    pub sent: Vec<Sent>,
    /// How it ended.
    pub outcome: Outcome,
    /// The state it was told last, when it ended in one it does not wait
    /// out (`abandoned`, `expired`, …): with [`Outcome::Other`].
    pub ended_in: Option<String>,
    /// The error codes of the 4xx replies it was given after entering (a
    /// poll or an order refused: a place or a token the stack no longer
    /// knows), in order.
    pub refused_with: Vec<String>,
}

/// Retries of an order the origin failed (5xx): its token is restored for
/// a retry window, and a shopper presses the button again.
const ORDER_RETRIES: u32 = 3;
/// The pause before such a retry.
const ORDER_RETRY_AFTER: Duration = Duration::from_secs(2);

/// How long a browser waits for an answer: the page sets no timeout of
/// its own, and Chromium and Firefox give up on a request after 300 s.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(300);

/// The page's wait after its `failures`-th failed request in a row (no
/// answer, or no JSON): `Math.min(30, 2 ** failures)` seconds.
pub fn backoff(failures: u32) -> Duration {
    Duration::from_secs(2u64.saturating_pow(failures).min(30))
}

/// The page's wait after a refusal without `Retry-After`.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(5);

/// Refusals at entry in a row a visitor sits through (each after its
/// `Retry-After`, as the page waits) before it gives up. The page itself
/// retries for as long as the tab stays open; people do not.
pub const REFUSAL_PATIENCE: u32 = 3;

/// A small deterministic generator (splitmix64), so a run is repeatable
/// without a dependency on `rand`.
pub fn splitmix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A uniform number in `[0, 1)` from `seed`.
pub fn unit(seed: u64) -> f64 {
    (splitmix(seed) >> 11) as f64 / (1u64 << 53) as f64
}

/// Whether item `i` is one of an evenly spread `share` of items: true each
/// time the running count `i × share` steps up (share 0.5: every other one).
pub fn spread(i: u64, share: f64) -> bool {
    ((i + 1) as f64 * share).floor() > (i as f64 * share).floor()
}

/// Runs every plan's visitor at once, each on its own task; their records
/// in the plans' order.
pub async fn run_all(
    http: &Client,
    shared: &Arc<Shared>,
    start: Instant,
    plans: Vec<Plan>,
) -> anyhow::Result<Vec<Record>> {
    let tasks: Vec<_> = plans
        .into_iter()
        .map(|plan| {
            let (http, shared) = (http.clone(), shared.clone());
            tokio::spawn(async move { run(&http, &shared, start, plan).await })
        })
        .collect();
    let mut records = Vec::with_capacity(tasks.len());
    for t in tasks {
        records.push(t.await?);
    }
    Ok(records)
}

/// Runs one visitor from its arrival to its end (or `shared.end`).
pub async fn run(http: &Client, shared: &Shared, start: Instant, plan: Plan) -> Record {
    let mut v = Visitor {
        http,
        shared,
        cookie: String::new(),
        place: String::new(),
        // Each simulated person comes from an address of their own, as a
        // crowd does: the per-address budget sees a crowd, not one client.
        ip: synthetic_address(plan.seed),
        altcha: None,
        record: Record {
            polling: plan.polling,
            leaver: plan.leave_after_polls.is_some(),
            entered_ms: None,
            position_at_entry: None,
            pre_queued: false,
            eta_at_entry_s: None,
            enters: 0,
            polls: 0,
            approximate_polls: 0,
            issued_ms: None,
            seen_admitted_ms: None,
            order_requests: 0,
            errors: 0,
            timeouts: 0,
            sent: Vec::new(),
            outcome: Outcome::Deadline,
            ended_in: None,
            refused_with: Vec::new(),
        },
        start,
        failures: 0,
        outage_wait: None,
    };
    let arrive = start + plan.arrive_after;
    if arrive < shared.end {
        tokio::time::sleep_until(arrive.into()).await;
        v.record.outcome = v.wait_and_order(&plan).await;
    }
    match v.record.outcome {
        Outcome::Ordered => v.tally(|t| &t.ordered),
        Outcome::Left => v.tally(|t| &t.left),
        Outcome::Refused => v.tally(|t| &t.refused),
        Outcome::Deadline | Outcome::Other => {}
    }
    v.record
}

struct Visitor<'a> {
    http: &'a Client,
    shared: &'a Shared,
    cookie: String,
    /// `qg_place=…`, kept as a browser keeps it: far from the head the
    /// edge answers polls from it (docs/uncapped-line.md).
    place: String,
    /// Sent as `CF-Connecting-IP`.
    ip: String,
    /// A solved challenge for the next enter.
    altcha: Option<String>,
    record: Record,
    start: Instant,
    /// Failed requests in a row without a JSON answer (the page's backoff
    /// counter).
    failures: u32,
    /// After a 5xx with a JSON body, the page waits its `Retry-After`
    /// instead (5 s without one).
    outage_wait: Option<Duration>,
}

/// A reply the visitor understood.
struct Reply {
    status: StatusCode,
    retry_after_s: Option<u64>,
    body: Json,
}

impl Visitor<'_> {
    /// Bumps one live counter, if a tally is kept.
    fn tally(&self, counter: fn(&Tally) -> &AtomicU64) {
        if let Some(t) = &self.shared.tally {
            counter(t).fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts a reply that is not the one a healthy stack gives (an
    /// unexpected refusal, an order the origin failed): an error, though
    /// the request was answered.
    fn error(&mut self) {
        self.record.errors += 1;
    }

    /// Waits as the page does after a failed request; false at the
    /// deadline.
    async fn back_off(&mut self) -> bool {
        let wait = self
            .outage_wait
            .take()
            .unwrap_or_else(|| backoff(self.failures));
        self.pause(wait).await
    }

    /// Waits a refusal's `Retry-After` (5 s without one); false at the
    /// deadline.
    async fn retry_after(&mut self, reply: &Reply) -> bool {
        let wait = reply
            .retry_after_s
            .map_or(DEFAULT_RETRY_AFTER, Duration::from_secs);
        self.pause(wait).await
    }

    async fn wait_and_order(&mut self, plan: &Plan) -> Outcome {
        let (mut solved, mut stale, mut refused) = (0, 0, 0);
        let mut reply = loop {
            let Some(r) = self.send(Route::Enter, None).await else {
                if !self.back_off().await {
                    return Outcome::Deadline;
                }
                continue;
            };
            match r {
                r if r.status.is_success() => break r,
                // A new place needs a proof of work: solve one as the page
                // would (a few tries: a challenge may expire or be refused).
                r if wants_challenge(&r.body) && solved < 3 => {
                    // An enter request all the same (one script call).
                    self.record.enters += 1;
                    // A stale solution is no failed try: the line grew
                    // while it was solved, and the level can rise only so
                    // often.
                    if is_stale(&r.body) && stale < MAX_LEVEL {
                        stale += 1;
                    } else {
                        solved += 1;
                    }
                    if self.solve().await {
                        continue;
                    }
                    if !self.back_off().await {
                        return Outcome::Deadline;
                    }
                }
                // The line or the address's share is full, the budget spent
                // or the queue closed: the page waits Retry-After and asks
                // again; a person does so a few times.
                r if is_refusal(&r.body) => {
                    self.record.enters += 1;
                    refused += 1;
                    if refused >= REFUSAL_PATIENCE || !self.retry_after(&r).await {
                        return Outcome::Refused;
                    }
                }
                r => {
                    self.record.enters += 1;
                    self.error();
                    if !self.retry_after(&r).await {
                        return Outcome::Deadline;
                    }
                }
            }
        };
        self.record.enters += 1;
        self.record.entered_ms = Some(now_ms());
        self.tally(|t| &t.entered);
        self.record.position_at_entry = reply.body["position"].as_u64();
        self.record.pre_queued = reply.body["state"] == "pre_queue";
        self.record.eta_at_entry_s = reply.body["etaSeconds"].as_u64();
        let mut poll = 0u64;
        loop {
            match reply.body["state"].as_str() {
                Some("waiting") => {
                    if plan
                        .leave_after_polls
                        .is_some_and(|n| self.record.polls >= n)
                    {
                        return Outcome::Left;
                    }
                    poll += 1;
                    let wait = match plan.polling {
                        Polling::Fixed => self.shared.fixed_interval,
                        Polling::Adaptive => {
                            let ms = reply.body["retryAfterMs"].as_u64().unwrap_or(1_000) as f64;
                            let jitter = 0.9 + 0.2 * unit(plan.seed ^ poll.rotate_left(32));
                            Duration::from_millis((ms * jitter) as u64)
                        }
                    };
                    if !self.pause(wait).await {
                        return Outcome::Deadline;
                    }
                    let Some(next) = self.poll().await else {
                        return Outcome::Deadline;
                    };
                    reply = next;
                }
                // Before a scheduled opening (or while the draw places this
                // visitor): no position yet. Poll exactly when told: the
                // server already spreads the first polls after the opening,
                // and that spread is what a drop run measures.
                Some("pre_queue") => {
                    let ms = reply.body["retryAfterMs"].as_u64().unwrap_or(1_000);
                    if !self.pause(Duration::from_millis(ms)).await {
                        return Outcome::Deadline;
                    }
                    let Some(next) = self.poll().await else {
                        return Outcome::Deadline;
                    };
                    reply = next;
                }
                Some("admitted") => return self.order(&reply.body).await,
                other => {
                    self.record.ended_in = Some(other.unwrap_or("(none)").to_string());
                    return Outcome::Other;
                }
            }
        }
    }

    /// One position request, sent again (after the page's backoff, or the
    /// refusal's `Retry-After`) until one is answered; None at the
    /// deadline.
    async fn poll(&mut self) -> Option<Reply> {
        let reply = loop {
            let waited = match self.send(Route::Position, None).await {
                Some(r) if r.status.is_success() => break r,
                Some(r) => {
                    self.error();
                    self.retry_after(&r).await
                }
                None => self.back_off().await,
            };
            if !waited {
                return None;
            }
        };
        self.record.polls += 1;
        self.tally(|t| &t.polls);
        if reply.body["approximate"] == true {
            self.record.approximate_polls += 1;
            self.tally(|t| &t.approximate_polls);
        }
        Some(reply)
    }

    async fn order(&mut self, admitted: &Json) -> Outcome {
        self.record.seen_admitted_ms = Some(now_ms());
        self.tally(|t| &t.admitted);
        self.record.issued_ms = self.issued_at().await;
        let token = admitted["token"].as_str().unwrap_or_default().to_string();
        let activate = admitted["activateAt"].as_u64().unwrap_or_default();
        let early = Duration::from_millis(activate.saturating_sub(now_ms()));
        if !self.pause(early).await {
            return Outcome::Deadline;
        }
        let mut failures = 0;
        loop {
            let Some(r) = self.send(Route::Order, Some(&token)).await else {
                // The page is gone by now: the shop's own page sends the
                // order, and a shopper whose click failed clicks again.
                if failures < ORDER_RETRIES && self.back_off().await {
                    failures += 1;
                    continue;
                }
                return Outcome::Other;
            };
            self.record.order_requests += 1;
            match r.status.as_u16() {
                200..=299 => return Outcome::Ordered,
                // The origin failed and the token is given back: try again
                // a little later, as a shopper would.
                500..=599 if failures < ORDER_RETRIES => {
                    failures += 1;
                    if !self.pause(ORDER_RETRY_AFTER).await {
                        return Outcome::Deadline;
                    }
                }
                429 => {
                    let wait = Duration::from_secs(r.retry_after_s.unwrap_or(1));
                    if !self.pause(wait).await {
                        return Outcome::Deadline;
                    }
                }
                _ => return Outcome::Other,
            }
        }
    }

    /// The admitting tick's time from `status:<uid>` (an `ISSUED` record); the
    /// user id is the visitor cookie's value before its signature.
    async fn issued_at(&self) -> Option<u64> {
        let reader = self.shared.status.as_ref()?;
        let value = self.cookie.strip_prefix("qg_visitor=")?;
        let user = UserId::new(value.split('.').next()?).ok()?;
        let mut conn = reader.redis.clone();
        let status: Option<String> = redis::cmd("GET")
            .arg(reader.keys.status(&user))
            .query_async(&mut conn)
            .await
            .ok()?;
        queuegate_shared::fields::issued_at(&status?)
    }

    /// Fetches a challenge and solves it off the async threads; false when
    /// none could be had.
    async fn solve(&mut self) -> bool {
        let Some(reply) = self.send(Route::Challenge, None).await else {
            return false;
        };
        if !reply.status.is_success() {
            self.error();
            return false;
        }
        self.altcha = solve_challenge(reply.body).await;
        if self.altcha.is_none() {
            self.error();
        }
        self.altcha.is_some()
    }

    /// Sleeps unless that would pass the deadline; false when it would.
    async fn pause(&self, d: Duration) -> bool {
        let until = Instant::now() + d;
        if until >= self.shared.end {
            return false;
        }
        tokio::time::sleep_until(until.into()).await;
        true
    }

    /// One request, given up after [`REQUEST_TIMEOUT`] (or at the
    /// deadline); `None` when it failed (see [`Failure`]), counted in the
    /// record and the tally either way. An order's 5xx is a reply (the
    /// shopper may retry) and an error all the same.
    async fn send(&mut self, route: Route, token: Option<&str>) -> Option<Reply> {
        let sent = Instant::now();
        let patience = REQUEST_TIMEOUT.min(self.shared.end.saturating_duration_since(sent));
        let result = match tokio::time::timeout(patience, self.exchange(route, token)).await {
            Ok(result) => result,
            Err(_) => Err(Failure::Timeout),
        };
        let latency = sent.elapsed();
        self.record.sent.push(Sent {
            at_s: (sent - self.start).as_secs_f32(),
            latency_ms: match result {
                Ok(_) => latency.as_secs_f32() * 1e3,
                Err(_) => f32::NAN,
            },
            route,
            failure: result.as_ref().err().copied(),
        });
        match result {
            Ok(reply) => {
                self.failures = 0;
                self.outage_wait = None;
                if let Some(t) = &self.shared.tally {
                    t.answered(latency);
                }
                if route == Route::Order && reply.status.is_server_error() {
                    self.error();
                }
                Some(reply)
            }
            Err(failure) => {
                // The page counts a failure only when no JSON came back; a
                // JSON 5xx resets its counter and it waits Retry-After.
                if self.outage_wait.is_none() {
                    self.failures += 1;
                } else {
                    self.failures = 0;
                }
                self.record.errors += 1;
                if failure == Failure::Timeout {
                    self.record.timeouts += 1;
                }
                if let Some(t) = &self.shared.tally {
                    t.failure(failure);
                }
                None
            }
        }
    }

    async fn exchange(&mut self, route: Route, token: Option<&str>) -> Result<Reply, Failure> {
        self.outage_wait = None;
        let (method, path) = match route {
            Route::Enter => (Method::POST, "/queue/enter"),
            Route::Position => (Method::GET, "/queue/position"),
            Route::Order => (Method::POST, "/orders"),
            Route::Challenge => (Method::GET, "/queue/challenge"),
        };
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.shared.base))
            .header(CLIENT_IP_HEADER, &self.ip);
        if route == Route::Enter {
            if let Some(a) = self.altcha.take() {
                req = req.header(altcha::HEADER, a);
            }
        }
        match (self.cookie.is_empty(), self.place.is_empty()) {
            (false, false) => {
                req = req.header("cookie", format!("{}; {}", self.cookie, self.place))
            }
            (false, true) => req = req.header("cookie", &self.cookie),
            _ => {}
        }
        if let Some(t) = token {
            req = req
                .header(TOKEN_HEADER, t)
                .header("content-type", "application/json")
                .body(r#"{"item":"ticket"}"#);
        }
        let resp = req.send().await.map_err(|e| {
            if e.is_timeout() {
                Failure::Timeout
            } else {
                Failure::Network
            }
        })?;
        if let Some(c) = visitor_cookie(&resp) {
            self.cookie = c;
        }
        if let Some(p) = our_cookie(&resp, PLACE_COOKIE) {
            self.place = p;
        }
        let status = resp.status();
        let retry_after_s = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()?.parse().ok());
        let body = resp.json::<Json>().await.map_err(|e| {
            if e.is_timeout() {
                Failure::Timeout
            } else {
                Failure::Unreadable
            }
        })?;
        // (429 is the origin's backpressure, waited out.)
        if status.is_client_error()
            && status != StatusCode::TOO_MANY_REQUESTS
            && matches!(route, Route::Position | Route::Order)
        {
            let code = body["error"].as_str().unwrap_or("(no code)");
            self.record
                .refused_with
                .push(format!("{} {code}", status.as_u16()));
        }
        // A 5xx is a fault, unless it is the queue's own answer (closed)
        // or the origin's to an order (the shopper may retry).
        if status.is_server_error() && route != Route::Order && !is_refusal(&body) {
            self.outage_wait = Some(retry_after_s.map_or(DEFAULT_RETRY_AFTER, Duration::from_secs));
            return Err(Failure::Server);
        }
        Ok(Reply {
            status,
            retry_after_s,
            body,
        })
    }
}

/// Solves a challenge reply off the async threads, as a browser's Web
/// Worker would; the `X-Altcha` value, or None for a reply that is not one.
pub async fn solve_challenge(reply: Json) -> Option<String> {
    let challenge = serde_json::from_value::<altcha::Challenge>(reply).ok()?;
    tokio::task::spawn_blocking(move || {
        altcha::solve(&challenge).map(|n| altcha::payload(&challenge, n))
    })
    .await
    .ok()
    .flatten()
}

/// True when an enter was refused for want of a (fresh) proof of work:
/// none, a bad or used one, or a stale one (the line grew while it was
/// solved, so a harder challenge is in force).
pub fn wants_challenge(body: &Json) -> bool {
    matches!(
        body["error"].as_str(),
        Some(
            "challenge_required"
                | "challenge_expired"
                | "challenge_invalid"
                | "challenge_reused"
                | "challenge_stale"
        )
    )
}

/// True when an enter was refused for a reason the page waits out
/// (`Retry-After`) and asks again: the line or the address's share is full,
/// the address's budget is spent, or the queue is closed.
pub fn is_refusal(body: &Json) -> bool {
    matches!(
        body["error"].as_str(),
        Some("queue_full" | "address_full" | "too_many_entries" | "queue_closed")
    )
}

/// True when an enter was refused for a solution of a lower difficulty
/// level than the one now in force: solve a fresh challenge, no failure.
pub fn is_stale(body: &Json) -> bool {
    body["error"].as_str() == Some("challenge_stale")
}

/// A private IPv4 address from a visitor's seed.
pub fn synthetic_address(seed: u64) -> String {
    let s = splitmix(seed);
    format!("10.{}.{}.{}", (s >> 16) & 255, (s >> 8) & 255, s & 255)
}

/// The `qg_visitor=…` pair a reply sets, ready for a `Cookie` header.
pub fn visitor_cookie(resp: &reqwest::Response) -> Option<String> {
    our_cookie(resp, VISITOR_COOKIE)
}

/// The `name=…` pair a reply sets, ready for a `Cookie` header.
pub fn our_cookie(resp: &reqwest::Response, name: &str) -> Option<String> {
    resp.headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| set_cookie_pair(v.to_str().ok()?))
        .find(|(n, _)| *n == name)
        .map(|(n, value)| format!("{n}={value}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_is_the_pages() {
        let secs: Vec<u64> = (1..=7).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(secs, [2, 4, 8, 16, 30, 30, 30]);
        assert_eq!(backoff(u32::MAX), Duration::from_secs(30));
        // The page's own rule, which this mirrors: if it changes, so must
        // `backoff`.
        let page = include_str!("../../../worker/assets/waiting-room.html");
        assert!(
            page.contains("Math.min(30, 2 ** failures)"),
            "the page's backoff changed"
        );
        assert!(
            page.contains(r#"Number(resp.headers.get("retry-after")) || 5"#),
            "the page's default Retry-After changed"
        );
    }

    #[test]
    fn a_stale_solution_asks_for_a_fresh_challenge() {
        let refusal = |code: &str| serde_json::json!({ "error": code, "message": "…" });
        for code in [
            "challenge_required",
            "challenge_expired",
            "challenge_invalid",
            "challenge_reused",
            "challenge_stale",
        ] {
            assert!(wants_challenge(&refusal(code)), "{code}");
        }
        assert!(is_stale(&refusal("challenge_stale")));
        assert!(!is_stale(&refusal("challenge_reused")));
        assert!(!wants_challenge(&refusal("too_many_entries")));
        assert!(!wants_challenge(&serde_json::json!({ "state": "waiting" })));
    }
}
