//! A virtual-time simulation of the polling policy at production scale: the
//! line, the scheduler's admissions and every visitor's enters and polls
//! as events on one clock, with no network and no Redis. The adaptive mode
//! asks `queuegate_shared::policy::PollPolicy` for each interval, exactly as
//! the worker's position reply does; the other modes are the yardsticks.
//!
//! What it models, and what it leaves out, is listed on [`Scenario`].
//! With a [`NearZone`] it models docs/uncapped-line.md instead (only the
//! visitors near the head poll Redis) and counts Redis requests by kind
//! per second ([`RedisSeconds`], [`Fleet`] for the edge's snapshot
//! refreshes); [`uncapped`] runs issue 24's crowds.

pub mod line;
pub mod uncapped;

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use queuegate_shared::policy::PollPolicy;
use queuegate_shared::Settings;

use crate::seeded::SplitMix64;
use line::Line;

/// How visitors choose when to poll again.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Polling {
    /// The server's `retryAfterMs` from shared's policy.
    Adaptive(PollPolicy),
    /// A fixed interval (ms), whatever the position.
    Fixed(u64),
    /// 5 s while the estimated wait is under 1 min, 15 s under 5 min,
    /// 30 s under 15 min, 60 s beyond (a common tiered schedule).
    Tiered,
}

impl Polling {
    /// Milliseconds to the next poll at `position`, before jitter.
    pub fn interval_ms(&self, position: u64, rate: f64) -> u64 {
        match self {
            Polling::Adaptive(p) => p.retry_after_ms(position, Some(rate), true),
            Polling::Fixed(ms) => *ms,
            Polling::Tiered => {
                let eta_s = position as f64 / rate;
                match eta_s {
                    e if e < 60.0 => 5_000,
                    e if e < 300.0 => 15_000,
                    e if e < 900.0 => 30_000,
                    _ => 60_000,
                }
            }
        }
    }

    /// A short name for tables.
    pub fn label(&self) -> String {
        match self {
            Polling::Adaptive(p) => format!(
                "adaptive (retryAfter, {}–{} s)",
                p.poll_min_ms / 1_000,
                p.poll_max_ms / 1_000
            ),
            Polling::Fixed(ms) => format!("fixed {} s", *ms as f64 / 1_000.0),
            Polling::Tiered => "tiered 5/15/30/60 s by ETA".into(),
        }
    }
}

/// One crowd. Modelled: arrivals falling linearly from the opening (the
/// shape `queuegate-load` uses), a tick every `tick_ms` popping the head at
/// `admit_rate` with fractional carry, the `max_waiting` cap (a refused
/// visitor retries enter after 30 s, as the page does on 429), leavers who
/// stop after 0–2 polls and are dropped `abandon_after_ms` after their last
/// request, each wait drawn ×U(0.8, 1.2) as the page spreads it. Left out:
/// slot limits (`max_active` is assumed not to bind), the idle passthrough,
/// network and server time (a reply arrives the instant it is asked).
///
/// With [`Scenario::near_zone`] set, the line is docs/uncapped-line.md's:
/// see [`NearZone`].
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Visitors who arrive.
    pub arrivals: u64,
    /// All arrive within this window (ms), most at the start.
    pub window_ms: u64,
    /// Share of visitors who give up after 0–2 polls.
    pub leave_share: f64,
    /// The queue's settings (rate, tick, cap, poll bounds, abandon timeout).
    pub settings: Settings,
    /// The refused visitor's wait before entering again (the 429's Retry-After).
    pub full_retry_ms: u64,
    /// Seed of the draws (arrivals, leavers, jitter).
    pub seed: u64,
    /// Each wait ×U(0.8, 1.2) (true), or exactly as told (false: for
    /// traces that can be worked out by hand).
    pub jitter: bool,
    /// The uncapped line's near zone; None: every poll is a Redis call and
    /// silence drops a visitor anywhere in the line.
    pub near_zone: Option<NearZone>,
    /// Sleeping phones and the sleep grace (docs/engine.md, *Sleep grace*);
    /// None: the model before the grace (silence drops a near visitor
    /// after `abandon_after_ms`, a leaver at the head takes a token).
    pub sleepers: Option<Sleepers>,
}

/// Sleep grace in the model (with a near zone). A share of the stayers
/// sleep once, from their first poll near the head, for a time drawn
/// U(`min_ms`, `max_ms`), then poll at once (the page polls on waking).
/// Silence counts from the later of the last request and the zone front
/// passing: within `sleep_grace()` a visitor keeps its place, and one the
/// head reaches while silent past `abandon_after_ms` is passed over (no
/// token, no rate) into a claim; back within the grace a claim is admitted
/// ahead of the line (it takes the next rate token), past it the return
/// poll finds it dropped. A sleeper past its grace still in line is taken
/// out when it returns (the engine's scan does it between 1× and 1.25×
/// the grace). Leavers are dropped the grace after the front passes them,
/// and passed over at the head like sleepers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sleepers {
    /// Share of the stayers whose phone sleeps.
    pub share: f64,
    /// Shortest sleep (ms).
    pub min_ms: u64,
    /// Longest sleep (ms).
    pub max_ms: u64,
}

impl Scenario {
    /// The issue's crowd: 200,000 arrivals over 10 minutes, 10 % leavers,
    /// the production defaults (175/s, poll 1–30 s, 52,500 max waiting).
    pub fn production() -> Scenario {
        Scenario {
            arrivals: 200_000,
            window_ms: 600_000,
            leave_share: 0.10,
            settings: Settings::default(),
            full_retry_ms: 30_000,
            seed: 0x5eed_9011,
            jitter: true,
            near_zone: None,
            sleepers: None,
        }
    }

    /// Issue 24's crowd: `arrivals` over `window_ms` at the production
    /// defaults but with no cap (`max_waiting` above the crowd), the line
    /// split by `zone`.
    pub fn uncapped(arrivals: u64, window_ms: u64, zone: NearZone) -> Scenario {
        let mut s = Scenario::production();
        s.arrivals = arrivals;
        s.window_ms = window_ms;
        s.settings.max_waiting = arrivals + 1;
        s.near_zone = Some(zone);
        s
    }
}

