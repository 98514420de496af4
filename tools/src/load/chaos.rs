//! Chaos mode: a drop on the real stack — a pre-queue, its draw at a
//! scheduled (and postponed) opening, a crowd that polls like the page and
//! orders — while faults are injected on a schedule: kill -9 and SIGSTOP of
//! the lease holder among several schedulers, Redis killed and restarted
//! from its append-only file or paused, the gateway restarted, run-time
//! settings changed, the holder reloading a different file. What must hold
//! is checked from Redis every 100 ms and from every visitor's own view
//! ([`Invariant`]); the run prints what it injected and what held, and
//! draws a timeline.
//!
//! Loopback only, bounded in time: every process stops when it returns.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use queuegate_scheduler::config::format_time;
use queuegate_shared::fields::{config, stats};
use queuegate_shared::QueueKeys;
use queuegate_testkit::counters::Counters;
use queuegate_testkit::measure::percentile;
use queuegate_testkit::now_ms;
use queuegate_testkit::scheduler::{self, Scheduler};
use redis::aio::ConnectionManager;

use super::visitor::{self, Outcome, Plan, Polling, Record, Shared};
use crate::stack::{schedule_opening, Edge, Stack, StackOptions};

/// What to run.
#[derive(Debug, Clone)]
pub struct ChaosOptions {
    /// Visitors who arrive before the opening (over its first half).
    pub pre_queue: u64,
    /// Visitors who arrive after it, evenly until the last fault.
    pub later: u64,
    /// From the start to the opening first scheduled.
    pub opens_in: Duration,
    /// How much later the opening is moved, halfway there (a fault too).
    pub postpone: Duration,
    /// Admissions per second.
    pub admit_rate: f64,
    /// Order slots.
    pub max_active: u64,
    /// Schedulers sharing the queue (one holds the lease).
    pub schedulers: usize,
    /// Faults to inject, one every `fault_every` (the postponement
    /// included).
    pub faults: u32,
    /// The time between two faults' starts.
    pub fault_every: Duration,
    /// After the last fault, the time the line has to drain.
    pub drain: Duration,
    /// Shortest poll interval.
    pub poll_min_ms: u64,
    /// Longest poll interval.
    pub poll_max_ms: u64,
    /// A visitor silent this long has left.
    pub abandon_after_ms: u64,
    /// The scheduler's lease.
    pub lease_ttl_ms: u64,
    /// Entry token lifetime.
    pub token_ttl_ms: u64,
    /// Spread of token activation.
    pub activation_jitter_ms: u64,
}

impl ChaosOptions {
    /// The short run `scripts/test` makes: every kind of fault twice.
    pub fn smoke() -> ChaosOptions {
        ChaosOptions {
            pre_queue: 40,
            later: 80,
            opens_in: Duration::from_secs(6),
            postpone: Duration::from_secs(3),
            admit_rate: 4.0,
            max_active: 8,
            schedulers: 3,
            faults: 15,
            fault_every: Duration::from_millis(2_500),
            drain: Duration::from_secs(20),
            poll_min_ms: 500,
            poll_max_ms: 4_000,
            abandon_after_ms: 20_000,
            lease_ttl_ms: 2_000,
            token_ttl_ms: 30_000,
            activation_jitter_ms: 300,
        }
    }

