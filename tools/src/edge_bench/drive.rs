//! One measured window: `concurrency` loops sending one route's requests
//! to one workerd for a fixed time, every reply checked, and the workerd
//! process's CPU time read from /proc before and after. The loops send as
//! fast as replies come (closed loop), or paced to a total rate, so that
//! every side serves the same load (`--rate`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queuegate_edge::TOKEN_HEADER;
use queuegate_testkit::workerd::process_cpu_time;

/// A route of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `GET /queue/position` of a waiting visitor.
    Position,
    /// `POST /queue/enter` of a new visitor.
    Enter,
    /// `POST /orders` with a valid, active entry token.
    Order,
    /// `GET /queue/position` of a waiting visitor far beyond the near zone
    /// with its signed place cookie: the worker answers from the isolate's
    /// snapshot (`approximate`), without Redis (docs/uncapped-line.md). The
    /// floor answers it with a static JSON reply and no I/O (the cheapest
    /// answer a worker can give).
    FarBack,
}

impl Route {
    /// Its name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Route::Position => "position",
            Route::Enter => "enter",
            Route::Order => "order",
            Route::FarBack => "far-back",
        }
    }

    /// The route of a name in tables and on the command line.
    pub fn from_name(name: &str) -> Option<Route> {
        [Route::Position, Route::Enter, Route::Order, Route::FarBack]
            .into_iter()
            .find(|r| r.name() == name)
    }
}

/// The worker or the floor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The built queuegate worker.
    Worker,
    /// The plain-JS floor (same I/O, no checks).
    Floor,
    /// Another build of the worker (`--variant DIR`), checked like the
    /// worker: the n-th directory given.
    Variant(usize),
}

impl Side {
    /// The worker or one of its other builds (not the floor).
    pub fn is_worker(self) -> bool {
        !matches!(self, Side::Floor)
    }
}

/// The headers a visitor's request carries to say who it is: a `cookie`
/// (the visitor cookie, a place cookie) and, signed in, an
/// `authorization` bearer JWT.
pub type Credentials = Vec<(&'static str, String)>;

/// What the loops send: waiting visitors' credentials, far-back visitors'
/// with their places, and admitted visitors' cookies with their tokens
/// (each order spends one).
#[derive(Debug, Clone)]
pub struct Visitors {
    /// Waiting visitors' credentials (no place cookie: every poll takes
    /// the exact path).
    pub waiting: Arc<Vec<Credentials>>,
    /// Credentials of visitors far beyond the near zone: their identity
    /// and the signed place cookie.
    pub far_back: Arc<Vec<Credentials>>,
    /// `Cookie` header values and tokens of admitted visitors.
    pub admitted: Arc<Vec<(String, String)>>,
    /// The next unspent admitted visitor.
    pub next_admitted: Arc<AtomicUsize>,
}

/// One window's result.
#[derive(Debug, Clone, Default)]
pub struct Window {
    /// Replies that were right for the route.
    pub ok: u64,
    /// Replies that were not (status, body) or transport errors.
    pub failed: u64,
    /// The first wrong reply, for the report.
    pub first_failure: Option<String>,
    /// Right far-back replies of a worker that were not `approximate`
    /// (answered by the position script: no fresh snapshot at hand).
    pub not_approximate: u64,
    /// Latency of each right reply (ms).
    pub latencies_ms: Vec<f64>,
    /// Wall time of the window.
    pub wall: Duration,
    /// CPU time workerd used during it (user + system).
    pub cpu: Duration,
    /// Redis commands the gateway ran during it, by name (filled in by
    /// the caller, which reads the gateway's counters around the window).
    pub redis_commands: BTreeMap<String, u64>,
    /// Commands Redis itself ran between two readings of `INFO
    /// commandstats` around the window (every client's, a script's inner
    /// commands included; filled in by the caller).
    pub redis_calls: u64,
    /// The time between those two readings.
    pub redis_span: Duration,
}

/// How fast the loops send.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Load {
    /// Loops, each with one request in flight at most.
    pub concurrency: usize,
    /// Requests a second over all loops (None: each loop sends its next
    /// request when the last reply is in).
    pub rate: Option<f64>,
}

