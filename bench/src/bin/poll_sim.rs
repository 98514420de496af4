//! The polling policy at production scale, in virtual time (no network):
//! 200,000 arrivals over 10 minutes at the production defaults, once per
//! polling mode on the same crowd, and the policy's closed-form load bound
//! checked against the simulated polls/s.
//!
//! `cargo run --profile release-native -p queuegate-bench --bin poll_sim [-- CHART.svg [ARRIVALS]]`
//!
//! Prints markdown tables; writes the chart to the path given (default
//! `docs/benchmarks/poll-sim.svg`). Deterministic: a fixed seed.
//!
//! `poll_sim uncapped [OPTIONS]` is issue 24's study instead: Redis
//! requests/s by kind when only the near zone polls Redis
//! (docs/uncapped-line.md), for crowds of 50,000, 1,000,000 and 10,000,000,
//! and the chart of the total against the number of worker isolates
//! (default `docs/benchmarks/uncapped-line-redis.svg`). Options:
//! `--chart PATH`, `--crowds 50000,1000000,10000000`, `--isolates 1000`,
//! `--locations 100`, `--refresh-s 5` (how long an isolate keeps its
//! snapshot, `snapshot::REFRESH_MS`), `--zone-ms 180000`, `--head-ms 5000` (the exact
//! head, `exact_head_ms`: behind it near polls ask Redis only every
//! `abandon_after_ms / 2`; 0 gives the design before it, every near poll
//! to Redis), `--full-max 1000000` (larger
//! crowds are simulated with the far back in bulk only; smaller ones both
//! ways, as a cross-check), `--old-max 50000` (crowds simulated the old way
//! too, every poll to Redis), `--sleepers SHARE` (the sleep grace of
//! docs/engine.md, and a share of the staying visitors whose phone sleeps
//! once, from their first poll near the head, for U(`--sleep-min-s 30`,
//! `--sleep-max-s 450`) s; 0: the grace with no sleepers; without the
//! option, the model before the grace).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use plotters::prelude::*;
use queuegate_bench::poll_sim::uncapped::{self, CrowdRun, Model, STEADY_SHARE};
use queuegate_bench::poll_sim::{
    closed_form_bound, run, Fleet, Outcome, Polling, Scenario, Sleepers, SteadyLoad,
};
use queuegate_testkit::chart::{self, DrawResult, PALETTE};
use queuegate_testkit::measure::{mean, percentile};

fn main() -> Result<()> {
    if std::env::args().nth(1).as_deref() == Some("uncapped") {
        return uncapped_study(std::env::args().skip(2).collect());
    }
    let chart = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("docs/benchmarks/poll-sim.svg"));
    let mut scenario = Scenario::production();
    if let Some(n) = std::env::args().nth(2) {
        scenario.arrivals = n.parse()?;
    }
    let policy = scenario.settings.poll_policy();
    let modes = [
        Polling::Adaptive(policy),
        Polling::Fixed(2_000),
        Polling::Tiered,
    ];
    let outcomes: Vec<(Polling, Outcome)> =
        modes.iter().map(|m| (*m, run(&scenario, *m))).collect();
    let s = &scenario.settings;
    println!(
        "{} arrivals over {} s (density falling linearly), {} % leavers, admit {}/s, tick {} ms, \
         max waiting {}, poll {}–{} s, abandon after {} s, waits ×U(0.8, 1.2)\n",
        scenario.arrivals,
        scenario.window_ms / 1_000,
        scenario.leave_share * 100.0,
        s.admit_rate_per_second,
        s.tick_ms,
        s.max_waiting,
        s.poll_min_ms / 1_000,
        s.poll_max_ms / 1_000,
        s.abandon_after_ms / 1_000,
    );
    let fixed_mean = mean(&outcomes[1].1.polls_per_admitted);
    println!(
        "| polling | polls per admitted visitor (mean / p50 / p95) | ÷ fixed 2 s | notice lag p50 / p95 / max | polls/s peak / mean | enters (refused) | admitted (+ absent) | wait p50 / p95 |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (mode, o) in &outcomes {
        let ppa = &o.polls_per_admitted;
        let seconds = (o.end_ms as f64 / 1_000.0).max(1.0);
        println!(
            "| {} | {:.2} / {:.0} / {:.0} | {:.3}× | {:.0} / {:.0} / {:.0} ms | {} / {:.0} | {} ({}) | {} (+{}) | {:.0} / {:.0} s |",
            mode.label(),
            mean(ppa),
            percentile(ppa, 50.0),
            percentile(ppa, 95.0),
            mean(ppa) / fixed_mean,
            percentile(&o.lag_ms, 50.0),
            percentile(&o.lag_ms, 95.0),
            o.lag_ms.last().copied().unwrap_or(f64::NAN),
            o.polls_per_second.iter().max().copied().unwrap_or(0),
            o.polls as f64 / seconds,
            o.enters,
            o.refused,
            o.admitted,
            o.admitted_absent,
            percentile(&o.wait_ms, 50.0) / 1_000.0,
            percentile(&o.wait_ms, 95.0) / 1_000.0,
        );
    }
    println!(
        "\n| polling | enter requests | position requests | per 1,000 admitted: enters / positions |"
    );
    println!("|---|---:|---:|---:|");
    for (mode, o) in &outcomes {
        let per = 1_000.0 / o.admitted.max(1) as f64;
        println!(
            "| {} | {} | {} | {:.0} / {:.0} |",
            mode.label(),
            o.enters,
            o.polls,
            o.enters as f64 * per,
            o.polls as f64 * per,
        );
    }
    bound_check(&outcomes[0].1, &scenario);
    draw(&outcomes, &scenario, &chart).map_err(|e| anyhow::anyhow!("{}: {e}", chart.display()))?;
    println!("\nchart: {}", chart.display());
    Ok(())
}

