//! Each protected route belongs to one queue (`PROTECTED_ROUTES` with
//! `@queue`; none: `QUEUE_ID`), whatever `?queue=` says: with several
//! queues a visitor can neither pass through the emptiest one nor spend a
//! token of another line (the real worker under workerd, real Redis).

use queuegate_shared::Settings;
use queuegate_system_tests::edge::EdgeStack;
use queuegate_system_tests::{fast_settings, user};
use queuegate_testkit::RedisServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protected_route_is_guarded_by_its_own_queue_only() {
    let settings = Settings {
        entry_budget_per_minute: 0,
        max_active: 50,
        admit_rate_per_second: 1_000.0,
        ..fast_settings()
    };
    let vars = [
        ("ENTRY_CHALLENGE", "off"),
        ("PROTECTED_ROUTES", "POST /orders, POST /other-orders@other"),
    ];
    let stack = EdgeStack::start_with(settings, "anonymous", RedisServer::start(), &vars).await;
    // `main` has a line; `other` is idle.
    stack.queue.enter(&user(1)).await;

    // Passing through the idle queue by naming it: refused, nothing written.
    let before = stack.snapshot().await;
    let mut shopper = stack.visitor();
    let r = shopper
        .send("POST", "/orders?queue=other", None, Some("{}"))
        .await;
    assert_eq!(
        (r.status, r.error()),
        (403, "queue_required"),
        "{:?}",
        r.json
    );
    assert_eq!(
        r.json["queueUrl"], "/queue?queue=main",
        "sent to the route's line"
    );
    assert_eq!(stack.snapshot().await, before, "Redis changed");

    // A token of the idle queue, taken honestly there (admitted at once)...
    let r = shopper
        .send("POST", "/queue/enter?queue=other", None, None)
        .await;
    assert_eq!((r.status, r.state()), (200, "admitted"), "{:?}", r.json);
    let token = r.json["token"].as_str().expect("a token").to_string();
    // ...is no ticket for `main`'s route, named queue or not.
    for path in ["/orders?queue=other", "/orders"] {
        let r = shopper.send("POST", path, Some(&token), Some("{}")).await;
        assert_eq!(
            (r.status, r.error()),
            (403, "token_invalid"),
            "{path}: {:?}",
            r.json
        );
    }
    assert!(stack.origin.hits().is_empty(), "the shop saw a request");

    // On its own queue's route it passes, signed for that queue.
    let r = shopper
        .send("POST", "/other-orders", Some(&token), Some("{}"))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    let hits = stack.origin.hits();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].header("x-queuegate-queue"), Some("other"));
}
