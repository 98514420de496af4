//! What reaches the origin (issue 35 moved the forward into one JS call;
//! the rules stay Rust's): a client's own `X-Queuegate-*` headers, its
//! entry token and our cookies never do, on an unprotected path or through
//! the gate, where the signed identity is the worker's and only the
//! worker's. Real redis-server, the gateway, the built wasm under workerd.

use std::collections::BTreeMap;

use queuegate_shared::Settings;
use queuegate_system_tests::edge::{raw_request, EdgeStack};
use queuegate_system_tests::origin::Hit;
use queuegate_system_tests::user;
use queuegate_testkit::RedisServer;

/// Headers a client forges, and one of its own that must go on.
const FORGED: [(&str, &str); 5] = [
    ("x-queuegate-user", "mallory"),
    ("x-queuegate-queue", "main"),
    ("x-queuegate-signature", "forged"),
    ("x-entry-token", "not-a-token"),
    ("x-shop-cart", "42"),
];

/// Our headers in `hit`, with their values.
fn ours(hit: &Hit) -> Vec<(String, String)> {
    hit.headers
        .iter()
        .filter(|(n, _)| n.starts_with("x-queuegate-") || n == "x-entry-token")
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_headers_and_our_cookies_never_reach_the_origin() {
    let stack = EdgeStack::start_with(
        Settings {
            entry_budget_per_minute: 0,
            idle_passthrough: false,
            ..Settings::default()
        },
        "anonymous",
        RedisServer::start(),
        &[
            ("ENTRY_CHALLENGE", "off"),
            ("PROTECTED_ROUTES", "POST /orders"),
        ],
    )
    .await;
    let base = stack.worker.url();
    let cookies: BTreeMap<String, String> = [
        ("qg_visitor", "junk.sig"),
        ("qg_token", "stolen"),
        ("shop_session", "s1"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();

    // An unprotected path: forwarded as it came, without any of ours.
    let r = raw_request(&base, "GET", "/about?x=1", &cookies, &FORGED).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let hits = stack.origin.hits();
    assert_eq!(hits.len(), 1);
    let hit = &hits[0];
    assert_eq!(hit.path, "/about?x=1");
    assert_eq!(ours(hit), [], "no header of ours from a client");
    assert_eq!(hit.header("cookie"), Some("shop_session=s1"));
    assert_eq!(hit.header("x-shop-cart"), Some("42"));

    // Only our cookies: no Cookie header at all.
    let only_ours: BTreeMap<String, String> =
        [("qg_visitor".to_string(), "junk.sig".to_string())].into();
    let r = raw_request(&base, "GET", "/about", &only_ours, &[]).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(stack.origin.hits()[1].header("cookie"), None);

    // Through the gate: the signed identity is the admitted visitor's,
    // each header once; the forged ones are gone.
    stack.queue.enter(&user(0)).await;
    let mut ann = stack.visitor();
    assert_eq!(ann.enter().await.state(), "waiting");
    stack.admit(2, 0).await;
    assert_eq!(ann.position().await.state(), "admitted");
    let mut with_token = ann.cookies.clone();
    with_token.insert("shop_session".into(), "s1".into());
    // (An X-Entry-Token header is the token the gate reads first: a forged
    // one is refused there, so the order carries its cookie's token.)
    let forged: Vec<(&str, &str)> = FORGED
        .into_iter()
        .filter(|(n, _)| *n != "x-entry-token")
        .collect();
    let r = raw_request(&base, "POST", "/orders", &with_token, &forged).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let hit = stack
        .origin
        .hits()
        .pop()
        .expect("the order reached the origin");
    let id = ann.id().expect("visitor id");
    let mut signed: Vec<String> = ours(&hit).into_iter().map(|(n, _)| n).collect();
    signed.sort();
    assert_eq!(
        signed,
        [
            "x-queuegate-queue",
            "x-queuegate-signature",
            "x-queuegate-time",
            "x-queuegate-user"
        ],
        "the four signed headers, once each: {hit:?}"
    );
    assert_eq!(hit.header("x-queuegate-user"), Some(id.as_str()));
    assert_ne!(hit.header("x-queuegate-signature"), Some("forged"));
    assert_eq!(hit.header("cookie"), Some("shop_session=s1"));
    assert_eq!(hit.header("x-shop-cart"), Some("42"));
}
