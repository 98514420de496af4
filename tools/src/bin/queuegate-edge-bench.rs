//! `queuegate-edge-bench`: the built worker under the `workerd` binary
//! beside a plain-JS floor worker with the same I/O, per route (position,
//! enter, order): workerd CPU ms per request (from /proc), requests/s,
//! p50/p99 and the worker ÷ floor CPU ratio. Loopback only, bounded in time.
//!
//! Needs `scripts/build-worker`, `npm ci` and
//! `cargo build --profile release-native --bins -p redis-rest` (or the
//! profile you run this from: binaries are found beside this one).

use std::time::Duration;

use clap::Parser;
use queuegate_tools::edge_bench::{self, Options, Rig, Route};

/// Worker CPU per request against a plain-JS floor, under workerd itself.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Waiting visitors whose positions are asked.
    #[arg(long, default_value_t = 500)]
    waiting: usize,
    /// Concurrent requests.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Seconds per window.
    #[arg(long, default_value_t = 10)]
    window_secs: u64,
    /// Windows per side and route (worker and floor alternate).
    #[arg(long, default_value_t = 2)]
    rounds: usize,
    /// Admitted visitors prepared for the order windows.
    #[arg(long, default_value_t = 40_000)]
    orders: usize,
    /// Routes, comma-separated: position, enter, order.
    #[arg(long, default_value = "position,enter,order", value_delimiter = ',')]
    routes: Vec<String>,
    /// Another build of the worker to measure beside it, in the same
    /// alternation: a directory holding a copy of `worker/build/index.js`
    /// and `index_bg.wasm`. Repeat to compare several changes in one run.
    #[arg(long = "variant", value_name = "DIR")]
    variants: Vec<std::path::PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let routes = args
        .routes
        .iter()
        .map(|r| match r.as_str() {
            "position" => Ok(Route::Position),
            "enter" => Ok(Route::Enter),
            "order" => Ok(Route::Order),
            other => Err(anyhow::anyhow!("unknown route {other}")),
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let opts = Options {
        waiting: args.waiting,
        concurrency: args.concurrency,
        window: Duration::from_secs(args.window_secs),
        rounds: args.rounds,
        orders: args.orders,
        routes,
        variants: args.variants,
        ..Options::default()
    };
    let mut rig = Rig::start_with(&opts.variants).await?;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(opts.concurrency)
        .build()?;
    let figures = edge_bench::measure(&mut rig, &http, &opts).await?;
    println!(
        "{} waiting, {} concurrent, {} × {} s per side and route, worker, floor and variants alternating; entry challenge off, address budget 0\n",
        opts.waiting, opts.concurrency, opts.rounds, args.window_secs
    );
    print!("{}", edge_bench::table(&figures));
    for f in &figures {
        if let Some(why) = &f.first_failure {
            println!("\nfirst failure ({} {:?}): {why}", f.route.name(), f.side);
        }
    }
    Ok(())
}
