//! The polling policy at production scale, in virtual time (no network):
//! 200,000 arrivals over 10 minutes at the production defaults, once per
//! polling mode on the same crowd, and the policy's closed-form load bound
//! checked against the simulated polls/s.
//!
//! `cargo run --profile release-native -p queuegate-bench --bin poll_sim [-- CHART.svg [ARRIVALS]]`
//!
//! Prints markdown tables; writes the chart to the path given (default
//! `docs/benchmarks/poll-sim.svg`). Deterministic: a fixed seed.

use std::path::{Path, PathBuf};

use anyhow::Result;
use plotters::prelude::*;
use queuegate_bench::poll_sim::{closed_form_bound, run, Outcome, Polling, Scenario};
use queuegate_testkit::chart::{self, DrawResult, PALETTE};
use queuegate_testkit::measure::{mean, percentile};

fn main() -> Result<()> {
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
    println!("| polling | polls per admitted visitor (mean / p50 / p95) | ÷ fixed 2 s | notice lag p50 / p95 / max | polls/s peak / mean | enters (refused) | admitted (+ absent) | wait p50 / p95 |");
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
    println!("\n| polling | enter requests | position requests | per 1,000 admitted: enters / positions |");
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
