//! Idle passthrough (issue #13) against real processes: in the engine,
//! and through the worker under workerd — while nobody waits a visitor is
//! admitted at once, within the free slots and the shared rate.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use queuegate_shared::fields::stats as sf;
use queuegate_shared::guard::EntryGuard;
use queuegate_shared::ops::{
    Change, ConsumeReply, Enter, EnterReply, Observed, Outcome, Pass, PassReply, QueueNeeded,
};
use queuegate_shared::state::UserState;
use queuegate_shared::token::EntryToken;
use queuegate_shared::{Settings, UserId};
use queuegate_system_tests::drop_day::{entered_position, eventually, in_ms, schedule};
use queuegate_system_tests::edge::EdgeStack;
use queuegate_system_tests::{fast_settings, grants, user, TestQueue};
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
    let token = grants(1, 0).remove(0).token;
    q.run(&Pass {
        keys: &q.keys,
        user: u,
        token: &token,
    })
    .await
    .expect("pass")
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
    assert_eq!(pass(&passes, &user(0)).await, PassReply::Passed);
    let refused_at = Instant::now();
    assert_eq!(refused_pass(&passes, &user(1)).await, QueueNeeded::Rate);
    // Back 2 s after the first pass.
    tokio::time::sleep(Duration::from_millis(2_100).saturating_sub(refused_at.elapsed())).await;
    assert_eq!(pass(&passes, &user(1)).await, PassReply::Passed);
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