    /// Rejects options that cannot make a meaningful run.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.pre_queue == 0 || self.pre_queue + self.later > 20_000 {
            bail!("--pre-queue must be 1 or more, and all visitors at most 20000");
        }
        if !(2..=5).contains(&self.schedulers) {
            bail!("--schedulers must be 2 to 5: a fail-over needs a standby");
        }
        if self.faults < 2 || self.faults > 1_000 {
            bail!("--faults must be 2 to 1000");
        }
        if self.fault_every < Duration::from_millis(1_500) {
            bail!("--fault-every-ms must be at least 1500: a fault needs time to act");
        }
        if self.opens_in < Duration::from_secs(4) || self.opens_in > Duration::from_secs(300) {
            bail!("--opens-in must be 4 to 300 s");
        }
        if self.deadline() > Duration::from_secs(1_800) {
            bail!(
                "the run would last over 30 minutes: fewer --faults or a shorter --fault-every-ms"
            );
        }
        if !self.admit_rate.is_finite() || self.admit_rate <= 0.0 || self.max_active == 0 {
            bail!("--admit-rate and --max-active must be positive");
        }
        Ok(())
    }

    /// When the first fault starts.
    fn first_fault(&self) -> Duration {
        Duration::from_secs(2)
    }

    /// When the last fault starts.
    fn last_fault(&self) -> Duration {
        self.first_fault() + self.fault_every * (self.faults - 1)
    }

    /// The crowd stops by then.
    pub fn deadline(&self) -> Duration {
        self.last_fault() + self.fault_every + self.drain
    }

    fn queue_settings(&self) -> Vec<(String, String)> {
        let crowd = self.pre_queue + self.later + 100;
        [
            ("poll_min_ms", self.poll_min_ms),
            ("poll_max_ms", self.poll_max_ms),
            ("abandon_after_ms", self.abandon_after_ms),
            ("lease_ttl_ms", self.lease_ttl_ms),
            ("token_ttl_ms", self.token_ttl_ms),
            ("activation_jitter_ms", self.activation_jitter_ms),
            ("max_waiting", crowd),
            ("challenge_crowd", crowd),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    /// The pre-queue over the first half of the time until the opening,
    /// the later visitors evenly from the (postponed) opening until the
    /// last fault; everyone polls as told and nobody leaves: every
    /// visitor keeps polling, so none may lose its place.
    fn plans(&self) -> Vec<Plan> {
        let before = self.opens_in / 2;
        let early = (0..self.pre_queue).map(|i| before.mul_f64(i as f64 / self.pre_queue as f64));
        let opened = self.opens_in + self.postpone;
        let span = self.last_fault().saturating_sub(opened);
        let late = (0..self.later).map(|i| opened + span.mul_f64(i as f64 / self.later as f64));
        early
            .chain(late)
            .enumerate()
            .map(|(i, arrive_after)| Plan {
                arrive_after,
                polling: Polling::Adaptive,
                leave_after_polls: None,
                seed: visitor::splitmix(i as u64 ^ 0xC4A0_5EED),
            })
            .collect()
    }

    fn describe(&self) -> String {
        format!(
            "{} pre-queued, {} more after the opening · opening at {:.0} s, postponed by {:.0} s · {} schedulers · {} faults, one every {:.1} s · admit {}/s · max_active {} · poll {}–{} ms · abandon after {} ms · lease {} ms · Redis with AOF (fsync always) · deadline {} s",
            self.pre_queue,
            self.later,
            self.opens_in.as_secs_f64(),
            self.postpone.as_secs_f64(),
            self.schedulers,
            self.faults,
            self.fault_every.as_secs_f64(),
            self.admit_rate,
            self.max_active,
            self.poll_min_ms,
            self.poll_max_ms,
            self.abandon_after_ms,
            self.lease_ttl_ms,
            self.deadline().as_secs(),
        )
    }
}

/// A kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultKind {
    /// The opening moved later by the `schedule` command.
    Postpone,
    /// kill -9 of the lease holder; a new scheduler is started in its place.
    KillHolder,
    /// A run-time settings change (`settings --set`).
    ChangeSettings,
    /// The gateway killed and started again on its port.
    RestartGateway,
    /// SIGSTOP of the lease holder for longer than its lease, then SIGCONT.
    StopHolder,
    /// SIGSTOP of Redis for 1.5 s, then SIGCONT.
    PauseRedis,
    /// The holder's file edited (another admission rate) and SIGHUP.
    ReloadOtherFile,
    /// kill -9 of Redis, started again from its append-only file.
    RestartRedis,
}

impl FaultKind {
    /// The cycle the faults after the postponement follow.
    const CYCLE: [FaultKind; 7] = [
        FaultKind::KillHolder,
        FaultKind::ChangeSettings,
        FaultKind::RestartGateway,
        FaultKind::StopHolder,
        FaultKind::PauseRedis,
        FaultKind::ReloadOtherFile,
        FaultKind::RestartRedis,
    ];

    /// How the report names it.
    pub fn label(self) -> &'static str {
        match self {
            FaultKind::Postpone => "opening postponed (schedule)",
            FaultKind::KillHolder => "kill -9 of the lease holder",
            FaultKind::ChangeSettings => "run-time settings change",
            FaultKind::RestartGateway => "gateway killed and restarted",
            FaultKind::StopHolder => "SIGSTOP of the lease holder past its lease",
            FaultKind::PauseRedis => "SIGSTOP of Redis for 1.5 s",
            FaultKind::ReloadOtherFile => "SIGHUP of the holder with a different file",
            FaultKind::RestartRedis => "kill -9 of Redis, restarted from its AOF",
        }
    }
}

/// One fault injected.
#[derive(Debug, Clone)]
pub struct Injected {
    /// Seconds after the start.
    pub at_s: f64,
    /// Seconds it lasted (until the process was back or resumed).
    pub lasted_s: f64,
    /// Its kind.
    pub kind: FaultKind,
    /// What exactly was done, and what the tool's commands answered.
    pub detail: String,
}

/// What must hold through every fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Invariant {
    /// Every visitor kept polling and none was told its place is gone
    /// (abandoned, expired, not in line) or refused a poll or an order.
    NoPlaceLost,
    /// Nobody admitted before the opening in force (Redis' counters every
    /// 100 ms, and each visitor's own first "admitted").
    NotBeforeOpening,
    /// At most `max_active` tokens out at any sample.
    MaxActive,
    /// The counter identities ([`Counters::broken`]) at every reading:
    /// a visitor admitted twice breaks them.
    Conserved,
    /// Admissions in ticket order (the draw's for the pre-queue) but for
    /// visitors passed over asleep.
    DrawnOrder,
    /// Every order settled (none lapsed; the shop's orders are the
    /// visitors') or its token restored.
    OrdersSettled,
}

