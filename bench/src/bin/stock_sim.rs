//! Issue 40's figures in virtual time (no network, no Redis): a drop of
//! 1,000,000 drawn visitors and 10,000 units at the production defaults —
//! how long the line waits after the last unit, what the line costs Redis
//! before and after it, and how well the chance shown to waiting visitors
//! is calibrated.
//!
//! `cargo run --profile release-native -p queuegate-bench --bin stock_sim [-- OPTIONS]`
//!
//! Options: `--visitors 1000000`, `--stock 10000`, `--conversion 0.6`
//! (share of turns that order), `--overbook P` (the operator's margin in
//! %, else measured), `--poll-max-s 30` (the longest poll interval),
//! `--seed N`. Prints markdown; deterministic.

use std::time::Instant;

use anyhow::{bail, Context, Result};
use queuegate_bench::stock_sim::calibration::Calibration;
use queuegate_bench::stock_sim::{run, Kind, Load, Outcome, Scenario, KINDS};

fn main() -> Result<()> {
    let sc = parse(std::env::args().skip(1).collect())?;
    let started = Instant::now();
    let out = run(&sc);
    let wall = started.elapsed();
    print_drop(&sc, &out);
    print_measured(&out);
    print_told(&out);
    print_load(&sc, &out);
    print_calibration(&out);
    println!(
        "\n{} polls simulated over {:.0} s of virtual time in {:.1} s (seed {:#x}).",
        thousands(out.polls as f64),
        out.end_ms as f64 / 1_000.0,
        wall.as_secs_f64(),
        sc.seed
    );
    Ok(())
}

fn parse(args: Vec<String>) -> Result<Scenario> {
    let mut sc = Scenario::production();
    let mut it = args.into_iter();
    while let Some(flag) = it.next() {
        let value = it.next().with_context(|| format!("{flag} needs a value"))?;
        let bad = || format!("{flag} {value}: not a number");
        match flag.as_str() {
            "--visitors" => sc.visitors = value.parse().with_context(bad)?,
            "--stock" => sc.stock = value.parse().with_context(bad)?,
            "--conversion" => sc.conversion = value.parse().with_context(bad)?,
            "--overbook" => sc.overbook_percent = Some(value.parse().with_context(bad)?),
            "--seed" => sc.seed = value.parse().with_context(bad)?,
            "--poll-max-s" => {
                sc.settings.poll_max_ms = value.parse::<u64>().with_context(bad)? * 1_000
            }
            _ => bail!("unknown option {flag}"),
        }
    }
    sc.settings.validate()?;
    if sc.visitors == 0 || !(0.0..=1.0).contains(&sc.conversion) {
        bail!("--visitors must be at least 1 and --conversion in [0, 1]");
    }
    Ok(sc)
}

fn print_drop(sc: &Scenario, out: &Outcome) {
    let s = &sc.settings;
    println!(
        "## A drop of {} visitors and {} units\n\n\
         Production defaults: {}/s, tick {} ms, max_active {}, token_ttl {} s, \
         poll {}–{} s ×U(0.8, 1.2) at the measured rate, exact head {} s, near zone {} s, \
         {} isolates with snapshots ≤ {} s old. Visitors order U({}, {}) s after \
         learning of their turn with probability {} ({} % of orders 2 units), \
         the rest are no-shows; margin {}.\n",
        thousands(sc.visitors as f64),
        thousands(sc.stock as f64),
        s.admit_rate_per_second,
        s.tick_ms,
        thousands(s.max_active as f64),
        s.token_ttl_ms / 1_000,
        s.poll_min_ms / 1_000,
        s.poll_max_ms / 1_000,
        s.exact_head_ms / 1_000,
        s.near_zone_ms() / 1_000,
        thousands(sc.fleet.isolates as f64),
        sc.fleet.refresh_s,
        sc.order_after_ms.0 / 1_000,
        sc.order_after_ms.1 / 1_000,
        sc.conversion,
        (sc.two_unit_share * 100.0).round(),
        sc.overbook_percent
            .map_or("measured (stock.tick)".into(), |p| format!(
                "{p} % (operator)"
            )),
    );
    println!("| turns let out | orders sold | units sold | orders refused (sold out) | turns expired | last unit (T0) | margin at T0 | conversion at T0 |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {} | {} | {} | {} | {} | {} | {} | {} |",
        thousands(out.admitted as f64),
        thousands(out.ordered as f64),
        thousands(out.sold as f64),
        thousands(out.refused as f64),
        thousands(out.expired as f64),
        out.t0_ms
            .map_or("never".into(), |t| format!("{:.1} s", t as f64 / 1_000.0)),
        format_args!("{:.1} %", out.margin_at_t0 as f64 / 10.0),
        out.conversion_at_t0
            .map_or("–".into(), |c| format!("{:.1} %", c as f64 / 10.0)),
    );
}

fn print_measured(out: &Outcome) {
    let at = |t: Option<u64>| t.map_or("never".into(), |t| format!("{:.0} s", t as f64 / 1_000.0));
    println!(
        "\nHalf the units had gone at {}, 90 % at {}, 99 % at {}, the last at {}.",
        at(out.gone_at[0]),
        at(out.gone_at[1]),
        at(out.gone_at[2]),
        at(out.t0_ms),
    );
    println!("\nWhat the tick measured (stock.tick), every 5 minutes from 60 s:\n");
    println!("| time | conversion | margin | turns out | units left |");
    println!("|---:|---:|---:|---:|---:|");
    for (at, conv, margin, turns_out, left) in &out.measured {
        println!(
            "| {} s | {} | {:.1} % | {} | {} |",
            at / 1_000,
            conv.map_or("–".into(), |c| format!("{:.1} %", c as f64 / 10.0)),
            *margin as f64 / 10.0,
            thousands(*turns_out as f64),
            thousands(*left as f64),
        );
    }
}

