//! The seam between the scripts and Rust on a real Redis: every record
//! declared in shared/src/records.rs and fields.rs (the waiting, pre-queue,
//! admitted and challenge replies, the admit reply, the token and status
//! records, the snapshot) written by the real scripts and read back by the
//! Rust decoders, field by field; and the shared rate bucket as the one
//! admission limit.

use queuegate_shared::draw::DrawSlot;
use queuegate_shared::fields::{stats, status, status_record, token_record, SEPARATOR};
use queuegate_shared::guard::{challenge_level, challenge_max_number};
use queuegate_shared::ops::{
    rate_bucket_cap, AdmitReply, ChallengeTerms, Change, ConsumeReply, EnterReply, Observed,
    Refused, Schedule,
};
use queuegate_shared::snapshot::{Snapshot, FIELDS};
use queuegate_shared::state::UserState;
use queuegate_shared::token::EntryToken;
use queuegate_shared::{QueueState, Settings};
use queuegate_system_tests::{fast_settings, grants, user, TestQueue};
use queuegate_testkit::RedisServer;

/// A string key's value.
async fn get(q: &TestQueue, key: &str) -> String {
    let mut conn = q.conn.clone();
    redis::cmd("GET")
        .arg(key)
        .query_async::<Option<String>>(&mut conn)
        .await
        .expect("GET")
        .unwrap_or_default()
}

/// Redis' clock, epoch ms.
async fn redis_now_ms(q: &TestQueue) -> u64 {
    let mut conn = q.conn.clone();
    let (s, us): (u64, u64) = redis::cmd("TIME")
        .query_async(&mut conn)
        .await
        .expect("TIME");
    s * 1_000 + us / 1_000
}

/// Writes the shared rate bucket: `tokens` at `at` (Redis epoch ms).
async fn set_bucket(q: &TestQueue, tokens: f64, at: u64) {
    let mut conn = q.conn.clone();
    let _: () = redis::cmd("HSET")
        .arg(q.keys.stats())
        .arg(stats::RATE_BUCKET)
        .arg(format!("{tokens}|{at}"))
        .query_async(&mut conn)
        .await
        .expect("HSET");
}

/// One admit tick asking for `n` admissions at 1/s in force: how many it
/// admitted.
async fn tick(q: &TestQueue, n: u64) -> u64 {
    match q.admit_at("me", n, &grants(n as usize, 0), 1.0).await {
        AdmitReply::Ran(c) => c.admitted,
        AdmitReply::NotOwner => panic!("not owner"),
    }
}

/// The 0-based index of a record's 1-based position.
fn at(position: usize) -> usize {
    position - 1
}

