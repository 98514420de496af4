//! The worker's own cost, measured where it runs: the built worker served
//! by the `workerd` binary directly (no wrangler, no Node, no proxy), beside
//! a plain-JS floor worker with the same I/O ([`floor.js`](floor.js)), both
//! in front of the same gateway, Redis and demo shop, driven in alternating
//! windows so the noisy machine treats both alike. Per route it reports the
//! workerd process's CPU time per request (from /proc), requests/s and
//! latency, and the worker ÷ floor CPU ratio.
//!
//! * [`drive`] — one measured window.

pub mod drive;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{ensure, Context};
use queuegate_edge::cookie::VISITOR_COOKIE;
use queuegate_edge::identity;
use queuegate_shared::guard::EntryGuard;
use queuegate_shared::ops::{Admit, AdmitReply, Configure, Enter, Position};
use queuegate_shared::token::{EntryToken, Grant};
use queuegate_shared::{Operation, Prefix, QueueId, QueueKeys, QueueState, Settings};
use queuegate_testkit::gateway::Gateway;
use queuegate_testkit::measure::percentile;
use queuegate_testkit::workerd::{Script, Workerd};
use queuegate_testkit::{RedisServer, Wrangler, IDENTITY_SECRET, ORIGIN_SECRET};
use redis::aio::MultiplexedConnection;

pub use drive::{Route, Side, Visitors, Window};

/// The floor worker's source.
pub const FLOOR_JS: &str = include_str!("floor.js");

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Waiting visitors whose positions are asked.
    pub waiting: usize,
    /// Concurrent requests.
    pub concurrency: usize,
    /// Length of one window.
    pub window: Duration,
    /// Windows per side and route (worker and floor alternate).
    pub rounds: usize,
    /// Unmeasured warm-up per side and route.
    pub warmup: Duration,
    /// Admitted visitors prepared for the order windows (each order spends one).
    pub orders: usize,
    /// Routes to measure.
    pub routes: Vec<Route>,
    /// Other builds of the worker served beside it (directories holding
    /// `index.js` and `index_bg.wasm`), measured in the same alternation:
    /// compares changes within one run on a noisy machine.
    pub variants: Vec<PathBuf>,
}

impl Default for Options {
    /// The load: 500 waiting, 64 concurrent, 2 × 10 s alternating.
    fn default() -> Self {
        Options {
            waiting: 500,
            concurrency: 64,
            window: Duration::from_secs(10),
            rounds: 2,
            warmup: Duration::from_secs(1),
            orders: 40_000,
            routes: vec![Route::Position, Route::Enter, Route::Order],
            variants: Vec::new(),
        }
    }
}

/// The figures of one route on one side, over all its windows.
#[derive(Debug, Clone)]
pub struct Figures {
    /// The route.
    pub route: Route,
    /// Worker, floor or variant.
    pub side: Side,
    /// The side's name in tables (a variant's directory).
    pub label: String,
    /// Right replies.
    pub ok: u64,
    /// Wrong replies and transport errors.
    pub failed: u64,
    /// The first wrong reply, if any.
    pub first_failure: Option<String>,
    /// Right replies per second of window.
    pub rps: f64,
    /// Median latency (ms).
    pub p50_ms: f64,
    /// 99th percentile latency (ms).
    pub p99_ms: f64,
    /// workerd CPU time per right reply (ms).
    pub cpu_ms_per_request: f64,
}

/// The settings the bench's queue runs with: room for every enter, every
/// prepared admission and slot, the address budget off, long token lives
/// (no scheduler runs: nothing moves unless the bench moves it).
pub fn bench_settings() -> Settings {
    Settings {
        max_waiting: 10_000_000,
        max_active: 10_000_000,
        entry_budget_per_minute: 0,
        token_ttl_ms: 3_600_000,
        status_ttl_ms: 3_700_000,
        activation_jitter_ms: 0,
        abandon_after_ms: 3_600_000,
        // The routes measured are a waiting visitor's poll and a new
        // place in a line: nobody passes straight through an idle room.
        idle_passthrough: false,
        ..Settings::default()
    }
}

