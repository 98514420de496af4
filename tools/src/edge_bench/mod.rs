//! The worker's own cost, measured where it runs: the built worker served
//! by the `workerd` binary directly (no wrangler, no Node, no proxy), beside
//! a plain-JS floor worker with the same I/O ([`floor.js`](floor.js); for
//! the far-back route a static JSON reply, the worker's is I/O-free), both
//! in front of the same gateway, Redis and demo shop, driven in alternating
//! windows so the noisy machine treats both alike. Per route it reports the
//! workerd process's CPU time per request (from /proc), requests/s and
//! latency, the worker ÷ floor CPU ratio, and the Redis commands the
//! gateway ran per request; and Redis' own count (`INFO commandstats`,
//! a script's inner commands included) around each window, less the
//! far-back ticker's background measured alone (one window before the
//! route's rounds).
//!
//! `--identity jwt` ([`Identity::Jwt`]) runs the worker signed in: every
//! poll brings an HS256 bearer JWT that the bench, as the shop's login
//! service, minted per visitor.
//!
//! The far-back route ([`Route::FarBack`]) polls visitors far beyond the
//! near zone with their signed place cookies, which the worker answers from
//! its isolate's snapshot of the line without Redis (docs/uncapped-line.md).
//! The bench is the scheduler there: an admit tick with a small rate in
//! force (so the near zone is [`Options::near_zone`] visitors) writes the
//! snapshot, and a tick every [`FAR_BACK_TICK`] (admitting nobody) keeps it
//! fresh through the route's windows. A worker's reply is checked to be
//! `approximate` before the windows, and those that are not are counted.
//!
//! * [`drive`] — one measured window.

pub mod drive;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use queuegate_edge::cookie::{PLACE_COOKIE, VISITOR_COOKIE};
use queuegate_edge::{identity, place};
use queuegate_shared::fields::config;
use queuegate_shared::guard::EntryGuard;
use queuegate_shared::ops::{Admit, AdmitReply, Configure, Enter, Position};
use queuegate_shared::token::{EntryToken, Grant};
use queuegate_shared::{Operation, Prefix, QueueId, QueueKeys, QueueState, Settings, UserId};
use queuegate_testkit::gateway::Gateway;
use queuegate_testkit::measure::percentile;
use queuegate_testkit::visitor::Visitor;
use queuegate_testkit::workerd::{Script, Workerd};
use queuegate_testkit::{RedisServer, Wrangler, IDENTITY_SECRET, ORIGIN_SECRET};
use redis::aio::MultiplexedConnection;
use tokio::task::JoinHandle;

use crate::load::counters::Counters;

pub use drive::{Credentials, Route, Side, Visitors, Window};

/// The bench's queue.
const QUEUE: &str = "main";

/// The lease owner the bench's admit ticks run as (it is the scheduler).
const OWNER: &str = "edge-bench";

/// How often the far-back route's admit tick rewrites the snapshot: well
/// inside its freshness (`snapshot::MAX_AGE_MS`, 10 s), and at least once
/// per worker refresh (`snapshot::REFRESH_MS`, 5 s).
pub const FAR_BACK_TICK: Duration = Duration::from_millis(500);

/// The HS256 key of the signed-in mode's JWTs (`--identity jwt`): the
/// bench is the shop's login service.
pub const BENCH_JWT_SECRET: &str = "edge-bench-jwt-secret-0123456789abcdef";

/// How visitors say who they are to the worker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Identity {
    /// The worker's signed visitor cookie (`IDENTITY_MODE=anonymous`).
    #[default]
    Anonymous,
    /// The shop's HS256 JWT as `Authorization: Bearer`
    /// (`IDENTITY_MODE=jwt`): every poll brings one to verify.
    Jwt,
}

