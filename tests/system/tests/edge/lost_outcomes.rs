//! Lost outcomes (issue #22 §4) on the real stack: the gateway runs a
//! script and holds its reply past the worker's REST deadline
//! (`--fault-delay-reply`), as a slow or broken link to Upstash would.
//! A consume whose reply is lost must not leave the visitor in flight,
//! without a token, for minutes: the worker gives the token back
//! (`unconsume`) and the visitor's retry with the same token goes through.
//! An enter whose reply is lost must not burn the new visitor's solution
//! and budget: the identity cookie comes with the error, and the retry
//! finds the place.

use std::time::Duration;

use queuegate_edge::altcha;
use queuegate_edge::identity;
use queuegate_shared::fields::stats as sf;
use queuegate_shared::ops::{ConsumeReply, Pass, PassReply, RouteKind, SettleReply, Unconsume};
use queuegate_shared::script::{CONSUME, ENTER, PASS};
use queuegate_shared::token::EntryToken;
use queuegate_shared::{Settings, UserId};
use queuegate_system_tests::drop_day::eventually;
use queuegate_system_tests::edge::{EdgeStack, Visitor, IDENTITY_SECRET};
use queuegate_system_tests::origin::TestOrigin;
use queuegate_system_tests::{grants, user, TestQueue};
use queuegate_testkit::gateway::Gateway;
use queuegate_testkit::RedisServer;
use queuegate_testkit::Wrangler;

/// The worker's REST deadline here, and how long the gateway holds a
/// faulted reply (well past it).
const REST_TIMEOUT_MS: &str = "1000";
const HELD_MS: u64 = 3_000;

/// The stack without the entry guard, losing one reply of the script.
async fn stack_losing(script_sha1: &str, settings: Settings) -> EdgeStack {
    let unguarded = Settings {
        entry_budget_per_minute: 0,
        ..settings
    };
    guarded_stack_losing(script_sha1, unguarded, "off").await
}

async fn guarded_stack_losing(script_sha1: &str, settings: Settings, challenge: &str) -> EdgeStack {
    let fault = format!("{script_sha1}:{HELD_MS}:1");
    let stack = EdgeStack::start_behind(
        settings,
        "anonymous",
        RedisServer::start(),
        &[
            ("ENTRY_CHALLENGE", challenge),
            ("REDIS_TIMEOUT_MS", REST_TIMEOUT_MS),
        ],
        &["--fault-delay-reply", &fault],
    )
    .await;
    // Load every script into Redis's cache, so the worker's first call is
    // the EVALSHA the fault names (not a NOSCRIPT and an EVAL).
    let client = redis::Client::open(stack.redis.url()).expect("redis url");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    for script in queuegate_shared::script::all() {
        let sha: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(script.source())
            .query_async(&mut conn)
            .await
            .expect("SCRIPT LOAD");
        assert_eq!(sha, script.sha1());
    }
    stack
}