/// Everything the bench runs against.
#[derive(Debug)]
pub struct Rig {
    /// The built worker under workerd.
    pub worker: Workerd,
    /// The floor under workerd.
    pub floor: Workerd,
    /// Other builds of the worker under workerd, with their directories.
    pub variants: Vec<(PathBuf, Workerd)>,
    /// The gateway both call.
    pub gateway: Gateway,
    /// Redis.
    pub redis: RedisServer,
    /// The queue's keys.
    pub keys: QueueKeys,
    conn: MultiplexedConnection,
}

impl Rig {
    /// Starts Redis, the gateway, the demo shop, the queue `main` (open,
    /// [`bench_settings`]), the worker with the entry challenge off (the
    /// guard's cost is measured apart: `guard_cost`, `pow_cost`) and the floor.
    pub async fn start() -> anyhow::Result<Rig> {
        Rig::start_with(&[]).await
    }

    /// [`Rig::start`] with other builds of the worker beside it (each
    /// with the worker's vars and secrets).
    pub async fn start_with(variants: &[PathBuf]) -> anyhow::Result<Rig> {
        let redis = RedisServer::start();
        let gateway = Gateway::builder(&redis.url())
            .env("RUST_LOG", "redis_rest=info")
            .start();
        let shop_url = crate::demo_origin::start(ORIGIN_SECRET).await?;
        let client = redis::Client::open(redis.url())?;
        let mut conn = client.get_multiplexed_async_connection().await?;
        let keys = QueueKeys::new(&Prefix::default(), &QueueId::new("main")?);
        let settings = bench_settings();
        settings.validate()?;
        queuegate_scheduler::engine::run(
            &mut conn,
            &Configure {
                keys: &keys,
                settings: &settings,
                initial_state: QueueState::Open,
            },
        )
        .await?;
        let worker = Wrangler::local(&gateway, &shop_url)
            .var("ENTRY_CHALLENGE", "off")
            .var("COOKIE_SECURE", "false");
        let mut started = Vec::new();
        for dir in variants {
            let (config, script) = (worker.clone(), Script::BuiltIn(dir.clone()));
            let w = tokio::task::spawn_blocking(move || config.start_workerd_from(script)).await?;
            started.push((dir.clone(), w));
        }
        let worker = tokio::task::spawn_blocking(move || worker.start_workerd()).await?;
        let user = queuegate_shared::UserId::new("floor-visitor")?;
        let floor_body = serde_json::to_string(&rest_body(&Position {
            keys: &keys,
            user: &user,
        }))?;
        let bindings: BTreeMap<String, String> = [
            ("UPSTASH_REDIS_REST_URL", gateway.url()),
            ("UPSTASH_REDIS_REST_TOKEN", gateway.token().to_string()),
            ("ORIGIN_URL", shop_url.clone()),
            ("FLOOR_BODY", floor_body),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let floor = tokio::task::spawn_blocking(move || {
            Workerd::start(&Script::Js(FLOOR_JS.into()), &bindings, "/queue/health")
        })
        .await?;
        Ok(Rig {
            worker,
            floor,
            variants: started,
            gateway,
            redis,
            keys,
            conn,
        })
    }

    /// `waiting` visitors entered through the worker (their cookies), and
    /// `admitted` visitors entered and admitted straight in Redis, each
    /// with a minted visitor cookie and its active token.
    pub async fn visitors(
        &mut self,
        http: &reqwest::Client,
        waiting: usize,
        admitted: usize,
    ) -> anyhow::Result<Visitors> {
        let admitted = self.admitted(admitted).await?;
        let mut cookies = Vec::with_capacity(waiting);
        for _ in 0..waiting {
            let resp = http
                .post(format!("{}/queue/enter", self.worker.url()))
                .send()
                .await?;
            let cookie = resp
                .headers()
                .get_all("set-cookie")
                .iter()
                .filter_map(|v| v.to_str().ok())
                .find_map(queuegate_testkit::set_cookie_pair)
                .map(|(name, value)| format!("{name}={value}"))
                .context("enter set no cookie")?;
            ensure!(resp.status() == 200, "enter answered {}", resp.status());
            cookies.push(cookie);
        }
        Ok(Visitors {
            waiting: Arc::new(cookies),
            admitted: Arc::new(admitted),
            next_admitted: Arc::new(AtomicUsize::new(0)),
        })
    }

    async fn admitted(&mut self, n: usize) -> anyhow::Result<Vec<(String, String)>> {
        let mut users = Vec::with_capacity(n);
        for i in 0..n {
            let mut random = [0u8; 16];
            random[..8].copy_from_slice(&(i as u64).to_le_bytes());
            random[8..].copy_from_slice(&0x6265_6e63_685f_6f72u64.to_le_bytes());
            let (user, cookie) = identity::mint_visitor(IDENTITY_SECRET.as_bytes(), random);
            users.push((user, format!("{VISITOR_COOKIE}={cookie}")));
        }
        for (k, chunk) in users.chunks(1_000).enumerate() {
            let mut pipe = redis::pipe();
            for (j, (user, _)) in chunk.iter().enumerate() {
                let enter = Enter {
                    keys: &self.keys,
                    user,
                    guard: EntryGuard::default(),
                    token: None,
                };
                if k == 0 && j == 0 {
                    // Loads the script, so the pipelined EVALSHAs find it.
                    queuegate_scheduler::engine::run(&mut self.conn, &enter).await?;
                    continue;
                }
                queuegate_scheduler::engine::pipe_evalsha(&mut pipe, &enter.invocation());
                pipe.ignore();
            }
            let _: () = pipe.query_async(&mut self.conn).await?;
        }
        let owner = "edge-bench";
        let _: () = redis::cmd("SET")
            .arg(self.keys.lock())
            .arg(owner)
            .query_async(&mut self.conn)
            .await?;
        let settings = bench_settings();
        let mut left = n;
        while left > 0 {
            let batch = left.min(settings.sweep_limit as usize);
            let grants: Vec<Grant> = (0..batch)
                .map(|i| {
                    let mut b = [0u8; 16];
                    b[..8].copy_from_slice(&((left - i) as u64).to_le_bytes());
                    b[8..].copy_from_slice(&queuegate_testkit::now_ms().to_le_bytes());
                    Grant {
                        token: EntryToken::from_random(b),
                        jitter_ms: 0,
                    }
                })
                .collect();
            let reply = queuegate_scheduler::engine::run(
                &mut self.conn,
                &Admit {
                    keys: &self.keys,
                    owner,
                    allowance: batch as u64,
                    settings: &settings,
                    rate_estimate: None,
                    // Admits the whole crowd at once: the shared rate
                    // bucket must not bind.
                    rate_in_force: 1e9,
                    grants: &grants,
                },
            )
            .await?;
            let AdmitReply::Ran(counts) = reply else {
                anyhow::bail!("admit: not the lease owner");
            };
            ensure!(counts.admitted == batch as u64, "admitted {counts:?}");
            left -= batch;
        }
        let mut out = Vec::with_capacity(n);
        for chunk in users.chunks(1_000) {
            let mut pipe = redis::pipe();
            for (user, _) in chunk {
                pipe.cmd("GET").arg(self.keys.token(user));
            }
            let tokens: Vec<Option<String>> = pipe.query_async(&mut self.conn).await?;
            for ((_, cookie), token) in chunk.iter().zip(tokens) {
                let token = token.context("an admitted visitor has no token key")?;
                let token = token.split('|').next().unwrap_or_default().to_string();
                out.push((cookie.clone(), token));
            }
        }
        Ok(out)
    }
}

/// The REST body of an operation, as the worker sends it.
fn rest_body<O: Operation>(op: &O) -> Vec<String> {
    let inv = op.invocation();
    let mut parts = vec![
        "EVALSHA".to_string(),
        inv.script.sha1().to_string(),
        inv.keys.len().to_string(),
    ];
    parts.extend(inv.keys);
    parts.extend(inv.args);
    parts
}

/// Runs the whole measurement on a started rig: per route, a warm-up per
/// side, then `rounds` × (worker window, floor window).
pub async fn measure(
    rig: &mut Rig,
    http: &reqwest::Client,
    opts: &Options,
) -> anyhow::Result<Vec<Figures>> {
    let orders = if opts.routes.contains(&Route::Order) {
        opts.orders
    } else {
        0
    };
    let visitors = rig.visitors(http, opts.waiting, orders).await?;
    let worker_pid = rig.worker.pid().context("workerd (worker) has exited")?;
    let floor_pid = rig.floor.pid().context("workerd (floor) has exited")?;
    let mut sides = vec![
        (
            Side::Worker,
            "worker (wasm)".to_string(),
            rig.worker.url(),
            worker_pid,
        ),
        (
            Side::Floor,
            "floor (JS)".to_string(),
            rig.floor.url(),
            floor_pid,
        ),
    ];
    for (n, (dir, w)) in rig.variants.iter().enumerate() {
        let pid = w.pid().context("workerd (variant) has exited")?;
        let label = format!("worker @{}", dir.display());
        sides.push((Side::Variant(n), label, w.url(), pid));
    }
    let mut out = Vec::new();
    for &route in &opts.routes {
        let mut windows: Vec<Vec<Window>> = vec![Vec::new(); sides.len()];
        for (side, _, url, pid) in &sides {
            drive::window(
                http,
                url,
                *pid,
                *side,
                route,
                &visitors,
                opts.concurrency,
                opts.warmup,
            )
            .await;
        }
        for _ in 0..opts.rounds {
            for (k, (side, _, url, pid)) in sides.iter().enumerate() {
                let w = drive::window(
                    http,
                    url,
                    *pid,
                    *side,
                    route,
                    &visitors,
                    opts.concurrency,
                    opts.window,
                )
                .await;
                windows[k].push(w);
            }
        }
        for (k, (side, label, _, _)) in sides.iter().enumerate() {
            out.push(figures(route, *side, label, &windows[k]));
        }
    }
    Ok(out)
}

fn figures(route: Route, side: Side, label: &str, windows: &[Window]) -> Figures {
    let ok: u64 = windows.iter().map(|w| w.ok).sum();
    let wall: f64 = windows.iter().map(|w| w.wall.as_secs_f64()).sum();
    let cpu: f64 = windows.iter().map(|w| w.cpu.as_secs_f64()).sum();
    let mut lat: Vec<f64> = windows
        .iter()
        .flat_map(|w| w.latencies_ms.iter().copied())
        .collect();
    lat.sort_by(f64::total_cmp);
    Figures {
        route,
        side,
        label: label.to_string(),
        ok,
        failed: windows.iter().map(|w| w.failed).sum(),
        first_failure: windows.iter().find_map(|w| w.first_failure.clone()),
        rps: ok as f64 / wall.max(1e-9),
        p50_ms: percentile(&lat, 50.0),
        p99_ms: percentile(&lat, 99.0),
        cpu_ms_per_request: cpu * 1e3 / ok.max(1) as f64,
    }
}

/// The markdown table of a run.
pub fn table(figures: &[Figures]) -> String {
    let mut s = String::from(
        "| route | side | requests | failed | req/s | p50 ms | p99 ms | CPU ms/request | CPU ÷ floor |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for f in figures {
        let floor = figures
            .iter()
            .find(|g| g.route == f.route && g.side == Side::Floor)
            .map_or(f64::NAN, |g| g.cpu_ms_per_request);
        s.push_str(&format!(
            "| {} | {} | {} | {} | {:.0} | {:.1} | {:.1} | {:.3} | {:.2}× |\n",
            f.route.name(),
            f.label,
            f.ok,
            f.failed,
            f.rps,
            f.p50_ms,
            f.p99_ms,
            f.cpu_ms_per_request,
            f.cpu_ms_per_request / floor,
        ));
    }
    s
}
