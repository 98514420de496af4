//! The whole waiting room on one machine: a private redis-server, the
//! redis-rest gateway, the scheduler, the demo shop and the worker, under
//! `wrangler dev` or the `workerd` binary alone ([`Edge`]). Every process
//! stops when the [`Stack`] is dropped.

use queuegate_testkit::gateway::Gateway;
use queuegate_testkit::scheduler::{Scheduler, SchedulerBuilder};
use queuegate_testkit::workerd::Workerd;
use queuegate_testkit::{RedisServer, Wrangler, WranglerBuilder, ORIGIN_SECRET};

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use queuegate_shared::fields::config;
use queuegate_shared::{Prefix, QueueId, QueueKeys, QueueState};

use crate::demo_origin::Conditions;

/// What serves the built worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Edge {
    /// `wrangler dev`: the way to edit the worker (rebuilds on change), but
    /// its Node proxy answers a few hundred requests/s on two cores.
    Wrangler,
    /// The `workerd` binary alone, with the same vars and secrets: about
    /// ten times the requests/s on the same machine (docs/benchmarks),
    /// what a crowd needs.
    Workerd,
}

impl Edge {
    /// How the status lines name it.
    pub fn label(self) -> &'static str {
        match self {
            Edge::Wrangler => "wrangler dev",
            Edge::Workerd => "workerd",
        }
    }
}

/// The running worker, however served.
#[derive(Debug)]
pub enum Worker {
    /// Under `wrangler dev`.
    Wrangler(Wrangler),
    /// Under the `workerd` binary alone.
    Workerd(Workerd),
}

impl Worker {
    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        match self {
            Worker::Wrangler(w) => w.url(),
            Worker::Workerd(w) => w.url(),
        }
    }

    /// Its output so far.
    pub fn log(&self) -> String {
        match self {
            Worker::Wrangler(w) => w.log(),
            Worker::Workerd(w) => w.log(),
        }
    }
}

/// Settings of the local demo.
#[derive(Debug, Clone)]
pub struct StackOptions {
    /// What serves the worker.
    pub edge: Edge,
    /// The worker's port (0: any free one).
    pub port: u16,
    /// Admissions per second.
    pub admit_rate: f64,
    /// Order slots.
    pub max_active: u64,
    /// Further queue settings for the scheduler, as TOML values, e.g.
    /// `("poll_max_ms", "10000")` (names as in `queuegate_shared::Settings`).
    pub settings: Vec<(String, String)>,
    /// The gateway's one-line-per-request debug log; off for measurements,
    /// where writing it would compete for the CPU being measured.
    pub gateway_request_log: bool,
    /// New places per address per minute (and burst); None: the product
    /// default. The synthetic crowd comes from addresses of its own.
    pub entry_budget: Option<u64>,
    /// The challenge's `maxnumber`; None: the product default.
    pub challenge_difficulty: Option<u64>,
    /// The worker's `ENTRY_CHALLENGE`; None: the worker's default.
    pub entry_challenge: Option<&'static str>,
    /// How the demo shop answers orders at the start (changed at run time
    /// with `POST /_demo/conditions`).
    pub origin: Conditions,
    /// Turnstile on, against a local stand-in of its script and
    /// `siteverify` ([`crate::turnstile_stand_in`]).
    pub turnstile_stand_in: bool,
    /// Signed-in mode: `IDENTITY_MODE=jwt`, with the demo shop as the
    /// login service whose tokens live this many seconds, handed to the
    /// page by its token script (`PAGE_TOKEN_SCRIPT`).
    pub signed_in_token_lifetime_s: Option<u64>,
    /// Redis with its append-only file on (fsync every write), so a
    /// restart keeps the line (the chaos run restarts it).
    pub persistence: bool,
}

/// The demo's `JWT_SECRET` in signed-in mode (loopback demos and tests only).
pub const DEMO_JWT_SECRET: &str = "demo-login-jwt-secret-0123456789abcdef";

impl Default for StackOptions {
    /// The local demo's settings (`queuegate-dev` without flags).
    fn default() -> Self {
        StackOptions {
            edge: Edge::Wrangler,
            port: 8787,
            admit_rate: 20.0,
            max_active: 100,
            settings: Vec::new(),
            gateway_request_log: true,
            entry_budget: None,
            challenge_difficulty: None,
            entry_challenge: None,
            origin: Conditions::default(),
            turnstile_stand_in: false,
            signed_in_token_lifetime_s: None,
            persistence: false,
        }
    }
}

/// A running stack.
#[derive(Debug)]
pub struct Stack {
    /// The worker (what visitors open).
    pub worker: Worker,
    /// The scheduler.
    pub scheduler: Scheduler,
    /// The gateway.
    pub gateway: Gateway,
    /// Redis.
    pub redis: RedisServer,
    /// The demo shop's own URL (behind the worker).
    pub shop_url: String,
    /// The worker's vars and secrets.
    worker_settings: WranglerBuilder,
    /// The scheduler's config, for more schedulers of the same file.
    scheduler_settings: SchedulerBuilder,
}

/// Schedules the opening of `keys`' queue at `opens_at` (epoch ms), as
/// `queuegate-scheduler schedule` does: until then new places go to the
/// pre-queue.
pub async fn schedule_opening(
    conn: &mut redis::aio::MultiplexedConnection,
    keys: &QueueKeys,
    opens_at: u64,
) -> anyhow::Result<()> {
    use queuegate_shared::ops::{Change, Schedule};
    queuegate_scheduler::engine::run(
        conn,
        &Schedule {
            keys,
            opens_at: Change::Set(opens_at),
            closes_at: Change::Keep,
        },
    )
    .await?;
    Ok(())
}