impl Identity {
    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Identity::Anonymous => "anonymous",
            Identity::Jwt => "jwt",
        }
    }

    /// The mode of a name on the command line.
    pub fn from_name(name: &str) -> Option<Identity> {
        [Identity::Anonymous, Identity::Jwt]
            .into_iter()
            .find(|i| i.name() == name)
    }
}

/// The floor worker's source.
pub const FLOOR_JS: &str = include_str!("floor.js");

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Waiting visitors whose positions are asked.
    pub waiting: usize,
    /// Concurrent requests.
    pub concurrency: usize,
    /// Requests a second over all loops, the same for every side (None:
    /// as fast as each side answers).
    pub rate: Option<f64>,
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
    /// Visitors polled by the far-back route (entered through the worker
    /// behind everyone else, so they hold place cookies).
    pub far_back: usize,
    /// Visitors entered straight in Redis between the waiting visitors and
    /// the far-back ones, so those are far beyond the near zone.
    pub far_gap: usize,
    /// The near zone's size in visitors during the far-back windows (the
    /// rate in force the admit ticks pass is chosen for it); at most
    /// `waiting + far_gap`.
    pub near_zone: usize,
    /// Other builds of the worker served beside it (directories holding
    /// `index.js` and `index_bg.wasm`), measured in the same alternation:
    /// compares changes within one run on a noisy machine.
    pub variants: Vec<PathBuf>,
    /// How the worker's visitors are identified (the floor checks none).
    pub identity: Identity,
}

impl Default for Options {
    /// The load: 500 waiting, 64 concurrent, 2 × 10 s alternating.
    fn default() -> Self {
        Options {
            waiting: 500,
            concurrency: 64,
            rate: None,
            window: Duration::from_secs(10),
            rounds: 2,
            warmup: Duration::from_secs(1),
            orders: 40_000,
            routes: vec![Route::Position, Route::Enter, Route::Order],
            far_back: 500,
            far_gap: 10_000,
            near_zone: 200,
            variants: Vec::new(),
            identity: Identity::Anonymous,
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
    /// Redis commands the gateway ran per right reply.
    pub redis_per_request: f64,
    /// Redis commands the gateway ran during the windows, by name.
    pub redis_commands: BTreeMap<String, u64>,
    /// Right far-back replies of a worker that were not `approximate`.
    pub not_approximate: u64,
    /// Commands Redis ran during the windows by `INFO commandstats`.
    pub redis_calls: u64,
    /// Redis' commands per second with the far-back route's ticker alone,
    /// measured before its windows (0 for the other routes).
    pub background_calls_per_s: f64,
    /// `INFO commandstats` calls per right reply, the background's share
    /// of the windows' time subtracted.
    pub redis_calls_net_per_request: f64,
}

/// What a run measured.
#[derive(Debug, Clone)]
pub struct Report {
    /// Per route and side.
    pub figures: Vec<Figures>,
    /// How the far-back route was set up, when it ran.
    pub far_back: Option<FarBackNotes>,
}

/// The far-back route's line and snapshot, and the ticks that kept it fresh.
#[derive(Debug, Clone, Default)]
pub struct FarBackNotes {
    /// The admissions per second in force the ticks passed.
    pub rate_in_force: f64,
    /// The near zone's size that rate gives (`near_zone_visitors`).
    pub zone_visitors: u64,
    /// The snapshot after the first tick: the zone's last ticket, the
    /// visitors up to it, the last ticket and the line's length.
    pub zone_front: u64,
    /// See `zone_front`.
    pub zone_count: u64,
    /// See `zone_front`.
    pub tail: u64,
    /// See `zone_front`.
    pub waiting: u64,
    /// The far-back visitors' tickets (lowest, highest), each checked
    /// against Redis (`ZSCORE`) and the place cookie's signature.
    pub tickets: (u64, u64),
    /// A worker's reply to a far-back poll before the windows.
    pub sample: String,
    /// Ticks run during the route (the first one included).
    pub ticks: u64,
    /// Ticks that failed.
    pub tick_failures: u64,
    /// The first failure.
    pub first_tick_failure: Option<String>,
    /// Builds (`--variant`) whose far-back sample was not approximate.
    pub variants_exact: Vec<String>,
}

impl FarBackNotes {
    /// Lines for the report.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "far-back line: {} waiting, tail ticket {}; near zone {} visitors (rate in force {:.4}/s \
             in the admit ticks, asked for {}), front ticket {}; far-back tickets {}..={} (ZSCORE \
             and place cookie agree)\n\
             snapshot kept fresh by {} admit ticks of allowance 0 every {} ms ({} failed{})\n\
             sample far-back reply (worker): {}\n",
            self.waiting,
            self.tail,
            self.zone_count,
            self.rate_in_force,
            self.zone_visitors,
            self.zone_front,
            self.tickets.0,
            self.tickets.1,
            self.ticks,
            FAR_BACK_TICK.as_millis(),
            self.tick_failures,
            self.first_tick_failure
                .as_deref()
                .map(|e| format!(": {e}"))
                .unwrap_or_default(),
            self.sample,
        );
        for v in &self.variants_exact {
            s.push_str(&format!(
                "variant {v}: its far-back sample was not approximate\n"
            ));
        }
        s
    }
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
    /// How the worker identifies visitors.
    pub identity: Identity,
    conn: MultiplexedConnection,
}

