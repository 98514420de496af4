//! The worker under the `workerd` binary, in its test build
//! (`scripts/build-worker --probes`, worker/build-probe; scripts/test
//! builds it): the paths of `probe` in worker/src/lib.rs.
//!
//! * A Rust panic does not take the isolate down with it: the panicking
//!   request fails, and the next one is served by a fresh wasm instance
//!   (workers-rs' abort hook schedules it, wasm-bindgen's glue builds it),
//!   through our own entry module (worker/entry.js) — the one that took the
//!   place of worker-build's per-request `Proxy` machinery.
//! * The executor the entry runs on (worker/src/exec.rs) copes with a
//!   future that wakes itself inside its own poll.

use std::time::Duration;

use queuegate_shared::Settings;
use queuegate_system_tests::origin::TestOrigin;
use queuegate_system_tests::{fast_settings, TestQueue};
use queuegate_testkit::gateway::Gateway;
use queuegate_testkit::visitor::Visitor;
use queuegate_testkit::workerd::{Script, Workerd};
use queuegate_testkit::{repo_root, RedisServer, Wrangler};

/// `POST /queue/enter` as a new visitor: the visitor, holding its cookie,
/// and its place.
async fn enter(base: &str) -> (Visitor, u64) {
    let mut visitor = Visitor::new(base);
    let reply = visitor.enter().await;
    assert_eq!(reply.status, 200);
    assert!(
        visitor.cookies.contains_key("qg_visitor"),
        "a visitor cookie"
    );
    assert_eq!(reply.state(), "waiting", "{}", reply.json);
    let place = reply.json["position"].as_u64().expect("a position");
    (visitor, place)
}

/// `GET /queue/position` as `visitor`: the place.
async fn position(visitor: &mut Visitor) -> u64 {
    let reply = visitor.position().await;
    assert_eq!(reply.state(), "waiting", "{}", reply.json);
    reply.json["position"].as_u64().expect("a position")
}

/// Redis with queue `main` (a line that stays put: no passthrough, no
/// guard, nobody admitted), the gateway, an origin and the probes build
/// under workerd.
async fn start() -> (RedisServer, Gateway, TestOrigin, Workerd) {
    let probe = repo_root().join("worker/build-probe");
    queuegate_testkit::fresh::assert_worker_fresh(&probe, "scripts/build-worker --probes");
    let redis = RedisServer::start();
    let settings = Settings {
        idle_passthrough: false,
        entry_budget_per_minute: 0,
        ..fast_settings()
    };
    TestQueue::open(&redis.url(), "main", settings).await;
    let gateway = Gateway::start(&redis.url());
    let origin = TestOrigin::start().await;
    let config = Wrangler::local(&gateway, origin.url())
        .var("ENTRY_CHALLENGE", "off")
        .var("COOKIE_SECURE", "false");
    let worker =
        tokio::task::spawn_blocking(move || config.start_workerd_from(Script::BuiltIn(probe)))
            .await
            .expect("start workerd");
    (redis, gateway, origin, worker)
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client")
}

#[tokio::test]
async fn a_future_that_wakes_itself_is_polled_again_not_nested() {
    let (_redis, _gateway, _origin, worker) = start().await;
    let http = client();
    for _ in 0..3 {
        let resp = http
            .get(format!("{}/__probe/yield", worker.url()))
            .send()
            .await
            .expect("an answer, not a hang");
        assert_eq!(resp.status(), 200);
        assert_eq!(
            resp.text().await.expect("text"),
            "polled 1001 times, then PONG"
        );
    }
    // And the worker serves the queue as ever after it.
    let (_, place) = enter(&worker.url()).await;
    assert_eq!(place, 1);
}

#[tokio::test]
async fn a_panic_fails_its_request_and_the_next_one_gets_a_fresh_instance() {
    let (_redis, _gateway, _origin, worker) = start().await;
    let base = worker.url();
    let pid = worker.pid();
    let http = client();

    let (mut first, place) = enter(&base).await;
    assert_eq!(place, 1);
    let mut places = 1;
    for path in ["/__panic/now", "/__panic/after-io", "/__panic/now"] {
        match http.get(format!("{base}{path}")).send().await {
            Ok(resp) => assert!(
                resp.status().is_server_error(),
                "{path}: {} after a panic",
                resp.status()
            ),
            // The runtime may also drop the connection of a request whose
            // handler can never answer; a timeout would fail the test.
            Err(e) => assert!(!e.is_timeout(), "{path}: {e}"),
        }
        // The next requests run Rust again, on a fresh instance: the queue
        // state in Redis is untouched, and new places are taken.
        assert_eq!(position(&mut first).await, 1, "after {path}");
        let (_, place) = enter(&base).await;
        places += 1;
        assert_eq!(place, places, "after {path}");
    }
    assert_eq!(worker.pid(), pid, "the same workerd served it all");
    let log = worker.log();
    assert!(
        log.contains("panic probe") && log.contains("panic probe, after I/O"),
        "the panics were real:\n{log}"
    );
}