/// docs/uncapped-line.md in the model. The near zone is the first
/// `Z = ⌈rate × exact_zone_ms / 1000⌉` visitors, the zone taken as given:
/// the design wants it at least `abandon_after_ms + 2 × poll_max_ms`
/// (150 s at the defaults), or a leaver who went silent far back reaches
/// the head before its silence drops it. A poll is a Redis call
/// (*exact*) when the visitor's rank is ≤ Z at that moment, or it has been
/// admitted (its ticket is behind `zone_front`), or it has no place; any
/// other poll is answered at the edge (*far back*) and costs Redis nothing
/// itself, only the snapshot refreshes ([`Fleet`]). A far-back visitor is
/// told `min(policy interval, (rank − Z) / rate)`, at least `poll_min`.
/// Silence drops a visitor only once it is near: a zone front moves each
/// tick to the ticket at rank Z and marks every visitor it passes seen,
/// and a leaver is dropped `abandon_after_ms` after the later of its last
/// request and that moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NearZone {
    /// The near zone's length in time (the setting of the same name).
    pub exact_zone_ms: u64,
    /// Far-back stayers beyond the wake band (Z + 2.4 × rate × poll_max
    /// visitors) are not simulated poll by poll: each such visitor counts
    /// `tick / poll_max` far-back polls a tick (one every `poll_max` on
    /// average, ×U(0.8, 1.2) having mean 1) until a wake front passes its
    /// ticket; its first own poll is then U(0, poll_max) later. Their polls
    /// cost Redis nothing, so only the refresh estimate and the per-visitor
    /// poll counts see the difference; it makes 10,000,000 feasible.
    pub aggregate_far: bool,
    /// The exact head (0: none, every near poll is exact): the first
    /// `⌈rate × exact_head_ms / 1000⌉` visitors poll Redis every time; the
    /// rest of the near zone polls Redis only when its last Redis request
    /// is `liveness_ms` old or more (to stay alive) and is answered at the
    /// edge otherwise (docs/uncapped-line.md, *Near polls at the edge*).
    pub exact_head_ms: u64,
    /// See [`NearZone::exact_head_ms`].
    pub liveness_ms: u64,
}

impl NearZone {
    /// Visitors in the near zone (Z) at `rate` admissions/s: at least one.
    pub fn visitors(&self, rate: f64) -> u64 {
        ((rate * self.exact_zone_ms as f64 / 1_000.0).ceil() as u64).max(1)
    }

    /// Visitors in the exact head at `rate`, if there is one.
    fn head(&self, rate: f64) -> Option<u64> {
        (self.exact_head_ms > 0)
            .then(|| ((rate * self.exact_head_ms as f64 / 1_000.0).ceil() as u64).max(1))
    }

    /// Rank beyond which the aggregate model lets a stayer sleep.
    fn wake_band(&self, settings: &Settings) -> u64 {
        let rate = settings.admit_rate_per_second;
        self.visitors(rate) + (2.4 * rate * settings.poll_max_ms as f64 / 1_000.0).ceil() as u64
    }
}

/// What one mode cost and how promptly it noticed.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Visitors admitted while still there (they noticed it).
    pub admitted: u64,
    /// Tokens issued to visitors who had already left.
    pub admitted_absent: u64,
    /// Leavers dropped before their turn.
    pub dropped: u64,
    /// Visitors passed over at the head while silent (sleep grace): claims.
    pub passed_over: u64,
    /// Claims taken up: sleepers admitted ahead of the line on return.
    pub reclaimed: u64,
    /// Sleepers back after their grace: dropped.
    pub slept_too_long: u64,
    /// The most claims held at once.
    pub claims_peak: u64,
    /// Enter requests, retries after a refusal included.
    pub enters: u64,
    /// Enter requests refused because the line was full.
    pub refused: u64,
    /// Position requests simulated one by one (exact and far back).
    pub polls: u64,
    /// Position requests that were Redis calls.
    pub exact_polls: u64,
    /// Position requests answered at the edge, the aggregate model's
    /// included (so fractional).
    pub edge_polls: f64,
    /// Position requests per admitted visitor (each visitor's count, sorted;
    /// the aggregate model's far-back polls are not in it).
    pub polls_per_admitted: Vec<f64>,
    /// Admission to the poll that saw it (ms, sorted).
    pub lag_ms: Vec<f64>,
    /// First enter to admission (ms, sorted).
    pub wait_ms: Vec<f64>,
    /// The zone front passing a visitor whose last request was far back,
    /// to its next poll (ms, sorted; the uncapped line only): how promptly
    /// a visitor coming near talks to Redis, now that its silence counts.
    pub near_delay_ms: Vec<f64>,
    /// Position requests in each second (simulated one by one).
    pub polls_per_second: Vec<u32>,
    /// Enter requests in each second.
    pub enters_per_second: Vec<u32>,
    /// People in line at the start of each second.
    pub waiting_per_second: Vec<u32>,
    /// The other Redis requests and the edge's polls, per second.
    pub redis: RedisSeconds,
    /// The near zone's visitors (Z), when the line has one.
    pub near_zone_visitors: Option<u64>,
    /// Events the simulation processed (its cost).
    pub events: u64,
    /// When the last admitted visitor noticed (ms).
    pub end_ms: u64,
}

/// Per second of simulated time (index = second): Redis requests by kind
/// other than enters (those are [`Outcome::enters_per_second`]), and the
/// polls the edge answered, from which snapshot refreshes follow
/// ([`Fleet`]).
#[derive(Debug, Clone, Default)]
pub struct RedisSeconds {
    /// Position polls that were Redis calls.
    pub exact_polls: Vec<u32>,
    /// Admit ticks (one script call each, which also renews the lease).
    pub ticks: Vec<u32>,
    /// Orders: consume + settle, two per visitor who noticed admission.
    pub orders: Vec<u32>,
    /// Position polls answered at the edge (fractional: the aggregate
    /// model's sleeping visitors count by share).
    pub edge_polls: Vec<f64>,
}

/// Where the worker answers: `isolates` spread evenly over `locations`
/// (isolate `i` in location `i mod locations`), far-back polls spread
/// uniformly at random over the isolates. Each isolate refreshes its
/// snapshot (one `HMGET`) at most once every `refresh_s` seconds
/// (`snapshot::REFRESH_MS`), in such a window in which it answered at least
/// one poll at the edge; shared through the Cache API, one refresh per
/// location serves its isolates. The counts are expectations given the
/// second's edge polls `F`, as if each window held `F × refresh_s` of them:
/// an isolate answers none with probability `(1 − 1/isolates)^(F·refresh_s)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fleet {
    /// Worker isolates serving the queue.
    pub isolates: u64,
    /// Cloudflare locations they run in.
    pub locations: u64,
    /// Seconds an isolate keeps a snapshot (at least 1).
    pub refresh_s: u64,
}

