//! `queuegate-load`: a flash-sale crowd through the whole local room
//! (workerd → gateway → redis-server, plus the scheduler), bounded in time
//! and count, loopback only, and the figures it yields.
//!
//! * [`visitor`] — one simulated visitor and what it saw; [`tally`] counts
//!   a crowd of them live.
//! * [`drop_day`] — drop mode: the crowd pre-queued before a scheduled
//!   opening, the poll rate after it with and without the spread.
//! * [`farm`] — farm mode: a drop under attack, humans against a bot farm
//!   of few addresses and many identities; [`farm_report`] its figures
//!   and chart.
//! * [`sampler`] — the queue seen from Redis while the crowd runs.
//! * [`counters`] — the gateway's round-trip counters (`GET /_stats`).
//! * [`throughput`] — position requests/s through the `workerd` binary
//!   (not `wrangler dev`) beside `redis-benchmark`.
//! * [`figures`] — the figures of a run; [`report`] prints them; [`charts`]
//!   draws them as SVG.

pub mod chaos;
pub mod charts;
pub mod counters;
pub mod drop_day;
pub mod farm;
pub mod farm_report;
pub mod figures;
pub mod report;
pub mod sampler;
pub mod tally;
pub mod throughput;
pub mod visitor;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;

use crate::stack::{Edge, Stack, StackOptions};
use counters::Counters;
use figures::{Report, RoundTrips};
use visitor::{Outcome, Plan, Polling, Shared, StatusReader};

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Simulated visitors.
    pub visitors: u64,
    /// Arrivals fall within this many seconds of the sale opening, most of
    /// them at the start (density falling linearly to zero).
    pub spike: Duration,
    /// Admissions per second.
    pub admit_rate: f64,
    /// Order slots.
    pub max_active: u64,
    /// Share of visitors who give up after 0–2 polls.
    pub leave_share: f64,
    /// Share of visitors who poll at `fixed_interval` instead of obeying
    /// retryAfter (0.5: every other visitor, for a comparison in one run).
    pub fixed_share: f64,
    /// The fixed visitors' interval.
    pub fixed_interval: Duration,
    /// Shortest poll interval the queue tells visitors.
    pub poll_min_ms: u64,
    /// Longest poll interval.
    pub poll_max_ms: u64,
    /// A visitor who has not polled for this long has left.
    pub abandon_after_ms: u64,
    /// Entry token lifetime (a leaver's unused token holds its slot this long).
    pub token_ttl_ms: u64,
    /// Spread of token activation after admission.
    pub activation_jitter_ms: u64,
    /// The crowd stops by this deadline whatever happens.
    pub deadline: Duration,
    /// Redis sampling interval.
    pub sample_every: Duration,
    /// The position throughput measurement (None: skip it).
    pub throughput: Option<ThroughputOptions>,
    /// Print a progress line every few seconds.
    pub progress: bool,
}

/// Settings of the throughput measurement.
#[derive(Debug, Clone)]
pub struct ThroughputOptions {
    /// Visitors entered (and held still, the queue paused) for it.
    pub visitors: usize,
    /// Concurrent requests on both sides.
    pub concurrency: usize,
    /// How long the worker side runs.
    pub duration: Duration,
    /// Requests redis-benchmark sends.
    pub redis_requests: u64,
}

impl Options {
    /// A tiny crowd that exercises every path in a few seconds (the smoke test).
    pub fn smoke() -> Options {
        Options {
            visitors: 24,
            spike: Duration::from_secs(1),
            admit_rate: 10.0,
            max_active: 50,
            leave_share: 0.2,
            fixed_share: 0.5,
            fixed_interval: Duration::from_secs(2),
            poll_min_ms: 1_000,
            poll_max_ms: 5_000,
            abandon_after_ms: 10_000,
            token_ttl_ms: 30_000,
            activation_jitter_ms: 200,
            deadline: Duration::from_secs(15),
            sample_every: Duration::from_millis(250),
            throughput: Some(ThroughputOptions {
                visitors: 8,
                concurrency: 4,
                duration: Duration::from_secs(1),
                redis_requests: 2_000,
            }),
            progress: false,
        }
    }