/// Simulated adaptive polls/s against the closed form for the line at the
/// start of each second (skipping the first 60 s, while the spike's first
/// visitors are still on their first, longest intervals).
fn bound_check(o: &Outcome, scenario: &Scenario) {
    let policy = scenario.settings.poll_policy();
    let mut ratios = Vec::new();
    let mut at_cap = Vec::new();
    for (sec, &waiting) in o.waiting_per_second.iter().enumerate().skip(60) {
        let polls = f64::from(o.polls_per_second.get(sec).copied().unwrap_or(0));
        if waiting < 1_000 {
            continue;
        }
        let ratio = polls / closed_form_bound(&policy, u64::from(waiting));
        ratios.push(ratio);
        if u64::from(waiting) * 100 >= scenario.settings.max_waiting * 99 {
            at_cap.push(polls);
        }
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "\nclosed-form bound (policy.rs) at {} waiting: {:.0} polls/s; simulated adaptive at ≥ 99 % of that line: mean {:.0}, max {:.0} polls/s over {} s",
        scenario.settings.max_waiting,
        closed_form_bound(&policy, scenario.settings.max_waiting),
        mean(&at_cap),
        at_cap.iter().copied().fold(0.0, f64::max),
        at_cap.len()
    );
    println!(
        "simulated ÷ closed form, per second with ≥ 1,000 waiting after 60 s ({} s): p50 {:.2}, p95 {:.2}, max {:.2}",
        ratios.len(),
        percentile(&ratios, 50.0),
        percentile(&ratios, 95.0),
        ratios.last().copied().unwrap_or(f64::NAN)
    );
}

