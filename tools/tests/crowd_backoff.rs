//! The synthetic crowd backs off like the page when the room fails
//! (issue #23), so an overloaded or broken stack sees fewer requests, not a
//! retry storm: after a failed request without an answer it waits 2, 4, 8,
//! 16, then 30 s; after a 5xx with a JSON body it waits `Retry-After` (5 s
//! without one). Before, a visitor retried every second without end.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use queuegate_tools::crowd;
use queuegate_tools::load::tally::{Failure, Tally};
use queuegate_tools::stack::{Edge, Stack, StackOptions};

const VISITORS: u64 = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nobody_answering_gets_the_pages_exponential_backoff() {
    // A loopback port nobody listens on (bound, then closed).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let tally = Arc::new(Tally::default());
    let started = Instant::now();
    crowd::run(
        format!("http://127.0.0.1:{port}"),
        VISITORS,
        Duration::from_secs(1),
        0.0,
        Duration::from_secs(16),
        tally.clone(),
    )
    .await;
    assert!(started.elapsed() < Duration::from_secs(20));
    // Each visitor: at its arrival, then 2, 6 and 14 s later; the next
    // (30 s later) would pass the deadline. Retrying every second would
    // have sent ~15 each.
    let sent = tally.requests.load(Ordering::Relaxed);
    assert!(
        (VISITORS * 3..=VISITORS * 4).contains(&sent),
        "{sent} requests: {}",
        tally.line()
    );
    assert_eq!(
        tally.failed_with(Failure::Network),
        sent,
        "{}",
        tally.line()
    );
    assert_eq!(tally.entered.load(Ordering::Relaxed), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_answered_with_503_is_retried_after_retry_after() {
    let mut stack = Stack::start(&StackOptions {
        edge: Edge::Workerd,
        port: 0,
        gateway_request_log: false,
        challenge_difficulty: Some(1_000),
        ..StackOptions::default()
    })
    .await
    .expect("the local stack");
    stack.main_queue().await.expect("the queue opens");
    // Redis unreachable: every call the worker makes fails, and it answers
    // 503 `unavailable` with Retry-After 5.
    stack.gateway.terminate(Duration::from_secs(5));
    let probe = reqwest::Client::new()
        .post(format!("{}/queue/enter", stack.worker.url()))
        .send()
        .await
        .expect("the worker answers");
    assert_eq!(probe.status(), 503);
    assert_eq!(
        probe.headers().get("retry-after").map(|v| v.as_bytes()),
        Some(&b"5"[..])
    );

    let tally = Arc::new(Tally::default());
    crowd::run(
        stack.worker.url(),
        VISITORS,
        Duration::from_secs(1),
        0.0,
        Duration::from_secs(13),
        tally.clone(),
    )
    .await;
    // Each visitor: at its arrival, then every 5 s: 3 requests before the
    // 13 s deadline (the 4th would be 15 s after a first at 0–1 s).
    let sent = tally.requests.load(Ordering::Relaxed);
    assert!(
        (VISITORS * 2..=VISITORS * 3).contains(&sent),
        "{sent} requests: {}",
        tally.line()
    );
    assert_eq!(tally.failed_with(Failure::Server), sent, "{}", tally.line());
    assert_eq!(tally.entered.load(Ordering::Relaxed), 0);
}