impl Fleet {
    /// Expected refreshes in a second with `far_polls` far-back polls, each
    /// isolate refreshing its own snapshot.
    pub fn isolate_refreshes(&self, far_polls: f64) -> f64 {
        let n = self.isolates.max(1);
        let r = self.refresh_s.max(1) as f64;
        distinct_bins(far_polls * r, n, 1.0 / n as f64) / r
    }

    /// The same, one refresh per location shared through the Cache API:
    /// a location refreshes when any of its isolates answered.
    pub fn location_refreshes(&self, far_polls: f64) -> f64 {
        let n = self.isolates.max(1);
        let used = self.locations.clamp(1, n);
        let (each, more) = (n / used, n % used);
        let (r, draws) = (
            self.refresh_s.max(1) as f64,
            far_polls * self.refresh_s.max(1) as f64,
        );
        (distinct_bins(draws, more, (each + 1) as f64 / n as f64)
            + distinct_bins(draws, used - more, each as f64 / n as f64))
            / r
    }
}

/// Expected bins hit by `draws` draws among `bins` bins each drawn with
/// probability `p`.
fn distinct_bins(draws: f64, bins: u64, p: f64) -> f64 {
    if draws <= 0.0 || bins == 0 || p <= 0.0 {
        return 0.0;
    }
    let hit = if p >= 1.0 {
        1.0
    } else {
        -(draws * (-p).ln_1p()).exp_m1()
    };
    bins as f64 * hit
}

/// Redis requests of one second (or a mean of seconds), by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RedisCounts {
    /// Enter scripts (refused ones included).
    pub enters: f64,
    /// Position scripts (near, admitted or placeless visitors).
    pub exact_polls: f64,
    /// Snapshot `HMGET`s, one per isolate.
    pub refreshes_isolate: f64,
    /// Snapshot `HMGET`s, one per location.
    pub refreshes_location: f64,
    /// Admit ticks.
    pub ticks: f64,
    /// Consume + settle.
    pub orders: f64,
    /// Far-back polls answered at the edge (not Redis requests).
    pub edge_polls: f64,
}

impl RedisCounts {
    /// All Redis requests, snapshots refreshed per isolate.
    pub fn total_isolate(&self) -> f64 {
        self.enters + self.exact_polls + self.refreshes_isolate + self.ticks + self.orders
    }

    /// All Redis requests, snapshots refreshed per location.
    pub fn total_location(&self) -> f64 {
        self.enters + self.exact_polls + self.refreshes_location + self.ticks + self.orders
    }
}

/// Redis load over a set of seconds.
#[derive(Debug, Clone, Default)]
pub struct SteadyLoad {
    /// Seconds averaged.
    pub seconds: usize,
    /// Mean requests/s by kind.
    pub mean: RedisCounts,
    /// Per-second totals (per isolate), sorted.
    pub totals_isolate: Vec<f64>,
    /// Per-second totals (per location), sorted.
    pub totals_location: Vec<f64>,
}

impl Outcome {
    /// Redis requests in second `sec` by kind, refreshes for `fleet`.
    pub fn redis_at(&self, sec: usize, fleet: Fleet) -> RedisCounts {
        let n = |v: &[u32]| f64::from(v.get(sec).copied().unwrap_or(0));
        let edge = self.redis.edge_polls.get(sec).copied().unwrap_or(0.0);
        RedisCounts {
            enters: n(&self.enters_per_second),
            exact_polls: n(&self.redis.exact_polls),
            refreshes_isolate: fleet.isolate_refreshes(edge),
            refreshes_location: fleet.location_refreshes(edge),
            ticks: n(&self.redis.ticks),
            orders: n(&self.redis.orders),
            edge_polls: edge,
        }
    }

    /// The steady line: seconds from `from_ms` on (the last arrival) in
    /// which the line holds at least `share` of its peak.
    pub fn steady_seconds(&self, from_ms: u64, share: f64) -> Vec<usize> {
        let peak = self.waiting_per_second.iter().copied().max().unwrap_or(0);
        let floor = f64::from(peak) * share;
        let first = from_ms.div_ceil(1_000) as usize;
        (first..self.waiting_per_second.len())
            .filter(|&s| f64::from(self.waiting_per_second[s]) >= floor && peak > 0)
            .collect()
    }

    /// The settled line: seconds from `from_ms` on in which the line holds
    /// more than `above` visitors (a far back exists behind the near zone).
    pub fn settled_seconds(&self, from_ms: u64, above: u64) -> Vec<usize> {
        let first = from_ms.div_ceil(1_000) as usize;
        (first..self.waiting_per_second.len())
            .filter(|&s| u64::from(self.waiting_per_second[s]) > above)
            .collect()
    }

