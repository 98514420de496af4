//! `queuegate-load`: starts the whole room on loopback, sends a flash-sale
//! crowd through it, measures position throughput, prints the figures and
//! writes the charts; with `--drop`, a crowd pre-queued before a scheduled
//! opening instead; with `--farm`, such a drop under attack by a bot farm.
//! Bounded in time and count; stops everything it started.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use queuegate_tools::load::chaos::{self, ChaosOptions};
use queuegate_tools::load::drop_day::{self, DropOptions};
use queuegate_tools::load::farm::{self, FarmOptions};
use queuegate_tools::load::farm_report;
use queuegate_tools::load::{self, Options, ThroughputOptions};

/// Figures for the whole waiting room: round trips per operation, position
/// throughput beside Redis, polls and notice lag adaptive vs fixed, ETA
/// error, realized admission rate (docs/benchmarks/load.md).
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Simulated visitors.
    #[arg(long, default_value_t = 3_000)]
    visitors: u64,
    /// Seconds over which they arrive (most at the start).
    #[arg(long, default_value_t = 6)]
    spike_secs: u64,
    /// Admissions per second.
    #[arg(long, default_value_t = 50.0)]
    admit_rate: f64,
    /// Order slots.
    #[arg(long, default_value_t = 200)]
    max_active: u64,
    /// Share of visitors who give up while waiting (0 to 1).
    #[arg(long, default_value_t = 0.1)]
    leave_share: f64,
    /// Share of visitors polling every --fixed-interval-ms instead of obeying
    /// retryAfter (0: all adaptive, 1: all fixed, 0.5: both in one run).
    #[arg(long, default_value_t = 0.5)]
    fixed_share: f64,
    /// The fixed visitors' poll interval.
    #[arg(long, default_value_t = 2_000)]
    fixed_interval_ms: u64,
    /// Shortest poll interval the queue tells visitors.
    #[arg(long, default_value_t = 1_000)]
    poll_min_ms: u64,
    /// Longest poll interval (scaled down with the crowd; production default 30 s).
    #[arg(long, default_value_t = 10_000)]
    poll_max_ms: u64,
    /// A visitor silent this long has left (at least 2 × --poll-max-ms).
    #[arg(long, default_value_t = 20_000)]
    abandon_after_ms: u64,
    /// Entry token lifetime.
    #[arg(long, default_value_t = 60_000)]
    token_ttl_ms: u64,
    /// Spread of token activation.
    #[arg(long, default_value_t = 1_000)]
    activation_jitter_ms: u64,
    /// The crowd stops by then whatever happens.
    #[arg(long, default_value_t = 110)]
    deadline_secs: u64,
    /// Concurrent position requests in the throughput measurement (0 skips it).
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Seconds of position load through the worker.
    #[arg(long, default_value_t = 10)]
    throughput_secs: u64,
    /// Requests redis-benchmark sends straight to Redis.
    #[arg(long, default_value_t = 200_000)]
    redis_requests: u64,
    /// Where the SVG charts go (default docs/benchmarks/ of the repository).
    #[arg(long)]
    charts: Option<PathBuf>,
    /// No charts.
    #[arg(long)]
    no_charts: bool,
    /// A tiny crowd in a few seconds, no charts unless --charts: checks the
    /// tool end to end.
    #[arg(long)]
    smoke: bool,
    /// Drop day: the crowd arrives before a scheduled opening and waits in
    /// the pre-queue; one run per --spreads-ms, each on a fresh stack;
    /// reports the poll rate after the opening, the draw's timing and the
    /// admission order against arrival (no throughput run, no charts).
    #[arg(long)]
    drop: bool,
    /// With --drop: seconds from the crowd's start to the opening.
    #[arg(long, default_value_t = 30)]
    opens_in: u64,
    /// With --drop: visitors who arrive before the opening (over its first
    /// 80 %); the rest of --visitors arrive over --spike-secs after it.
    /// Default: all of --visitors.
    #[arg(long)]
    pre_queue: Option<u64>,
    /// With --drop: `opening_spread_ms` of each run (the product default,
    /// then none).
    #[arg(long, value_delimiter = ',', default_value = "10000,0")]
    spreads_ms: Vec<u64>,
    /// With --drop: seconds after the opening whose poll rate is shown.
    #[arg(long, default_value_t = 20)]
    after_opening_secs: u64,
    /// Farm mode (issue #22 §5): --humans people (one address each, solving
    /// at --human-hashes-per-s) and a bot farm (--farm-addresses ×
    /// --identities-per-address, native solver) take places before an
    /// opening --opens-in seconds away; reports the farm's share of the
    /// first N admitted (N = --humans) against its share of addresses,
    /// the humans refused, and the farm's spend; writes
    /// load-farm-<label>.svg. Also uses --opens-in, --admit-rate,
    /// --poll-min-ms, --poll-max-ms, --abandon-after-ms and --deadline-secs
    /// (docs/benchmarks/load.md gives the values of the reported run).
    #[arg(long)]
    farm: bool,
    /// With --farm: humans, one address each (N).
    #[arg(long, default_value_t = 300)]
    humans: u64,
    /// With --farm: the farm's addresses (K).
    #[arg(long, default_value_t = 10)]
    farm_addresses: u64,
    /// With --farm: identities each farm address tries to place (M).
    #[arg(long, default_value_t = 200)]
    identities_per_address: u64,
    /// With --farm: identities each farm address enters at once (enough
    /// that the per-address budget, not the round trips, paces the farm).
    #[arg(long, default_value_t = 4)]
    farm_lanes: u64,
    /// With --farm: the humans' solving speed (the page in Chromium,
    /// BENCHMARKS.md: ~90,000 hashes/s); simulated by sleeping.
    #[arg(long, default_value_t = 90_000.0)]
    human_hashes_per_s: f64,
    /// With --farm: `entry_budget_per_minute` per address (scaled down
    /// with the pre-queue window: the default lets one address take ~260
    /// places in 45 s, as 40/min does over a ~30-minute pre-queue).
    #[arg(long, default_value_t = 300)]
    entry_budget_per_minute: u64,
    /// With --farm: `entry_budget_burst` per address.
    #[arg(long, default_value_t = 40)]
    entry_budget_burst: u64,
    /// With --farm: `challenge_max_number` (the product default).
    #[arg(long, default_value_t = 100_000)]
    challenge_max_number: u64,
    /// With --farm: `max_waiting` (default: room for every human and
    /// identity, so nobody is refused for a full queue).
    #[arg(long)]
    max_waiting: Option<u64>,
    /// With --farm: `opening_spread_ms`.
    #[arg(long, default_value_t = 5_000)]
    opening_spread_ms: u64,
    /// With --farm: the defence `entry_places_per_address` (a cap on live
    /// places per address group, 429 `address_full`), passed through to
    /// the queue settings; a build without the setting refuses it.
    #[arg(long)]
    entry_places_per_address: Option<u64>,
    /// With --farm: the run's name in the report and the chart file
    /// (`load-farm-<label>.svg`): "off" on a build with the uniform draw
    /// and no cap, "on" with the fair per-address draw (and the cap).
    #[arg(long, default_value = "off")]
    farm_label: String,
    /// With --farm: the farm's K addresses are K IPv6 /64s of one /48
    /// (2001:db8:ff00::/48, each of the first 256 in a /56 of its own)
    /// instead of K IPv4 addresses; the report gives the farm's share of
    /// addresses as the product counts them (a /48 as at most 16) and
    /// naively. At most 65,536 addresses.
    #[arg(long)]
    farm_ipv6: bool,
    /// With --farm: people who all share one IPv4 address (a NAT,
    /// 198.18.255.254), arriving over the humans' window (0 to 5,000); the
    /// report gives their rank correlation between arrival and admission,
    /// and the run goes on until the line is empty.
    #[arg(long, default_value_t = 0)]
    nat_humans: u64,
    /// Chaos mode (issue #37): a drop on the real stack (Redis with its
    /// append-only file, the gateway, --schedulers schedulers, workerd)
    /// while --faults faults are injected, one every --fault-every-ms:
    /// kill -9 and SIGSTOP of the lease holder, Redis killed and restarted
    /// or paused, the gateway restarted, settings changed, the opening
    /// postponed, the holder reloading another file. Checks what must
    /// hold from Redis and from every visitor, prints what was injected
    /// and what held, writes load-chaos.svg, and exits 1 on any
    /// violation. --pre-queue visitors before the opening (--opens-in),
    /// the rest of --visitors after it; also uses --admit-rate and
    /// --max-active.
    #[arg(long)]
    chaos: bool,
    /// With --chaos: faults to inject (the postponement counts as one).
    #[arg(long, default_value_t = 105)]
    faults: u32,
    /// With --chaos: milliseconds between two faults' starts.
    #[arg(long, default_value_t = 2_500)]
    fault_every_ms: u64,
    /// With --chaos: schedulers sharing the queue.
    #[arg(long, default_value_t = 3)]
    schedulers: usize,
}

