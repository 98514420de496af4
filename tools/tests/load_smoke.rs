//! `queuegate-load` end to end with a tiny crowd, so the tool cannot rot:
//! the whole stack starts, every visitor path runs (enter, adaptive and
//! fixed polls, leaving, ordering), the figures come out and the charts are
//! written. Needs the built worker and `cargo build --bins` (scripts/test
//! does both); takes about 10 s, and the drop mode about 20 s more (one after the
//! other).

use queuegate_tools::load::drop_day::{self, DropOptions};
use queuegate_tools::load::{self, visitor::Outcome, Options};
use tokio::sync::Mutex;

/// One whole room at a time: two stacks (each a `wrangler dev`) sharing two
/// cores slow each other's visitors past the timings the runs are built on.
static ONE_STACK: Mutex<()> = Mutex::const_new(());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiny_crowd_runs_through_the_whole_room() {
    let _one = ONE_STACK.lock().await;
    let opts = Options::smoke();
    let report = load::run(&opts).await.expect("the load run");
    let text = report.to_string();

    let leavers = report.records.iter().filter(|r| r.leaver).count();
    assert_eq!(report.records.len(), opts.visitors as usize);
    assert!(
        report.count(Outcome::Ordered) >= report.records.len() - leavers,
        "everyone who stayed should have ordered:\n{text}"
    );
    assert_eq!(report.count(Outcome::Deadline), 0, "{text}");

    // One script round trip per edge call, plus at most a few NOSCRIPT
    // fallbacks while Redis's script cache warms up.
    let rt = &report.round_trips;
    assert!((1.0..1.3).contains(&rt.per_enter()), "{text}");
    assert!((1.0..1.3).contains(&rt.per_position()), "{text}");
    assert!((2.0..2.5).contains(&rt.per_order()), "{text}");
    // Besides scripts, only the isolate's snapshot reads (an `HMGET` at
    // most once in `snapshot::REFRESH_MS` while a polling visitor's ticket
    // lies behind the exact head it knows; docs/uncapped-line.md).
    let others = rt.counters.non_script_commands();
    let hmget = rt.counters.commands.get("HMGET").copied().unwrap_or(0);
    assert_eq!(others, hmget, "{text}");
    assert!(hmget as f64 <= report.crowd_seconds.ceil() + 1.0, "{text}");

    let t = report.throughput.expect("throughput measured");
    assert!(t.worker.ok > 0 && t.redis.rps > 0.0, "{text}");
    for a in ["adaptive", "fixed 2 s"] {
        assert!(text.contains(a), "{text}");
    }
    assert!(report.eta_error().is_some(), "{text}");

    let dir = tempfile::tempdir().expect("temp dir");
    for chart in load::charts::write(&report, dir.path()).expect("charts") {
        let svg = std::fs::read_to_string(&chart).expect("chart written");
        assert!(
            svg.starts_with("<svg") && svg.contains("</svg>"),
            "{}",
            chart.display()
        );
    }
}

/// Drop mode with a tiny crowd: everyone pre-queued before the opening is
/// drawn into line, admitted and orders, and the figures come out. About
/// 20 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiny_drop_is_drawn_admitted_and_reported() {
    let _one = ONE_STACK.lock().await;
    let opts = DropOptions::smoke();
    let report = drop_day::run(&opts).await.expect("the drop run");
    let text = report.to_string();
    let run = &report.runs[0];
    // A visitor whose proof of work (slow in a debug build) ends after the
    // opening joins the line instead; the draw places exactly the others.
    let pre = run.records.iter().filter(|r| r.pre_queued).count() as u64;
    assert!(pre >= opts.pre_queue / 2, "{text}");
    assert_eq!(run.drawn, pre, "{text}");
    assert!(run.placed_ms.is_some_and(|t| t >= run.opens_at), "{text}");
    assert_eq!(run.count(Outcome::Ordered), run.records.len(), "{text}");
    assert!(
        run.all_admitted_s().is_some() && run.rank_correlation().is_some(),
        "{text}"
    );
    assert!(
        run.poll_rate(0.0, 5.0, 1.0).iter().any(|p| p.1 > 0.0),
        "{text}"
    );
}
