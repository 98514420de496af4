//! The origin's answers as settle records them and origin_window reads
//! them, against a real redis-server: counts by class and latency bucket
//! per second, a TTL on every bucket, 4xx never counted and one sample a
//! second per user, the controller state recorded only by the lease holder.

use queuegate_shared::ops::{
    ControlRecord, OriginReply, OriginWindow, Outcome, Settle, SettleReply,
};
use queuegate_shared::Settings;
use queuegate_system_tests::{grants, user, TestQueue};
use queuegate_testkit::RedisServer;
use redis::AsyncCommands;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settles_count_the_origin_and_only_the_holder_records_control_state() {
    let redis = RedisServer::shared();
    let settings = Settings {
        activation_jitter_ms: 0,
        ..Settings::default()
    };
    let q = TestQueue::open(&redis.url(), "main", settings).await;
    let outcomes = [
        (Outcome::Success, 20),
        (Outcome::ClientError, 30),
        (Outcome::ServerError, 700),
        (Outcome::NoAnswer, 20_000),
    ];
    for i in 0..outcomes.len() {
        q.enter(&user(i)).await;
    }
    q.set_lock("holder").await;
    q.admit("holder", 4, &grants(4, 0)).await;
    for (i, (outcome, latency_ms)) in outcomes.into_iter().enumerate() {
        let u = user(i);
        let token = q.token_of(&u).await.expect("admitted");
        q.consume(&u, &token).await;
        let reply = q
            .run(&Settle {
                keys: &q.keys,
                user: &u,
                token: &token,
                outcome,
                latency_ms,
                units: 1,
            })
            .await
            .expect("settle");
        let want_ordered = outcome == Outcome::Success;
        assert_eq!(
            reply == SettleReply::Ordered,
            want_ordered,
            "{outcome:?}: {reply:?}"
        );
        // A duplicate settle is stale and counts nothing.
        q.run(&Settle {
            keys: &q.keys,
            user: &u,
            token: &token,
            outcome,
            latency_ms,
            units: 1,
        })
        .await
        .expect("settle again");
    }
    // The 5xx visitor retries at once with the restored token and fails
    // slowly again: the order is settled (restored once more), but the
    // same visitor gave a sample this second already.
    let u = user(2);
    let token = q.token_of(&u).await.expect("restored");
    q.consume(&u, &token).await;
    let again = q
        .run(&Settle {
            keys: &q.keys,
            user: &u,
            token: &token,
            outcome: Outcome::NoAnswer,
            latency_ms: 20_000,
            units: 1,
        })
        .await
        .expect("settle the retry");
    assert!(
        matches!(again, SettleReply::Restored { .. }),
        "the visitor's own outcome is still recorded: {again:?}"
    );
    // The 4xx visitor took no sample: its retry, a success, is counted.
    let u = user(1);
    let token = q.token_of(&u).await.expect("restored after a 4xx");
    q.consume(&u, &token).await;
    let fixed = q
        .run(&Settle {
            keys: &q.keys,
            user: &u,
            token: &token,
            outcome: Outcome::Success,
            latency_ms: 20,
            units: 1,
        })
        .await
        .expect("settle the fixed order");
    assert_eq!(fixed, SettleReply::Ordered);
    let mut conn = q.conn.clone();
    let mark: i64 = conn.pttl(q.keys.sampled(&u)).await.expect("pttl");
    assert!(
        (1..=1_000).contains(&mark),
        "a sample mark lives one bucket: {mark}"
    );

    let read = |owner: &'static str, record: Option<ControlRecord>| {
        let q = q.clone();
        async move {
            q.run(&OriginWindow {
                keys: &q.keys,
                owner,
                seconds: 3,
                record: record.as_ref(),
            })
            .await
            .expect("origin_window")
        }
    };
    let OriginReply::Read(r) = read("holder", None).await else {
        panic!("the holder reads");
    };
    let mut total = queuegate_shared::ops::Answers::default();
    for s in &r.seconds {
        total.add(s);
    }
    assert_eq!(
        (total.ok, total.server_errors, total.no_answer),
        (2, 1, 1),
        "one of each class but 4xx, duplicates and repeats within a second not counted"
    );
    // ≤ 50 ms twice, ≤ 1000 ms once, slower than 10 s once.
    assert_eq!(total.latency, [2, 0, 0, 0, 1, 0, 0, 0, 1]);
    assert_eq!(total.error_share(), Some(0.5));
    assert_eq!(r.target_rate, None, "nothing recorded yet");

    // Every bucket expires by itself.
    let ttl: i64 = conn.pttl(q.keys.origin(r.now_second)).await.expect("pttl");
    let earlier: i64 = conn
        .pttl(q.keys.origin(r.now_second - 1))
        .await
        .expect("pttl");
    assert!(
        ttl > 0 || earlier > 0,
        "buckets carry a TTL ({ttl}, {earlier})"
    );
    assert!(ttl <= 65_000 && earlier <= 65_000);

    let record = ControlRecord {
        target_rate: 12.5,
        cut_at: r.now_second,
        error_share: Some(0.5),
        p95_ms: Some(10_000.0),
    };
    // A stale owner is fenced off: nothing read, nothing written.
    assert_eq!(read("stale", Some(record)).await, OriginReply::NotOwner);
    let config = || {
        let mut conn = q.conn.clone();
        let key = q.keys.config();
        async move {
            let v: Option<String> = conn
                .hget(key, queuegate_shared::fields::config::TARGET_RATE)
                .await
                .expect("hget");
            v
        }
    };
    assert_eq!(config().await, None);
    let OriginReply::Read(again) = read("holder", Some(record)).await else {
        panic!("the holder reads");
    };
    assert_eq!(again.target_rate, Some(12.5), "recorded, then read back");
    assert_eq!(again.cut_at, Some(r.now_second));
}