    /// Mean Redis requests/s by kind over `seconds`, and the per-second
    /// totals.
    pub fn load_over(&self, seconds: &[usize], fleet: Fleet) -> SteadyLoad {
        let mut load = SteadyLoad {
            seconds: seconds.len(),
            ..SteadyLoad::default()
        };
        let m = &mut load.mean;
        for &sec in seconds {
            let c = self.redis_at(sec, fleet);
            m.enters += c.enters;
            m.exact_polls += c.exact_polls;
            m.refreshes_isolate += c.refreshes_isolate;
            m.refreshes_location += c.refreshes_location;
            m.ticks += c.ticks;
            m.orders += c.orders;
            m.edge_polls += c.edge_polls;
            load.totals_isolate.push(c.total_isolate());
            load.totals_location.push(c.total_location());
        }
        let k = seconds.len().max(1) as f64;
        for x in [
            &mut m.enters,
            &mut m.exact_polls,
            &mut m.refreshes_isolate,
            &mut m.refreshes_location,
            &mut m.ticks,
            &mut m.orders,
            &mut m.edge_polls,
        ] {
            *x /= k;
        }
        load.totals_isolate.sort_by(f64::total_cmp);
        load.totals_location.sort_by(f64::total_cmp);
        load
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Tick,
    Enter(u32),
    Poll(u32),
    Drop(u32),
}

/// "Not yet" for the visitor's times and ticket.
const NONE: u32 = u32::MAX;
/// `leaves_after` of a visitor who stays.
const STAYS: u8 = u8::MAX;

/// One visitor, packed (32 bytes: 10,000,000 of them fit); times in ms.
#[derive(Debug, Clone)]
struct Visitor {
    ticket: u32,
    first_enter_ms: u32,
    admitted_ms: u32,
    /// The last request (enter or poll).
    last_ms: u32,
    /// When the zone front passed its ticket.
    near_ms: u32,
    polls: u32,
    /// Polls a leaver makes before going; STAYS for a stayer.
    leaves_after: u8,
    gone: bool,
    /// Far back, its polls counted in bulk (the aggregate model).
    asleep: bool,
    /// Has polled since the zone front passed it.
    polled_near: bool,
    /// Its last request was far back (rank > Z).
    far_at_last: bool,
    /// Its last Redis request (enter or exact poll).
    last_exact_ms: u32,
    /// How long its phone will sleep (ms; 0: it does not, or it has).
    sleep_ms: u32,
    /// Asleep until then (NONE: awake).
    asleep_until: u32,
    /// Passed over at the head: holds a claim.
    claimed: bool,
}

impl Visitor {
    fn new(leaves_after: Option<u32>) -> Visitor {
        Visitor {
            ticket: NONE,
            first_enter_ms: NONE,
            admitted_ms: NONE,
            last_ms: NONE,
            near_ms: NONE,
            polls: 0,
            leaves_after: leaves_after.map_or(STAYS, |n| n.min(u32::from(STAYS) - 1) as u8),
            gone: false,
            asleep: false,
            polled_near: false,
            far_at_last: false,
            last_exact_ms: NONE,
            sleep_ms: 0,
            asleep_until: NONE,
            claimed: false,
        }
    }
}

/// A simulated time as a visitor keeps it.
fn ms32(ms: u64) -> u32 {
    u32::try_from(ms)
        .ok()
        .filter(|&t| t != NONE)
        .expect("simulated time within 49 days")
}

fn bump(v: &mut Vec<u32>, at: u64, by: u32) {
    let sec = (at / 1_000) as usize;
    if v.len() <= sec {
        v.resize(sec + 1, 0);
    }
    v[sec] += by;
}

fn add(v: &mut Vec<f64>, at: u64, by: f64) {
    let sec = (at / 1_000) as usize;
    if v.len() <= sec {
        v.resize(sec + 1, 0.0);
    }
    v[sec] += by;
}

/// Runs one crowd with one polling mode. The same seed gives the same
/// arrivals and leavers in every mode, so modes compare on one crowd.
pub fn run(scenario: &Scenario, polling: Polling) -> Outcome {
    let s = &scenario.settings;
    let rate = s.admit_rate_per_second;
    let zone = scenario.near_zone;
    let near = zone.map(|z| z.visitors(rate));
    let wake_band = zone.filter(|z| z.aggregate_far).map(|z| z.wake_band(s));
    let n = usize::try_from(scenario.arrivals).expect("a crowd that fits in memory");
    assert!(
        u32::try_from(n).is_ok_and(|n| n < NONE),
        "at most 2^32 − 2 visitors"
    );
    let mut draws = SplitMix64::new(scenario.seed);
    let mut visitors: Vec<Visitor> = Vec::with_capacity(n);
    // Arrivals in time order, then id order: the order the heap gave them
    // when every enter was pushed first.
    let mut arrivals: Vec<(u32, u32)> = Vec::with_capacity(n);
    for id in 0..n as u32 {
        let u = draws.unit();
        let at = (scenario.window_ms as f64 * (1.0 - (1.0 - u).sqrt())) as u64;
        let leaves_after = (draws.unit() < scenario.leave_share).then(|| draws.up_to(2) as u32);
        let mut v = Visitor::new(leaves_after);
        if let Some(z) = scenario.sleepers.filter(|_| leaves_after.is_none()) {
            if draws.unit() < z.share {
                v.sleep_ms = ms32(z.min_ms + (draws.unit() * (z.max_ms - z.min_ms) as f64) as u64);
            }
        }
        visitors.push(v);
        arrivals.push((ms32(at), id));
    }
    arrivals.sort_unstable();
    let mut arrivals = arrivals.into_iter().peekable();
    let mut events: BinaryHeap<Reverse<(u64, u64, Event)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut push = |events: &mut BinaryHeap<_>, at: u64, e: Event| {
        seq += 1;
        events.push(Reverse((at, seq, e)));
    };
    push(&mut events, 0, Event::Tick);
    let mut pending = visitors.len();
    let mut line = Line::new(visitors.len());
    let mut holder: Vec<u32> = vec![0; visitors.len()];
    let mut out = Outcome {
        near_zone_visitors: near,
        ..Outcome::default()
    };
    let mut carry = 0.0f64;
    let per_tick = rate * s.tick_ms as f64 / 1_000.0;
    let spread = scenario.jitter;
    let jitter = |d: &mut SplitMix64, ms: u64| {
        if spread {
            (ms as f64 * (0.8 + 0.4 * d.unit())) as u64
        } else {
            ms
        }
    };
    // The policy's interval, cut far back to the time until the visitor
    // comes near (at least poll_min).
    let interval = |rank: u64| {
        let told = polling.interval_ms(rank, rate);
        match near {
            Some(z) if rank > z => {
                let until_near = ((rank - z) as f64 * 1_000.0 / rate) as u64;
                told.min(until_near).max(s.poll_min_ms)
            }
            _ => told,
        }
    };
    let is_exact = |rank: u64| near.is_none_or(|z| rank <= z);
    let head = zone.and_then(|z| z.head(rate));
    let liveness_ms = zone.map_or(0, |z| z.liveness_ms);
    // Whether a poll at `rank` asks Redis: anywhere without a near zone;
    // in the near zone unless an exact head is set, then in the head, or
    // when the visitor's last Redis request is liveness_ms old.
    let asks_redis = |rank: u64, now: u64, last_exact: u32| match head {
        None => is_exact(rank),
        Some(h) => {
            rank <= h
                || (is_exact(rank)
                    && (last_exact == NONE || now - u64::from(last_exact) >= liveness_ms))
        }
    };
    let (mut zone_front, mut wake_front, mut sleepers) = (0usize, 0usize, 0u64);
    // Sleep grace: a near visitor silent this long is dropped (before it,
    // after abandon_after_ms).
    let grace = scenario.sleepers.map(|_| s.sleep_grace());
    let silent_drop_ms = grace.unwrap_or(s.abandon_after_ms);
    let mut claims = 0u64;
    // Silence counts from the later of the last request and the front
    // passing (which marks the visitor seen).
    let silent_since = |v: &Visitor| -> u64 {
        let near = if v.near_ms == NONE { 0 } else { v.near_ms };
        u64::from(v.last_ms.max(near))
    };

    loop {
        let from_heap = events.peek().map(|Reverse((at, _, _))| *at);
        let arrival = arrivals.next_if(|&(at, _)| from_heap.is_none_or(|t| u64::from(at) <= t));
        let (now, event) = if let Some((at, id)) = arrival {
            (u64::from(at), Event::Enter(id))
        } else if let Some(Reverse((at, _, e))) = events.pop() {
            (at, e)
        } else {
            break;
        };
        out.events += 1;
        match event {
            Event::Tick => {
                if now % 1_000 == 0 {
                    out.waiting_per_second.push(line.len() as u32);
                }
                bump(&mut out.redis.ticks, now, 1);
                carry += per_tick;
                while carry >= 1.0 {
                    let Some(ticket) = line.pop_front() else {
                        break;
                    };
                    let v = &mut visitors[holder[ticket] as usize];
                    if grace.is_some() {
                        let asleep = v.asleep_until != NONE && now < u64::from(v.asleep_until);
                        if (asleep || v.gone) && now - silent_since(v) >= s.abandon_after_ms {
                            // Passed over: no token, no rate; the line goes on.
                            v.claimed = true;
                            out.passed_over += 1;
                            claims += 1;
                            out.claims_peak = out.claims_peak.max(claims);
                            if v.gone {
                                // A leaver's claim runs out unused (its
                                // Drop, due at the end of its grace, ends it).
                                out.dropped += 1;
                                pending -= 1;
                            }
                            continue;
                        }
                    }
                    carry -= 1.0;
                    v.admitted_ms = ms32(now);
                    if v.gone {
                        out.admitted_absent += 1;
                        pending -= 1;
                    }
                    if v.asleep {
                        // Never reached: the wake band is far behind the head.
                        v.asleep = false;
                        sleepers -= 1;
                        push(&mut events, now, Event::Poll(holder[ticket]));
                    }
                }
                if line.is_empty() {
                    carry = carry.min(per_tick);
                }
                if let Some(z) = near {
                    while zone_front < line.issued() && line.position(zone_front) <= z {
                        if line.contains(zone_front) {
                            let id = holder[zone_front];
                            let v = &mut visitors[id as usize];
                            v.near_ms = ms32(now);
                            if v.gone {
                                push(&mut events, now + silent_drop_ms, Event::Drop(id));
                            }
                        }
                        zone_front += 1;
                    }
                }
                if let Some(band) = wake_band {
                    while wake_front < line.issued() && line.position(wake_front) <= band {
                        if line.contains(wake_front) {
                            let id = holder[wake_front];
                            let v = &mut visitors[id as usize];
                            if v.asleep {
                                v.asleep = false;
                                sleepers -= 1;
                                let at = now + (draws.unit() * s.poll_max_ms as f64) as u64;
                                push(&mut events, at, Event::Poll(id));
                            }
                        }
                        wake_front += 1;
                    }
                    let far = sleepers as f64 * s.tick_ms as f64 / s.poll_max_ms as f64;
                    add(&mut out.redis.edge_polls, now, far);
                    out.edge_polls += far;
                }
                if pending > 0 {
                    push(&mut events, now + s.tick_ms, Event::Tick);
                }
            }
            Event::Enter(id) => {
                out.enters += 1;
                bump(&mut out.enters_per_second, now, 1);
                let v = &mut visitors[id as usize];
                if v.first_enter_ms == NONE {
                    v.first_enter_ms = ms32(now);
                }
                v.last_ms = ms32(now);
                if line.len() as u64 >= s.max_waiting {
                    out.refused += 1;
                    if v.leaves_after != STAYS {
                        v.gone = true;
                        pending -= 1;
                    } else {
                        push(&mut events, now + scenario.full_retry_ms, Event::Enter(id));
                    }
                    continue;
                }
                let ticket = line.join();
                holder[ticket] = id;
                v.ticket = ticket as u32;
                v.last_exact_ms = ms32(now);
                let rank = line.position(ticket);
                v.far_at_last = !is_exact(rank);
                if v.leaves_after == 0 {
                    v.gone = true;
                    push(&mut events, now + silent_drop_ms, Event::Drop(id));
                } else if v.leaves_after == STAYS && wake_band.is_some_and(|b| rank > b) {
                    v.asleep = true;
                    sleepers += 1;
                } else {
                    let next = interval(rank);
                    push(&mut events, now + jitter(&mut draws, next), Event::Poll(id));
                }
            }
            Event::Poll(id) => {
                out.polls += 1;
                bump(&mut out.polls_per_second, now, 1);
                let v = &mut visitors[id as usize];
                v.polls += 1;
                let silent_from = silent_since(v);
                v.last_ms = ms32(now);
                if v.near_ms != NONE && !v.polled_near {
                    v.polled_near = true;
                    if v.far_at_last {
                        out.near_delay_ms.push((now - u64::from(v.near_ms)) as f64);
                    }
                }
                if v.admitted_ms != NONE {
                    let admitted = u64::from(v.admitted_ms);
                    out.exact_polls += 1;
                    bump(&mut out.redis.exact_polls, now, 1);
                    bump(&mut out.redis.orders, now, 2);
                    out.admitted += 1;
                    out.lag_ms.push((now - admitted) as f64);
                    let first = if v.first_enter_ms == NONE {
                        admitted
                    } else {
                        u64::from(v.first_enter_ms)
                    };
                    out.wait_ms.push((admitted - first) as f64);
                    out.polls_per_admitted.push(f64::from(v.polls));
                    out.end_ms = out.end_ms.max(now);
                    pending -= 1;
                    continue;
                }
                if v.asleep_until != NONE {
                    // Awake again: the page polls at once, one Redis request.
                    v.asleep_until = NONE;
                    let within = now - silent_from <= grace.unwrap_or(0);
                    if v.claimed || !within {
                        v.last_exact_ms = ms32(now);
                        out.exact_polls += 1;
                        bump(&mut out.redis.exact_polls, now, 1);
                        if v.claimed {
                            claims -= 1;
                        }
                        if v.claimed && within {
                            // Ahead of the line: the next rate token; it
                            // learns of its token at its next poll.
                            v.admitted_ms = ms32(now);
                            carry -= 1.0;
                            out.reclaimed += 1;
                            push(&mut events, now + s.poll_min_ms, Event::Poll(id));
                        } else {
                            if !v.claimed {
                                line.remove(v.ticket as usize);
                            }
                            out.dropped += 1;
                            out.slept_too_long += 1;
                            pending -= 1;
                        }
                        continue;
                    }
                }
                let rank = if v.ticket == NONE {
                    0
                } else {
                    line.position(v.ticket as usize)
                };
                v.far_at_last = !is_exact(rank);
                if v.ticket == NONE || asks_redis(rank, now, v.last_exact_ms) {
                    v.last_exact_ms = ms32(now);
                    out.exact_polls += 1;
                    bump(&mut out.redis.exact_polls, now, 1);
                } else {
                    out.edge_polls += 1.0;
                    add(&mut out.redis.edge_polls, now, 1.0);
                }
                if v.leaves_after != STAYS && u32::from(v.leaves_after) == v.polls {
                    v.gone = true;
                    push(&mut events, now + silent_drop_ms, Event::Drop(id));
                    continue;
                }
                if v.sleep_ms > 0 && v.near_ms != NONE {
                    // Its phone sleeps from its first poll near the head.
                    let until = now + u64::from(v.sleep_ms);
                    v.sleep_ms = 0;
                    v.asleep_until = ms32(until);
                    push(&mut events, until, Event::Poll(id));
                    continue;
                }
                if v.leaves_after == STAYS && wake_band.is_some_and(|b| rank > b) {
                    v.asleep = true;
                    sleepers += 1;
                    continue;
                }
                let next = interval(rank);
                push(&mut events, now + jitter(&mut draws, next), Event::Poll(id));
            }
            Event::Drop(id) => {
                let v = &mut visitors[id as usize];
                if v.claimed && v.gone {
                    // A leaver's claim: it ends with its grace (the later
                    // of its Drops).
                    if now >= silent_since(v) + silent_drop_ms {
                        v.claimed = false;
                        claims -= 1;
                    }
                    continue;
                }
                if v.admitted_ms != NONE || v.ticket == NONE {
                    continue;
                }
                if near.is_some() {
                    // Silence counts only once the zone front has passed
                    // the visitor; the front schedules the drop then.
                    if v.near_ms == NONE {
                        continue;
                    }
                    let due = u64::from(v.last_ms.max(v.near_ms)) + silent_drop_ms;
                    if now < due {
                        continue;
                    }
                }
                if line.remove(v.ticket as usize) {
                    out.dropped += 1;
                    pending -= 1;
                }
            }
        }
    }
    for v in [
        &mut out.polls_per_admitted,
        &mut out.lag_ms,
        &mut out.wait_ms,
        &mut out.near_delay_ms,
    ] {
        v.sort_by(f64::total_cmp);
    }
    out
}

/// The closed-form polling load of `policy.rs` for `waiting` people (per
/// second): `k·r·(1 + ln(max/min)) + (N − k·r·max)/max` with `k = 2`,
/// intervals in seconds; below `k·r·max` people, the sum over the line.
pub fn closed_form_bound(policy: &PollPolicy, waiting: u64) -> f64 {
    let k = 2.0;
    let r = policy.admit_rate_per_second;
    let (min, max) = (
        policy.poll_min_ms as f64 / 1_000.0,
        policy.poll_max_ms as f64 / 1_000.0,
    );
    let n = waiting as f64;
    if n <= k * r * min {
        return n / min;
    }
    if n <= k * r * max {
        return k * r * (1.0 + (n / (k * r * min)).ln());
    }
    k * r * (1.0 + (max / min).ln()) + (n - k * r * max) / max
}

#[cfg(test)]
mod tests {
    use super::*;
    use queuegate_testkit::measure::percentile;