/// Top: position requests/s per mode, with the closed form for the
/// adaptive line. Bottom: people waiting.
fn draw(outcomes: &[(Polling, Outcome)], scenario: &Scenario, path: &Path) -> DrawResult {
    let root = chart::canvas(path, (960, 720))?;
    let (top, bottom) = root.split_vertically(460);
    let x_max = outcomes
        .iter()
        .map(|(_, o)| o.polls_per_second.len())
        .max()
        .unwrap_or(1) as f64;
    let y_max = outcomes
        .iter()
        .flat_map(|(_, o)| o.polls_per_second.iter().copied())
        .max()
        .unwrap_or(1) as f64
        * 1.1;
    let caption = format!(
        "Position requests per second, {} arrivals over 10 min (simulated)",
        scenario.arrivals
    );
    let mut chart = chart::axes(&top, &caption, 18, 70)
        .build_cartesian_2d(0.0..x_max, (10.0..y_max).log_scale())?;
    chart::mesh(&mut chart, "seconds since the sale opened", "polls/s (log)").draw()?;
    for ((mode, o), colour) in outcomes.iter().zip(PALETTE) {
        let pts = o
            .polls_per_second
            .iter()
            .enumerate()
            .map(|(s, &n)| (s as f64, f64::from(n).max(10.0)));
        chart
            .draw_series(LineSeries::new(pts, colour.stroke_width(1)))?
            .label(mode.label())
            .legend(chart::swatch(colour));
    }
    let policy = scenario.settings.poll_policy();
    let adaptive = &outcomes[0].1;
    let bound = adaptive
        .waiting_per_second
        .iter()
        .enumerate()
        .map(|(s, &n)| (s as f64, closed_form_bound(&policy, u64::from(n)).max(10.0)));
    chart
        .draw_series(DashedLineSeries::new(
            bound,
            6,
            4,
            BLACK.mix(0.6).stroke_width(2),
        ))?
        .label("closed form of policy.rs for the line")
        .legend(chart::swatch(BLACK.mix(0.6)));
    chart::legend(&mut chart, SeriesLabelPosition::UpperRight)?;

    let w_max = adaptive
        .waiting_per_second
        .iter()
        .copied()
        .max()
        .unwrap_or(1) as f64
        * 1.15;
    let mut chart = chart::axes(
        &bottom,
        "People waiting (adaptive run; the same line in every mode)",
        16,
        70,
    )
    .build_cartesian_2d(0.0..x_max, 0.0..w_max)?;
    chart::mesh(&mut chart, "seconds since the sale opened", "waiting").draw()?;
    chart.draw_series(LineSeries::new(
        adaptive
            .waiting_per_second
            .iter()
            .enumerate()
            .map(|(s, &n)| (s as f64, f64::from(n))),
        PALETTE[0].stroke_width(2),
    ))?;
    root.present()?;
    Ok(())
}

/// Options of `poll_sim uncapped`.
#[derive(Debug)]
struct Study {
    chart: PathBuf,
    crowds: Vec<u64>,
    fleet: Fleet,
    zone_ms: u64,
    head_ms: u64,
    full_max: u64,
    old_max: u64,
    sleepers: Option<Sleepers>,
}

/// Isolate counts on the chart's x axis (and in its table).
const ISOLATES: [u64; 9] = [1, 3, 10, 30, 100, 300, 1_000, 3_000, 10_000];

/// The targets: Redis requests/s at 1,000,000, and 1M ÷ 50k.
const TARGET_AT_1M: f64 = 2_000.0;
const TARGET_RATIO: f64 = 1.3;
/// Notice lag p95 (ms).
const TARGET_LAG_MS: f64 = 1_500.0;

fn parse_study(args: Vec<String>) -> Result<Study> {
    let mut st = Study {
        chart: PathBuf::from("docs/benchmarks/uncapped-line-redis.svg"),
        crowds: vec![50_000, 1_000_000, 10_000_000],
        fleet: Fleet {
            isolates: 1_000,
            locations: 100,
            refresh_s: queuegate_shared::snapshot::REFRESH_MS / 1_000,
        },
        zone_ms: 180_000,
        head_ms: queuegate_shared::Settings::default().exact_head_ms,
        full_max: 1_000_000,
        old_max: 50_000,
        sleepers: None,
    };
    let mut with_grace = false;
    let mut sleep = Sleepers {
        share: 0.0,
        min_ms: 30_000,
        max_ms: 450_000,
    };
    let number = |v: &str| -> Result<u64> {
        v.trim()
            .replace(['_', ','], "")
            .parse()
            .with_context(|| format!("not a number: {v}"))
    };
    let mut it = args.into_iter();
    while let Some(flag) = it.next() {
        let value = it.next().with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--chart" => st.chart = PathBuf::from(value),
            "--crowds" => {
                st.crowds = value.split(',').map(number).collect::<Result<_>>()?;
            }
            "--isolates" => st.fleet.isolates = number(&value)?,
            "--locations" => st.fleet.locations = number(&value)?,
            "--refresh-s" => st.fleet.refresh_s = number(&value)?,
            "--zone-ms" => st.zone_ms = number(&value)?,
            "--head-ms" => st.head_ms = number(&value)?,
            "--full-max" => st.full_max = number(&value)?,
            "--old-max" => st.old_max = number(&value)?,
            "--sleepers" => {
                with_grace = true;
                sleep.share = value
                    .trim()
                    .parse()
                    .with_context(|| format!("not a share: {value}"))?;
            }
            "--sleep-min-s" => sleep.min_ms = number(&value)? * 1_000,
            "--sleep-max-s" => sleep.max_ms = number(&value)? * 1_000,
            _ => bail!("unknown option {flag} (see the doc comment of poll_sim.rs)"),
        }
    }
    if st.crowds.is_empty() || st.crowds.contains(&0) {
        bail!("--crowds needs crowds of at least one visitor");
    }
    let d = queuegate_shared::Settings::default();
    let floor = d.abandon_after_ms + 2 * d.poll_max_ms;
    if st.zone_ms < floor {
        bail!(
            "--zone-ms must be at least abandon_after_ms + 2 × poll_max_ms = {floor} \
             (docs/uncapped-line.md), or far-back leavers reach the head"
        );
    }
    if !(0.0..=1.0).contains(&sleep.share) || sleep.min_ms > sleep.max_ms {
        bail!("--sleepers must be 0 to 1, and --sleep-min-s at most --sleep-max-s");
    }
    if with_grace {
        st.sleepers = Some(sleep);
    }
    if st.fleet.isolates == 0 || st.fleet.locations == 0 {
        bail!("--isolates and --locations must be at least 1");
    }
    Ok(st)
}