impl Rig {
    /// Starts Redis, the gateway, the demo shop, the queue `main` (open,
    /// [`bench_settings`]), the worker with the entry challenge off (the
    /// guard's cost is measured apart: `guard_cost`, `pow_cost`) and the floor.
    pub async fn start() -> anyhow::Result<Rig> {
        Rig::start_with(&[], Identity::Anonymous).await
    }

    /// [`Rig::start`] with other builds of the worker beside it (each
    /// with the worker's vars and secrets), identifying visitors as
    /// `identity` says.
    pub async fn start_with(variants: &[PathBuf], identity: Identity) -> anyhow::Result<Rig> {
        let redis = RedisServer::start();
        let gateway = Gateway::builder(&redis.url())
            .env("RUST_LOG", "redis_rest=info")
            .start();
        let shop_url = crate::demo_origin::start(ORIGIN_SECRET).await?;
        let client = redis::Client::open(redis.url())?;
        let mut conn = client.get_multiplexed_async_connection().await?;
        let keys = QueueKeys::new(&Prefix::default(), &QueueId::new(QUEUE)?);
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
        let mut worker = Wrangler::local(&gateway, &shop_url)
            .var("ENTRY_CHALLENGE", "off")
            .var("COOKIE_SECURE", "false");
        if identity == Identity::Jwt {
            worker = worker
                .var("IDENTITY_MODE", "jwt")
                .secret("JWT_SECRET", BENCH_JWT_SECRET);
        }
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
            identity,
            conn,
        })
    }

    /// The key the worker signs place cookies with.
    fn place_key(&self) -> &'static [u8] {
        match self.identity {
            Identity::Anonymous => IDENTITY_SECRET.as_bytes(),
            Identity::Jwt => BENCH_JWT_SECRET.as_bytes(),
        }
    }

    /// A new visitor for a place through the worker: none yet (anonymous:
    /// the worker mints the cookie), or a signed-in one's bearer JWT for
    /// the subject `sub`, valid for two hours.
    fn new_visitor(&self, sub: &str) -> Credentials {
        match self.identity {
            Identity::Anonymous => Vec::new(),
            Identity::Jwt => {
                let exp = queuegate_testkit::now_ms() / 1_000 + 7_200;
                let jwt = identity::sign_jwt(
                    BENCH_JWT_SECRET.as_bytes(),
                    &serde_json::json!({ "sub": sub, "exp": exp }),
                );
                vec![("authorization", format!("Bearer {jwt}"))]
            }
        }
    }

    /// Who `set` (the cookies an enter set) and the credentials it was
    /// entered with say the visitor is, with their credentials from now
    /// on (a minted visitor cookie joins them).
    fn entered_as(
        &self,
        mut who: Credentials,
        sub: &str,
        set: &BTreeMap<String, String>,
    ) -> anyhow::Result<(UserId, Credentials)> {
        let user = match self.identity {
            Identity::Anonymous => {
                let visitor = set
                    .get(VISITOR_COOKIE)
                    .context("enter set no visitor cookie")?;
                who.push(("cookie", format!("{VISITOR_COOKIE}={visitor}")));
                identity::verify_visitor(self.place_key(), visitor)
                    .map_err(|e| anyhow::anyhow!("the worker's visitor cookie: {e}"))?
            }
            Identity::Jwt => UserId::new(sub)?,
        };
        Ok((user, who))
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
        let mut credentials = Vec::with_capacity(waiting);
        for i in 0..waiting {
            let sub = format!("bench-waiting-{i}");
            let who = self.new_visitor(&sub);
            let set = self.enter(http, &who).await?;
            credentials.push(self.entered_as(who, &sub, &set)?.1);
        }
        Ok(Visitors {
            waiting: Arc::new(credentials),
            far_back: Arc::new(Vec::new()),
            admitted: Arc::new(admitted),
            next_admitted: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// One `POST /queue/enter` through the worker with `who`'s
    /// credentials: the cookies it set.
    async fn enter(
        &self,
        http: &reqwest::Client,
        who: &Credentials,
    ) -> anyhow::Result<BTreeMap<String, String>> {
        let mut visitor = Visitor::with_client(&self.worker.url(), http.clone());
        let headers: Vec<(&str, &str)> = who.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let reply = visitor
            .try_send_with("POST", "/queue/enter", None, None, &headers)
            .await?;
        ensure!(!reply.set_cookies.is_empty(), "enter set no cookie");
        ensure!(reply.status == 200, "enter answered {}", reply.status);
        Ok(visitor.cookies)
    }

    /// `gap` visitors entered straight in Redis, then `n` entered through
    /// the worker behind them: their credentials (identity and place
    /// cookie) with their tickets, each ticket checked against the line
    /// (`ZSCORE`) and the place cookie's signature for its visitor.
    pub async fn far_back_visitors(
        &mut self,
        http: &reqwest::Client,
        gap: usize,
        n: usize,
    ) -> anyhow::Result<Vec<(Credentials, u64)>> {
        ensure!(n > 0, "the far-back route needs far-back visitors");
        self.enter_direct(gap, 0x6661_725f_6761_7021).await?;
        let key = self.place_key();
        let queue = QueueId::new(QUEUE)?;
        let mut entered = Vec::with_capacity(n);
        for i in 0..n {
            let sub = format!("bench-far-back-{i}");
            let who = self.new_visitor(&sub);
            let set = self.enter(http, &who).await?;
            let place = set.get(PLACE_COOKIE).context("enter set no place cookie")?;
            let (user, who) = self.entered_as(who, &sub, &set)?;
            entered.push((user, who, place.clone()));
        }
        let mut out = Vec::with_capacity(n);
        for chunk in entered.chunks(1_000) {
            let mut pipe = redis::pipe();
            for (user, _, _) in chunk {
                pipe.cmd("ZSCORE")
                    .arg(self.keys.waiting())
                    .arg(user.as_str());
            }
            let scores: Vec<Option<f64>> = pipe.query_async(&mut self.conn).await?;
            for ((user, who, place), score) in chunk.iter().zip(scores) {
                let ticket = score.context("a far-back visitor is not in line")? as u64;
                ensure!(
                    matches!(
                        place::verify(key, place, &queue, user),
                        Some(place::Held::Ticket { ticket: t, .. }) if t == ticket
                    ),
                    "the place cookie {place} does not hold ticket {ticket}"
                );
                let mut who = who.clone();
                add_cookie(&mut who, &format!("{PLACE_COOKIE}={place}"));
                out.push((who, ticket));
            }
        }
        Ok(out)
    }

    /// `n` visitors entered straight in Redis (pipelined), their ids made
    /// from their index and `tag`, with their minted visitor cookies.
    async fn enter_direct(&mut self, n: usize, tag: u64) -> anyhow::Result<Vec<(UserId, String)>> {
        let mut users = Vec::with_capacity(n);
        for i in 0..n {
            let mut random = [0u8; 16];
            random[..8].copy_from_slice(&(i as u64).to_le_bytes());
            random[8..].copy_from_slice(&tag.to_le_bytes());
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
        Ok(users)
    }

    async fn admitted(&mut self, n: usize) -> anyhow::Result<Vec<(String, String)>> {
        let users = self.enter_direct(n, 0x6265_6e63_685f_6f72).await?;
        let owner = OWNER;
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
                    idle_lease: false,
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

/// `pair` (`name=value`) added to the `cookie` header of `who`.
fn add_cookie(who: &mut Credentials, pair: &str) {
    match who.iter_mut().find(|(name, _)| *name == "cookie") {
        Some((_, cookies)) => {
            cookies.push_str("; ");
            cookies.push_str(pair);
        }
        None => who.push(("cookie", pair.to_string())),
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

/// One admit tick as the scheduler would run it, admitting nobody: it
/// moves the near zone's front (never back) and rewrites the snapshot the
/// worker answers far-back polls from. The bench takes the lease first (it
/// is the only scheduler).
async fn idle_tick(
    conn: &mut MultiplexedConnection,
    keys: &QueueKeys,
    rate_in_force: f64,
) -> anyhow::Result<()> {
    let settings = bench_settings();
    let _: () = redis::cmd("SET")
        .arg(keys.lock())
        .arg(OWNER)
        .query_async(conn)
        .await?;
    let reply = queuegate_scheduler::engine::run(
        conn,
        &Admit {
            keys,
            owner: OWNER,
            allowance: 0,
            settings: &settings,
            rate_estimate: None,
            rate_in_force,
            grants: &[],
            idle_lease: false,
        },
    )
    .await?;
    let AdmitReply::Ran(counts) = reply else {
        anyhow::bail!("admit: not the lease owner");
    };
    ensure!(counts.admitted == 0, "an idle tick admitted {counts:?}");
    Ok(())
}

/// The rate in force whose near zone (`Settings::near_zone_visitors`) is
/// `visitors` under [`bench_settings`].
pub fn zone_rate(visitors: usize) -> f64 {
    let secs = bench_settings().near_zone_ms() as f64 / 1_000.0;
    (visitors.max(1) as f64 - 0.5) / secs
}

/// Admit ticks every [`FAR_BACK_TICK`] in the background until stopped.
struct Ticker {
    stop: tokio::sync::watch::Sender<bool>,
    task: JoinHandle<(u64, u64, Option<String>)>,
}

impl Ticker {
    fn start(mut conn: MultiplexedConnection, keys: QueueKeys, rate_in_force: f64) -> Ticker {
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(async move {
            let (mut ticks, mut failures, mut first) = (0u64, 0u64, None);
            let mut every = tokio::time::interval(FAR_BACK_TICK);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stopped.changed() => break,
                    _ = every.tick() => {
                        ticks += 1;
                        if let Err(e) = idle_tick(&mut conn, &keys, rate_in_force).await {
                            failures += 1;
                            first.get_or_insert(format!("{e:#}"));
                        }
                    }
                }
            }
            (ticks, failures, first)
        });
        Ticker { stop, task }
    }

    /// Stops it: ticks run, failed, the first failure.
    async fn stop(self) -> (u64, u64, Option<String>) {
        let _ = self.stop.send(true);
        self.task
            .await
            .unwrap_or((0, 1, Some("the ticker panicked".into())))
    }
}

/// A worker's reply to a far-back poll, once it is `approximate` (tries
/// for a little longer than an isolate keeps a snapshot, `REFRESH_MS`: the
/// isolate may hold one read before the first tick wrote the near zone).
async fn far_back_sample(
    http: &reqwest::Client,
    base: &str,
    who: &Credentials,
) -> anyhow::Result<Result<String, String>> {
    let mut last = String::new();
    let tries = queuegate_shared::snapshot::REFRESH_MS / 200 + 10;
    for _ in 0..tries {
        let resp = drive::with(http.get(format!("{base}/queue/position")), who)
            .send()
            .await?;
        let status = resp.status();
        let body = resp.text().await?;
        let json: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        if status == 200 && json["state"] == "waiting" && json["approximate"] == true {
            return Ok(Ok(body));
        }
        last = format!("{status} {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(Err(last))
}

/// Prepares the far-back windows: the first tick (checked: the far-back
/// visitors are beyond the near zone), the background ticker, and a sample
/// reply from each worker build (the built worker's must be approximate).
async fn far_back_start(
    rig: &mut Rig,
    http: &reqwest::Client,
    sides: &[(Side, String, String, u32)],
    far_back: &[(Credentials, u64)],
    near_zone: usize,
) -> anyhow::Result<(Ticker, FarBackNotes)> {
    let rate_in_force = zone_rate(near_zone);
    idle_tick(&mut rig.conn, &rig.keys, rate_in_force).await?;
    let read: Vec<Option<u64>> = redis::cmd("HMGET")
        .arg(rig.keys.config())
        .arg(config::ZONE_FRONT)
        .arg(config::ZONE_COUNT)
        .arg(config::TAIL)
        .arg(config::WAITING)
        .query_async(&mut rig.conn)
        .await?;
    let [Some(zone_front), Some(zone_count), Some(tail), Some(waiting)] = read[..] else {
        anyhow::bail!("the admit tick wrote no snapshot: {read:?}");
    };
    let lowest = far_back.iter().map(|(_, t)| *t).min().unwrap_or_default();
    let highest = far_back.iter().map(|(_, t)| *t).max().unwrap_or_default();
    ensure!(
        lowest > zone_front,
        "far-back ticket {lowest} is inside the near zone (front {zone_front}): lower the near zone"
    );
    let ticker = Ticker::start(rig.conn.clone(), rig.keys.clone(), rate_in_force);
    let mut notes = FarBackNotes {
        rate_in_force,
        zone_visitors: bench_settings().near_zone_visitors(rate_in_force),
        zone_front,
        zone_count,
        tail,
        waiting,
        tickets: (lowest, highest),
        ..FarBackNotes::default()
    };
    let who = &far_back[far_back.len() - 1].0;
    for (side, label, url, _) in sides {
        if !side.is_worker() {
            continue;
        }
        match far_back_sample(http, url, who).await? {
            Ok(body) if *side == Side::Worker => notes.sample = body,
            Ok(_) => {}
            Err(last) if *side == Side::Worker => {
                let _ = ticker.stop().await;
                anyhow::bail!("the worker's far-back poll is not approximate: {last}");
            }
            Err(_) => notes.variants_exact.push(label.clone()),
        }
    }
    Ok((ticker, notes))
}

/// Every command Redis has run, by `INFO commandstats` (a script's inner
/// commands included), less the `INFO` readings themselves.
async fn redis_calls(conn: &mut MultiplexedConnection) -> anyhow::Result<u64> {
    let text: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await?;
    Ok(commandstats_calls(&text))
}

/// The sum of `calls=` over the `cmdstat_*` lines of `INFO commandstats`
/// but `cmdstat_info`.
fn commandstats_calls(text: &str) -> u64 {
    text.lines()
        .filter_map(|l| l.strip_prefix("cmdstat_"))
        .filter(|l| !l.starts_with("info:"))
        .filter_map(|l| {
            let calls = l.split_once("calls=")?.1;
            calls.split(',').next()?.parse::<u64>().ok()
        })
        .sum()
}

/// Runs the whole measurement on a started rig: per route, a warm-up per
/// side, then `rounds` × (worker window, floor window). The gateway's
/// command counters are read around each measured window.
pub async fn measure(
    rig: &mut Rig,
    http: &reqwest::Client,
    opts: &Options,
) -> anyhow::Result<Report> {
    let orders = if opts.routes.contains(&Route::Order) {
        opts.orders
    } else {
        0
    };
    let mut visitors = rig.visitors(http, opts.waiting, orders).await?;
    let far_back = if opts.routes.contains(&Route::FarBack) {
        let far = rig
            .far_back_visitors(http, opts.far_gap, opts.far_back)
            .await?;
        visitors.far_back = Arc::new(far.iter().map(|(c, _)| c.clone()).collect());
        far
    } else {
        Vec::new()
    };
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
    let (gateway_url, gateway_token) = (rig.gateway.url(), rig.gateway.token().to_string());
    let mut out = Vec::new();
    let mut far_back_notes = None;
    let load = drive::Load {
        concurrency: opts.concurrency,
        rate: opts.rate,
    };
    for &route in &opts.routes {
        let ticker = if route == Route::FarBack {
            Some(far_back_start(rig, http, &sides, &far_back, opts.near_zone).await?)
        } else {
            None
        };
        let mut windows: Vec<Vec<Window>> = vec![Vec::new(); sides.len()];
        for (side, _, url, pid) in &sides {
            drive::window(
                http,
                (url, *pid, *side),
                route,
                &visitors,
                load,
                opts.warmup,
            )
            .await;
        }
        // Redis' own count with the far-back ticker alone, to subtract
        // (the other routes run nothing in the background).
        let background = if ticker.is_some() {
            let (before, started) = (redis_calls(&mut rig.conn).await?, Instant::now());
            tokio::time::sleep(opts.window).await;
            let calls = redis_calls(&mut rig.conn).await? - before;
            calls as f64 / started.elapsed().as_secs_f64()
        } else {
            0.0
        };
        for _ in 0..opts.rounds {
            for (k, (side, _, url, pid)) in sides.iter().enumerate() {
                let calls_before = redis_calls(&mut rig.conn).await?;
                let span = Instant::now();
                let before = Counters::read(http, &gateway_url, &gateway_token).await?;
                let mut w = drive::window(
                    http,
                    (url, *pid, *side),
                    route,
                    &visitors,
                    load,
                    opts.window,
                )
                .await;
                let after = Counters::read(http, &gateway_url, &gateway_token).await?;
                w.redis_commands = after.since(&before).commands;
                w.redis_calls = redis_calls(&mut rig.conn).await? - calls_before;
                w.redis_span = span.elapsed();
                windows[k].push(w);
            }
        }
        if let Some((ticker, mut notes)) = ticker {
            let (ticks, failures, first) = ticker.stop().await;
            notes.ticks = ticks + 1;
            notes.tick_failures = failures;
            notes.first_tick_failure = first;
            far_back_notes = Some(notes);
        }
        for (k, (side, label, _, _)) in sides.iter().enumerate() {
            out.push(figures(route, *side, label, &windows[k], background));
        }
    }
    Ok(Report {
        figures: out,
        far_back: far_back_notes,
    })
}

fn figures(
    route: Route,
    side: Side,
    label: &str,
    windows: &[Window],
    background_calls_per_s: f64,
) -> Figures {
    let ok: u64 = windows.iter().map(|w| w.ok).sum();
    let wall: f64 = windows.iter().map(|w| w.wall.as_secs_f64()).sum();
    let cpu: f64 = windows.iter().map(|w| w.cpu.as_secs_f64()).sum();
    let mut lat: Vec<f64> = windows
        .iter()
        .flat_map(|w| w.latencies_ms.iter().copied())
        .collect();
    lat.sort_by(f64::total_cmp);
    let mut redis_commands = BTreeMap::new();
    for w in windows {
        for (name, n) in &w.redis_commands {
            *redis_commands.entry(name.clone()).or_default() += n;
        }
    }
    let redis: u64 = redis_commands.values().sum();
    let redis_calls: u64 = windows.iter().map(|w| w.redis_calls).sum();
    let span: f64 = windows.iter().map(|w| w.redis_span.as_secs_f64()).sum();
    let net = redis_calls as f64 - background_calls_per_s * span;
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
        redis_per_request: redis as f64 / ok.max(1) as f64,
        redis_commands,
        not_approximate: windows.iter().map(|w| w.not_approximate).sum(),
        redis_calls,
        background_calls_per_s,
        redis_calls_net_per_request: net / ok.max(1) as f64,
    }
}

/// The markdown table of a run.
pub fn table(figures: &[Figures]) -> String {
    let mut s = String::from(
        "| route | side | requests | failed | req/s | p50 ms | p99 ms | CPU ms/request | CPU ÷ floor | Redis/request |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for f in figures {
        let floor = figures
            .iter()
            .find(|g| g.route == f.route && g.side == Side::Floor)
            .map_or(f64::NAN, |g| g.cpu_ms_per_request);
        s.push_str(&format!(
            "| {} | {} | {} | {} | {:.0} | {:.1} | {:.1} | {:.3} | {:.2}× | {:.4} |\n",
            f.route.name(),
            f.label,
            f.ok,
            f.failed,
            f.rps,
            f.p50_ms,
            f.p99_ms,
            f.cpu_ms_per_request,
            f.cpu_ms_per_request / floor,
            f.redis_per_request,
        ));
    }
    s
}

/// The far-back route's lines after the table: each worker build's
/// replies that were not approximate and the Redis commands its polls
/// cost, by name.
pub fn far_back_lines(figures: &[Figures]) -> String {
    let mut s = String::new();
    for f in figures.iter().filter(|f| f.route == Route::FarBack) {
        let commands = if f.redis_commands.is_empty() {
            "none".to_string()
        } else {
            f.redis_commands
                .iter()
                .map(|(name, n)| format!("{name} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if f.side.is_worker() {
            s.push_str(&format!(
                "far-back {}: {} of {} replies not approximate; Redis commands {} ({:.5} per poll)\n",
                f.label, f.not_approximate, f.ok, commands, f.redis_per_request
            ));
        } else {
            s.push_str(&format!(
                "far-back {}: Redis commands {} ({:.3} per poll)\n",
                f.label, commands, f.redis_per_request
            ));
        }
        s.push_str(&format!(
            "far-back {}: INFO commandstats (a script's inner commands included: a bound on \
             requests) {} calls in the windows, background {:.1}/s (the ticker alone) \
             subtracted: {:.5} per poll\n",
            f.label, f.redis_calls, f.background_calls_per_s, f.redis_calls_net_per_request
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::commandstats_calls;

    #[test]
    fn commandstats_sums_every_command_but_info() {
        let text = "# Commandstats\r\n\
            cmdstat_hmget:calls=28,usec=190,usec_per_call=6.79,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_evalsha:calls=1002,usec=90000,usec_per_call=89.82,rejected_calls=0,failed_calls=1\r\n\
            cmdstat_info:calls=40,usec=2000,usec_per_call=50.00,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_zrank:calls=5,usec=10,usec_per_call=2.00,rejected_calls=0,failed_calls=0\r\n";
        assert_eq!(commandstats_calls(text), 1_035);
        assert_eq!(commandstats_calls("# Commandstats\r\n"), 0);
    }
}