impl Invariant {
    const ALL: [Invariant; 6] = [
        Invariant::NoPlaceLost,
        Invariant::NotBeforeOpening,
        Invariant::MaxActive,
        Invariant::Conserved,
        Invariant::DrawnOrder,
        Invariant::OrdersSettled,
    ];

    fn label(self) -> &'static str {
        match self {
            Invariant::NoPlaceLost => "no place lost by a visitor who kept polling",
            Invariant::NotBeforeOpening => "nobody admitted before the opening",
            Invariant::MaxActive => "max_active never exceeded",
            Invariant::Conserved => "counters conserved (nobody admitted twice)",
            Invariant::DrawnOrder => "drawn order kept (admissions in ticket order)",
            Invariant::OrdersSettled => "every order settled or its token restored",
        }
    }
}

/// One reading of the queue from Redis.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Seconds after the start.
    pub t_s: f64,
    /// In line.
    pub waiting: u64,
    /// Pre-queued.
    pub pre: u64,
    /// Holding a slot.
    pub active: u64,
    /// Admitted so far.
    pub admitted: u64,
}

/// What the watcher saw from Redis.
#[derive(Debug, Default)]
struct Watch {
    samples: Vec<Sample>,
    /// Readings that failed (Redis down or paused).
    missed: u64,
    /// Each visitor's ticket, as first seen in line.
    tickets: HashMap<String, u64>,
    /// When each visitor was first seen holding a slot (ms since start).
    first_active: HashMap<String, u64>,
    /// Visitors ever passed over asleep (their place kept in claims).
    claimed: HashSet<String>,
    /// The opening in force, as last read.
    opens_at: Option<u64>,
    /// Counter readings checked.
    readings: u64,
    /// Violations found, with what was seen.
    violations: Vec<(Invariant, String)>,
    max_active_seen: u64,
}

/// The whole run.
#[derive(Debug)]
pub struct ChaosReport {
    /// `nproc` and the CPU.
    pub machine: String,
    /// The settings in one line.
    pub settings: String,
    /// The faults, in order.
    pub injected: Vec<Injected>,
    /// The readings from Redis.
    pub samples: Vec<Sample>,
    /// Readings that failed while Redis was down or paused.
    pub missed_samples: u64,
    /// Counter readings checked.
    pub readings: u64,
    /// Every visitor's record.
    pub records: Vec<Record>,
    /// Violations, each with what was seen.
    pub violations: Vec<(Invariant, String)>,
    /// What each invariant was checked against.
    pub checked: Vec<(Invariant, String)>,
    /// The opening in force at the end (epoch ms) and the start.
    pub opens_at: u64,
    /// Epoch ms of the start.
    pub start_ms: u64,
    /// Seconds from each fault until admissions moved again (faults while
    /// the line was admitting).
    pub resumed_s: Vec<(FaultKind, f64)>,
}

