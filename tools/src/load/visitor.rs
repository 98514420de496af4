//! One simulated visitor: arrives on the spike's schedule, enters, polls
//! (obeying `retryAfterMs`, or every 2 s for comparison), may leave, and
//! orders once admitted. Everything it saw is kept in a [`Record`]; a
//! [`Tally`] shared by a crowd counts it live.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use queuegate_edge::altcha;
use queuegate_edge::{CLIENT_IP_HEADER, TOKEN_HEADER};
use queuegate_shared::guard::MAX_LEVEL;
use queuegate_shared::{QueueKeys, UserId};
use queuegate_testkit::{now_ms, set_cookie_pair};
use redis::aio::MultiplexedConnection;
use reqwest::{Client, Method, StatusCode};
use serde_json::Value as Json;

use super::tally::Tally;

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
    /// Refused at entry (429 full or 503 closed).
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
    /// Epoch ms of the tick that issued its token (from its status key).
    pub issued_ms: Option<u64>,
    /// Epoch ms when it first saw "admitted".
    pub seen_admitted_ms: Option<u64>,
    /// `POST /orders` requests answered.
    pub order_requests: u32,
    /// Requests that failed (network, 5xx, unreadable reply).
    pub errors: u32,
    /// Every request sent, in order.
    pub sent: Vec<Sent>,
    /// How it ended.
    pub outcome: Outcome,
}

/// Retries of an order the origin failed (5xx): its token is restored for
/// a retry window, and a shopper presses the button again.
const ORDER_RETRIES: u32 = 3;
/// The pause before such a retry.
const ORDER_RETRY_AFTER: Duration = Duration::from_secs(2);

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
            issued_ms: None,
            seen_admitted_ms: None,
            order_requests: 0,
            errors: 0,
            sent: Vec::new(),
            outcome: Outcome::Deadline,
        },
        start,
    };
    let arrive = start + plan.arrive_after;
    if arrive < shared.end {
        tokio::time::sleep_until(arrive.into()).await;
        v.record.outcome = v.wait_and_order(&plan).await;
    }
    match v.record.outcome {
        Outcome::Ordered => v.tally(|t| &t.ordered),
        Outcome::Left => v.tally(|t| &t.left),
        // On a status line a full or closed queue reads as an error.
        Outcome::Refused => v.tally(|t| &t.errors),
        Outcome::Deadline | Outcome::Other => {}
    }
    v.record
}

struct Visitor<'a> {
    http: &'a Client,
    shared: &'a Shared,
    cookie: String,
    /// Sent as `CF-Connecting-IP`.
    ip: String,
    /// A solved challenge for the next enter.
    altcha: Option<String>,
    record: Record,
    start: Instant,
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

    /// Counts a failed request.
    fn error(&mut self) {
        self.record.errors += 1;
        self.tally(|t| &t.errors);
    }

    async fn wait_and_order(&mut self, plan: &Plan) -> Outcome {
        let (mut solved, mut stale) = (0, 0);
        let mut reply = loop {
            match self.send(Route::Enter, None).await {
                Some(r) if r.status.is_success() => break r,
                // A new place needs a proof of work: solve one as the page
                // would (a few tries: a challenge may expire or be refused).
                Some(r) if wants_challenge(&r.body) && solved < 3 => {
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
                }
                Some(r) if matches!(r.status.as_u16(), 429 | 503) => {
                    self.record.enters += 1;
                    return Outcome::Refused;
                }
                Some(_) => self.error(),
                None => {}
            }
            if !self.pause(Duration::from_secs(1)).await {
                return Outcome::Deadline;
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
                _ => return Outcome::Other,
            }
        }
    }

    /// One position request, sent again every second until one is
    /// answered; None at the deadline.
    async fn poll(&mut self) -> Option<Reply> {
        let reply = loop {
            match self.send(Route::Position, None).await {
                Some(r) if r.status.is_success() => break r,
                Some(_) => self.error(),
                None => {}
            }
            if !self.pause(Duration::from_secs(1)).await {
                return None;
            }
        };
        self.record.polls += 1;
        self.tally(|t| &t.polls);
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

    /// One request; `None` (counted as an error) unless a JSON reply came
    /// back with a status below 500 (or any status, for an order).
    async fn send(&mut self, route: Route, token: Option<&str>) -> Option<Reply> {
        let sent = Instant::now();
        let reply = self.exchange(route, token).await;
        self.record.sent.push(Sent {
            at_s: (sent - self.start).as_secs_f32(),
            latency_ms: match reply {
                Some(_) => sent.elapsed().as_secs_f32() * 1e3,
                None => f32::NAN,
            },
            route,
        });
        reply
    }

    async fn exchange(&mut self, route: Route, token: Option<&str>) -> Option<Reply> {
        let (method, path) = match route {
            Route::Enter => (Method::POST, "/queue/enter"),
            Route::Position => (Method::GET, "/queue/position"),
            Route::Order => (Method::POST, "/orders"),
            Route::Challenge => (Method::GET, "/queue/challenge"),
        };
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.shared.base))
            .timeout(Duration::from_secs(10))
            .header(CLIENT_IP_HEADER, &self.ip);
        if route == Route::Enter {
            if let Some(a) = self.altcha.take() {
                req = req.header(altcha::HEADER, a);
            }
        }
        if !self.cookie.is_empty() {
            req = req.header("cookie", &self.cookie);
        }
        if let Some(t) = token {
            req = req
                .header(TOKEN_HEADER, t)
                .header("content-type", "application/json")
                .body(r#"{"item":"ticket"}"#);
        }
        let Ok(resp) = req.send().await else {
            self.error();
            return None;
        };
        let visitor_cookie = visitor_cookie(&resp);
        if let Some(c) = visitor_cookie {
            self.cookie = c;
        }
        let status = resp.status();
        let retry_after_s = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()?.parse().ok());
        // An order's 5xx is still a reply (the visitor may retry); it counts
        // as an error all the same.
        let server_error = status.as_u16() >= 500;
        if server_error && route == Route::Order {
            self.error();
        }
        match resp.json::<Json>().await {
            Ok(body) if !server_error || route == Route::Order => Some(Reply {
                status,
                retry_after_s,
                body,
            }),
            _ => {
                self.error();
                None
            }
        }
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
    resp.headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| set_cookie_pair(v.to_str().ok()?))
        .find(|(name, _)| *name == "qg_visitor")
        .map(|(name, value)| format!("{name}={value}"))
}

#[cfg(test)]
mod tests {
    use super::*;

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