/// `x` rounded, with thousands separators.
fn thousands(x: f64) -> String {
    if !x.is_finite() {
        return "–".into();
    }
    let n = x.round() as i64;
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        out.insert(0, '-');
    }
    out
}

fn simulate(crowd: u64, model: Model, st: &Study) -> CrowdRun {
    let (zone_ms, head_ms) = (st.zone_ms, st.head_ms);
    eprintln!(
        "simulating {} arrivals: {} …",
        thousands(crowd as f64),
        model.label()
    );
    let r = CrowdRun::simulate_with(crowd, model, zone_ms, head_ms, st.sleepers);
    eprintln!(
        "  {:.1} s wall, {} events",
        r.wall.as_secs_f64(),
        thousands(r.outcome.events as f64)
    );
    r
}

fn uncapped_study(args: Vec<String>) -> Result<()> {
    let st = parse_study(args)?;
    let started = Instant::now();
    let mut primary = Vec::new();
    let mut others = Vec::new();
    for &crowd in &st.crowds {
        if crowd <= st.full_max {
            primary.push(simulate(crowd, Model::Full, &st));
            others.push(simulate(crowd, Model::Aggregate, &st));
        } else {
            primary.push(simulate(crowd, Model::Aggregate, &st));
        }
        if crowd <= st.old_max {
            others.push(simulate(crowd, Model::Old, &st));
        }
    }
    let fleet = st.fleet;
    let first = &primary[0];
    let s = &first.scenario.settings;
    let z = first.outcome.near_zone_visitors.unwrap_or(0);
    println!(
        "Near zone (docs/uncapped-line.md), simulated: admit {}/s, tick {} ms, poll {}–{} s, \
         abandon after {} s, {} % leavers, waits ×U(0.8, 1.2), no cap (max_waiting above the \
         crowd); near zone {} s = Z {} visitors, exact head {} s (behind it a near poll asks \
         Redis only every {} s; 0: every near poll does); tables for {} isolates over {} \
         locations. \
         Each crowd arrives over crowd × 0.6 ms (1,000,000 in 600 s), density falling linearly. \
         Settled line: the seconds after the last arrival, and after the first liveness \
         requests are due ({} s after the opening), in which the line is longer than the near \
         zone (a far back exists); the targets are judged there. Steady line: the seconds after \
         the last arrival in which the line holds ≥ {:.0} % of its peak (at 50,000 it ends \
         before the first liveness requests). Per-kind figures are means over those seconds; \
         the isolate sweep and the chart are for the settled line.\n",
        s.admit_rate_per_second,
        s.tick_ms,
        s.poll_min_ms / 1_000,
        s.poll_max_ms / 1_000,
        s.abandon_after_ms / 1_000,
        first.scenario.leave_share * 100.0,
        st.zone_ms / 1_000,
        thousands(z as f64),
        st.head_ms as f64 / 1_000.0,
        s.abandon_after_ms / 2_000,
        thousands(fleet.isolates as f64),
        thousands(fleet.locations as f64),
        uncapped::settled_from_ms(&first.scenario) / 1_000,
        STEADY_SHARE * 100.0,
    );
    if let Some(z) = st.sleepers {
        println!(
            "Sleeping phones: {:.0} % of the staying visitors sleep once, from their first poll \
             near the head, for U({}, {}) s; sleep grace {} s (docs/engine.md).\n",
            z.share * 100.0,
            z.min_ms / 1_000,
            z.max_ms / 1_000,
            s.sleep_grace() / 1_000,
        );
        println!(
            "| crowd | model | passed over at the head (sleepers and leavers) | claims taken up | back too late (dropped) | claims held at most |"
        );
        println!("|---:|---|---:|---:|---:|---:|");
        for r in primary.iter().chain(others.iter()) {
            let o = &r.outcome;
            println!(
                "| {} | {} | {} | {} | {} | {} |",
                thousands(r.crowd as f64),
                r.model.label(),
                thousands(o.passed_over as f64),
                thousands(o.reclaimed as f64),
                thousands(o.slept_too_long as f64),
                thousands(o.claims_peak as f64),
            );
        }
        println!();
    }
    let all: Vec<&CrowdRun> = primary.iter().chain(others.iter()).collect();
    runs_table(&all);
    kinds_table(&primary, &others, fleet, Window::Settled);
    kinds_table(&primary, &others, fleet, Window::Steady);
    lag_table(&all);
    by_model_table(&all, fleet);
    whole_run_table(&primary, fleet);
    sweep_table(&primary, fleet);
    targets(&primary, fleet);
    draw_isolates(&primary, fleet, &st.chart)
        .map_err(|e| anyhow::anyhow!("{}: {e}", st.chart.display()))?;
    println!("\nchart: {}", st.chart.display());
    eprintln!("done in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Which seconds of a run a table averages over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Window {
    /// After the last arrival, the line at ≥ 90 % of its peak.
    Steady,
    /// After the last arrival and the first liveness requests, a far back
    /// behind the near zone (`uncapped::settled_from_ms`).
    Settled,
}

impl Window {
    fn name(self) -> &'static str {
        match self {
            Window::Steady => "steady line (≥ 90 % of the peak)",
            Window::Settled => "settled line",
        }
    }

    fn seconds(self, r: &CrowdRun) -> &[usize] {
        match self {
            Window::Steady => &r.steady,
            Window::Settled => &r.settled,
        }
    }

    fn load(self, r: &CrowdRun, fleet: Fleet) -> SteadyLoad {
        match self {
            Window::Steady => r.load(fleet),
            Window::Settled => r.settled_load(fleet),
        }
    }
}

