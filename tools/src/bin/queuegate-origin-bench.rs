//! `queuegate-origin-bench`: the origin-control figure of BENCHMARKS.md.
//! Runs the whole room twice on loopback with the same crowd, the demo
//! shop failing every order for a spell in the middle — once with origin
//! control, once without — writes the chart and prints the table.

use std::path::PathBuf;

use clap::Parser;
use queuegate_tools::origin_bench::{self, Options};

/// Orders that reach a failing origin, with and without origin control.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Visitors in the crowd.
    #[arg(long, default_value_t = 1_200)]
    crowd: u64,
    /// Seconds over which they arrive.
    #[arg(long, default_value_t = 10)]
    ramp_secs: u64,
    /// admit_rate_per_second (the maximum).
    #[arg(long, default_value_t = 15.0)]
    admit_rate: f64,
    /// min_admit_rate_per_second.
    #[arg(long, default_value_t = 2.0)]
    min_rate: f64,
    /// Order slots.
    #[arg(long, default_value_t = 400)]
    max_active: u64,
    /// When the shop starts failing, seconds into the run.
    #[arg(long, default_value_t = 20)]
    fail_at: u64,
    /// How long it fails.
    #[arg(long, default_value_t = 30)]
    fail_for: u64,
    /// Length of each run in seconds.
    #[arg(long, default_value_t = 70)]
    run_secs: u64,
    /// Where the chart goes.
    #[arg(long, default_value = "docs/benchmarks/origin-control.svg")]
    chart: PathBuf,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    if a.fail_at + a.fail_for >= a.run_secs || a.min_rate > a.admit_rate {
        anyhow::bail!(
            "the failing spell must end before the run does, and --min-rate ≤ --admit-rate"
        );
    }
    let opts = Options {
        crowd: a.crowd,
        ramp_s: a.ramp_secs,
        admit_rate: a.admit_rate,
        min_rate: a.min_rate,
        max_active: a.max_active,
        fail_at_s: a.fail_at,
        fail_for_s: a.fail_for,
        run_s: a.run_secs,
    };
    eprintln!("run 1 of 2: with origin control ({} s)…", opts.run_s);
    let with = origin_bench::run(&opts, true).await?;
    eprintln!("run 2 of 2: without ({} s)…", opts.run_s);
    let without = origin_bench::run(&opts, false).await?;
    if let Some(dir) = a.chart.parent() {
        std::fs::create_dir_all(dir)?;
    }
    origin_bench::chart(&opts, &with, &without, &a.chart)
        .map_err(|e| anyhow::anyhow!("{}: {e}", a.chart.display()))?;
    println!("{}", origin_bench::table(&opts, &[&with, &without]));
    println!("chart: {}", a.chart.display());
    Ok(())
}