    fn small() -> Scenario {
        let mut s = Scenario::production();
        s.arrivals = 3_000;
        s.window_ms = 20_000;
        s.settings.admit_rate_per_second = 50.0;
        s.settings.max_waiting = 1_000;
        s
    }

    #[test]
    fn everyone_is_admitted_dropped_or_absent_once() {
        let s = small();
        let out = run(&s, Polling::Adaptive(s.settings.poll_policy()));
        assert!(out.refused > 0, "the cap binds in this crowd");
        let leavers_refused = s.arrivals - out.admitted - out.admitted_absent - out.dropped;
        assert!(leavers_refused <= out.refused, "{out:?}");
        assert_eq!(out.polls_per_admitted.len() as u64, out.admitted);
        assert!(out.admitted > s.arrivals * 8 / 10);
    }

    #[test]
    fn adaptive_notices_within_poll_min_plus_jitter() {
        let s = small();
        let out = run(&s, Polling::Adaptive(s.settings.poll_policy()));
        let max_lag = out.lag_ms.last().copied().unwrap_or_default();
        assert!(max_lag <= 1.2 * s.settings.poll_min_ms as f64, "{max_lag}");
        let fixed = run(&s, Polling::Fixed(2_000));
        assert!(out.polls < fixed.polls);
    }

