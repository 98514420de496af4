//! `queuegate-dev`: the whole waiting room locally, optionally with a
//! synthetic crowd. Ctrl-C stops everything it started.

use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use queuegate_shared::settings::SettingsError;
use queuegate_shared::Settings;
use queuegate_signal::shutdown_signal;
use queuegate_tools::crowd;
use queuegate_tools::demo_origin::Conditions;
use queuegate_tools::load::tally::Tally;
use queuegate_tools::stack::{Edge, Stack, StackOptions};

/// Runs redis-server, the gateway, the scheduler, a demo shop and the worker
/// (under `wrangler dev`, or the `workerd` binary alone when a crowd is
/// sent), all on loopback.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Port of the worker (what you open in the browser); 0 picks a free one.
    #[arg(long, default_value_t = 8787)]
    port: u16,
    /// What serves the worker. Default: wrangler (rebuilds the worker when
    /// its build changes, for editing it) without a crowd; workerd (the
    /// binary alone, about ten times the requests/s) with one, since
    /// wrangler dev's proxy answers only a few hundred requests/s on a
    /// small machine.
    #[arg(long, value_enum)]
    edge: Option<Edge>,
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
    /// (100000) when not given, or the lowest allowed (1000) with a crowd,
    /// whose proofs this machine computes for every visitor.
    #[arg(long)]
    challenge_difficulty: Option<u64>,
    /// Longest line (waiting, pre-queue and draw together); the product
    /// default (10000000) when not given.
    #[arg(long)]
    max_waiting: Option<u64>,
    /// The line size the challenge's difficulty counts from (product
    /// default 52500): harder from half of it and again from three
    /// quarters, so a small value shows the levels with a small crowd.
    #[arg(long)]
    challenge_crowd: Option<u64>,
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
    /// Turn Turnstile on against a local stand-in of its widget and
    /// `siteverify` (a button that "solves" the check), to try the page's
    /// Turnstile path without the internet.
    #[arg(long)]
    turnstile_stand_in: bool,
    /// Signed-in mode (IDENTITY_MODE=jwt) with the demo shop as the login
    /// service: the buyer is the `demo_user` cookie, whose login tokens
    /// live this many seconds; the page gets fresh ones from the shop's
    /// token script (PAGE_TOKEN_SCRIPT=/_demo/queuegate-token.js).
    #[arg(long, value_name = "TOKEN_LIFETIME_S", value_parser = clap::value_parser!(u64).range(5..=86_400))]
    signed_in: Option<u64>,
    /// Stop by itself after this many seconds (0: run until Ctrl-C).
    #[arg(long, default_value_t = 0)]
    exit_after: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if !(0.0..=1.0).contains(&args.leave_share) {
        refuse(&format!(
            "--leave-share {}: must be 0 to 1",
            args.leave_share
        ));
    }
    let origin = Conditions {
        error_rate: args.origin_error_rate,
        latency_ms: args.origin_latency_ms,
    };
    if let Err(why) = origin.validate() {
        refuse(&format!("--origin-error-rate / --origin-latency-ms: {why}"));
    }
    // Every combination the scheduler would refuse is refused here, in one
    // line naming the flag, before anything starts.
    let (queue, notes) = queue_settings(&args).unwrap_or_else(|why| refuse(&why));
    for note in notes {
        eprintln!("{note}");
    }
    let edge = args.edge.unwrap_or(if args.crowd > 0 {
        Edge::Workerd
    } else {
        Edge::Wrangler
    });
    if args.crowd > 0 {
        // Each visitor keeps a connection open, as a browser does, and so
        // does workerd (started below, inheriting the limit) on its side:
        // a 1,024 soft limit would refuse most of a 5,000 crowd.
        if let Ok(limit) = rlimit::increase_nofile_limit(u64::MAX) {
            if limit < args.crowd + 256 {
                eprintln!(
                    "note: this machine allows {limit} open files per process; a crowd of {} needs about {} (raise `ulimit -n`)",
                    args.crowd,
                    args.crowd + 256
                );
            }
        }
    }
    if args.port != 0 && std::net::TcpListener::bind(("127.0.0.1", args.port)).is_err() {
        refuse(&format!(
            "--port {}: already in use on 127.0.0.1 (another scripts/dev? pick another port, or 0 for any free one)",
            args.port
        ));
    }
    eprintln!(
        "starting redis-server, redis-rest, queuegate-scheduler, the demo shop and the worker under {}…",
        edge.label()
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
    if let Some(n) = args.challenge_crowd {
        settings.push(("challenge_crowd".to_string(), n.to_string()));
    }
    if queue.min_admit_rate_per_second != Settings::default().min_admit_rate_per_second {
        settings.push((
            "min_admit_rate_per_second".to_string(),
            queue.min_admit_rate_per_second.to_string(),
        ));
    }
    let stack = Stack::start(&StackOptions {
        edge,
        settings,
        port: args.port,
        admit_rate: args.admit_rate,
        max_active: args.max_active,
        entry_budget: args.entry_budget,
        challenge_difficulty: Some(queue.challenge_max_number),
        origin,
        turnstile_stand_in: args.turnstile_stand_in,
        signed_in_token_lifetime_s: args.signed_in,
        ..StackOptions::default()
    })
    .await?;
    let url = stack.worker.url();
    println!("queuegate is running ({}): open {url}/queue", edge.label());
    println!("  shop (behind the worker): {url}/   checkout: {url}/checkout");
    println!("  a protected page (sent to the room and back): {url}/tickets/7");
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
    if let Some(s) = args.signed_in {
        println!(
            "  signed in: set the cookie demo_user=<name> on {url}, then open /queue (login tokens live {s} s; minted: {url}/_demo/logins)"
        );
    }
    println!("press Ctrl-C to stop");

    let stats = Arc::new(Tally::default());
    if args.crowd > 0 {
        let (base, stats, n) = (url.clone(), stats.clone(), args.crowd);
        let ramp = Duration::from_secs(args.crowd_ramp);
        tokio::spawn(async move {
            crowd::run(
                base,
                n,
                ramp,
                args.leave_share,
                Duration::from_secs(3_600),
                stats.clone(),
            )
            .await;
            eprintln!("the crowd is done; {}", stats.line());
        });
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

/// A flag that cannot work: one line, exit code 2, before anything starts
/// (an error returned from `main` would print a backtrace when
/// `RUST_BACKTRACE` is set).
fn refuse(why: &str) -> ! {
    eprintln!("queuegate-dev: {why}");
    std::process::exit(2);
}

/// The queue's settings as the flags make them, checked as the scheduler
/// will check them. One adaptation, said in the returned notes: a rate
/// below origin control's default minimum (1/s) lowers the minimum with it.
/// Anything else the scheduler would refuse is an error naming the flag.
fn queue_settings(args: &Args) -> Result<(Settings, Vec<String>), String> {
    let mut s = Settings {
        admit_rate_per_second: args.admit_rate,
        max_active: args.max_active,
        ..Settings::default()
    };
    if let Some(b) = args.entry_budget {
        s.entry_budget_per_minute = b;
        s.entry_budget_burst = b;
    }
    let mut notes = Vec::new();
    match args.challenge_difficulty {
        Some(d) => s.challenge_max_number = d,
        None if args.crowd > 0 => {
            s.challenge_max_number = CROWD_DIFFICULTY;
            notes.push(format!(
                "the crowd's proofs of work run on this machine, not on {} phones: the challenge's difficulty is {CROWD_DIFFICULTY} for this run, not {} (--challenge-difficulty to choose)",
                args.crowd,
                Settings::default().challenge_max_number
            ));
        }
        None => {}
    }
    if let Some(n) = args.max_waiting {
        s.max_waiting = n;
    }
    if let Some(n) = args.challenge_crowd {
        s.challenge_crowd = n;
    }
    let rate = s.admit_rate_per_second;
    if !(rate.is_finite() && rate > 0.0) {
        return Err(format!("--admit-rate {rate}: must be above 0"));
    }
    if rate < s.min_admit_rate_per_second {
        s.min_admit_rate_per_second = rate;
        notes.push(format!(
            "--admit-rate {rate} is below origin control's default minimum (1/s): the minimum is lowered to {rate}/s too"
        ));
    }
    match s.validate() {
        Ok(()) => Ok((s, notes)),
        Err(SettingsError::Invalid { field, value, rule }) => Err(match flag_of(field) {
            Some(flag) => format!("{flag} {value}: {rule}"),
            None => format!("the flags make {field} = {value}: {rule}"),
        }),
        Err(other) => Err(other.to_string()),
    }
}

/// The challenge's difficulty when a crowd runs and `--challenge-difficulty`
/// is not given: the lowest the scheduler accepts. At the product default a
/// visitor's proof takes ~50,000 SHA-256 on average; 5,000 visitors in 20 s
/// would ask this machine for 250 million, the work of 5,000 phones, and
/// starve the stack they are meant to show.
const CROWD_DIFFICULTY: u64 = 1_000;

/// The `queuegate-dev` flag that sets a queue setting.
fn flag_of(field: &str) -> Option<&'static str> {
    Some(match field {
        "admit_rate_per_second" | "min_admit_rate_per_second" => "--admit-rate",
        "max_active" => "--max-active",
        "entry_budget_per_minute" | "entry_budget_burst" => "--entry-budget",
        "challenge_max_number" => "--challenge-difficulty",
        "max_waiting" => "--max-waiting",
        "challenge_crowd" => "--challenge-crowd",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(flags: &[&str]) -> Args {
        Args::try_parse_from(std::iter::once("queuegate-dev").chain(flags.iter().copied()))
            .expect("flags parse")
    }

    #[test]
    fn the_defaults_are_a_valid_queue() {
        let (s, notes) = queue_settings(&args(&[])).expect("valid");
        assert_eq!(s.admit_rate_per_second, 20.0);
        assert_eq!(
            s.challenge_max_number,
            Settings::default().challenge_max_number
        );
        assert!(notes.is_empty());
    }

    #[test]
    fn a_crowd_lowers_the_difficulty_unless_one_is_given_and_says_so() {
        let (s, notes) = queue_settings(&args(&["--crowd", "5000"])).expect("valid");
        assert_eq!(s.challenge_max_number, CROWD_DIFFICULTY);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("--challenge-difficulty"), "{notes:?}");
        let (s, notes) = queue_settings(&args(&[
            "--crowd",
            "5000",
            "--challenge-difficulty",
            "50000",
        ]))
        .expect("valid");
        assert_eq!(s.challenge_max_number, 50_000);
        assert!(notes.is_empty(), "{notes:?}");
    }

    #[test]
    fn a_slow_rate_lowers_the_minimum_and_says_so() {
        let (s, notes) = queue_settings(&args(&["--admit-rate", "0.05"])).expect("adapted");
        assert_eq!(s.min_admit_rate_per_second, 0.05);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("lowered"), "{notes:?}");
    }

    #[test]
    fn what_the_scheduler_refuses_is_one_line_naming_the_flag() {
        for (flags, flag) in [
            (&["--admit-rate", "0"][..], "--admit-rate 0:"),
            (&["--admit-rate=-3"][..], "--admit-rate -3:"),
            (&["--max-active", "0"][..], "--max-active 0:"),
            (
                &["--challenge-difficulty", "5"][..],
                "--challenge-difficulty 5:",
            ),
            (&["--max-waiting", "0"][..], "--max-waiting 0:"),
        ] {
            let why = queue_settings(&args(flags)).expect_err("refused");
            assert!(why.starts_with(flag), "{flags:?}: {why}");
            assert!(!why.contains('\n'), "one line: {why}");
        }
    }
}