    /// Rejects options that cannot make a meaningful run.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.visitors == 0 || self.visitors > 100_000 {
            bail!("--visitors must be 1 to 100000");
        }
        if !(0.0..=1.0).contains(&self.leave_share) || !(0.0..=1.0).contains(&self.fixed_share) {
            bail!("--leave-share and --fixed-share must be between 0 and 1");
        }
        if self.deadline > Duration::from_secs(900) || self.deadline.is_zero() {
            bail!("--deadline-secs must be 1 to 900");
        }
        if self.spike >= self.deadline {
            bail!("--spike-secs must be shorter than the deadline");
        }
        if self.sample_every < Duration::from_millis(50) {
            bail!("the sampling interval must be at least 50 ms");
        }
        Ok(())
    }

    /// Queue settings beyond rate and slots, as TOML values for the scheduler.
    fn queue_settings(&self) -> Vec<(String, String)> {
        let extra = self.throughput.as_ref().map_or(0, |t| t.visitors as u64);
        [
            ("poll_min_ms", self.poll_min_ms),
            ("poll_max_ms", self.poll_max_ms),
            ("abandon_after_ms", self.abandon_after_ms),
            ("token_ttl_ms", self.token_ttl_ms),
            ("activation_jitter_ms", self.activation_jitter_ms),
            ("max_waiting", self.visitors + extra + 100),
            ("challenge_crowd", self.visitors + extra + 100),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        // The run measures a line: with passthrough on, a crowd that
        // trickles in (a slow machine, a small spike) would pass straight
        // through and leave nothing to poll or to time.
        .chain([("idle_passthrough".to_string(), "false".to_string())])
        .collect()
    }

    /// One line naming the settings, for the report.
    fn describe(&self) -> String {
        format!(
            "{} visitors over a {:.0} s spike · admit {}/s · max_active {} · leave share {} · fixed-2 s share {} · poll {}–{} ms · abandon after {} ms · token TTL {} ms · jitter {} ms · idle passthrough off · deadline {} s",
            self.visitors,
            self.spike.as_secs_f64(),
            self.admit_rate,
            self.max_active,
            self.leave_share,
            self.fixed_share,
            self.poll_min_ms,
            self.poll_max_ms,
            self.abandon_after_ms,
            self.token_ttl_ms,
            self.activation_jitter_ms,
            self.deadline.as_secs()
        )
    }

    /// The visitors' plans: arrival `spike · (1 − √(1 − u))` (most at the
    /// opening), every `1/fixed_share`-th visitor on fixed polling, leavers
    /// drawn independently of both.
    pub fn plans(&self) -> Vec<Plan> {
        let n = self.visitors;
        (0..n)
            .map(|i| {
                let u = (i as f64 + 0.5) / n as f64;
                let leaves = visitor::unit(i ^ 0x5EED_1EAF) < self.leave_share;
                Plan {
                    arrive_after: self.spike.mul_f64(1.0 - (1.0 - u).sqrt()),
                    polling: if visitor::spread(i, self.fixed_share) {
                        Polling::Fixed
                    } else {
                        Polling::Adaptive
                    },
                    leave_after_polls: leaves.then(|| (visitor::splitmix(i) % 3) as u32),
                    seed: visitor::splitmix(i ^ 0xC0FF_EE00),
                }
            })
            .collect()
    }
}

/// Starts the stack, runs the crowd and the throughput measurement, and
/// returns the report. Every process stops when this returns.
pub async fn run(opts: &Options) -> anyhow::Result<Report> {
    opts.validate()?;
    let stack = Stack::start(&StackOptions {
        // Its figures (and BENCHMARKS.md's) were taken through wrangler dev.
        edge: Edge::Wrangler,
        port: 0,
        admit_rate: opts.admit_rate,
        max_active: opts.max_active,
        settings: opts.queue_settings(),
        gateway_request_log: false,
        // The product's guard: the visitors come from addresses of their
        // own and solve challenges when the worker asks for them.
        entry_budget: None,
        challenge_difficulty: None,
        entry_challenge: None,
        origin: Default::default(),
        turnstile_stand_in: false,
        signed_in_token_lifetime_s: None,
        persistence: false,
    })
    .await?;
    let (keys, mut conn) = stack.main_queue().await?;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(1_024)
        .build()?;
    let base = stack.worker.url();
    let (gw_url, gw_token) = (stack.gateway.url(), stack.gateway.token().to_string());

    // The crowd.
    let before = Counters::read(&http, &gw_url, &gw_token).await?;
    let start = Instant::now();
    let shared = Arc::new(Shared {
        base: base.clone(),
        status: Some(StatusReader {
            redis: conn.clone(),
            keys: keys.clone(),
        }),
        fixed_interval: opts.fixed_interval,
        end: start + opts.deadline,
        tally: None,
    });
    let (stop, stopped) = tokio::sync::oneshot::channel();
    let sampler = tokio::spawn(sampler::run(
        conn.clone(),
        keys.clone(),
        start,
        opts.sample_every,
        opts.progress,
        stopped,
    ));
    let records = visitor::run_all(&http, &shared, start, opts.plans()).await?;
    let crowd_seconds = start.elapsed().as_secs_f64();
    // Settles run after the reply (wait_until): give the last ones a moment.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _ = stop.send(());
    let samples = sampler.await??;
    let after = Counters::read(&http, &gw_url, &gw_token).await?;

    let round_trips = RoundTrips {
        enters: records.iter().map(|r| u64::from(r.enters)).sum(),
        positions: records.iter().map(|r| u64::from(r.polls)).sum(),
        orders: records.iter().map(|r| u64::from(r.order_requests)).sum(),
        ordered: records
            .iter()
            .filter(|r| r.outcome == Outcome::Ordered)
            .count() as u64,
        counters: after.since(&before),
    };

    let throughput = match &opts.throughput {
        Some(t) => {
            let direct = stack.start_workerd().await?;
            let plan = throughput::Plan {
                base: direct.url(),
                redis_port: stack.redis.port(),
                visitors: t.visitors,
                concurrency: t.concurrency,
                duration: t.duration,
                redis_requests: t.redis_requests,
            };
            let config = stack.scheduler.config_path();
            Some(throughput::measure(&http, &mut conn, &keys, config, &plan).await?)
        }
        None => None,
    };
    drop(stack);
    Ok(Report {
        machine: machine(),
        settings: opts.describe(),
        crowd_seconds,
        records,
        samples,
        admit_rate: opts.admit_rate,
        max_active: opts.max_active,
        round_trips,
        throughput,
    })
}

/// `nproc` and the CPU model.
pub fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    format!("{cores} cores (nproc), {cpu}")
}