fn print_told(out: &Outcome) {
    let Some(_) = out.t0_ms else {
        println!("\nThe stock outlived the line: nobody was told `sold_out`.");
        return;
    };
    let t = &out.told_after_ms;
    let pct = |p: f64| -> String {
        if t.is_empty() {
            return "–".into();
        }
        let i = ((p * t.len() as f64).ceil() as usize).clamp(1, t.len()) - 1;
        format!("{:.1} s", t[i] as f64 / 1_000.0)
    };
    let share = |n: u64| 100.0 * n as f64 / out.waiting_at_t0.max(1) as f64;
    let within_30 = t.iter().filter(|&&x| x <= 30_000).count() as u64;
    println!("\n### Told `sold_out` after the last unit\n");
    println!(
        "Of those waiting at T0; told by Redis (exact head, near-zone polls to Redis) \
         at the poll, by a snapshot once the snapshot was read at or after T0. {} told \
         by a snapshot, {} by Redis.\n",
        thousands(out.told_by_snapshot as f64),
        thousands((out.told_after_ms.len() as u64 - out.told_by_snapshot) as f64),
    );
    println!("| waiting at T0 | p50 | p95 | p99 | max | within 30 s | within their poll interval | never told |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {} | {} | {} | {} | {} | {:.2} % | {:.2} % | {} |",
        thousands(out.waiting_at_t0 as f64),
        pct(0.50),
        pct(0.95),
        pct(0.99),
        pct(1.0),
        share(within_30),
        share(out.told_within_interval),
        thousands(out.never_told as f64),
    );
}

fn print_load(sc: &Scenario, out: &Outcome) {
    let end = out.end_ms / 1_000;
    let t0 = out.t0_ms.map_or(end, |t| t / 1_000);
    let windows: Vec<(String, Load)> = [
        ("opening minute (0–60 s)".to_string(), 0, 60.min(t0)),
        (format!("the drop (60–{t0} s)"), 60.min(t0), t0),
        ("first minute after T0".into(), t0, t0 + 60),
        ("second minute after T0".into(), t0 + 60, t0 + 120),
    ]
    .into_iter()
    .filter(|(_, a, b)| b > a)
    .map(|(name, a, b)| (name, out.load(a, b, sc.fleet)))
    .collect();
    let kinds: [(Kind, &str); KINDS] = [
        (Kind::ExactPoll, "exact polls (head, turns)"),
        (Kind::LivenessPoll, "near zone's liveness polls"),
        (Kind::Tick, "admit ticks"),
        (Kind::Consume, "consume"),
        (Kind::Settle, "settle"),
    ];
    println!("\n### Redis requests/s\n");
    print!("| kind |");
    windows.iter().for_each(|(n, _)| print!(" {n} |"));
    print!("\n|---|");
    windows.iter().for_each(|_| print!("---:|"));
    println!();
    for (k, name) in kinds {
        print!("| {name} |");
        windows
            .iter()
            .for_each(|(_, l)| print!(" {:.1} |", l.by_kind[k as usize]));
        println!();
    }
    let row = |name: &str, f: &dyn Fn(&Load) -> f64| {
        print!("| {name} |");
        windows.iter().for_each(|(_, l)| print!(" {:.1} |", f(l)));
        println!();
    };
    row(
        &format!(
            "snapshot refreshes ({} isolates)",
            thousands(sc.fleet.isolates as f64)
        ),
        &|l| l.refreshes,
    );
    row("**total Redis**", &|l| l.total());
    row("polls answered at the edge (no Redis)", &|l| l.edge_polls);
    println!(
        "\nAfter T0 nobody is admitted: the ticks go on (the line is not empty) but let \
         out no turn."
    );
}

fn print_calibration(out: &Outcome) {
    println!("\n### Calibration of the chance\n");
    println!(
        "Every 5 s until T0, every 50th waiting position up to 3× the stock's reach; \
         the chance is `chance_percent` from the snapshot's left, turns out, measured \
         conversion and units per order. Outcome: the visitor had a turn and, if it \
         ordered, got a unit.\n"
    );
    print_bins(&out.calibration);
    println!(
        "\nBrier score {:.4} over {} predictions ({:.4} over the {} made before the \
         conversion was measured; {:.4} against \"a unit was left when it ordered, or \
         would have\").",
        out.calibration.brier(),
        thousands(out.calibration.count() as f64),
        out.calibration_unmeasured.brier(),
        thousands(out.calibration_unmeasured.count() as f64),
        out.calibration_unit_left.brier(),
    );
    println!(
        "\nDiagnostic: the same predictions with the turns out left out \
         (`out: 0`), Brier score {:.4}:\n",
        out.calibration_without_out.brier()
    );
    print_bins(&out.calibration_without_out);
    println!(
        "\nDiagnostic: without the turns out and with the drop's true conversion \
         and units per order, Brier score {:.4}:\n",
        out.calibration_oracle.brier()
    );
    print_bins(&out.calibration_oracle);
}

fn print_bins(c: &Calibration) {
    println!("| predicted | mean predicted | observed | count |");
    println!("|---|---:|---:|---:|");
    for (label, predicted, observed, n) in c.rows() {
        println!(
            "| {label} | {:.1} % | {:.1} % | {} |",
            predicted * 100.0,
            observed * 100.0,
            thousands(n as f64)
        );
    }
}

fn thousands(x: f64) -> String {
    let n = x.round() as i64;
    let digits = n.unsigned_abs().to_string();
    let mut s = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            s.push(',');
        }
        s.push(c);
    }
    if n < 0 {
        s.insert(0, '-');
    }
    s
}