    /// Four visitors at t = 0, admitted one a second; poll 1–4 s, no
    /// jitter, no leavers, a near zone of one visitor (1 s at 1/s). The
    /// trace, worked out by hand from `PollPolicy` (`clamp(rank × 500 ms,
    /// 1 s, 4 s)`) and the cut `(rank − 1) s`:
    ///
    /// ```text
    /// t=0     enters v0..v3 at ranks 1..4: next polls at 1, 1, 1.5, 2 s
    ///         (v2: min(1.5, 2); v3: min(2, 3)); tick admits v0; the zone
    ///         front passes v1 (rank 1)
    /// t=1     v0 sees admission (exact, order); v1 rank 1 exact, near
    ///         since 0 (far at its enter: delay 1 s); tick admits v1,
    ///         front passes v2
    /// t=1.5   v2 rank 1 exact (near since 1: delay 0.5 s)
    /// t=2     v3 rank 2 > Z: at the edge, next min(1, 1) = 1 s; v1 sees
    ///         admission; tick admits v2, front passes v3
    /// t=2.5   v2 sees admission
    /// t=3     v3 rank 1 exact (near since 2: delay 1 s); tick admits v3
    /// t=4     v3 sees admission; last tick
    /// ```
    fn by_hand() -> Scenario {
        let mut s = Scenario::production();
        s.arrivals = 4;
        s.window_ms = 0;
        s.leave_share = 0.0;
        s.jitter = false;
        s.settings.admit_rate_per_second = 1.0;
        s.settings.tick_ms = 1_000;
        s.settings.poll_min_ms = 1_000;
        s.settings.poll_max_ms = 4_000;
        s.settings.max_waiting = 5;
        s.near_zone = Some(NearZone {
            exact_head_ms: 0,
            liveness_ms: 0,
            exact_zone_ms: 1_000,
            aggregate_far: false,
        });
        s
    }