#[tokio::test]
async fn every_record_round_trips_through_the_real_scripts() {
    let redis = RedisServer::start();
    let settings = Settings {
        challenge_crowd: 3,
        ..fast_settings()
    };
    let q = TestQueue::open(&redis.url(), "seam", settings.clone()).await;
    for i in 0..3 {
        q.enter(&user(i)).await;
    }

    // The waiting reply: every field where the decoder expects it.
    let EnterReply::Entered(Observed::Waiting(w)) = q.enter(&user(1)).await else {
        panic!("user 1 waits");
    };
    assert_eq!(w.position, 2);
    assert_eq!(w.queue_state, Some(QueueState::Open));
    assert_eq!(w.policy, Some(settings.poll_policy()));
    assert_eq!(w.measured_rate, None);
    let mut conn = q.conn.clone();
    let ticket: u64 = redis::cmd("ZSCORE")
        .arg(q.keys.waiting())
        .arg(user(1).as_str())
        .query_async(&mut conn)
        .await
        .expect("ZSCORE");
    assert_eq!(w.ticket, ticket);

    // The challenge reply: the level the scripts computed from the size.
    let terms = q
        .run(&ChallengeTerms { keys: &q.keys })
        .await
        .expect("challenge")
        .expect("configured");
    let level = challenge_level(3, settings.challenge_crowd);
    assert_eq!(level, 2, "3 of a crowd of 3");
    assert_eq!(terms.level, level);
    assert_eq!(
        terms.max_number,
        challenge_max_number(settings.challenge_max_number, level)
    );
    assert_eq!(terms.ttl_ms, settings.challenge_ttl_ms);

    // The admit reply: each count in its place.
    q.set_lock("me").await;
    let AdmitReply::Ran(c) = q.admit("me", 1, &grants(1, 0)).await else {
        panic!("not owner");
    };
    assert!(c.admitting && !c.drawing);
    assert_eq!((c.admitted, c.waiting, c.active), (1, 2, 1));
    assert_eq!(
        (c.expired, c.lapsed, c.abandoned, c.pre_queued),
        (0, 0, 0, 0)
    );
    assert_eq!(c.refused, Refused::default());
    assert_eq!((c.bypassed, c.revoked, c.settings_version), (0, 0, 0));

    // The admitted reply and the token record agree field by field.
    let Observed::Settled(UserState::Admitted {
        token,
        activate_at,
        expires_at,
    }) = q.position(&user(0)).await
    else {
        panic!("user 0 is admitted");
    };
    let record = get(&q, &q.keys.token(&user(0))).await;
    let f: Vec<&str> = record.split(SEPARATOR).collect();
    assert_eq!(f.len(), token_record::ALL.len(), "{record}");
    assert_eq!(f[at(token_record::TOKEN)], token);
    assert_eq!(f[at(token_record::ACTIVATE_AT)], activate_at.to_string());
    assert_eq!(f[at(token_record::EXPIRES_AT)], expires_at.to_string());
    assert_eq!(f[at(token_record::RESTORES)], "0");

    // The status record of a consumed token carries the token record.
    let entry = EntryToken::parse(&token).expect("a token");
    let mut tries = 0;
    while q.consume(&user(0), &entry).await != ConsumeReply::Accepted {
        tries += 1;
        assert!(tries < 50, "never active");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let record = get(&q, &q.keys.status(&user(0))).await;
    let f: Vec<&str> = record.split(SEPARATOR).collect();
    assert_eq!(f.len(), status_record::ALL.len(), "{record}");
    assert_eq!(f[at(status_record::KIND)], status::IN_FLIGHT);
    assert!(f[at(status_record::AT)].parse::<u64>().is_ok());
    assert_eq!(f[at(status_record::TOKEN)], token);
    assert_eq!(f[at(status_record::ACTIVATE_AT)], activate_at.to_string());
    assert_eq!(f[at(status_record::EXPIRES_AT)], expires_at.to_string());
    assert_eq!(f[at(status_record::RESTORES)], "0");

    // The snapshot the tick wrote, read as the edge reads it.
    let values: Vec<Option<String>> = redis::cmd("HMGET")
        .arg(q.keys.config())
        .arg(&FIELDS[..])
        .query_async(&mut conn)
        .await
        .expect("HMGET");
    let snap = Snapshot::decode(&values).expect("a snapshot");
    assert_eq!(snap.waiting, 2);
    assert_eq!(snap.state, QueueState::Open);
    assert_eq!(snap.policy, settings.poll_policy());
    assert_eq!(snap.pre_policy, settings.pre_queue_policy());
    let last: u64 = redis::cmd("ZSCORE")
        .arg(q.keys.waiting())
        .arg(user(2).as_str())
        .query_async(&mut conn)
        .await
        .expect("ZSCORE");
    assert_eq!(snap.tail, last);
    assert_eq!((snap.draw_left, snap.sealed, snap.opens_at), (0, 0, None));
    assert!(snap.notice.is_none() && snap.draw.is_none());
    assert!(snap.snap_at.abs_diff(redis_now_ms(&q).await) < 60_000);

    // The pre-queue reply, before a scheduled opening.
    let pre = TestQueue::open(&redis.url(), "seam-pre", settings.clone()).await;
    let opens = redis_now_ms(&pre).await + 60_000;
    pre.run(&Schedule {
        keys: &pre.keys,
        opens_at: Change::Set(opens),
        closes_at: Change::Keep,
    })
    .await
    .expect("schedule");
    let EnterReply::Entered(Observed::PreQueue(p)) = pre.enter(&user(7)).await else {
        panic!("pre-queued");
    };
    assert_eq!(p.opens_at, Some(opens));
    assert_eq!(p.policy, Some(settings.pre_queue_policy()));
    assert!(p.now.abs_diff(opens) <= 60_000);
    assert_eq!(p.draw, Some(1), "the first draw");
    let mut conn = pre.conn.clone();
    let score: u64 = redis::cmd("ZSCORE")
        .arg(pre.keys.pre())
        .arg(user(7).as_str())
        .query_async(&mut conn)
        .await
        .expect("ZSCORE");
    assert_eq!(p.slot, DrawSlot::from_score(score));
    assert!(p.slot.is_some());
}

/// The rate bucket `rate_bucket` in the stats hash, which admit ticks and
/// idle passthrough share, is the one limit: a tick asks for what it can
/// hold (`rate_bucket_cap`) and admits what it holds, fractions carried,
/// never more than two ticks' worth after a stall. The rate is slow (1/s
/// at 10 s ticks) so the few ms between writing the bucket and the tick
/// cannot earn a token.
#[tokio::test]
async fn the_shared_rate_bucket_is_the_one_admission_limit() {
    let redis = RedisServer::start();
    let settings = Settings {
        admit_rate_per_second: 1.0,
        tick_ms: 10_000,
        lease_ttl_ms: 30_000,
        max_active: 100,
        ..fast_settings()
    };
    let q = TestQueue::open(&redis.url(), "bucket", settings.clone()).await;
    for i in 0..40 {
        q.enter(&user(i)).await;
    }
    q.set_lock("me").await;
    let cap = rate_bucket_cap(1.0, settings.tick_ms);
    assert_eq!(cap, 20.0, "two ticks' worth");
    let ask = cap.floor() as u64;
    let mut conn = q.conn.clone();
    // 3.5 tokens: three admitted though the tick asked for twenty, and the
    // half carries to the next tick.
    set_bucket(&q, 3.5, redis_now_ms(&q).await).await;
    assert_eq!(tick(&q, ask).await, 3);
    let left: String = redis::cmd("HGET")
        .arg(q.keys.stats())
        .arg(stats::RATE_BUCKET)
        .query_async(&mut conn)
        .await
        .expect("HGET");
    let tokens: f64 = left.split('|').next().unwrap().parse().unwrap();
    assert!((0.5..1.0).contains(&tokens), "{left}");

    // An hour's stall earns two ticks' worth, no more.
    set_bucket(&q, 0.0, redis_now_ms(&q).await - 3_600_000).await;
    assert_eq!(tick(&q, ask).await, ask);

    // A caller asking for less gets no more than it asked for.
    set_bucket(&q, 10.0, redis_now_ms(&q).await).await;
    assert_eq!(tick(&q, 4).await, 4);
    q.assert_conserved().await;
}