impl Args {
    fn options(&self) -> Options {
        if self.smoke {
            return Options::smoke();
        }
        Options {
            visitors: self.visitors,
            spike: Duration::from_secs(self.spike_secs),
            admit_rate: self.admit_rate,
            max_active: self.max_active,
            leave_share: self.leave_share,
            fixed_share: self.fixed_share,
            fixed_interval: Duration::from_millis(self.fixed_interval_ms),
            poll_min_ms: self.poll_min_ms,
            poll_max_ms: self.poll_max_ms,
            abandon_after_ms: self.abandon_after_ms,
            token_ttl_ms: self.token_ttl_ms,
            activation_jitter_ms: self.activation_jitter_ms,
            deadline: Duration::from_secs(self.deadline_secs),
            sample_every: Duration::from_millis(250),
            throughput: (self.concurrency > 0).then(|| ThroughputOptions {
                visitors: 500,
                concurrency: self.concurrency,
                duration: Duration::from_secs(self.throughput_secs),
                redis_requests: self.redis_requests,
            }),
            progress: true,
        }
    }

    fn drop_options(&self) -> DropOptions {
        if self.smoke {
            return DropOptions::smoke();
        }
        let pre_queue = self.pre_queue.unwrap_or(self.visitors);
        DropOptions {
            pre_queue,
            later: self.visitors.saturating_sub(pre_queue),
            opens_in: Duration::from_secs(self.opens_in),
            arrive_share: 0.8,
            spike: Duration::from_secs(self.spike_secs),
            spreads_ms: self.spreads_ms.clone(),
            admit_rate: self.admit_rate,
            max_active: self.max_active,
            poll_min_ms: self.poll_min_ms,
            poll_max_ms: self.poll_max_ms,
            abandon_after_ms: self.abandon_after_ms,
            token_ttl_ms: self.token_ttl_ms,
            activation_jitter_ms: self.activation_jitter_ms,
            after_opening: Duration::from_secs(self.after_opening_secs),
            deadline: Duration::from_secs(self.deadline_secs),
        }
    }