    #[test]
    fn redis_requests_by_kind_in_a_crowd_worked_out_by_hand() {
        let s = by_hand();
        let out = run(&s, Polling::Adaptive(s.settings.poll_policy()));
        assert_eq!(out.near_zone_visitors, Some(1));
        assert_eq!((out.admitted, out.admitted_absent, out.dropped), (4, 0, 0));
        assert_eq!((out.enters, out.polls, out.exact_polls), (4, 8, 7));
        assert_eq!(out.edge_polls, 1.0);
        assert_eq!(out.enters_per_second, vec![4]);
        assert_eq!(out.redis.exact_polls, vec![0, 3, 2, 1, 1]);
        assert_eq!(out.redis.edge_polls, vec![0.0, 0.0, 1.0]);
        assert_eq!(out.redis.ticks, vec![1; 5]);
        assert_eq!(out.redis.orders, vec![0, 2, 4, 0, 2]);
        assert_eq!(out.waiting_per_second, vec![4, 3, 2, 1, 0]);
        assert_eq!(out.lag_ms, vec![500.0, 1_000.0, 1_000.0, 1_000.0]);
        assert_eq!(out.near_delay_ms, vec![500.0, 1_000.0, 1_000.0]);
        assert_eq!(out.events, 4 + 8 + 5);

        // Second 2: two exact polls, one far-back poll (one refresh
        // however many isolates), a tick, two orders of two requests.
        let fleet = Fleet {
            isolates: 10,
            locations: 3,
            refresh_s: 1,
        };
        let c = out.redis_at(2, fleet);
        let near = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(
            near(c.refreshes_isolate, 1.0) && near(c.refreshes_location, 1.0),
            "{c:?}"
        );
        assert_eq!(
            c,
            RedisCounts {
                enters: 0.0,
                exact_polls: 2.0,
                refreshes_isolate: c.refreshes_isolate,
                refreshes_location: c.refreshes_location,
                ticks: 1.0,
                orders: 4.0,
                edge_polls: 1.0,
            }
        );
        assert!(near(c.total_isolate(), 8.0) && near(c.total_location(), 8.0));
        let load = out.load_over(&[1, 2], fleet);
        assert_eq!(load.mean.exact_polls, 2.5);
        assert_eq!(load.mean.orders, 3.0);
        assert!(near(load.mean.refreshes_isolate, 0.5));
        assert!(near(load.totals_isolate[0], 6.0) && near(load.totals_isolate[1], 8.0));

        // Seconds from 0 with at least half the peak (4) waiting: 0, 1, 2.
        assert_eq!(out.steady_seconds(0, 0.5), vec![0, 1, 2]);
        assert_eq!(out.steady_seconds(1_000, 0.5), vec![1, 2]);
        assert_eq!(out.steady_seconds(0, 0.9), vec![0]);
        // Seconds with more than two waiting: 0 and 1.
        assert_eq!(out.settled_seconds(0, 2), vec![0, 1]);
        assert_eq!(out.settled_seconds(1_000, 2), vec![1]);
        assert_eq!(out.settled_seconds(0, 4), Vec::<usize>::new());
    }

    #[test]
    fn without_a_near_zone_every_poll_is_a_redis_call() {
        let mut s = by_hand();
        s.near_zone = None;
        let out = run(&s, Polling::Adaptive(s.settings.poll_policy()));
        assert_eq!(out.exact_polls, out.polls);
        assert_eq!(out.edge_polls, 0.0);
        assert!(out.near_delay_ms.is_empty());
        assert_eq!(out.redis.orders.iter().sum::<u32>(), 8);
        let s = small();
        let out = run(&s, Polling::Adaptive(s.settings.poll_policy()));
        assert_eq!(out.exact_polls, out.polls);
        assert_eq!(
            u64::from(out.redis.exact_polls.iter().sum::<u32>()),
            out.polls
        );
    }

    #[test]
    fn refreshes_are_the_isolates_or_locations_hit() {
        let f = |isolates, locations| Fleet {
            isolates,
            locations,
            refresh_s: 1,
        };
        assert_eq!(f(1_000, 100).isolate_refreshes(0.0), 0.0);
        assert_eq!(f(1_000, 100).location_refreshes(0.0), 0.0);
        assert!((f(1_000, 100).isolate_refreshes(1.0) - 1.0).abs() < 1e-9);
        assert_eq!(f(1, 1).isolate_refreshes(5.0), 1.0);
        // Two polls over two isolates: both hit with probability 1/2.
        assert!((f(2, 2).isolate_refreshes(2.0) - 1.5).abs() < 1e-12);
        // Fewer isolates than locations: one location per isolate.
        assert_eq!(
            f(10, 100).location_refreshes(7.0),
            f(10, 100).isolate_refreshes(7.0)
        );
        assert_eq!(f(10, 1).location_refreshes(7.0), 1.0);
        // Four isolates in three locations hold 2, 1, 1 of them: two polls
        // hit 1 − ½² + 2 × (1 − ¾²) = 1.625 locations.
        assert!((f(4, 3).location_refreshes(2.0) - 1.625).abs() < 1e-12);
        // A million polls saturate the fleet.
        assert!((f(10_000, 300).isolate_refreshes(1e6) - 10_000.0).abs() < 1e-6);
        assert!((f(10_000, 300).location_refreshes(1e6) - 300.0).abs() < 1e-6);
    }

    #[test]
    fn refresh_expectation_matches_random_polls() {
        let mut d = SplitMix64::new(42);
        let fleet = Fleet {
            isolates: 1_000,
            locations: 30,
            refresh_s: 1,
        };
        for polls in [300u64, 1_000, 3_000] {
            let (mut isolates, mut locations) = (0.0, 0.0);
            let trials = 200;
            for _ in 0..trials {
                let mut hit = vec![false; 1_000];
                let mut hit_loc = [false; 30];
                for _ in 0..polls {
                    let i = d.up_to(999) as usize;
                    hit[i] = true;
                    hit_loc[i % 30] = true;
                }
                isolates += hit.iter().filter(|&&h| h).count() as f64;
                locations += hit_loc.iter().filter(|&&h| h).count() as f64;
            }
            let (isolates, locations) = (isolates / trials as f64, locations / trials as f64);
            let want = fleet.isolate_refreshes(polls as f64);
            assert!(
                (isolates / want - 1.0).abs() < 0.01,
                "{polls}: {isolates} vs {want}"
            );
            let want = fleet.location_refreshes(polls as f64);
            assert!(
                (locations / want - 1.0).abs() < 0.01,
                "{polls}: {locations} vs {want}"
            );
        }
    }

