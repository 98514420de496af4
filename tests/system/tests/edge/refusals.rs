//! Redis refusing a command it did not run (issue 37): out of memory
//! (`OOM`), busy with a long script (`BUSY`) and a read-only replica after
//! a fail-over (`READONLY`) reach a visitor as 503 `unavailable` with a
//! `Retry-After`, never a 500; nothing changes while Redis refuses, and
//! the same visitor's next request succeeds once Redis is itself again,
//! their place intact.

use std::time::Duration;

use queuegate_shared::Settings;
use queuegate_system_tests::{fast_settings, redis_cmd, TestQueue};
use queuegate_testkit::gateway::Gateway;
use queuegate_testkit::visitor::{Reply, Visitor};
use queuegate_testkit::{RedisServer, Wrangler};

const SECRET: &str = "refusal-test-secret-0123456789abcdef";

/// A refusal as the contract says: 503 `unavailable`, retry in 5 s.
fn assert_refused(reply: &Reply, what: &str) {
    assert_eq!(
        (reply.status, reply.error(), reply.retry_after),
        (503, "unavailable", Some(5)),
        "{what}: {:?}",
        reply.json
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oom_busy_and_readonly_are_503_with_retry_after_and_lose_no_place() {
    let redis = RedisServer::start();
    let url = redis.url();
    let settings = Settings {
        entry_budget_per_minute: 0,
        idle_passthrough: false,
        ..fast_settings()
    };
    let q = TestQueue::open(&url, "main", settings).await;
    let gateway = Gateway::start(&url);
    let (rest_url, token) = (gateway.url(), gateway.token().to_string());
    let worker = tokio::task::spawn_blocking(move || {
        Wrangler::builder()
            .var("ENTRY_CHALLENGE", "off")
            .secret("UPSTASH_REDIS_REST_URL", &rest_url)
            .secret("UPSTASH_REDIS_REST_TOKEN", &token)
            .secret("IDENTITY_SECRET", SECRET)
            .secret("ORIGIN_SIGNING_SECRET", SECRET)
            .start()
    })
    .await
    .expect("start the worker");
    let base = worker.url();
    let waiting_key = q.keys.waiting();

    // Two visitors in line before anything goes wrong.
    let mut first = Visitor::new(&base);
    assert_eq!(first.enter().await.state(), "waiting");
    let mut second = Visitor::new(&base);
    assert_eq!(second.enter().await.state(), "waiting");
    let place = |r: &Reply| r.json["position"].as_u64();
    let first_place = place(&first.position().await);
    assert_eq!(first_place, Some(1));
    assert_eq!(q.zcard(&waiting_key).await, 2);

    // 1. Out of memory: maxmemory below what Redis already uses, and no
    // eviction (Redis' default policy).
    redis_cmd(&url, &["CONFIG", "SET", "maxmemory", "1"]).expect("maxmemory");
    // Redis refuses a script's first write that needs memory, and lets
    // the rest of a script that has written already run on (it never
    // half-runs a script): so a poll, whose first write is its liveness
    // mark, is refused whole, while an enter, which tidies up before it
    // adds, may go through. Either way: a whole answer or a 503, never a
    // 500 and never half a change.
    assert_refused(&first.position().await, "a poll while out of memory");
    let mut newcomer = Visitor::new(&base);
    let under_oom = newcomer.enter().await;
    if under_oom.status == 200 {
        assert_eq!(under_oom.state(), "waiting");
    } else {
        assert_refused(&under_oom, "enter while out of memory");
    }
    redis_cmd(&url, &["CONFIG", "SET", "maxmemory", "0"]).expect("maxmemory off");
    assert_eq!(newcomer.enter().await.state(), "waiting", "after OOM");
    assert_eq!(place(&first.position().await), first_place);
    assert_eq!(q.zcard(&waiting_key).await, 3);
    q.assert_conserved().await;

    // 2. Busy: a script from another client runs past the threshold.
    redis_cmd(&url, &["CONFIG", "SET", "busy-reply-threshold", "100"]).expect("threshold");
    let busy_url = url.clone();
    let spinner = std::thread::spawn(move || {
        // Read-only, so SCRIPT KILL can stop it.
        redis_cmd(
            &busy_url,
            &["EVAL", "while true do redis.call('TIME') end", "0"],
        )
    });
    tokio::time::sleep(Duration::from_millis(400)).await;
    let mut during_busy = Visitor::new(&base);
    assert_refused(&during_busy.enter().await, "enter while Redis is busy");
    assert_refused(&second.position().await, "a poll while Redis is busy");
    redis_cmd(&url, &["SCRIPT", "KILL"]).expect("script kill");
    let killed = spinner.join().expect("spinner thread");
    assert!(killed.is_err(), "the long script ended by SCRIPT KILL");
    assert_eq!(
        during_busy.enter().await.state(),
        "waiting",
        "retried after BUSY"
    );
    assert_eq!(place(&second.position().await), Some(2));

    // 3. A fail-over left the address on a replica: writes are refused
    // (its primary is a closed port, so it never syncs or flushes).
    redis_cmd(&url, &["REPLICAOF", "127.0.0.1", "1"]).expect("replicaof");
    let mut on_replica = Visitor::new(&base);
    assert_refused(&on_replica.enter().await, "enter on a read-only replica");
    assert_refused(&first.position().await, "a poll on a read-only replica");
    redis_cmd(&url, &["REPLICAOF", "NO", "ONE"]).expect("replicaof no one");
    assert_eq!(
        on_replica.enter().await.state(),
        "waiting",
        "retried after READONLY"
    );
    assert_eq!(place(&first.position().await), first_place);

    // Everyone who entered is in line once, and the counters add up.
    assert_eq!(q.zcard(&waiting_key).await, 5);
    q.assert_conserved().await;
}