/// Runs the drop under faults; the report, violations included (the
/// caller decides what they mean for its exit code).
pub async fn run(opts: &ChaosOptions) -> anyhow::Result<ChaosReport> {
    opts.validate()?;
    let stack = Stack::start(&StackOptions {
        edge: Edge::Workerd,
        port: 0,
        admit_rate: opts.admit_rate,
        max_active: opts.max_active,
        settings: opts.queue_settings(),
        gateway_request_log: false,
        persistence: true,
        ..StackOptions::default()
    })
    .await?;
    let (keys, mut conn) = stack.main_queue().await?;
    let standbys: Vec<Scheduler> = (1..opts.schedulers)
        .map(|_| stack.another_scheduler())
        .collect();
    let start = Instant::now();
    let start_ms = now_ms();
    schedule_opening(
        &mut conn,
        &keys,
        start_ms + opts.opens_in.as_millis() as u64,
    )
    .await?;
    let redis = redis::Client::open(stack.redis.url())?;
    let mut manager = ConnectionManager::new_with_config(
        redis,
        redis::aio::ConnectionManagerConfig::new()
            .set_response_timeout(Some(Duration::from_millis(500)))
            .set_connection_timeout(Some(Duration::from_millis(500)))
            .set_number_of_retries(1),
    )
    .await
    .context("the watcher's Redis connection")?;

    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(1_024)
        .build()?;
    let end = start + opts.deadline();
    let shared = Arc::new(Shared {
        base: stack.worker.url(),
        status: None,
        fixed_interval: Duration::from_secs(2),
        end,
        tally: None,
    });
    let watch = Arc::new(Mutex::new(Watch::default()));
    let watcher = tokio::spawn(watch_redis(
        manager.clone(),
        keys.clone(),
        opts.max_active,
        start,
        start_ms,
        end,
        watch.clone(),
    ));
    let injected = Arc::new(Mutex::new(Vec::new()));
    let injector = {
        let (opts, injected) = (opts.clone(), injected.clone());
        std::thread::spawn(move || inject_all(stack, standbys, &opts, start, start_ms, &injected))
    };
    let records = visitor::run_all(&http, &shared, start, opts.plans()).await?;
    watcher.await??;
    let stack = injector
        .join()
        .map_err(|_| anyhow::anyhow!("the fault injector panicked"))??;

    // Final readings, with every fault over.
    let mut w = std::mem::take(&mut *watch.lock().unwrap_or_else(|p| p.into_inner()));
    let final_counts = Counters::read(&mut manager, &keys).await?;
    let (ordered_stat, lapsed): (Option<u64>, Option<u64>) = redis::cmd("HMGET")
        .arg(keys.stats())
        .arg(stats::ORDERED)
        .arg(stats::LAPSED)
        .query_async(&mut manager)
        .await?;
    let opens_at: Option<u64> = redis::cmd("HGET")
        .arg(keys.config())
        .arg(config::OPENS_AT)
        .query_async(&mut manager)
        .await?;
    drop(stack);
    let opens_at = opens_at.or(w.opens_at).unwrap_or(start_ms);
    let injected = std::mem::take(&mut *injected.lock().unwrap_or_else(|p| p.into_inner()));

    let mut checked = Vec::new();
    // From the visitors' own view.
    let lost = visitor_violations(&records, opens_at);
    let lost_count = lost
        .iter()
        .filter(|(i, _)| *i == Invariant::NoPlaceLost)
        .count();
    w.violations.extend(lost);
    let entered = records.iter().filter(|r| r.entered_ms.is_some()).count();
    checked.push((
        Invariant::NoPlaceLost,
        format!("{entered} visitors who entered and kept polling; {lost_count} lost"),
    ));
    checked.push((
        Invariant::NotBeforeOpening,
        format!(
            "{} readings from Redis, {} visitors admitted",
            w.samples.len(),
            records
                .iter()
                .filter(|r| r.seen_admitted_ms.is_some())
                .count()
        ),
    ));
    checked.push((
        Invariant::MaxActive,
        format!(
            "{} readings; most seen {} of {}",
            w.samples.len(),
            w.max_active_seen,
            opts.max_active
        ),
    ));
    for broken in final_counts.broken() {
        w.violations
            .push((Invariant::Conserved, format!("at the end: {broken}")));
    }
    checked.push((
        Invariant::Conserved,
        format!(
            "{} readings (one MULTI/EXEC each) and the final one: entered {}, admitted {}, ordered {}, abandoned {}",
            w.readings, final_counts.entered, final_counts.admitted, final_counts.ordered, final_counts.abandoned
        ),
    ));
    let (pairs, inversions) = drawn_order(&w);
    for (a, b) in inversions.iter().take(20) {
        w.violations
            .push((Invariant::DrawnOrder, format!("{a} admitted after {b}")));
    }
    if inversions.len() > 20 {
        w.violations.push((
            Invariant::DrawnOrder,
            format!("… and {} more inversions", inversions.len() - 20),
        ));
    }
    checked.push((
        Invariant::DrawnOrder,
        format!(
            "{pairs} visitors seen in line and then admitted, in order of their tickets; {} passed over asleep left out",
            w.claimed.len()
        ),
    ));
    let ordered_visitors = records
        .iter()
        .filter(|r| r.outcome == Outcome::Ordered)
        .count() as u64;
    let (ordered_stat, lapsed) = (ordered_stat.unwrap_or(0), lapsed.unwrap_or(0));
    if lapsed > 0 {
        w.violations.push((
            Invariant::OrdersSettled,
            format!("{lapsed} consumes never settled (lapsed)"),
        ));
    }
    if ordered_stat != ordered_visitors {
        w.violations.push((
            Invariant::OrdersSettled,
            format!(
                "the queue counted {ordered_stat} orders, the visitors placed {ordered_visitors}"
            ),
        ));
    }
    checked.push((
        Invariant::OrdersSettled,
        format!("{ordered_visitors} orders placed, {ordered_stat} counted, {lapsed} lapsed"),
    ));
    let resumed_s = resumed(&injected, &w.samples);
    Ok(ChaosReport {
        machine: super::machine(),
        settings: opts.describe(),
        injected,
        samples: w.samples,
        missed_samples: w.missed,
        readings: w.readings,
        records,
        violations: w.violations,
        checked,
        opens_at,
        start_ms,
        resumed_s,
    })
}

/// What the visitors saw that must not be: a place lost (an end in a state
/// it does not wait out, or a poll or an order refused) or an admission
/// before the opening in force (`opens_at`, epoch ms).
fn visitor_violations(records: &[Record], opens_at: u64) -> Vec<(Invariant, String)> {
    let mut found = Vec::new();
    for (i, r) in records.iter().enumerate() {
        if r.outcome == Outcome::Other || !r.refused_with.is_empty() {
            // Its last requests, for the timeline: when, where, how.
            let last: Vec<String> = r.sent[r.sent.len().saturating_sub(4)..]
                .iter()
                .map(|s| match s.failure {
                    Some(f) => format!("{:?} at {:.1} s failed ({f:?})", s.route, s.at_s),
                    None => format!("{:?} at {:.1} s", s.route, s.at_s),
                })
                .collect();
            found.push((
                Invariant::NoPlaceLost,
                format!(
                    "visitor {i}: ended {:?} in {:?}, refused with {:?}; last requests: {}",
                    r.outcome,
                    r.ended_in,
                    r.refused_with,
                    last.join(", ")
                ),
            ));
        }
        if let Some(seen) = r.seen_admitted_ms.filter(|&t| t < opens_at) {
            found.push((
                Invariant::NotBeforeOpening,
                format!(
                    "visitor {i} saw \"admitted\" {} ms before the opening",
                    opens_at - seen
                ),
            ));
        }
    }
    found
}