/// Runs one window against the workerd at `base` (process `pid`).
pub async fn window(
    http: &reqwest::Client,
    (base, pid, side): (&str, u32, Side),
    route: Route,
    visitors: &Visitors,
    load: Load,
    duration: Duration,
) -> Window {
    let concurrency = load.concurrency.max(1);
    let cpu_before = process_cpu_time(pid).unwrap_or_default();
    let started = Instant::now();
    let end = started + duration;
    let failed = Arc::new(AtomicU64::new(0));
    let not_approximate = Arc::new(AtomicU64::new(0));
    let first_failure = Arc::new(Mutex::new(None));
    let mut tasks = Vec::with_capacity(concurrency);
    for lane in 0..concurrency {
        let (http, visitors) = (http.clone(), visitors.clone());
        let (failed, first_failure) = (failed.clone(), first_failure.clone());
        let not_approximate = not_approximate.clone();
        let base = base.to_string();
        // Paced: each loop's turn every `concurrency / rate` seconds, the
        // loops' turns spread over that period. A side too slow for the
        // rate sends late, never in a burst to catch up (its req/s shows it).
        let mut pace = load.rate.filter(|r| *r > 0.0).map(|rate| {
            let period = Duration::from_secs_f64(concurrency as f64 / rate);
            let first = tokio::time::Instant::from_std(started)
                + period.mul_f64(lane as f64 / concurrency as f64);
            let mut pace = tokio::time::interval_at(first, period);
            pace.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            pace
        });
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut i = lane;
            while Instant::now() < end {
                if let Some(pace) = pace.as_mut() {
                    pace.tick().await;
                    if Instant::now() >= end {
                        break;
                    }
                }
                let Some(request) = build(&http, &base, side, route, &visitors, i) else {
                    break; // no unspent token left
                };
                i += concurrency;
                let sent = Instant::now();
                match check(side, route, request.send().await).await {
                    Ok(approximate) => {
                        latencies.push(sent.elapsed().as_secs_f64() * 1e3);
                        if !approximate {
                            not_approximate.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Err(why) => {
                        failed.fetch_add(1, Ordering::Relaxed);
                        if let Ok(mut first) = first_failure.lock() {
                            first.get_or_insert(why);
                        }
                    }
                }
            }
            latencies
        }));
    }
    let mut latencies_ms = Vec::new();
    for t in tasks {
        latencies_ms.extend(t.await.unwrap_or_default());
    }
    let wall = started.elapsed();
    // An order's settle runs after its reply (waitUntil): let it finish
    // inside this window's CPU reading. Nothing else is sent meanwhile.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let cpu = process_cpu_time(pid)
        .unwrap_or_default()
        .saturating_sub(cpu_before);
    let first_failure = first_failure.lock().ok().and_then(|mut f| f.take());
    Window {
        ok: latencies_ms.len() as u64,
        failed: failed.load(Ordering::Relaxed),
        first_failure,
        not_approximate: not_approximate.load(Ordering::Relaxed),
        latencies_ms,
        wall,
        cpu,
        redis_commands: BTreeMap::new(),
        redis_calls: 0,
        redis_span: Duration::ZERO,
    }
}

fn build(
    http: &reqwest::Client,
    base: &str,
    side: Side,
    route: Route,
    visitors: &Visitors,
    i: usize,
) -> Option<reqwest::RequestBuilder> {
    Some(match route {
        Route::Position => with(
            http.get(format!("{base}/queue/position")),
            &visitors.waiting[i % visitors.waiting.len()],
        ),
        Route::FarBack => with(
            http.get(format!("{base}/queue/position")),
            &visitors.far_back[i % visitors.far_back.len()],
        ),
        Route::Enter => http.post(format!("{base}/queue/enter")),
        Route::Order if !side.is_worker() => http.post(format!("{base}/orders")),
        Route::Order => {
            let n = visitors.next_admitted.fetch_add(1, Ordering::Relaxed);
            let (cookie, token) = visitors.admitted.get(n)?;
            http.post(format!("{base}/orders"))
                .header("cookie", cookie)
                .header(TOKEN_HEADER, token)
        }
    })
}

/// `request` with a visitor's credentials.
pub fn with(mut request: reqwest::RequestBuilder, who: &Credentials) -> reqwest::RequestBuilder {
    for (name, value) in who {
        request = request.header(*name, value);
    }
    request
}

/// The worker must give each route its right answer; the floor only has to
/// answer (it checks nothing, so its order reaches the shop unsigned). Ok
/// holds whether a worker's far-back reply was `approximate` (true for
/// every other reply).
async fn check(
    side: Side,
    route: Route,
    reply: reqwest::Result<reqwest::Response>,
) -> Result<bool, String> {
    let resp = reply.map_err(|e| format!("transport: {e}"))?;
    let status = resp.status().as_u16();
    let body = resp.text().await.map_err(|e| format!("body: {e}"))?;
    let json = serde_json::from_str::<serde_json::Value>(&body).ok();
    let waiting = status == 200 && json.as_ref().is_some_and(|b| b["state"] == "waiting");
    let ok = match (side, route) {
        (Side::Floor, Route::Order) => status < 500,
        (_, Route::Position | Route::Enter | Route::FarBack) => waiting,
        (_, Route::Order) => status == 201,
    };
    if ok {
        Ok(route != Route::FarBack
            || side == Side::Floor
            || json.is_some_and(|b| b["approximate"] == true))
    } else {
        Err(format!(
            "{} {}: {status} {body}",
            side_name(side),
            route.name()
        ))
    }
}

fn side_name(side: Side) -> String {
    match side {
        Side::Worker => "worker".into(),
        Side::Floor => "floor".into(),
        Side::Variant(n) => format!("variant {n}"),
    }
}
