//! `queuegate-edge-bench`: the built worker under the `workerd` binary
//! beside a plain-JS floor worker with the same I/O, per route (position,
//! enter, order, and on request far-back: polls beyond the near zone that
//! the worker answers from its snapshot): workerd CPU ms per request (from
//! /proc), requests/s, p50/p99, the worker ÷ floor CPU ratio and the Redis
//! commands per request. Loopback only, bounded in time.
//!
//! Needs `scripts/build-worker`, `npm ci` and
//! `cargo build --profile release-native --bins -p redis-rest` (or the
//! profile you run this from: binaries are found beside this one).

use std::time::Duration;

use clap::Parser;
use queuegate_tools::edge_bench::{self, Identity, Options, Rig, Route};

/// Worker CPU per request against a plain-JS floor, under workerd itself.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Waiting visitors whose positions are asked.
    #[arg(long, default_value_t = 500)]
    waiting: usize,
    /// Concurrent requests.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Requests a second over all concurrent loops, the same for every
    /// side, so each is measured under the same load (default: each loop
    /// sends as soon as its last reply is in, so a faster side serves
    /// more). A side that cannot keep up falls behind (its req/s shows it).
    #[arg(long, value_parser = positive_rate)]
    rate: Option<f64>,
    /// Seconds per window.
    #[arg(long, default_value_t = 10)]
    window_secs: u64,
    /// Windows per side and route (worker and floor alternate).
    #[arg(long, default_value_t = 2)]
    rounds: usize,
    /// Admitted visitors prepared for the order windows.
    #[arg(long, default_value_t = 40_000)]
    orders: usize,
    /// Routes, comma-separated: position, enter, order, far-back.
    #[arg(long, default_value = "position,enter,order", value_delimiter = ',')]
    routes: Vec<String>,
    /// Visitors polled by the far-back route (entered behind everyone).
    #[arg(long, default_value_t = 500)]
    far_back: usize,
    /// Visitors entered straight in Redis between the waiting visitors and
    /// the far-back ones.
    #[arg(long, default_value_t = 10_000)]
    far_gap: usize,
    /// The near zone's size in visitors during the far-back windows.
    #[arg(long, default_value_t = 200)]
    near_zone: usize,
    /// Another build of the worker to measure beside it, in the same
    /// alternation: a directory holding a copy of `worker/build/index.js`
    /// and `index_bg.wasm`. Repeat to compare several changes in one run.
    #[arg(long = "variant", value_name = "DIR")]
    variants: Vec<std::path::PathBuf>,
    /// How visitors identify to the worker: anonymous (its signed visitor
    /// cookie) or jwt (signed in: an HS256 bearer JWT on every request,
    /// the bench being the login service). jwt measures position and
    /// far-back only.
    #[arg(long, default_value = "anonymous")]
    identity: String,
}

/// A `--rate`: a finite number of requests a second above zero.
fn positive_rate(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(rate) if rate.is_finite() && rate > 0.0 => Ok(rate),
        _ => Err(format!(
            "{text:?} is not a rate above 0 (requests a second)"
        )),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let routes = args
        .routes
        .iter()
        .map(|r| Route::from_name(r).ok_or_else(|| anyhow::anyhow!("unknown route {r}")))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let identity = Identity::from_name(&args.identity).ok_or_else(|| {
        anyhow::anyhow!("--identity takes anonymous or jwt, not {}", args.identity)
    })?;
    anyhow::ensure!(
        identity == Identity::Anonymous
            || routes
                .iter()
                .all(|r| matches!(r, Route::Position | Route::FarBack)),
        "--identity jwt measures the position and far-back routes only"
    );
    let opts = Options {
        waiting: args.waiting,
        concurrency: args.concurrency,
        rate: args.rate,
        window: Duration::from_secs(args.window_secs),
        rounds: args.rounds,
        orders: args.orders,
        routes,
        far_back: args.far_back,
        far_gap: args.far_gap,
        near_zone: args.near_zone,
        variants: args.variants,
        identity,
        ..Options::default()
    };
    let mut rig = Rig::start_with(&opts.variants, opts.identity).await?;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(opts.concurrency)
        .build()?;
    let report = edge_bench::measure(&mut rig, &http, &opts).await?;
    let figures = &report.figures;
    let paced = match opts.rate {
        Some(rate) => format!(", paced at {rate} requests/s"),
        None => String::new(),
    };
    println!(
        "{} waiting, {} concurrent{paced}, {} × {} s per side and route, worker, floor and variants alternating; entry challenge off, address budget 0; identity {}\n",
        opts.waiting, opts.concurrency, opts.rounds, args.window_secs, opts.identity.name()
    );
    print!("{}", edge_bench::table(figures));
    if let Some(notes) = &report.far_back {
        println!();
        print!("{}", notes.describe());
        print!("{}", edge_bench::far_back_lines(figures));
    }
    for f in figures {
        if let Some(why) = &f.first_failure {
            println!("\nfirst failure ({} {:?}): {why}", f.route.name(), f.side);
        }
    }
    Ok(())
}