/// Pairs of visitors admitted out of their tickets' order (by the 100 ms
/// reading that first saw each holding a slot), leaving out those ever
/// passed over asleep; and how many visitors the check covered.
fn drawn_order(w: &Watch) -> (usize, Vec<(String, String)>) {
    let mut seen: Vec<(u64, u64, &str)> = w
        .first_active
        .iter()
        .filter(|(u, _)| !w.claimed.contains(*u))
        .filter_map(|(u, &at)| Some((*w.tickets.get(u)?, at, u.as_str())))
        .collect();
    seen.sort_unstable();
    let mut inversions = Vec::new();
    // A visitor admitted in a later reading than one behind it in line.
    let mut latest_before: Option<(u64, &str)> = None;
    for &(ticket, at, user) in &seen {
        if let Some((earlier_at, earlier)) = latest_before {
            if at < earlier_at {
                inversions.push((
                    format!("{earlier} (an earlier ticket)"),
                    format!("{user} (ticket {ticket})"),
                ));
            }
        }
        if latest_before.is_none_or(|(t, _)| at > t) {
            latest_before = Some((at, user));
        }
    }
    (seen.len(), inversions)
}

/// For each fault while visitors were waiting after the opening: seconds
/// until the admitted count moved on again.
fn resumed(injected: &[Injected], samples: &[Sample]) -> Vec<(FaultKind, f64)> {
    injected
        .iter()
        .filter_map(|f| {
            let at = samples.iter().find(|s| s.t_s >= f.at_s)?;
            if at.waiting == 0 {
                return None;
            }
            let moved = samples
                .iter()
                .find(|s| s.t_s >= f.at_s && s.admitted > at.admitted)?;
            Some((f.kind, moved.t_s - f.at_s))
        })
        .collect()
}

/// Reads the queue every 100 ms until `end`: the counters (checked), the
/// slots held (who, and how many), the opening in force; every second the
/// line's tickets and the visitors passed over asleep. A reading that
/// fails (Redis down or paused) is counted and skipped.
async fn watch_redis(
    mut conn: ConnectionManager,
    keys: QueueKeys,
    max_active: u64,
    start: Instant,
    start_ms: u64,
    end: Instant,
    watch: Arc<Mutex<Watch>>,
) -> anyhow::Result<()> {
    let mut next_line = Instant::now();
    while Instant::now() < end {
        let tick = Instant::now() + Duration::from_millis(100);
        let read = tokio::time::timeout(Duration::from_millis(800), async {
            let counts = Counters::read(&mut conn, &keys).await?;
            let (active, opens_at): (Vec<String>, Option<u64>) = redis::pipe()
                .atomic()
                .zrange(keys.active(), 0, -1)
                .hget(keys.config(), config::OPENS_AT)
                .query_async(&mut conn)
                .await?;
            let line = if Instant::now() >= next_line {
                let (waiting, claims): (Vec<(String, u64)>, Vec<String>) = redis::pipe()
                    .zrange_withscores(keys.waiting(), 0, -1)
                    .zrange(keys.claims(), 0, -1)
                    .query_async(&mut conn)
                    .await?;
                Some((waiting, claims))
            } else {
                None
            };
            redis::RedisResult::Ok((counts, active, opens_at, line))
        })
        .await;
        let now = now_ms();
        let t_ms = now.saturating_sub(start_ms);
        {
            let mut w = watch.lock().unwrap_or_else(|p| p.into_inner());
            match read {
                Ok(Ok((counts, active, opens_at, line))) => {
                    w.readings += 1;
                    for broken in counts.broken() {
                        w.violations.push((
                            Invariant::Conserved,
                            format!("at {:.1} s: {broken}", t_ms as f64 / 1e3),
                        ));
                    }
                    let held = active.len() as u64;
                    w.max_active_seen = w.max_active_seen.max(held);
                    if held > max_active {
                        w.violations.push((
                            Invariant::MaxActive,
                            format!("at {:.1} s: {held} slots held", t_ms as f64 / 1e3),
                        ));
                    }
                    if let Some(opens) = opens_at {
                        w.opens_at = Some(opens);
                        if counts.admitted > 0 && now < opens {
                            w.violations.push((
                                Invariant::NotBeforeOpening,
                                format!(
                                    "at {:.1} s: {} admitted, {} ms before the opening",
                                    t_ms as f64 / 1e3,
                                    counts.admitted,
                                    opens - now
                                ),
                            ));
                        }
                    }
                    for user in active {
                        w.first_active.entry(user).or_insert(t_ms);
                    }
                    if let Some((waiting, claims)) = line {
                        next_line = Instant::now() + Duration::from_secs(1);
                        for (user, ticket) in waiting {
                            w.tickets.entry(user).or_insert(ticket);
                        }
                        w.claimed.extend(claims);
                    }
                    w.samples.push(Sample {
                        t_s: start.elapsed().as_secs_f64(),
                        waiting: counts.waiting.max(0) as u64,
                        pre: (counts.pre + counts.unplaced).max(0) as u64,
                        active: held,
                        admitted: counts.admitted.max(0) as u64,
                    });
                }
                _ => w.missed += 1,
            }
        }
        tokio::time::sleep_until(tick.into()).await;
    }
    Ok(())
}

