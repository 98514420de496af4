//! Idle passthrough (issue #13) against real processes: in the engine,
//! and through the worker under workerd — while nobody waits a visitor is
//! admitted at once, within the free slots, the shared rate and the
//! address's entry budget; a failed passed order frees its slot at once,
//! so junk orders cannot freeze the room (issue #22 §3).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use queuegate_shared::fields::stats as sf;
use queuegate_shared::guard::{ClientAddress, EntryGuard};
use queuegate_shared::ops::{
    Change, ConsumeReply, Enter, EnterReply, Observed, Outcome, Pass, PassReply, QueueNeeded,
    RouteKind, SettleReply,
};
use queuegate_shared::state::UserState;
use queuegate_shared::token::EntryToken;
use queuegate_shared::{Settings, UserId};
use queuegate_system_tests::drop_day::{entered_position, eventually, in_ms, schedule};
use queuegate_system_tests::edge::{EdgeStack, Visitor};
use queuegate_system_tests::{fast_settings, grants, user, TestQueue};
use queuegate_testkit::scheduler::Scheduler;
use queuegate_testkit::{now_ms, RedisServer};

async fn enter_with_token(q: &TestQueue, u: &UserId) -> (EnterReply, EntryToken) {
    let token = grants(1, 0).remove(0).token;
    let reply = q
        .run(&Enter {
            keys: &q.keys,
            user: u,
            guard: EntryGuard::default(),
            token: Some(&token),
        })
        .await
        .expect("enter");
    (reply, token)
}

async fn pass(q: &TestQueue, u: &UserId) -> PassReply {
    pass_from(q, u, None).await.0
}

/// A pass from `address`, and the in-flight token it was given.
async fn pass_from(
    q: &TestQueue,
    u: &UserId,
    address: Option<&ClientAddress>,
) -> (PassReply, EntryToken) {
    let token = grants(1, 0).remove(0).token;
    let reply = q
        .run(&Pass {
            keys: &q.keys,
            user: u,
            token: &token,
            address,
            route: RouteKind::Spend,
        })
        .await
        .expect("pass");
    (reply, token)
}

