//! Issue #37, operations never lose the line, on real processes: a
//! schedule moved at run time survives the holder stalling and re-taking
//! its lease, and a standby whose file has a past opening; schedulers with
//! different config files see it (log, `status`, metric), a standby taking
//! over keeps the published settings, and the admin API says what the
//! holder did with a settings change.

use std::time::{Duration, Instant};

use queuegate_scheduler::config::{format_time, token_hash};
use queuegate_scheduler::engine;
use queuegate_shared::fields::{config as cf, stats as sf};
use queuegate_shared::ops::{Enter, EnterReply, Observed};
use queuegate_shared::{Prefix, QueueId, QueueKeys};
use queuegate_system_tests::user;
use queuegate_testkit::scheduler::{self, Scheduler};
use queuegate_testkit::{now_ms, wait_until, RedisServer};
use redis::aio::MultiplexedConnection;
use reqwest::{Client, Method};
use serde_json::Value;

const QUEUE: &str = "drop";
const TOKEN: &str = "qga_issue37-ops-token";

fn keys() -> QueueKeys {
    QueueKeys::new(
        &Prefix::default(),
        &QueueId::new(QUEUE).expect("a queue id"),
    )
}

async fn conn(redis: &RedisServer) -> MultiplexedConnection {
    redis::Client::open(redis.url())
        .expect("a Redis URL")
        .get_multiplexed_async_connection()
        .await
        .expect("connect to Redis")
}

async fn field(conn: &mut MultiplexedConnection, key: String, name: &str) -> Option<String> {
    redis::cmd("HGET")
        .arg(key)
        .arg(name)
        .query_async(conn)
        .await
        .expect("Redis answers")
}

async fn holder(conn: &mut MultiplexedConnection) -> Option<String> {
    redis::cmd("GET")
        .arg(keys().lock())
        .query_async(conn)
        .await
        .expect("Redis answers")
}

/// `n` visitors enter before the opening: all pre-queued.
async fn pre_queue(conn: &mut MultiplexedConnection, n: usize) {
    for i in 0..n {
        let reply = engine::run(
            conn,
            &Enter {
                keys: &keys(),
                user: &user(i),
                guard: queuegate_shared::guard::EntryGuard::default(),
                token: None,
            },
        )
        .await
        .expect("enter");
        assert!(
            matches!(reply, EnterReply::Entered(Observed::PreQueue(_))),
            "{reply:?}"
        );
    }
}

async fn start(builder: queuegate_testkit::scheduler::SchedulerBuilder) -> Scheduler {
    tokio::task::spawn_blocking(move || builder.start())
        .await
        .expect("start a scheduler")
}