/// The schedulers: the stack's own (number 0) and the standbys.
struct Schedulers<'a> {
    stack: &'a mut Stack,
    standbys: Vec<Scheduler>,
}

impl Schedulers<'_> {
    fn get(&mut self, i: usize) -> &mut Scheduler {
        match i {
            0 => &mut self.stack.scheduler,
            n => &mut self.standbys[n - 1],
        }
    }

    /// The number of the one holding the lease, waiting up to 5 s for a
    /// fail-over to finish.
    fn holder(&mut self) -> Option<usize> {
        let until = Instant::now() + Duration::from_secs(5);
        loop {
            let held = (0..=self.standbys.len()).find(|&i| {
                self.get(i).metric(r#"queuegate_lease_held{queue="main"}"#) == Some(1.0)
            });
            if held.is_some() || Instant::now() > until {
                return held;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// kill -9 of number `i`, and a new scheduler of the same file in its
    /// place (a supervisor's restart).
    fn replace(&mut self, i: usize) {
        let fresh = self.stack.another_scheduler();
        let old = self.get(i);
        old.kill();
        *old = fresh;
    }
}

/// Injects the faults on their schedule, from a thread of its own (the
/// processes are driven by blocking calls); gives the stack back at the
/// end, with every process running again.
fn inject_all(
    mut stack: Stack,
    standbys: Vec<Scheduler>,
    opts: &ChaosOptions,
    start: Instant,
    start_ms: u64,
    log: &Mutex<Vec<Injected>>,
) -> anyhow::Result<Stack> {
    let mut pool = Schedulers {
        stack: &mut stack,
        standbys,
    };
    let mut cycle = FaultKind::CYCLE.iter().copied().cycle();
    let mut settings_turn = 0u32;
    let mut file_turn = 0u32;
    let postpone_at = opts.opens_in / 2;
    let mut postponed = false;
    let mut n = 0;
    while n < opts.faults {
        let due = opts.first_fault() + opts.fault_every * n;
        let kind = if !postponed && due >= postpone_at {
            postponed = true;
            FaultKind::Postpone
        } else {
            cycle.next().unwrap_or(FaultKind::KillHolder)
        };
        let wait = (start + due).saturating_duration_since(Instant::now());
        std::thread::sleep(wait);
        let at = Instant::now();
        let detail = match kind {
            FaultKind::Postpone => {
                let opens = start_ms + (opts.opens_in + opts.postpone).as_millis() as u64;
                let out = scheduler::command(
                    pool.get(0).config_path(),
                    &["schedule", "main", "--opens-at", &format_time(opens)],
                );
                format!(
                    "opening moved to {} (exit {:?})",
                    format_time(opens),
                    out.status.code()
                )
            }
            FaultKind::KillHolder => match pool.holder() {
                Some(h) => {
                    pool.replace(h);
                    format!("scheduler {h} killed; a new one started as a standby")
                }
                None => "no holder found within 5 s: skipped".into(),
            },
            FaultKind::StopHolder => match pool.holder() {
                Some(h) => {
                    pool.get(h).sigstop();
                    std::thread::sleep(Duration::from_millis(opts.lease_ttl_ms + 1_000));
                    pool.get(h).sigcont();
                    format!("scheduler {h} stopped for {} ms", opts.lease_ttl_ms + 1_000)
                }
                None => "no holder found within 5 s: skipped".into(),
            },
            FaultKind::RestartRedis => {
                pool.stack.redis.stop();
                std::thread::sleep(Duration::from_millis(500));
                pool.stack.redis.restart();
                "Redis killed, down 0.5 s, restarted from its AOF".into()
            }
            FaultKind::PauseRedis => {
                pool.stack.redis.pause();
                std::thread::sleep(Duration::from_millis(1_500));
                pool.stack.redis.resume();
                "Redis stopped for 1.5 s".into()
            }
            FaultKind::RestartGateway => {
                pool.stack.gateway.restart();
                "gateway killed and restarted on its port".into()
            }
            FaultKind::ChangeSettings => {
                settings_turn += 1;
                let set = match settings_turn % 4 {
                    1 => format!("abandon_after_ms={}", opts.abandon_after_ms * 3 / 2),
                    2 => format!("admit_rate_per_second={}", opts.admit_rate * 1.5),
                    3 => format!("abandon_after_ms={}", opts.abandon_after_ms),
                    _ => format!("admit_rate_per_second={}", opts.admit_rate),
                };
                let out = scheduler::command(
                    pool.get(0).config_path(),
                    &["settings", "main", "--set", &set],
                );
                let said = String::from_utf8_lossy(&out.stdout);
                // Its first line says whether the holder put it in force,
                // the next one why not, if it did not.
                let told: Vec<&str> = said
                    .lines()
                    .take(2)
                    .filter(|l| l.starts_with("queue ") || l.contains("lease holder"))
                    .map(str::trim)
                    .collect();
                format!(
                    "settings --set {set} (exit {:?}: {})",
                    out.status.code(),
                    told.join("; ")
                )
            }
            FaultKind::ReloadOtherFile => match pool.holder() {
                Some(h) => {
                    file_turn += 1;
                    let rate = if file_turn % 2 == 1 {
                        opts.admit_rate * 0.75
                    } else {
                        opts.admit_rate
                    };
                    let path = pool.get(h).config_path().to_path_buf();
                    rewrite_rate(&path, rate)?;
                    pool.get(h).sighup();
                    format!("scheduler {h}'s file now admits {rate}/s; SIGHUP")
                }
                None => "no holder found within 5 s: skipped".into(),
            },
        };
        let injected = Injected {
            at_s: (at - start).as_secs_f64(),
            lasted_s: at.elapsed().as_secs_f64(),
            kind,
            detail,
        };
        eprintln!(
            "chaos {:>3}/{} at {:>6.1} s: {} — {}",
            n + 1,
            opts.faults,
            injected.at_s,
            kind.label(),
            injected.detail
        );
        log.lock().unwrap_or_else(|p| p.into_inner()).push(injected);
        n += 1;
    }
    // Let the line drain, then hand everything back.
    std::thread::sleep((start + opts.deadline()).saturating_duration_since(Instant::now()));
    drop(pool);
    Ok(stack)
}

/// Sets `admit_rate_per_second` in a scheduler's config file.
fn rewrite_rate(path: &Path, rate: f64) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path)?;
    let mut found = false;
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("admit_rate_per_second") {
                found = true;
                format!("admit_rate_per_second = {rate}")
            } else {
                l.to_string()
            }
        })
        .collect();
    if !found {
        bail!("{} sets no admit_rate_per_second", path.display());
    }
    std::fs::write(path, lines.join("\n") + "\n")?;
    Ok(())
}

