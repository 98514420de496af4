//! An idle room (issue 27) on the real stack: redis-server and the
//! scheduler binary. After 10 s with nobody waiting, the holder extends its
//! lease by the idle TTL and waits for a wake-up instead of ticking; its
//! health stays good; a visitor who joins the line wakes it, and is
//! admitted long before the idle wait would have ended.

use std::time::{Duration, Instant};

use queuegate_shared::settings::IDLE_WAIT_MS;
use queuegate_shared::Settings;
use queuegate_system_tests::{user, TestQueue};
use queuegate_testkit::scheduler::Scheduler;
use queuegate_testkit::RedisServer;

async fn lock_pttl(q: &TestQueue) -> i64 {
    redis::cmd("PTTL")
        .arg(q.keys.lock())
        .query_async(&mut q.conn.clone())
        .await
        .expect("PTTL")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_holder_waits_and_the_first_visitor_wakes_it() {
    let redis = RedisServer::start();
    let settings = Settings {
        idle_passthrough: false,
        ..Settings::default()
    };
    let q = TestQueue::open(&redis.url(), "main", settings.clone()).await;
    let sched = Scheduler::builder(&redis.url())
        .queue("main", &[("idle_passthrough", "false")])
        .start();

    // Idle long enough: the lease outlasts an idle wait.
    let deadline = Instant::now() + Duration::from_secs(30);
    while lock_pttl(&q).await <= settings.lease_ttl_ms as i64 {
        assert!(Instant::now() < deadline, "never idle: {}", sched.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(lock_pttl(&q).await <= settings.idle_lease_ttl_ms() as i64);
    // Waiting, and healthy all the while (a few idle waits).
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(IDLE_WAIT_MS / 2)).await;
        let health = reqwest::get(format!("http://127.0.0.1:{}/healthz", sched.port()))
            .await
            .expect("healthz");
        assert_eq!(health.status().as_u16(), 200, "an idle holder is healthy");
    }

    // A visitor joins: the holder wakes and admits at once, not at the
    // end of its idle wait.
    let joined = Instant::now();
    q.enter(&user(0)).await;
    while q.token_of(&user(0)).await.is_none() {
        assert!(
            joined.elapsed() < Duration::from_secs(10),
            "never admitted: {}",
            sched.log()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let took = joined.elapsed();
    assert!(
        took < Duration::from_millis(IDLE_WAIT_MS / 2),
        "admitted after {took:?}: woken, not timed out"
    );
    // Busy again: the lease is back to lease_ttl_ms.
    assert!(lock_pttl(&q).await <= settings.lease_ttl_ms as i64);
}