fn runs_table(all: &[&CrowdRun]) {
    println!(
        "| crowd | model | arrivals over | peak line | steady line: seconds (from–to) | settled line: seconds (from–to) | mean line in the steady line | far-back polls, whole run | events | wall |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let span = |secs: &[usize]| {
        format!(
            "{} ({}–{} s)",
            thousands(secs.len() as f64),
            thousands(secs.first().copied().unwrap_or(0) as f64),
            thousands(secs.last().copied().unwrap_or(0) as f64),
        )
    };
    for r in all {
        println!(
            "| {} | {} | {} s | {} | {} | {} | {} | {} | {} | {:.1} s |",
            thousands(r.crowd as f64),
            r.model.label(),
            thousands(r.scenario.window_ms as f64 / 1_000.0),
            thousands(f64::from(r.peak_waiting())),
            span(&r.steady),
            span(&r.settled),
            thousands(r.steady_waiting()),
            thousands(r.outcome.edge_polls),
            thousands(r.outcome.events as f64),
            r.wall.as_secs_f64(),
        );
    }
}

/// Redis requests/s in `window` by kind, a column per crowd, and
/// each crowd ÷ the first.
fn kinds_table(primary: &[CrowdRun], others: &[CrowdRun], fleet: Fleet, window: Window) {
    let loads: Vec<_> = primary.iter().map(|r| window.load(r, fleet)).collect();
    let base = &primary[0];
    print!("\n| Redis requests/s in the {} |", window.name());
    for r in primary {
        let tag = if r.model == Model::Aggregate {
            " (far back in bulk)"
        } else {
            ""
        };
        print!(" {}{} |", thousands(r.crowd as f64), tag);
    }
    for r in &primary[1..] {
        print!(
            " {} ÷ {} |",
            thousands(r.crowd as f64),
            thousands(base.crowd as f64)
        );
    }
    println!();
    println!("|---|{}", "---:|".repeat(primary.len() * 2 - 1));
    let row = |name: &str, f: &dyn Fn(usize) -> f64| {
        print!("| {name} |");
        for i in 0..primary.len() {
            print!(" {} |", thousands(f(i)));
        }
        for i in 1..primary.len() {
            let ratio = f(i) / f(0);
            if ratio.is_finite() {
                print!(" {ratio:.2}× |");
            } else {
                print!(" – |");
            }
        }
        println!();
    };
    row("enters", &|i| loads[i].mean.enters);
    row("exact polls (near zone, admitted)", &|i| {
        loads[i].mean.exact_polls
    });
    row(
        &format!(
            "snapshot refreshes, per isolate ({} isolates)",
            thousands(fleet.isolates as f64)
        ),
        &|i| loads[i].mean.refreshes_isolate,
    );
    row("admit ticks", &|i| loads[i].mean.ticks);
    row("orders (consume + settle)", &|i| loads[i].mean.orders);
    row("**total, snapshots per isolate** (mean)", &|i| {
        loads[i].mean.total_isolate()
    });
    row("total, snapshots per isolate: median", &|i| {
        percentile(&loads[i].totals_isolate, 50.0)
    });
    row("total, snapshots per isolate: p95", &|i| {
        percentile(&loads[i].totals_isolate, 95.0)
    });
    row(
        &format!(
            "snapshot refreshes, per location ({} locations)",
            thousands(fleet.locations as f64)
        ),
        &|i| loads[i].mean.refreshes_location,
    );
    row("**total, snapshots per location** (mean)", &|i| {
        loads[i].mean.total_location()
    });
    row("total, snapshots per location: median", &|i| {
        percentile(&loads[i].totals_location, 50.0)
    });
    row("total, snapshots per location: p95", &|i| {
        percentile(&loads[i].totals_location, 95.0)
    });
    row("(not Redis) far-back polls answered at the edge", &|i| {
        loads[i].mean.edge_polls
    });
    let policy = base.scenario.settings.poll_policy();
    row(
        "old design: policy.rs closed form (polls only) at the line's mean length here",
        &|i| {
            let r = &primary[i];
            closed_form_bound(&policy, r.mean_waiting(window.seconds(r)).round() as u64)
        },
    );
    if primary.iter().any(|p| {
        others
            .iter()
            .any(|o| o.model == Model::Old && o.crowd == p.crowd)
    }) {
        row("old design simulated, total (mean)", &|i| {
            others
                .iter()
                .find(|o| o.model == Model::Old && o.crowd == primary[i].crowd)
                .map_or(f64::NAN, |o| window.load(o, fleet).mean.total_isolate())
        });
    }
}