fn user_of(v: &Visitor) -> UserId {
    UserId::new(&v.id().expect("an identity cookie")).expect("user id")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consume_whose_reply_is_lost_gives_the_token_back() {
    let settings = Settings {
        max_active: 10,
        activation_jitter_ms: 0,
        idle_passthrough: false,
        ..Settings::default()
    };
    let stack = stack_losing(CONSUME.sha1(), settings).await;
    let q = &stack.queue;
    let mut ann = stack.visitor();
    assert_eq!(ann.enter().await.state(), "waiting");
    stack.admit(1, 0).await;
    let admitted = ann.position().await;
    let token = admitted.json["token"]
        .as_str()
        .expect("admitted")
        .to_string();

    // Redis spends the token; its reply never reaches the worker in time.
    let lost = ann.order(Some(&token)).await;
    assert_eq!(
        (lost.status, lost.error()),
        (503, "unavailable"),
        "{:?}",
        lost.json
    );
    assert!(lost.retry_after.is_some());
    assert!(
        stack.origin.hits().is_empty(),
        "forwarded without a consume reply"
    );

    // What Ann's page then shows: her token, as it was — not `in_flight`
    // until the slot lapses and the status expires minutes later.
    assert!(
        eventually(Duration::from_secs(5), || async {
            let mut ann = ann.clone();
            ann.position().await.json["token"] == token.as_str()
        })
        .await,
        "the lost consume left Ann without her token: {:?}",
        ann.position().await.json
    );
    let back = EntryToken::parse(&token).expect("token");
    assert_eq!(q.token_of(&user_of(&ann)).await, Some(back));
    // No restore was counted and no origin answer: the origin never saw it.
    assert_eq!(q.stat(sf::RESTORED).await, 0);

    // Her retry with the same token is the order.
    let retried = ann.order(Some(&token)).await;
    assert_eq!(retried.status, 200, "{:?}", retried.json);
    assert_eq!(stack.origin.hits().len(), 1);
    assert!(
        eventually(Duration::from_secs(5), || async {
            q.stat(sf::ORDERED).await == 1
        })
        .await
    );
    q.assert_conserved().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_whose_reply_is_lost_frees_its_slot() {
    let settings = Settings {
        max_active: 1,
        in_flight_ms: 120_000,
        ..Settings::default()
    };
    let stack = stack_losing(PASS.sha1(), settings).await;
    let q = &stack.queue;
    let mut junk = stack.visitor();
    let lost = junk.order(None).await;
    assert_eq!(
        (lost.status, lost.error()),
        (503, "unavailable"),
        "{:?}",
        lost.json
    );
    assert!(stack.origin.hits().is_empty());
    // The one slot is free again at once, not after in_flight_ms.
    assert!(
        eventually(Duration::from_secs(5), || async {
            q.zcard(&q.keys.active()).await == 0
        })
        .await,
        "the lost pass kept its slot"
    );
    let mut next = stack.visitor();
    let r = next.order(None).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    assert!(
        eventually(Duration::from_secs(5), || async {
            q.stat(sf::ORDERED).await == 1
        })
        .await
    );
    q.assert_conserved().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enter_whose_reply_is_lost_keeps_the_place_solution_and_budget() {
    // One new place per address, and a proof of work for each.
    let settings = Settings {
        entry_budget_per_minute: 1,
        entry_budget_burst: 1,
        challenge_max_number: 1_000,
        idle_passthrough: false,
        ..Settings::default()
    };
    let stack = guarded_stack_losing(ENTER.sha1(), settings, "on").await;
    let q = &stack.queue;
    let ip = [("cf-connecting-ip", "203.0.113.7")];
    let mut ann = stack.visitor();
    let c = ann.send("GET", "/queue/challenge", None, None).await;
    assert_eq!(c.status, 200, "{:?}", c.json);
    let c: altcha::Challenge = serde_json::from_value(c.json).expect("challenge");
    let solution = altcha::payload(&c, altcha::solve(&c).expect("solvable"));
    let headers = [ip[0], ("x-altcha", solution.as_str())];

    // Redis takes the place, spends the budget and the solution; the reply
    // is lost. Ann sees 503 with Retry-After, and gets her identity.
    let lost = ann
        .send_with("POST", "/queue/enter", None, None, &headers)
        .await;
    assert_eq!(
        (lost.status, lost.error()),
        (503, "unavailable"),
        "{:?}",
        lost.json
    );
    assert!(lost.retry_after.is_some());
    assert!(
        ann.id().is_some(),
        "no identity with the error: {:?}",
        lost.set_cookies
    );
    assert_eq!(q.zcard(&q.keys.waiting()).await, 1);

    // Her retry (the page sends what it has; the solution is not needed)
    // finds her place: no new solution, no second share of the budget.
    for headers in [&ip[..], &headers[..]] {
        let again = ann
            .send_with("POST", "/queue/enter", None, None, headers)
            .await;
        assert_eq!(
            (again.status, again.state()),
            (200, "waiting"),
            "{:?}",
            again.json
        );
        assert_eq!(again.json["position"], 1);
    }
    assert_eq!(q.zcard(&q.keys.waiting()).await, 1, "one place, not two");
    assert_eq!(q.stat(sf::ENTERED).await, 1);
    q.assert_conserved().await;
}

/// Served by workerd itself: `wrangler dev`'s proxy in front keeps the
/// worker's request open when the client hangs up, workerd (like the edge)
/// cancels it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visitor_who_disconnects_mid_order_is_settled() {
    let settings = Settings {
        max_active: 10,
        activation_jitter_ms: 0,
        in_flight_ms: 60_000,
        ..Settings::default()
    };
    let redis = RedisServer::start();
    let q = TestQueue::open(&redis.url(), "main", settings).await;
    let gateway = Gateway::start(&redis.url());
    let origin = TestOrigin::start().await;
    let worker = Wrangler::local(&gateway, origin.url())
        .var("ENTRY_CHALLENGE", "off")
        .start_workerd();
    let (ann, cookie) = identity::mint_visitor(IDENTITY_SECRET.as_bytes(), [7; 16]);
    q.enter(&ann).await;
    q.set_lock("test").await;
    q.admit("test", 1, &grants(1, 0)).await;
    let token = q.token_of(&ann).await.expect("admitted");
    // The shop takes 2 s; Ann gives up after 0.5 s and closes the
    // connection while her order is with the shop.
    origin.set_delay(Duration::from_millis(2_000));
    let gave_up = reqwest::Client::new()
        .post(format!("{}/orders", worker.url()))
        .header("cookie", format!("qg_visitor={cookie}"))
        .header("x-entry-token", token.expose())
        .body(r#"{"item":"ticket"}"#)
        .timeout(Duration::from_millis(500))
        .send()
        .await;
    assert!(gave_up.is_err(), "answered within 0.5 s: {gave_up:?}");
    // The shop still took the order; its outcome is recorded, so Ann's
    // page says `ordered`, not `in_flight` for minutes.
    let settled = eventually(Duration::from_secs(10), || async {
        q.stat(sf::ORDERED).await == 1
    })
    .await;
    assert_eq!(origin.hits().len(), 1);
    assert!(
        settled,
        "the order's outcome was lost: {:?}",
        q.position(&ann).await
    );
    q.assert_conserved().await;
}

/// Issue #37 (found by the chaos run): the settle of an order the shop
/// failed cannot reach Redis — the gateway crashed while the shop was
/// answering, and is back a second later. The worker tries the settle
/// again, so the token comes back for its retry window as it would have
/// without the crash, and the shopper's retry is the order; before, the
/// settle was tried once, the token stayed in flight and the retry was
/// refused `token_used` (and the order lapsed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settle_that_cannot_reach_redis_is_tried_again() {
    let settings = Settings {
        max_active: 10,
        activation_jitter_ms: 0,
        idle_passthrough: false,
        in_flight_ms: 60_000,
        ..Settings::default()
    };
    let mut stack = EdgeStack::start(settings, "anonymous", RedisServer::start()).await;
    let mut ann = stack.visitor();
    assert_eq!(ann.enter().await.state(), "waiting");
    stack.admit(1, 0).await;
    let token = ann.position().await.json["token"]
        .as_str()
        .expect("admitted")
        .to_string();

    // The shop fails the order, slowly; meanwhile the gateway dies.
    stack.origin.set_status(500);
    stack.origin.set_delay(Duration::from_millis(1_500));
    let order = {
        let (mut ann, token) = (ann.clone(), token.clone());
        tokio::spawn(async move { ann.order(Some(&token)).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    stack.gateway.kill();
    let failed = order.await.expect("the order task");
    assert_eq!(
        failed.status, 500,
        "the shop's own answer: {:?}",
        failed.json
    );
    assert_eq!(stack.origin.hits().len(), 1);
    // The settle found no gateway; it is back a second later.
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    stack.gateway.start_again();

    let q = &stack.queue;
    let restored = eventually(Duration::from_secs(10), || async {
        q.stat(sf::RESTORED).await == 1
    })
    .await;
    assert!(
        restored,
        "the failed order's settle was lost: {:?}",
        q.position(&user_of(&ann)).await
    );
    assert_eq!(
        ann.position().await.json["token"],
        token.as_str(),
        "her token, back for a retry"
    );
    stack.origin.set_status(200);
    stack.origin.set_delay(Duration::ZERO);
    let retried = ann.order(Some(&token)).await;
    assert_eq!(retried.status, 200, "{:?}", retried.json);
    assert!(
        eventually(Duration::from_secs(5), || async {
            q.stat(sf::ORDERED).await == 1
        })
        .await
    );
    assert_eq!(q.stat(sf::LAPSED).await, 0);
    q.assert_conserved().await;
}

/// `unconsume` in the engine: a no-op unless in flight with exactly that
/// token; the token back as it was; a passthrough record (no retry) and a
/// slot the sweep took end `expired`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unconsume_gives_back_only_what_a_lost_consume_took() {
    let redis = RedisServer::start();
    let settings = Settings {
        max_active: 5,
        activation_jitter_ms: 0,
        idle_passthrough: false,
        ..Settings::default()
    };
    let q = TestQueue::open(&redis.url(), "lost", settings).await;
    let unconsume = |u: UserId, t: EntryToken| {
        let q = &q;
        async move {
            q.run(&Unconsume {
                keys: &q.keys,
                user: &u,
                token: &t,
            })
            .await
            .expect("unconsume")
        }
    };
    let ann = user(1);
    q.enter(&ann).await;
    q.set_lock("test").await;
    q.admit("test", 1, &grants(1, 0)).await;
    let token = q.token_of(&ann).await.expect("admitted");
    let before_consume = q.snapshot().await;
    // The consume never ran: nothing changes.
    assert_eq!(
        unconsume(ann.clone(), token.clone()).await,
        SettleReply::Stale
    );
    assert_eq!(q.snapshot().await, before_consume, "a no-op wrote");
    // It ran: the token comes back as it was.
    let record_before = raw_get(&q, &q.keys.token(&ann)).await;
    assert_eq!(q.consume(&ann, &token).await, ConsumeReply::Accepted);
    let other = grants(1, 0).remove(0).token;
    let in_flight = q.snapshot().await;
    assert_eq!(unconsume(ann.clone(), other).await, SettleReply::Stale);
    assert_eq!(q.snapshot().await, in_flight, "another token changed it");
    assert!(matches!(
        unconsume(ann.clone(), token.clone()).await,
        SettleReply::Restored { .. }
    ));
    assert_eq!(raw_get(&q, &q.keys.token(&ann)).await, record_before);
    assert_eq!(q.token_of(&ann).await, Some(token.clone()));
    assert_eq!(q.stat(sf::RESTORED).await, 0);
    // Twice is once.
    assert_eq!(
        unconsume(ann.clone(), token.clone()).await,
        SettleReply::Stale
    );
    // A slot the sweep took (counted lapsed) ends expired.
    assert_eq!(q.consume(&ann, &token).await, ConsumeReply::Accepted);
    lapse(&q, &ann).await;
    assert_eq!(unconsume(ann.clone(), token).await, SettleReply::Expired);
    assert_eq!(
        (q.stat(sf::LAPSED).await, q.stat(sf::EXPIRED).await),
        (0, 1)
    );
    // A passthrough record holds no retry: expired, slot freed.
    let open = TestQueue::open(
        &redis.url(),
        "open",
        Settings {
            idle_passthrough: true,
            entry_budget_per_minute: 0,
            ..Settings::default()
        },
    )
    .await;
    let passed = grants(1, 0).remove(0).token;
    let reply = open
        .run(&Pass {
            keys: &open.keys,
            user: &ann,
            token: &passed,
            address: None,
            route: RouteKind::Spend,
        })
        .await
        .expect("pass");
    assert!(matches!(reply, PassReply::Passed { .. }));
    let back = open
        .run(&Unconsume {
            keys: &open.keys,
            user: &ann,
            token: &passed,
        })
        .await
        .expect("unconsume");
    assert_eq!(back, SettleReply::Expired);
    assert_eq!(open.zcard(&open.keys.active()).await, 0);
    q.assert_conserved().await;
    open.assert_conserved().await;
}

async fn raw_get(q: &TestQueue, key: &str) -> Option<String> {
    let mut conn = q.conn.clone();
    redis::cmd("GET")
        .arg(key)
        .query_async(&mut conn)
        .await
        .expect("GET")
}

/// The slot's time runs out and an admit tick sweeps it (as `lapsed`).
async fn lapse(q: &TestQueue, u: &UserId) {
    let mut conn = q.conn.clone();
    let _: () = redis::cmd("ZADD")
        .arg(q.keys.active())
        .arg(1)
        .arg(u.as_str())
        .query_async(&mut conn)
        .await
        .expect("ZADD");
    q.admit("test", 0, &[]).await;
    assert_eq!(q.zcard(&q.keys.active()).await, 0, "not swept");
    assert_eq!(q.stat(sf::LAPSED).await, 1);
}