/// A pass that must not pass, and must change nothing.
async fn refused_pass(q: &TestQueue, u: &UserId) -> QueueNeeded {
    let before = q.snapshot().await;
    let reply = pass(q, u).await;
    assert_eq!(q.snapshot().await, before, "{reply:?} wrote to Redis");
    match reply {
        PassReply::Queue(why) => why,
        other => panic!("passed: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_room_admits_at_once_within_the_slots_and_the_rate() {
    let redis = RedisServer::start();
    let idle = Settings {
        max_active: 2,
        admit_rate_per_second: 50.0,
        tick_ms: 100,
        ..fast_settings()
    };
    let q = TestQueue::open(&redis.url(), "idle", idle.clone()).await;

    // Nobody waits and a slot is free: admitted now, active at once.
    let before = now_ms();
    let (reply, token) = enter_with_token(&q, &user(0)).await;
    let EnterReply::Entered(Observed::Settled(UserState::Admitted {
        token: got,
        activate_at,
        expires_at,
    })) = reply
    else {
        panic!("an idle room: {reply:?}");
    };
    assert_eq!(got, token.expose());
    assert!((before..=now_ms()).contains(&activate_at), "{activate_at}");
    assert_eq!(expires_at, activate_at + idle.token_ttl_ms);
    assert_eq!(q.consume(&user(0), &token).await, ConsumeReply::Accepted);
    assert_eq!(
        (q.stat(sf::PASSED).await, q.stat(sf::ENTERED).await),
        (1, 0)
    );
    // The second slot; then the room is full and the next takes a ticket.
    let (second, _) = enter_with_token(&q, &user(1)).await;
    assert!(matches!(
        second,
        EnterReply::Entered(Observed::Settled(UserState::Admitted { .. }))
    ));
    assert_eq!(refused_pass(&q, &user(7)).await, QueueNeeded::Full);
    assert_eq!(refused_pass(&q, &user(1)).await, QueueNeeded::Holds);
    let (third, _) = enter_with_token(&q, &user(2)).await;
    assert_eq!(entered_position(&third), Some(1), "{third:?}");
    // A slot frees, but someone waits: a newcomer lines up behind them.
    q.settle(&user(0), &token, Outcome::Success).await;
    assert_eq!(q.zcard(&q.keys.active()).await, 1);
    let (fourth, _) = enter_with_token(&q, &user(3)).await;
    assert_eq!(entered_position(&fourth), Some(2), "{fourth:?}");
    assert_eq!(refused_pass(&q, &user(7)).await, QueueNeeded::Waiting);
    // A visitor holding a slot is told to use it, even while others wait.
    assert_eq!(refused_pass(&q, &user(1)).await, QueueNeeded::Holds);
    q.assert_conserved().await;

    // Passthrough off: always a ticket.
    let off = TestQueue::open(
        &redis.url(),
        "off",
        Settings {
            idle_passthrough: false,
            ..idle.clone()
        },
    )
    .await;
    assert_eq!(refused_pass(&off, &user(0)).await, QueueNeeded::Off);
    let (r, _) = enter_with_token(&off, &user(0)).await;
    assert_eq!(entered_position(&r), Some(1), "{r:?}");

    // A pre-queue is not an idle room.
    let early = TestQueue::open(&redis.url(), "early", idle.clone()).await;
    schedule(&early, Change::Set(in_ms(60_000)), Change::Keep).await;
    assert_eq!(refused_pass(&early, &user(0)).await, QueueNeeded::Waiting);
    let (r, _) = enter_with_token(&early, &user(0)).await;
    assert!(
        matches!(r, EnterReply::Entered(Observed::PreQueue(_))),
        "{r:?}"
    );

    // The rate: at 0.5/s with 100 ms ticks the bucket holds one admission
    // and refills it in 2 s.
    let slow = Settings {
        admit_rate_per_second: 0.5,
        min_admit_rate_per_second: 0.5,
        ..idle
    };
    let rate = TestQueue::open(&redis.url(), "rate", slow.clone()).await;
    let (first, _) = enter_with_token(&rate, &user(0)).await;
    assert!(matches!(
        first,
        EnterReply::Entered(Observed::Settled(UserState::Admitted { .. }))
    ));
    let (next, _) = enter_with_token(&rate, &user(1)).await;
    assert_eq!(entered_position(&next), Some(1), "the next waits: {next:?}");
    let passes = TestQueue::open(&redis.url(), "passes", slow).await;
    assert!(matches!(
        pass(&passes, &user(0)).await,
        PassReply::Passed { .. }
    ));
    let refused_at = Instant::now();
    assert_eq!(refused_pass(&passes, &user(1)).await, QueueNeeded::Rate);
    // Back 2 s after the first pass.
    tokio::time::sleep(Duration::from_millis(2_100).saturating_sub(refused_at.elapsed())).await;
    assert!(matches!(
        pass(&passes, &user(1)).await,
        PassReply::Passed { .. }
    ));
    assert_eq!(passes.stat(sf::PASSED).await, 2);
    passes.assert_conserved().await;
    rate.assert_conserved().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_the_free_slots_pass_through_the_edge_and_the_rest_must_queue() {
    const K: u64 = 5;
    const N: usize = 20;
    let settings = Settings {
        max_active: K,
        admit_rate_per_second: 1_000.0,
        in_flight_ms: 30_000,
        status_ttl_ms: 600_000,
        ..Settings::default()
    };
    let stack = EdgeStack::start(settings, "anonymous", RedisServer::start()).await;
    // The origin holds each request long enough for all to arrive.
    stack.origin.set_delay(Duration::from_millis(3_000));
    let tasks: Vec<_> = (0..N)
        .map(|_| {
            let mut v = stack.visitor();
            tokio::spawn(async move { v.order(None).await })
        })
        .collect();
    let mut by_outcome: BTreeMap<(u16, String), usize> = BTreeMap::new();
    for t in tasks {
        let r = t.await.unwrap();
        if r.status == 403 {
            assert_eq!(r.json["queueUrl"], "/queue?queue=main", "{:?}", r.json);
        }
        *by_outcome
            .entry((r.status, r.error().to_string()))
            .or_default() += 1;
    }
    let want = BTreeMap::from([
        ((200, String::new()), K as usize),
        ((403, "queue_required".to_string()), N - K as usize),
    ]);
    assert_eq!(by_outcome, want);
    assert_eq!(stack.origin.hits().len(), K as usize);
    let q = &stack.queue;
    assert_eq!(q.stat(sf::PASSED).await, K as i64);
    // Settled: the slots are free again, and the next request passes.
    assert!(
        eventually(Duration::from_secs(5), || async {
            q.zcard(&q.keys.active()).await == 0
        })
        .await,
        "the slots were not freed"
    );
    assert_eq!(q.stat(sf::ORDERED).await, K as i64);
    stack.origin.set_delay(Duration::ZERO);
    let mut newcomer = stack.visitor();
    let again = newcomer.order(None).await;
    assert_eq!(again.status, 200, "{:?}", again.json);
    assert_eq!(again.json["origin"], true, "the origin's reply, unchanged");
    assert_eq!(stack.origin.hits().len(), K as usize + 1);
    // The visitor came without an identity: the one the slot was taken
    // for comes with the origin's reply, so the order is theirs.
    assert!(
        newcomer.cookies.contains_key("qg_visitor"),
        "{:?}",
        newcomer.cookies
    );
    // Its settle may land after the answer: wait for it.
    assert!(
        eventually(Duration::from_secs(5), || async {
            q.stat(sf::ORDERED).await == K as i64 + 1
        })
        .await,
        "the passed request was not settled"
    );
    assert_eq!(newcomer.position().await.state(), "ordered");

    // Someone waits: a token-less request must queue, and nothing changes.
    assert_eq!(entered_position(&q.enter(&user(1)).await), Some(1));
    let before = stack.snapshot().await;
    let mut v = stack.visitor();
    let r = v.order(None).await;
    assert_eq!(
        (r.status, r.error()),
        (403, "queue_required"),
        "{:?}",
        r.json
    );
    assert_eq!(r.json["queueUrl"], "/queue?queue=main");
    assert_eq!(stack.snapshot().await, before, "Redis changed");
    assert_eq!(stack.origin.hits().len(), K as usize + 1);

    // Before a scheduled opening the edge tells a new visitor when it
    // opens and when to poll, and no position.
    let opens = in_ms(60_000);
    schedule(q, Change::Set(opens), Change::Keep).await;
    let mut early = stack.visitor();
    let r = early.enter().await;
    assert_eq!((r.status, r.state()), (200, "pre_queue"), "{:?}", r.json);
    assert_eq!(r.json["opensAt"], opens);
    let retry = r.json["retryAfterMs"].as_u64().expect("retryAfterMs");
    assert_eq!(r.retry_after, Some(retry.div_ceil(1_000).max(1)));
    assert!(r.json.get("position").is_none(), "{:?}", r.json);
    assert_eq!(early.position().await.state(), "pre_queue");
    assert_eq!(q.zcard(&q.keys.pre()).await, 1);
    q.assert_conserved().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_passed_order_frees_its_slot_and_passes_spend_the_address_budget() {
    let redis = RedisServer::start();
    // Long tokens and a long retry window: a restored passthrough token
    // would hold its slot for minutes.
    let settings = Settings {
        max_active: 1,
        admit_rate_per_second: 1_000.0,
        token_ttl_ms: 300_000,
        retry_window_ms: 120_000,
        entry_budget_per_minute: 0,
        ..Settings::default()
    };
    let q = TestQueue::open(&redis.url(), "failing", settings.clone()).await;

    // Every failure class frees the one slot at once, and the status says
    // `expired`: nobody holds the token a retry would need.
    for outcome in [
        Outcome::ServerError,
        Outcome::NoAnswer,
        Outcome::ClientError,
    ] {
        let (reply, token) = pass_from(&q, &user(0), None).await;
        assert!(matches!(reply, PassReply::Passed { .. }), "{outcome:?}");
        assert_eq!(q.zcard(&q.keys.active()).await, 1);
        assert_eq!(
            q.settle(&user(0), &token, outcome).await,
            SettleReply::Expired
        );
        assert_eq!(
            q.zcard(&q.keys.active()).await,
            0,
            "{outcome:?} kept the slot"
        );
        assert_eq!(
            q.position(&user(0)).await,
            Observed::Settled(UserState::Expired)
        );
        // A duplicate settle changes nothing.
        assert_eq!(
            q.settle(&user(0), &token, outcome).await,
            SettleReply::Stale
        );
    }
    assert_eq!(
        (q.stat(sf::EXPIRED).await, q.stat(sf::RESTORED).await),
        (3, 0)
    );
    // A successful passed order still ends `ordered`.
    let (reply, token) = pass_from(&q, &user(0), None).await;
    assert!(matches!(reply, PassReply::Passed { .. }));
    assert_eq!(
        q.settle(&user(0), &token, Outcome::Success).await,
        SettleReply::Ordered
    );
    assert_eq!(q.zcard(&q.keys.active()).await, 0);
    assert_eq!(q.stat(sf::ORDERED).await, 1);
    q.assert_conserved().await;

    // The address budget: 2 passes, then 429 with the wait, and only the
    // refusal counter is written; another address has its own budget.
    let budgeted = TestQueue::open(
        &redis.url(),
        "budget",
        Settings {
            max_active: 10,
            entry_budget_per_minute: 2,
            entry_budget_burst: 2,
            ..settings
        },
    )
    .await;
    let home = ClientAddress::parse("203.0.113.7").expect("address");
    let other = ClientAddress::parse("198.51.100.9").expect("address");
    for n in 0..2 {
        let (reply, token) = pass_from(&budgeted, &user(n), Some(&home)).await;
        assert!(matches!(reply, PassReply::Passed { .. }));
        budgeted.settle(&user(n), &token, Outcome::Success).await;
    }
    let before = budgeted.snapshot().await;
    let (reply, _) = pass_from(&budgeted, &user(2), Some(&home)).await;
    let PassReply::TooManyEntries { retry_after_ms } = reply else {
        panic!("over the budget: {reply:?}");
    };
    // 2 a minute: the next pass is at most 30 s away.
    assert!((1..=30_000).contains(&retry_after_ms), "{retry_after_ms}");
    let after = budgeted.snapshot().await;
    let changed: Vec<&String> = after
        .keys()
        .filter(|k| before.get(*k) != after.get(*k))
        .collect();
    assert_eq!(changed, [&budgeted.keys.stats()], "only the counter moved");
    assert_eq!(budgeted.stat(sf::REFUSED_BUDGET).await, 1);
    // The budget is the one new places spend: enter is refused too.
    let refused = budgeted
        .run(&Enter {
            keys: &budgeted.keys,
            user: &user(3),
            guard: EntryGuard {
                address: Some(&home),
                ..EntryGuard::default()
            },
            token: None,
        })
        .await
        .expect("enter");
    assert!(
        matches!(
            refused,
            EnterReply::Refused(queuegate_shared::ops::Refusal::TooManyEntries { .. })
        ),
        "{refused:?}"
    );
    let (reply, _) = pass_from(&budgeted, &user(4), Some(&other)).await;
    assert!(matches!(reply, PassReply::Passed { .. }));
    // A pass refused for another reason spends no budget.
    let full = TestQueue::open(
        &redis.url(),
        "full",
        Settings {
            max_active: 1,
            entry_budget_per_minute: 1,
            entry_budget_burst: 1,
            ..Settings::default()
        },
    )
    .await;
    let (reply, token) = pass_from(&full, &user(0), Some(&home)).await;
    assert!(matches!(reply, PassReply::Passed { .. }));
    for _ in 0..3 {
        assert_eq!(refused_pass(&full, &user(1)).await, QueueNeeded::Full);
        let (reply, _) = pass_from(&full, &user(1), Some(&other)).await;
        assert_eq!(reply, PassReply::Queue(QueueNeeded::Full));
    }
    full.settle(&user(0), &token, Outcome::Success).await;
    let (reply, _) = pass_from(&full, &user(1), Some(&other)).await;
    assert!(
        matches!(reply, PassReply::Passed { .. }),
        "its one pass was kept"
    );
    budgeted.assert_conserved().await;
    full.assert_conserved().await;
}

/// Polls the page's `position` until the visitor is admitted, or `None`
/// after `within`; the admitted reply's token.
async fn admitted_within(v: &mut Visitor, within: Duration) -> Option<String> {
    let deadline = Instant::now() + within;
    loop {
        let r = v.position().await;
        if r.state() == "admitted" {
            return r.json["token"].as_str().map(String::from);
        }
        assert_eq!(r.state(), "waiting", "{:?}", r.json);
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Issue #22 §3: junk token-less orders against a failing shop, just
/// before a drop, took every slot and held each for a token nobody holds
/// (token_ttl, 5 min): no one was admitted until then. A failed passed
/// order now frees its slot at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn junk_orders_against_a_failing_shop_do_not_freeze_the_slots() {
    const K: usize = 5;
    let settings = Settings {
        max_active: K as u64,
        activation_jitter_ms: 500,
        in_flight_ms: 30_000,
        entry_budget_per_minute: 0,
        ..Settings::default()
    };
    assert_eq!(settings.token_ttl_ms, 300_000, "the 5 minutes at stake");
    let stack = EdgeStack::start(settings.clone(), "anonymous", RedisServer::start()).await;
    let url = stack.redis.url();
    let _scheduler = tokio::task::spawn_blocking(move || {
        Scheduler::builder(&url)
            .queue_settings("main", &settings)
            .start()
    })
    .await
    .expect("start the scheduler");
    let q = &stack.queue;

    // The shop fails; K token-less junk orders pass the idle room, one per
    // slot, and get the shop's 503.
    stack.origin.set_status(503);
    let mut junk = Vec::new();
    for _ in 0..K {
        let mut v = stack.visitor();
        let r = v.order(None).await;
        assert_eq!(r.status, 503, "{:?}", r.json);
        junk.push(v);
    }
    assert_eq!(stack.origin.hits().len(), K);
    assert!(
        eventually(Duration::from_secs(10), || async {
            q.stat(sf::EXPIRED).await + q.stat(sf::RESTORED).await == K as i64
        })
        .await,
        "the junk orders were not settled"
    );

    // The shop recovers and the drop's first visitors arrive: each is
    // admitted within the normal admission time (here: a few ticks), not
    // when the junk's tokens lapse minutes later.
    stack.origin.set_status(200);
    let mut visitors: Vec<Visitor> = (0..3).map(|_| stack.visitor()).collect();
    for v in &mut visitors {
        let r = v.enter().await;
        assert_eq!(r.status, 200, "{:?}", r.json);
    }
    for v in &mut visitors {
        let token = admitted_within(v, Duration::from_secs(10))
            .await
            .expect("not admitted within 10 s: the junk orders froze the slots");
        // Its token activates within the jitter window.
        let mut ordered = v.order(Some(&token)).await;
        for _ in 0..10 {
            if ordered.status != 429 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            ordered = v.order(Some(&token)).await;
        }
        assert_eq!(ordered.status, 200, "{:?}", ordered.json);
    }
    assert_eq!(stack.origin.hits().len(), K + 3);

    // The junk's slots went at their settle; each junk visitor's page says
    // `expired`: there was never a token to give back.
    assert_eq!(q.stat(sf::RESTORED).await, 0);
    assert_eq!(q.stat(sf::EXPIRED).await, K as i64);
    assert_eq!(junk[0].position().await.state(), "expired");
}

/// A token-less protected request spends the address's entry budget like
/// a new place: over it, 429 `too_many_entries` with Retry-After, nothing
/// forwarded and only the refusal counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passthrough_is_refused_once_the_address_budget_is_spent() {
    const BUDGET: u64 = 3;
    let settings = Settings {
        max_active: 50,
        entry_budget_per_minute: BUDGET,
        entry_budget_burst: BUDGET,
        ..Settings::default()
    };
    let stack = EdgeStack::start_with(
        settings,
        "anonymous",
        RedisServer::start(),
        &[("ENTRY_CHALLENGE", "off")],
    )
    .await;
    let q = &stack.queue;
    let from = |ip: &'static str| [("cf-connecting-ip", ip)];
    let order = |mut v: Visitor, ip: &'static str| async move {
        v.send_with(
            "POST",
            "/orders",
            None,
            Some(r#"{"item":"ticket"}"#),
            &from(ip),
        )
        .await
    };
    for _ in 0..BUDGET {
        let r = order(stack.visitor(), "203.0.113.7").await;
        assert_eq!(r.status, 200, "{:?}", r.json);
    }
    assert!(
        eventually(Duration::from_secs(5), || async {
            q.stat(sf::ORDERED).await == BUDGET as i64
        })
        .await,
        "the passed orders were not settled"
    );
    let before = stack.snapshot().await;
    let over = order(stack.visitor(), "203.0.113.7").await;
    assert_eq!(
        (over.status, over.error()),
        (429, "too_many_entries"),
        "{:?}",
        over.json
    );
    // 3 a minute: the next pass is at most 20 s away.
    assert!(
        matches!(over.retry_after, Some(1..=20)),
        "{:?}",
        over.retry_after
    );
    assert_eq!(
        stack.origin.hits().len(),
        BUDGET as usize,
        "forwarded over the budget"
    );
    let after = stack.snapshot().await;
    let changed: Vec<&String> = after
        .keys()
        .filter(|k| before.get(*k) != after.get(*k))
        .collect();
    assert_eq!(changed, [&q.keys.stats()], "only the counter moved");
    assert_eq!(q.stat(sf::REFUSED_BUDGET).await, 1);
    // A new place from that address is refused from the same budget.
    let mut v = stack.visitor();
    let enter = v
        .send_with("POST", "/queue/enter", None, None, &from("203.0.113.7"))
        .await;
    assert_eq!((enter.status, enter.error()), (429, "too_many_entries"));
    // Another address has its own.
    let r = order(stack.visitor(), "198.51.100.9").await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    assert_eq!(stack.origin.hits().len(), BUDGET as usize + 1);
}