fn lag_table(all: &[&CrowdRun]) {
    println!(
        "\n| crowd | model | notice lag p50 / p95 / max | zone front → next poll p50 / p95 / max | wait p50 / p95 | admitted (+ absent) | dropped | polls per admitted p50 |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|");
    for r in all {
        let o = &r.outcome;
        let near = if o.near_delay_ms.is_empty() {
            "–".to_string()
        } else {
            format!(
                "{} / {} / {} ms",
                thousands(percentile(&o.near_delay_ms, 50.0)),
                thousands(percentile(&o.near_delay_ms, 95.0)),
                thousands(o.near_delay_ms.last().copied().unwrap_or(f64::NAN)),
            )
        };
        let ppa = if r.model == Model::Aggregate {
            "–".to_string()
        } else {
            thousands(percentile(&o.polls_per_admitted, 50.0))
        };
        println!(
            "| {} | {} | {} / {} / {} ms | {} | {} / {} s | {} (+{}) | {} | {} |",
            thousands(r.crowd as f64),
            r.model.label(),
            thousands(percentile(&o.lag_ms, 50.0)),
            thousands(percentile(&o.lag_ms, 95.0)),
            thousands(o.lag_ms.last().copied().unwrap_or(f64::NAN)),
            near,
            thousands(percentile(&o.wait_ms, 50.0) / 1_000.0),
            thousands(percentile(&o.wait_ms, 95.0) / 1_000.0),
            thousands(o.admitted as f64),
            thousands(o.admitted_absent as f64),
            thousands(o.dropped as f64),
            ppa,
        );
    }
}