impl Stack {
    /// The demo queue's keys and a connection to the stack's Redis, once
    /// the scheduler has published the queue's settings and opened it
    /// (within 15 s).
    pub async fn main_queue(
        &self,
    ) -> anyhow::Result<(QueueKeys, redis::aio::MultiplexedConnection)> {
        let keys = QueueKeys::new(&Prefix::default(), &QueueId::new("main")?);
        let mut conn = redis::Client::open(self.redis.url())?
            .get_multiplexed_async_connection()
            .await
            .context("connect to the stack's redis-server")?;
        let until = Instant::now() + Duration::from_secs(15);
        loop {
            let state: Option<String> = redis::cmd("HGET")
                .arg(keys.config())
                .arg(config::STATE)
                .query_async(&mut conn)
                .await?;
            if state.as_deref() == Some(QueueState::Open.as_str()) {
                return Ok((keys, conn));
            }
            if Instant::now() > until {
                bail!("the scheduler did not open the queue within 15 s (state {state:?})");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Starts everything and waits until the worker answers.
    pub async fn start(opts: &StackOptions) -> anyhow::Result<Stack> {
        let redis = RedisServer::builder().aof(opts.persistence).start();
        let log = if opts.gateway_request_log {
            "redis_rest=debug"
        } else {
            "redis_rest=info"
        };
        let gateway = Gateway::builder(&redis.url()).env("RUST_LOG", log).start();
        let login = opts
            .signed_in_token_lifetime_s
            .map(|lifetime_s| crate::demo_origin::Login {
                jwt_secret: DEMO_JWT_SECRET.into(),
                lifetime_s,
            });
        let shop_url =
            crate::demo_origin::start_with_login(ORIGIN_SECRET, opts.origin, login.clone()).await?;
        let rate = opts.admit_rate.to_string();
        let max_active = opts.max_active.to_string();
        let budget = opts.entry_budget.map(|n| n.to_string());
        let difficulty = opts.challenge_difficulty.map(|n| n.to_string());
        let mut settings = vec![
            ("admit_rate_per_second", rate.as_str()),
            ("max_active", max_active.as_str()),
        ];
        if let Some(b) = &budget {
            settings.push(("entry_budget_per_minute", b));
            settings.push(("entry_budget_burst", b));
        }
        if let Some(d) = &difficulty {
            settings.push(("challenge_max_number", d));
        }
        settings.extend(opts.settings.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let scheduler_settings = Scheduler::builder(&redis.url()).queue("main", &settings);
        let scheduler = scheduler_settings.clone().start();
        let mut worker = Wrangler::local(&gateway, &shop_url)
            .var("CONTINUE_URL", "/checkout")
            // The shop's ticket pages are protected too: a person who opens
            // one without a token is sent to the room and back.
            .var("PROTECTED_ROUTES", "POST /orders, GET /tickets/*")
            .var("PAGE_TITLE", "Demo shop — waiting room")
            // Plain http on loopback: browsers accept Secure cookies on
            // localhost, but curl users would not see them.
            .var("COOKIE_SECURE", "false");
        if let Some(c) = opts.entry_challenge {
            worker = worker.var("ENTRY_CHALLENGE", c);
        }
        if login.is_some() {
            worker = worker
                .var("IDENTITY_MODE", "jwt")
                .secret("JWT_SECRET", DEMO_JWT_SECRET)
                .var("PAGE_TOKEN_SCRIPT", crate::demo_origin::TOKEN_SCRIPT);
        }
        if opts.turnstile_stand_in {
            let (script, verify) = crate::turnstile_stand_in::start().await?;
            worker = worker
                .var("TURNSTILE_SITE_KEY", crate::turnstile_stand_in::SITE_KEY)
                .secret(
                    "TURNSTILE_SECRET_KEY",
                    crate::turnstile_stand_in::SECRET_KEY,
                )
                .var("TURNSTILE_SCRIPT_URL", &script)
                .var("TURNSTILE_VERIFY_URL", &verify);
        }
        let worker_settings = worker.clone();
        if opts.port != 0 {
            worker = worker.port(opts.port);
        }
        let edge = opts.edge;
        let worker = tokio::task::spawn_blocking(move || match edge {
            Edge::Wrangler => Worker::Wrangler(worker.start()),
            Edge::Workerd => Worker::Workerd(worker.start_workerd()),
        })
        .await?;
        Ok(Stack {
            worker,
            scheduler,
            gateway,
            redis,
            shop_url,
            worker_settings,
            scheduler_settings,
        })
    }

    /// The same worker, vars and secrets served by another `workerd`
    /// process alone, on a free port: what throughput is measured against,
    /// since `wrangler dev`'s Node process and proxy cost the CPU several
    /// times over (docs/benchmarks/load.md).
    pub async fn start_workerd(&self) -> anyhow::Result<Workerd> {
        let settings = self.worker_settings.clone();
        Ok(tokio::task::spawn_blocking(move || settings.start_workerd()).await?)
    }

    /// Another scheduler with the same config file (a standby, or a
    /// killed one's replacement), once its HTTP listener answers: it
    /// takes the lease only when the holder's runs out.
    pub fn another_scheduler(&self) -> Scheduler {
        self.scheduler_settings.clone().spawn()
    }
}