impl ChaosReport {
    /// How many visitors ended each way.
    pub fn count(&self, outcome: Outcome) -> usize {
        self.records.iter().filter(|r| r.outcome == outcome).count()
    }

    /// Faults injected (skipped ones left out).
    pub fn faults(&self) -> usize {
        self.injected
            .iter()
            .filter(|f| !f.detail.contains("skipped"))
            .count()
    }
}

impl fmt::Display for ChaosReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Chaos run through the whole room ({})", self.machine)?;
        writeln!(f, "{}", self.settings)?;
        writeln!(f)?;
        writeln!(
            f,
            "| fault | injected | admissions moved again after (p50 / max) |"
        )?;
        writeln!(f, "|---|---:|---:|")?;
        let mut kinds: Vec<FaultKind> = self.injected.iter().map(|i| i.kind).collect();
        kinds.sort();
        kinds.dedup();
        for kind in kinds {
            let count = self
                .injected
                .iter()
                .filter(|i| i.kind == kind && !i.detail.contains("skipped"))
                .count();
            let mut after: Vec<f64> = self
                .resumed_s
                .iter()
                .filter(|(k, _)| *k == kind)
                .map(|(_, s)| *s)
                .collect();
            after.sort_by(f64::total_cmp);
            let moved = if after.is_empty() {
                "–".to_string()
            } else {
                format!(
                    "{:.1} s / {:.1} s",
                    percentile(&after, 50.0),
                    after.last().copied().unwrap_or(0.0)
                )
            };
            writeln!(f, "| {} | {count} | {moved} |", kind.label())?;
        }
        writeln!(
            f,
            "| **all** | **{}** ({} skipped: no holder) | |",
            self.faults(),
            self.injected.len() - self.faults()
        )?;
        writeln!(f)?;
        writeln!(f, "| invariant | checked | violations |")?;
        writeln!(f, "|---|---|---:|")?;
        for inv in Invariant::ALL {
            let checked = self
                .checked
                .iter()
                .find(|(i, _)| *i == inv)
                .map_or("", |(_, c)| c.as_str());
            let broken = self.violations.iter().filter(|(i, _)| *i == inv).count();
            writeln!(f, "| {} | {checked} | {broken} |", inv.label())?;
        }
        let count = |o: Outcome| self.count(o);
        writeln!(f)?;
        writeln!(
            f,
            "Visitors: {} · ordered {} · still waiting at the deadline {} · other {} · requests that failed (retried as the page does) {} · Redis readings missed while it was down or paused {}",
            self.records.len(),
            count(Outcome::Ordered),
            count(Outcome::Deadline),
            count(Outcome::Other),
            self.records.iter().map(|r| r.errors as u64).sum::<u64>(),
            self.missed_samples
        )?;
        writeln!(
            f,
            "Opening in force: {} ({:.1} s after the start)",
            format_time(self.opens_at),
            (self.opens_at as f64 - self.start_ms as f64) / 1e3
        )?;
        if self.violations.is_empty() {
            writeln!(f, "Violations: 0")?;
        } else {
            writeln!(f, "Violations: {}", self.violations.len())?;
            for (inv, what) in self.violations.iter().take(40) {
                writeln!(f, "  {}: {what}", inv.label())?;
            }
        }
        writeln!(f)?;
        writeln!(f, "Faults:")?;
        for i in &self.injected {
            writeln!(
                f,
                "  {:>6.1} s (+{:.1} s) {} — {}",
                i.at_s,
                i.lasted_s,
                i.kind.label(),
                i.detail
            )?;
        }
        Ok(())
    }
}