/// Every run by kind: the full model against the aggregate one (the
/// cross-check), and the old design.
fn by_model_table(all: &[&CrowdRun], fleet: Fleet) {
    println!(
        "\n| crowd | model | enters | exact polls | refreshes per isolate / per location | ticks | orders | total per isolate / per location | edge polls |"
    );
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut rows: Vec<&&CrowdRun> = all.iter().collect();
    rows.sort_by_key(|r| (r.crowd, r.model as u8));
    for r in rows {
        let m = r.load(fleet).mean;
        println!(
            "| {} | {} | {} | {} | {} / {} | {} | {} | {} / {} | {} |",
            thousands(r.crowd as f64),
            r.model.label(),
            thousands(m.enters),
            thousands(m.exact_polls),
            thousands(m.refreshes_isolate),
            thousands(m.refreshes_location),
            thousands(m.ticks),
            thousands(m.orders),
            thousands(m.total_isolate()),
            thousands(m.total_location()),
            thousands(m.edge_polls),
        );
    }
}

/// Each crowd's whole run, arrivals to the last admission: what a drop of
/// that size costs Redis and the worker (BENCHMARKS.md's cost table).
fn whole_run_table(primary: &[CrowdRun], fleet: Fleet) {
    println!(
        "\n| crowd (whole run) | seconds | enters | exact polls | snapshot refreshes per isolate | ticks | orders (consume + settle) | **Redis requests** | polls answered at the edge | worker requests (enters, polls, orders) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in primary {
        let seconds: Vec<usize> = (0..r.outcome.redis.ticks.len()).collect();
        let n = seconds.len() as f64;
        let m = r.outcome.load_over(&seconds, fleet).mean;
        let worker = (m.enters + m.exact_polls + m.edge_polls + m.orders / 2.0) * n;
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | **{}** | {} | {} |",
            thousands(r.crowd as f64),
            thousands(n),
            thousands(m.enters * n),
            thousands(m.exact_polls * n),
            thousands(m.refreshes_isolate * n),
            thousands(m.ticks * n),
            thousands(m.orders * n),
            thousands(m.total_isolate() * n),
            thousands(m.edge_polls * n),
            thousands(worker),
        );
    }
}

/// The chart's data: steady-line total against isolates.
fn sweep(r: &CrowdRun, fleet: Fleet) -> Vec<(u64, f64, f64)> {
    ISOLATES
        .iter()
        .map(|&isolates| {
            let m = r.settled_load(Fleet { isolates, ..fleet }).mean;
            (isolates, m.total_isolate(), m.total_location())
        })
        .collect()
}

fn sweep_table(primary: &[CrowdRun], fleet: Fleet) {
    print!("\n| isolates |");
    for r in primary {
        print!(
            " {}: per isolate / per location ({}) |",
            thousands(r.crowd as f64),
            thousands(fleet.locations as f64)
        );
    }
    println!();
    println!("|---:|{}", "---:|".repeat(primary.len()));
    let sweeps: Vec<_> = primary.iter().map(|r| sweep(r, fleet)).collect();
    for (i, isolates) in ISOLATES.iter().enumerate() {
        print!("| {} |", thousands(*isolates as f64));
        for sw in &sweeps {
            print!(" {} / {} |", thousands(sw[i].1), thousands(sw[i].2));
        }
        println!();
    }
}

