//! `queuegate-dev`: the whole waiting room locally, optionally with a
//! synthetic crowd. Ctrl-C stops everything it started.

use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use queuegate_signal::shutdown_signal;
use queuegate_tools::crowd;
use queuegate_tools::demo_origin::Conditions;
use queuegate_tools::load::tally::Tally;
use queuegate_tools::stack::{Stack, StackOptions};

/// Runs redis-server, the gateway, the scheduler, a demo shop and the worker
/// under `wrangler dev`, all on loopback.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Port of the worker (what you open in the browser); 0 picks a free one.
    #[arg(long, default_value_t = 8787)]
    port: u16,
    /// Synthetic visitors to send through the queue.
    #[arg(long, default_value_t = 0)]
    crowd: u64,
    /// Seconds over which the crowd arrives.
    #[arg(long, default_value_t = 20)]
    crowd_ramp: u64,
    /// Share of the crowd that gives up while waiting (0 to 1).
    #[arg(long, default_value_t = 0.1)]
    leave_share: f64,
    /// Admissions per second (low, so you can watch the line move).
    #[arg(long, default_value_t = 20.0)]
    admit_rate: f64,
    /// Order slots at the shop.
    #[arg(long, default_value_t = 100)]
    max_active: u64,
    /// New places one address may take per minute (and at once); the
    /// product default (40) when not given. 0 turns the budget off.
    #[arg(long)]
    entry_budget: Option<u64>,
    /// Proof-of-work difficulty (ALTCHA `maxnumber`); the product default
    /// (100000) when not given.
    #[arg(long)]
    challenge_difficulty: Option<u64>,
    /// Longest line (waiting, pre-queue and draw together); the product
    /// default (52500) when not given. The challenge gets harder from half
    /// of it and again from three quarters, so a small value shows the
    /// difficulty levels with a small crowd.
    #[arg(long)]
    max_waiting: Option<u64>,
    /// Share of orders the demo shop answers with 503 at the start (0 to 1);
    /// change it while running with `POST /_demo/conditions`.
    #[arg(long, default_value_t = 0.0)]
    origin_error_rate: f64,
    /// Milliseconds the demo shop waits before answering an order.
    #[arg(long, default_value_t = 0)]
    origin_latency_ms: u64,
    /// Schedule the opening this many seconds after start: until then
    /// visitors join the pre-queue, whose places are drawn at random at the
    /// opening (also settable at run time with `queuegate-scheduler
    /// schedule`).
    #[arg(long)]
    opens_in: Option<u64>,
    /// Stop by itself after this many seconds (0: run until Ctrl-C).
    #[arg(long, default_value_t = 0)]
    exit_after: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if !(0.0..=1.0).contains(&args.leave_share) {
        anyhow::bail!("--leave-share must be between 0 and 1");
    }
    let origin = Conditions {
        error_rate: args.origin_error_rate,
        latency_ms: args.origin_latency_ms,
    };
    if let Err(why) = origin.validate() {
        anyhow::bail!("--origin-error-rate / --origin-latency-ms: {why}");
    }
    eprintln!(
        "starting redis-server, redis-rest, queuegate-scheduler, the demo shop and wrangler dev…"
    );
    let mut settings = Vec::new();
    if let Some(secs) = args.opens_in {
        let opens_at = queuegate_testkit::now_ms() + secs * 1_000;
        let at = queuegate_scheduler::config::format_time(opens_at);
        eprintln!("the queue opens at {at}: visitors before then join the pre-queue");
        settings.push(("opens_at".to_string(), format!("\"{at}\"")));
    }
    if let Some(n) = args.max_waiting {
        settings.push(("max_waiting".to_string(), n.to_string()));
    }
    let stack = Stack::start(&StackOptions {
        settings,
        port: args.port,
        admit_rate: args.admit_rate,
        max_active: args.max_active,
        entry_budget: args.entry_budget,
        challenge_difficulty: args.challenge_difficulty,
        origin,
        ..StackOptions::default()
    })
    .await?;
    let url = stack.worker.url();
    println!("queuegate is running: open {url}/queue");
    println!("  shop (behind the worker): {url}/   checkout: {url}/checkout");
    println!(
        "  make the shop fail or slow down: curl -X POST {url}/_demo/conditions -d '{{\"errorRate\":0.5,\"latencyMs\":300}}'"
    );
    println!(
        "  scheduler metrics: http://127.0.0.1:{}/metrics",
        stack.scheduler.port()
    );
    println!(
        "  redis: {}   gateway: {}",
        stack.redis.url(),
        stack.gateway.url()
    );
    println!("press Ctrl-C to stop");

    let stats = Arc::new(Tally::default());
    if args.crowd > 0 {
        let (base, stats, n) = (url.clone(), stats.clone(), args.crowd);
        let ramp = Duration::from_secs(args.crowd_ramp);
        tokio::spawn(crowd::run(
            base,
            n,
            ramp,
            args.leave_share,
            Duration::from_secs(3_600),
            stats,
        ));
    }
    let ticker = {
        let stats = stats.clone();
        let crowd = args.crowd > 0;
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(2)).await;
                if crowd {
                    eprintln!("{}", stats.line());
                }
            }
        })
    };
    let stop = async {
        if args.exit_after > 0 {
            tokio::time::sleep(Duration::from_secs(args.exit_after)).await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        () = shutdown_signal() => {}
        () = stop => {}
    }
    ticker.abort();
    eprintln!("stopping…");
    drop(stack);
    Ok(())
}