/// Writes the run's timeline as `load-chaos.svg` in `dir`: the line and
/// the pre-queue, the slots held against `max_active`, admissions, and
/// every fault as a mark on its kind's row.
pub fn write_chart(
    report: &ChaosReport,
    max_active: u64,
    dir: &Path,
) -> anyhow::Result<std::path::PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let path = dir.join("load-chaos.svg");
    super::charts::chaos_chart(report, max_active, &path)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok(path)
}

/// The kinds in the order the chart's fault rows show them.
pub fn chart_rows() -> Vec<FaultKind> {
    let mut rows = vec![FaultKind::Postpone];
    rows.extend(FaultKind::CYCLE);
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch(admitted: &[(&str, u64, u64)], claimed: &[&str]) -> Watch {
        let mut w = Watch::default();
        for &(user, ticket, at) in admitted {
            w.tickets.insert(user.to_string(), ticket);
            w.first_active.insert(user.to_string(), at);
        }
        w.claimed = claimed.iter().map(|u| u.to_string()).collect();
        w
    }

    #[test]
    fn an_admission_behind_a_later_ticket_is_an_inversion() {
        // In order, one tick sharing two admissions: none.
        let kept = watch(&[("a", 1, 100), ("b", 2, 100), ("c", 3, 200)], &[]);
        assert_eq!(drawn_order(&kept), (3, vec![]));
        // Ticket 1 admitted after ticket 2 and 3: one inversion per
        // visitor admitted too early.
        let broken = watch(&[("a", 1, 300), ("b", 2, 100), ("c", 3, 200)], &[]);
        let (seen, inversions) = drawn_order(&broken);
        assert_eq!(seen, 3);
        assert_eq!(inversions.len(), 2, "{inversions:?}");
        // A visitor passed over asleep is left out.
        let asleep = watch(&[("a", 1, 300), ("b", 2, 100), ("c", 3, 200)], &["a"]);
        assert_eq!(drawn_order(&asleep), (2, vec![]));
        // Only visitors whose ticket was seen count.
        let mut unseen = broken;
        unseen.tickets.remove("a");
        assert_eq!(drawn_order(&unseen), (2, vec![]));
    }

    fn record(outcome: Outcome) -> Record {
        Record {
            polling: Polling::Adaptive,
            leaver: false,
            entered_ms: Some(1_000),
            position_at_entry: Some(1),
            pre_queued: true,
            eta_at_entry_s: None,
            enters: 1,
            polls: 3,
            approximate_polls: 0,
            issued_ms: None,
            seen_admitted_ms: None,
            order_requests: 0,
            errors: 0,
            timeouts: 0,
            sent: Vec::new(),
            outcome,
            ended_in: None,
            refused_with: Vec::new(),
        }
    }

    #[test]
    fn a_visitor_told_its_place_is_gone_or_admitted_early_is_a_violation() {
        let opens = 10_000;
        let ordered = Record {
            seen_admitted_ms: Some(opens + 5),
            ..record(Outcome::Ordered)
        };
        let waiting = record(Outcome::Deadline);
        assert!(visitor_violations(&[ordered.clone(), waiting], opens).is_empty());
        let abandoned = Record {
            ended_in: Some("abandoned".into()),
            ..record(Outcome::Other)
        };
        let refused = Record {
            refused_with: vec!["404 not_in_queue".into()],
            ..record(Outcome::Deadline)
        };
        let early = Record {
            seen_admitted_ms: Some(opens - 1),
            ..ordered
        };
        let found: Vec<Invariant> = visitor_violations(&[abandoned, refused, early], opens)
            .into_iter()
            .map(|(i, _)| i)
            .collect();
        assert_eq!(
            found,
            [
                Invariant::NoPlaceLost,
                Invariant::NoPlaceLost,
                Invariant::NotBeforeOpening
            ]
        );
    }

    #[test]
    fn the_schedule_fits_its_faults_and_is_checked() {
        let smoke = ChaosOptions::smoke();
        smoke.validate().expect("the smoke run is valid");
        assert!(smoke.deadline() > smoke.last_fault() + smoke.drain);
        // The postponement falls among the faults, before the opening.
        assert!(smoke.opens_in / 2 >= smoke.first_fault());
        assert!(smoke.opens_in / 2 < smoke.last_fault());
        let one_scheduler = ChaosOptions {
            schedulers: 1,
            ..smoke.clone()
        };
        assert!(one_scheduler.validate().is_err());
        let too_often = ChaosOptions {
            fault_every: Duration::from_millis(100),
            ..smoke
        };
        assert!(too_often.validate().is_err());
    }
}