async fn wait_for(what: &str, secs: u64, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !check().await {
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn time(ms: u64) -> String {
    format!("{:?}", format_time(ms))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postponed_opening_survives_the_holder_stalling_and_retaking_its_lease() {
    let redis = RedisServer::start();
    let mut c = conn(&redis).await;
    // The file opens in 4 s (whole seconds: RFC 3339 in the file).
    let file_opens = (now_ms() / 1000 + 4) * 1000;
    let sched =
        start(Scheduler::builder(&redis.url()).queue(QUEUE, &[("opens_at", &time(file_opens))]))
            .await;
    wait_for("the file's opening published", 10, async || {
        field(&mut c, keys().config(), cf::OPENS_AT).await == Some(file_opens.to_string())
    })
    .await;
    pre_queue(&mut c, 5).await;

    // The drop is postponed by 15 minutes at run time.
    let postponed = (now_ms() / 1000 + 900) * 1000;
    let out = scheduler::command(
        sched.config_path(),
        &["schedule", QUEUE, "--opens-at", &format_time(postponed)],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The file's opening passes; then the holder stalls past its lease
    // (2 s) and re-takes it.
    tokio::time::sleep(Duration::from_millis(
        file_opens.saturating_sub(now_ms()) + 500,
    ))
    .await;
    let owner = holder(&mut c).await.expect("a holder");
    sched.sigstop();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        holder(&mut c).await,
        None,
        "the stalled holder's lease ran out"
    );
    sched.sigcont();
    wait_for("the holder re-takes its lease", 10, async || {
        holder(&mut c).await.as_deref() == Some(owner.as_str())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;

    assert_eq!(
        field(&mut c, keys().config(), cf::OPENS_AT).await,
        Some(postponed.to_string()),
        "the opening stays postponed:\n{}",
        sched.log()
    );
    let admitted = field(&mut c, keys().stats(), sf::ADMITTED).await;
    assert_eq!(
        admitted.as_deref().unwrap_or("0"),
        "0",
        "nobody admitted early"
    );
    let pre: u64 = redis::cmd("ZCARD")
        .arg(keys().pre())
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(pre, 5, "all 5 still pre-queued");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_with_a_past_opening_in_its_file_does_not_publish_it_over_a_future_one() {
    let redis = RedisServer::start();
    let mut c = conn(&redis).await;
    let future = (now_ms() / 1000 + 900) * 1000;
    let past = (now_ms() / 1000 - 3600) * 1000;
    let mut a =
        start(Scheduler::builder(&redis.url()).queue(QUEUE, &[("opens_at", &time(future))])).await;
    wait_for("the opening published", 10, async || {
        field(&mut c, keys().config(), cf::OPENS_AT).await == Some(future.to_string())
    })
    .await;
    let b =
        start(Scheduler::builder(&redis.url()).queue(QUEUE, &[("opens_at", &time(past))])).await;
    pre_queue(&mut c, 3).await;

    a.kill();
    let b_pid = b.pid().unwrap().to_string();
    wait_for("the standby takes over", 10, async || {
        holder(&mut c)
            .await
            .is_some_and(|h| h.contains(&format!("/{b_pid}/")))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        field(&mut c, keys().config(), cf::OPENS_AT).await,
        Some(future.to_string()),
        "the future opening is kept:\n{}",
        b.log()
    );
    let admitted = field(&mut c, keys().stats(), sf::ADMITTED).await;
    assert_eq!(
        admitted.as_deref().unwrap_or("0"),
        "0",
        "nobody admitted early"
    );
}

async fn admin(base: &str, method: Method, path: &str, body: &str) -> (u16, Value) {
    let resp = Client::new()
        .request(method, format!("{base}{path}"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body(body.to_string())
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .expect("the admin API answers");
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedulers_with_different_files_see_it_and_a_standby_keeps_the_published_settings() {
    let redis = RedisServer::start();
    let mut c = conn(&redis).await;
    let hash = token_hash(TOKEN);
    // A: max_active 7. B: max_active 9, and a slower Redis timeout, under
    // which a 1500 ms lease breaks the lease rule.
    let a = start(
        Scheduler::builder(&redis.url())
            .queue(QUEUE, &[("max_active", "7")])
            .admin_tokens(&[("ops", &hash)]),
    )
    .await;
    wait_for("A publishes", 10, async || {
        field(&mut c, keys().config(), cf::MAX_ACTIVE)
            .await
            .as_deref()
            == Some("7")
    })
    .await;
    let b = start(
        Scheduler::builder(&redis.url())
            .redis_option("response_timeout_ms", "900")
            .queue(QUEUE, &[("max_active", "9")]),
    )
    .await;

    // At start: B says loudly that its file differs; status and metrics show it.
    let differs = wait_until(Duration::from_secs(10), || {
        b.log().contains("CONFIG FILE DIFFERS")
    });
    assert!(differs, "B's log:\n{}", b.log());
    let series = format!("queuegate_config_file_mismatch{{queue=\"{QUEUE}\"}}");
    assert_eq!(b.metric(&series), Some(1.0), "{}", b.metrics());
    assert_eq!(a.metric(&series), Some(0.0));
    let out = scheduler::command(b.config_path(), &["status", QUEUE, "--json"]);
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    let status = status[0].clone();
    assert_eq!(status["file"]["mismatch"], true, "{status}");
    let published = status["file"]["published"].clone();
    let out = scheduler::command(a.config_path(), &["status", QUEUE]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("published (this file)"), "{text}");

    // A stalls past its lease: B takes over, says so, and keeps A's settings.
    a.sigstop();
    let b_pid = b.pid().unwrap().to_string();
    wait_for("B takes over", 10, async || {
        holder(&mut c)
            .await
            .is_some_and(|h| h.contains(&format!("/{b_pid}/")))
    })
    .await;
    a.sigcont();
    let loud = wait_until(Duration::from_secs(5), || {
        b.log().contains("TAKE-OVER WITH A DIFFERENT CONFIG FILE")
    });
    assert!(loud, "B's log:\n{}", b.log());
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        field(&mut c, keys().config(), cf::MAX_ACTIVE)
            .await
            .as_deref(),
        Some("7"),
        "the published settings are kept"
    );
    assert_eq!(
        field(&mut c, keys().config(), cf::FILE_FINGERPRINT)
            .await
            .map(Value::String),
        Some(published),
        "and the published file's fingerprint"
    );

    // A change through A's admin API (its file allows it): the answer says
    // what the holder, B, did with it.
    let base = a.admin_url().unwrap();
    let path = format!("/admin/v1/queues/{QUEUE}/settings");
    let (code, body) = admin(
        &base,
        Method::PUT,
        &path,
        r#"{"admit_rate_per_second": 30}"#,
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["holder"]["outcome"], "applied", "{body}");
    let (code, body) = admin(&base, Method::PUT, &path, r#"{"lease_ttl_ms": 1500}"#).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["holder"]["outcome"], "refused", "{body}");
    let reason = body["holder"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("lease_ttl_ms = 1500"), "{body}");
}
