//! The demo's synthetic crowd passes the entry guard like browsers would:
//! each visitor solves a proof of work and comes from an address of its
//! own, so a tight per-address budget does not hold the crowd back.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use queuegate_tools::crowd;
use queuegate_tools::load::tally::Tally;
use queuegate_tools::stack::{Stack, StackOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_crowd_solves_challenges_and_takes_its_places() {
    let stack = Stack::start(&StackOptions {
        port: 0,
        admit_rate: 50.0,
        gateway_request_log: false,
        entry_budget: Some(2),
        challenge_difficulty: Some(1_000),
        entry_challenge: Some("on"),
        ..StackOptions::default()
    })
    .await
    .expect("the local stack");
    let tally = Arc::new(Tally::default());
    crowd::run(
        stack.worker.url(),
        12,
        Duration::from_secs(1),
        0.0,
        Duration::from_secs(40),
        tally.clone(),
    )
    .await;
    let got = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    assert_eq!(got(&tally.entered), 12, "{}", tally.line());
    assert_eq!(got(&tally.ordered), 12, "{}", tally.line());

    // Each first enter was refused for want of a solution; none for budget.
    let mut conn = redis::Client::open(stack.redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    // The stats hash holds counters and the shared rate bucket's
    // `tokens|at` record: read text.
    let stats: std::collections::HashMap<String, String> = redis::cmd("HGETALL")
        .arg("qg:{main}:stats")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        stats.get("refused_challenge").map(String::as_str),
        Some("12"),
        "{stats:?}"
    );
    assert_eq!(stats.get("refused_budget"), None, "{stats:?}");
}