    /// 40,000 arrivals in 20 s at 50/s: a line of ~39,000 against a near
    /// zone of 7,500 (150 s, the least the defaults allow).
    fn long_line(aggregate_far: bool) -> Scenario {
        let mut s = Scenario::uncapped(
            40_000,
            20_000,
            NearZone {
                exact_head_ms: 0,
                liveness_ms: 0,
                exact_zone_ms: 150_000,
                aggregate_far,
            },
        );
        s.settings.admit_rate_per_second = 50.0;
        s
    }

    #[test]
    fn the_near_zone_polls_redis_and_notices_as_promptly() {
        let s = long_line(false);
        let p = s.settings.poll_policy();
        let out = run(&s, Polling::Adaptive(p));
        assert_eq!(out.near_zone_visitors, Some(7_500));
        assert_eq!(out.refused, 0);
        assert_eq!(out.admitted + out.admitted_absent + out.dropped, s.arrivals);
        assert_eq!(out.exact_polls as f64 + out.edge_polls, out.polls as f64);
        let max_lag = out.lag_ms.last().copied().unwrap_or_default();
        assert!(max_lag <= 1.2 * s.settings.poll_min_ms as f64, "{max_lag}");
        // Told the time until they come near, far-back visitors poll within
        // one (jittered) poll_max of it.
        let near = out.near_delay_ms.last().copied().unwrap_or_default();
        assert!(!out.near_delay_ms.is_empty());
        assert!(near <= 1.2 * s.settings.poll_max_ms as f64, "{near}");
        // In the steady line the exact polls stay under the closed form for
        // a line as long as the zone, whatever the line's length.
        let steady = out.steady_seconds(s.window_ms, 0.9);
        assert!(steady.len() > 10, "{}", steady.len());
        let load = out.load_over(
            &steady,
            Fleet {
                isolates: 1,
                locations: 1,
                refresh_s: 1,
            },
        );
        assert!(
            load.mean.exact_polls <= closed_form_bound(&p, 7_500),
            "{load:?}"
        );
        assert!((load.mean.ticks - 10.0).abs() < 1e-9);
        assert!(load.mean.edge_polls > load.mean.exact_polls);
        // The old design pays for the whole line.
        let mut old = s.clone();
        old.near_zone = None;
        let old = run(&old, Polling::Adaptive(p));
        let old_load = old.load_over(
            &steady,
            Fleet {
                isolates: 1,
                locations: 1,
                refresh_s: 1,
            },
        );
        assert!(
            old_load.mean.exact_polls > 2.0 * load.mean.exact_polls,
            "{old_load:?}"
        );
    }

    #[test]
    fn far_silence_drops_a_leaver_only_once_near() {
        let s = long_line(false);
        let out = run(&s, Polling::Adaptive(s.settings.poll_policy()));
        let mut old = s.clone();
        old.near_zone = None;
        let old = run(&old, Polling::Adaptive(s.settings.poll_policy()));
        // Same leavers, dropped before their turn about as often either
        // way (those who left near the head are admitted absent in both)…
        assert!(out.dropped > s.arrivals / 20, "{}", out.dropped);
        let gone = |o: &Outcome| o.dropped + o.admitted_absent;
        assert!(gone(&out).abs_diff(gone(&old)) < s.arrivals / 200);
        assert!(
            out.admitted_absent < old.admitted_absent * 11 / 10 + 20,
            "{} vs {}",
            out.admitted_absent,
            old.admitted_absent
        );
        // …but the line holds them longer: the old line drops a far-back
        // leaver 90 s after its last request, the new one only 90 s after
        // the zone (150 s from the head) reached it.
        let mean_line = |o: &Outcome| {
            o.waiting_per_second
                .iter()
                .map(|&n| f64::from(n))
                .sum::<f64>()
        };
        assert!(mean_line(&out) > mean_line(&old));
    }

    /// Sleeping phones with the grace: some are passed over and come back
    /// in time (admitted), some come back too late (dropped); everyone is
    /// accounted for once.
    #[test]
    fn sleepers_within_the_grace_are_admitted_and_the_others_dropped() {
        let mut s = long_line(false);
        s.sleepers = Some(Sleepers {
            share: 0.3,
            min_ms: 30_000,
            max_ms: 450_000,
        });
        let out = run(&s, Polling::Adaptive(s.settings.poll_policy()));
        assert!(out.passed_over > 0 && out.reclaimed > 0, "{out:?}");
        assert!(out.slept_too_long > 0, "{}", out.slept_too_long);
        assert!(out.reclaimed < out.passed_over);
        // Everyone once; a leaver reaches the head admitted (absent) only
        // within abandon_after_ms of its last request, as before the grace.
        assert_eq!(out.admitted + out.admitted_absent + out.dropped, s.arrivals);
        assert!(out.claims_peak > 0 && out.claims_peak < out.passed_over);
    }

    #[test]
    fn far_back_in_bulk_agrees_with_every_poll_simulated() {
        let p = Settings::default().poll_policy();
        let full_s = long_line(false);
        let full = run(&full_s, Polling::Adaptive(p));
        let bulk_s = long_line(true);
        let bulk = run(&bulk_s, Polling::Adaptive(bulk_s.settings.poll_policy()));
        assert!(
            bulk.events < full.events * 3 / 4,
            "{} vs {}",
            bulk.events,
            full.events
        );
        let close = |a: f64, b: f64, tol: f64| (a / b - 1.0).abs() < tol;
        assert!(close(
            bulk.exact_polls as f64,
            full.exact_polls as f64,
            0.02
        ));
        assert!(
            close(bulk.edge_polls, full.edge_polls, 0.05),
            "{} vs {}",
            bulk.edge_polls,
            full.edge_polls
        );
        assert_eq!(bulk.admitted + bulk.admitted_absent + bulk.dropped, 40_000);
        assert!(close(bulk.admitted as f64, full.admitted as f64, 0.01));
        let (a, b) = (
            percentile(&bulk.lag_ms, 95.0),
            percentile(&full.lag_ms, 95.0),
        );
        assert!(close(a, b, 0.05), "{a} vs {b}");
    }

    #[test]
    fn bound_is_continuous_at_its_joints() {
        let p = Settings::default().poll_policy();
        for n in [350u64, 10_500] {
            let (a, b) = (closed_form_bound(&p, n), closed_form_bound(&p, n + 1));
            assert!((a - b).abs() < 1.0, "{n}: {a} vs {b}");
        }
        assert!((closed_form_bound(&p, 52_500) - 2_940.0).abs() < 10.0);
    }
}