    fn farm_options(&self) -> FarmOptions {
        if self.smoke {
            return FarmOptions::smoke();
        }
        FarmOptions {
            humans: self.humans,
            farm_addresses: self.farm_addresses,
            identities_per_address: self.identities_per_address,
            farm_lanes: self.farm_lanes,
            opens_in: Duration::from_secs(self.opens_in),
            arrive_share: 0.8,
            human_hashes_per_s: self.human_hashes_per_s,
            entry_budget_per_minute: self.entry_budget_per_minute,
            entry_budget_burst: self.entry_budget_burst,
            challenge_max_number: self.challenge_max_number,
            max_waiting: self.max_waiting,
            admit_rate: self.admit_rate,
            poll_min_ms: self.poll_min_ms,
            poll_max_ms: self.poll_max_ms,
            abandon_after_ms: self.abandon_after_ms,
            opening_spread_ms: self.opening_spread_ms,
            entry_places_per_address: self.entry_places_per_address,
            label: self.farm_label.clone(),
            deadline: Duration::from_secs(self.deadline_secs),
            farm_ipv6: self.farm_ipv6,
            nat_humans: self.nat_humans,
        }
    }

    fn chaos_options(&self) -> ChaosOptions {
        let smoke = ChaosOptions::smoke();
        if self.smoke {
            return smoke;
        }
        let pre_queue = self.pre_queue.unwrap_or(self.visitors / 2);
        ChaosOptions {
            pre_queue,
            later: self.visitors.saturating_sub(pre_queue),
            opens_in: Duration::from_secs(self.opens_in),
            postpone: Duration::from_secs(self.opens_in / 2),
            admit_rate: self.admit_rate,
            max_active: self.max_active,
            schedulers: self.schedulers,
            faults: self.faults,
            fault_every: Duration::from_millis(self.fault_every_ms),
            ..smoke
        }
    }

    fn charts_dir(&self) -> Option<PathBuf> {
        match (&self.charts, self.no_charts, self.smoke) {
            (_, true, _) => None,
            (Some(dir), false, _) => Some(dir.clone()),
            (None, false, true) => None,
            (None, false, false) => Some(queuegate_testkit::repo_root().join("docs/benchmarks")),
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.chaos {
        let opts = args.chaos_options();
        eprintln!(
            "chaos: starting the stack (redis-server with AOF, redis-rest, {} schedulers, demo shop, workerd)…",
            opts.schedulers
        );
        let report = chaos::run(&opts).await?;
        println!("{report}");
        if let Some(dir) = args.charts_dir() {
            let path = chaos::write_chart(&report, opts.max_active, &dir)?;
            println!("chart: {}", path.display());
        }
        if !report.violations.is_empty() {
            std::process::exit(1);
        }
        return Ok(());
    }
    if args.drop {
        eprintln!("drop day: one stack per spread (redis-server, redis-rest, queuegate-scheduler, demo shop, wrangler dev)…");
        println!("{}", drop_day::run(&args.drop_options()).await?);
        return Ok(());
    }
    if args.farm {
        let opts = args.farm_options();
        eprintln!("farm: starting the stack (redis-server, redis-rest, queuegate-scheduler, demo shop, wrangler dev)…");
        let report = farm::run(&opts).await?;
        println!("{report}");
        if let Some(dir) = args.charts_dir() {
            let path = farm_report::write_chart(&report, &dir)?;
            println!("chart: {}", path.display());
        }
        return Ok(());
    }
    let opts = args.options();
    eprintln!("starting the stack (redis-server, redis-rest, queuegate-scheduler, demo shop, wrangler dev)…");
    let report = load::run(&opts).await?;
    println!("{report}");
    if let Some(dir) = args.charts_dir() {
        for path in load::charts::write(&report, &dir)? {
            println!("chart: {}", path.display());
        }
    }
    Ok(())
}