fn targets(primary: &[CrowdRun], fleet: Fleet) {
    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    let find = |n: u64| primary.iter().find(|r| r.crowd == n);
    println!();
    if let Some(r) = find(1_000_000) {
        let l = Window::Settled.load(r, fleet);
        for (name, mean_total, totals) in [
            ("per isolate", l.mean.total_isolate(), &l.totals_isolate),
            ("per location", l.mean.total_location(), &l.totals_location),
        ] {
            let median = percentile(totals, 50.0);
            println!(
                "target, 1,000,000 arrivals, snapshots {name}: {} Redis requests/s (median; mean {}) against ≤ {}: {}",
                thousands(median),
                thousands(mean_total),
                thousands(TARGET_AT_1M),
                verdict(median <= TARGET_AT_1M && mean_total <= TARGET_AT_1M),
            );
        }
        if let Some(b) = find(50_000) {
            for window in [Window::Settled, Window::Steady] {
                let (lb, la) = (window.load(b, fleet), window.load(r, fleet));
                let judged = if window == Window::Settled {
                    ""
                } else {
                    " (for comparison: the 50,000 crowd's 90 % window ends before its first liveness requests)"
                };
                for (name, big, small) in [
                    (
                        "per isolate",
                        percentile(&la.totals_isolate, 50.0),
                        percentile(&lb.totals_isolate, 50.0),
                    ),
                    (
                        "per location",
                        percentile(&la.totals_location, 50.0),
                        percentile(&lb.totals_location, 50.0),
                    ),
                ] {
                    let ratio = big / small;
                    if window == Window::Settled {
                        println!(
                        "target, 1,000,000 ÷ 50,000 (medians, {}), snapshots {name}: {ratio:.2}× against ≤ {TARGET_RATIO}×: {}",
                        window.name(),
                        verdict(ratio <= TARGET_RATIO)
                    );
                    } else {
                        println!(
                        "1,000,000 ÷ 50,000 (medians, {}), snapshots {name}: {ratio:.2}×{judged}",
                        window.name(),
                    );
                    }
                }
            }
        }
    }
    for r in primary {
        let p95 = percentile(&r.outcome.lag_ms, 95.0);
        println!(
            "target, notice lag p95 ≤ {} ms, {} arrivals: {} ms: {}",
            thousands(TARGET_LAG_MS),
            thousands(r.crowd as f64),
            thousands(p95),
            verdict(p95 <= TARGET_LAG_MS)
        );
    }
}

/// Steady-line Redis requests/s against worker isolates, a colour per
/// crowd: solid, each isolate refreshing its own snapshot; dashed, one
/// refresh per location.
fn draw_isolates(primary: &[CrowdRun], fleet: Fleet, path: &Path) -> DrawResult {
    let root = chart::canvas(path, (960, 560))?;
    let sweeps: Vec<_> = primary.iter().map(|r| sweep(r, fleet)).collect();
    let y_max = sweeps
        .iter()
        .flatten()
        .map(|p| p.1.max(p.2))
        .fold(TARGET_AT_1M, f64::max)
        * 1.12;
    let x_max = *ISOLATES.last().unwrap_or(&10_000) as f64;
    let caption = format!(
        "Redis requests/s in the settled line against worker isolates (simulated; {} locations)",
        thousands(fleet.locations as f64)
    );
    let mut chart = chart::axes(&root, &caption, 18, 70)
        .build_cartesian_2d((0.8..x_max * 1.4).log_scale(), 0.0..y_max)?;
    chart::mesh(&mut chart, "worker isolates (log)", "Redis requests/s")
        .x_label_formatter(&|x| thousands(*x))
        .y_label_formatter(&|y| thousands(*y))
        .draw()?;
    for ((r, sw), colour) in primary.iter().zip(&sweeps).zip(PALETTE.iter().cycle()) {
        let name = thousands(r.crowd as f64);
        let solid: Vec<(f64, f64)> = sw.iter().map(|p| (p.0 as f64, p.1)).collect();
        chart
            .draw_series(LineSeries::new(solid.clone(), colour.stroke_width(2)))?
            .label(format!("{name} arrivals, refresh per isolate"))
            .legend(chart::swatch(*colour));
        chart.draw_series(solid.iter().map(|&p| Circle::new(p, 3, colour.filled())))?;
        let dashed = sw.iter().map(|p| (p.0 as f64, p.2));
        chart
            .draw_series(DashedLineSeries::new(dashed, 6, 4, colour.stroke_width(2)))?
            .label(format!("{name} arrivals, refresh per location"))
            .legend(chart::swatch(colour.mix(0.5)));
    }
    chart
        .draw_series(DashedLineSeries::new(
            [(0.8, TARGET_AT_1M), (x_max * 1.4, TARGET_AT_1M)],
            2,
            4,
            BLACK.mix(0.6).stroke_width(1),
        ))?
        .label("issue target at 1,000,000: 2,000/s (old closed form: ~34,500/s)")
        .legend(chart::swatch(BLACK.mix(0.6)));
    chart::legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    root.present()?;
    Ok(())
}
