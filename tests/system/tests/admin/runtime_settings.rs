//! Settings at run time (issue 26) on the real stack: redis-server, the
//! gateway, the wasm under workerd, a test origin, and two scheduler
//! binaries (a lease holder and a standby), each with its admin API. A
//! change made through either scheduler is checked like the config file,
//! kept in Redis, in force at the holder within a tick and enforced by the
//! edge's scripts at once; a new holder keeps it; clearing it brings the
//! file's back; a change made from a stale read is refused.

use std::time::{Duration, Instant};

use queuegate_scheduler::config::token_hash;
use queuegate_shared::fields::config as cf;
use queuegate_shared::ops::{SetSettings, SettingsReply};
use queuegate_shared::Settings;
use queuegate_system_tests::edge::EdgeStack;
use queuegate_testkit::scheduler::{self, Scheduler};
use queuegate_testkit::RedisServer;
use reqwest::{Client, Method, StatusCode};
use serde_json::Value;

const TOKEN: &str = "qga_00112233445566778899aabbccddeeff-ops";

async fn call(base: &str, method: Method, path: &str, body: Option<&str>) -> (StatusCode, Value) {
    let mut req = Client::new()
        .request(method, format!("{base}{path}"))
        .bearer_auth(TOKEN)
        .timeout(Duration::from_secs(10));
    if let Some(b) = body {
        req = req
            .header("content-type", "application/json")
            .body(b.to_string());
    }
    let resp = req.send().await.expect("the admin API answers");
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

async fn start_scheduler(redis_url: String) -> Scheduler {
    let hash = token_hash(TOKEN);
    tokio::task::spawn_blocking(move || {
        Scheduler::builder(&redis_url)
            .queue("main", &[])
            .admin_tokens(&[("ops", &hash)])
            .start()
    })
    .await
    .expect("start a scheduler")
}

/// Waits (up to 10 s) until `check` holds.
async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check().await {
        assert!(Instant::now() < deadline, "not within 10 s: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_changed_at_run_time_are_in_force_within_a_tick_and_outlive_the_holder() {
    let stack = EdgeStack::start(
        Settings {
            idle_passthrough: false,
            ..Settings::default()
        },
        "anonymous",
        RedisServer::start(),
    )
    .await;
    let q = &stack.queue;
    let mut holder = start_scheduler(stack.redis.url()).await;
    until("the first scheduler holds the lease", || async {
        holder.metric("queuegate_lease_held{queue=\"main\"}") == Some(1.0)
    })
    .await;
    let standby = start_scheduler(stack.redis.url()).await;
    let (hold_api, standby_api) = (
        holder.admin_url().expect("admin API"),
        standby.admin_url().expect("admin API"),
    );
    let settings = "/admin/v1/queues/main/settings";

    // Nothing set yet: the file's settings are in force.
    let (status, v) = call(&hold_api, Method::GET, settings, None).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(
        (
            v["version"].as_u64(),
            v["runtime"].as_object().map(|o| o.len())
        ),
        (Some(0), Some(0))
    );
    assert_eq!(v["effective"]["max_waiting"], 10_000_000);

    // Bad changes: each a 400 that writes nothing.
    let before = q.snapshot().await.get(&q.keys.settings()).cloned();
    for bad in [
        r#"{"max_waiting": -1}"#,
        r#"{"max_waiting": 2.5}"#,
        r#"{"nope": 1}"#,
        r#"{"max_active": "many"}"#,
        r#"{"poll_min_ms": 90000, "poll_max_ms": 1000}"#,
        r#"{"admit_rate_per_second": 60000}"#,
        r#"{"lease_ttl_ms": 500}"#,
        r#"{"max_waiting": [2]}"#,
        "{}",
        "[]",
        "{",
    ] {
        let (status, v) = call(&standby_api, Method::PUT, settings, Some(bad)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {v}");
        assert!(
            v["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{bad}: {v}"
        );
    }
    assert_eq!(q.snapshot().await.get(&q.keys.settings()).cloned(), before);
    assert_eq!(q.config_field(cf::SETTINGS_VERSION).await, "");

    // A change through the standby's API: the holder puts it in force.
    let (status, v) = call(
        &standby_api,
        Method::PUT,
        settings,
        Some(r#"{"max_waiting": 2, "admit_rate_per_second": 40}"#),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["version"], 1);
    assert_eq!(v["effective"]["max_waiting"], 2);
    assert_eq!(v["file"]["max_waiting"], 10_000_000);
    until("the holder applies version 1", || async {
        q.config_field(cf::SETTINGS_APPLIED).await == "1"
    })
    .await;
    assert_eq!(
        q.config_field(cf::MAX_WAITING).await,
        "2",
        "published for the edge"
    );
    assert_eq!(
        holder.metric("queuegate_config_max_waiting{queue=\"main\"}"),
        Some(2.0)
    );
    assert_eq!(
        holder.metric("queuegate_config_admit_rate_per_second{queue=\"main\"}"),
        Some(40.0)
    );

    // The edge enforces it: a third visitor finds the line full (paused,
    // so nobody is admitted meanwhile).
    let (status, _) = call(&hold_api, Method::POST, "/admin/v1/queues/main/pause", None).await;
    assert_eq!(status, StatusCode::OK);
    let mut visitors = (0..3).map(|_| stack.visitor()).collect::<Vec<_>>();
    let mut replies = Vec::new();
    for v in &mut visitors {
        replies.push(v.enter().await);
    }
    assert_eq!(replies[0].state(), "waiting", "{:?}", replies[0].json);
    assert_eq!(replies[1].state(), "waiting", "{:?}", replies[1].json);
    assert_eq!(
        (replies[2].status, replies[2].error()),
        (429, "queue_full"),
        "{:?}",
        replies[2].json
    );

    // A write from a stale read is refused and changes nothing.
    let stale = q
        .run(&SetSettings {
            keys: &q.keys,
            read_version: None,
            set: vec![("max_waiting".into(), "5".into())],
            remove: vec![],
        })
        .await
        .expect("settings script");
    assert_eq!(stale, SettingsReply::Moved(1));
    assert_eq!(q.config_field(cf::SETTINGS_VERSION).await, "1");

    // The holder dies: the standby takes the lease and keeps the change
    // (it would publish its file's 10,000,000 otherwise).
    holder.kill();
    until("the standby holds the lease", || async {
        standby.metric("queuegate_lease_held{queue=\"main\"}") == Some(1.0)
    })
    .await;
    assert_eq!(q.config_field(cf::MAX_WAITING).await, "2");
    assert!(
        standby.log().contains("run-time settings in force"),
        "{}",
        standby.log()
    );

    // The CLI: the same action; a setting removed goes back to the file's.
    let out = scheduler::command(
        standby.config_path(),
        &[
            "settings",
            "main",
            "--unset",
            "admit_rate_per_second",
            "--set",
            "max_waiting=3",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("run-time version 2"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains("max_waiting") && l.contains("run time (file: 10000000)")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("admit_rate_per_second") && l.ends_with("file")),
        "{text}"
    );
    let out = scheduler::command(
        standby.config_path(),
        &["settings", "main", "--set", "max_waiting"],
    );
    assert_eq!(out.status.code(), Some(2), "a usage error");
    until("the new holder applies version 2", || async {
        q.config_field(cf::SETTINGS_APPLIED).await == "2"
    })
    .await;
    assert_eq!(q.config_field(cf::MAX_WAITING).await, "3");
    let mut fourth = stack.visitor();
    assert_eq!(fourth.enter().await.state(), "waiting", "room for one more");

    // A rehearsal's reset keeps them; clearing brings the file's back.
    let api = standby.admin_url().expect("admin API");
    call(&api, Method::POST, "/admin/v1/queues/main/close", None).await;
    let (status, _) = call(
        &api,
        Method::POST,
        "/admin/v1/queues/main/reset?force=true",
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (_, v) = call(&api, Method::GET, settings, None).await;
    assert_eq!(v["runtime"]["max_waiting"], 3, "{v}");
    let (status, v) = call(&api, Method::DELETE, settings, None).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(
        (
            v["version"].as_u64(),
            v["runtime"].as_object().map(|o| o.len())
        ),
        (Some(3), Some(0))
    );
    until("the file's settings are back", || async {
        q.config_field(cf::MAX_WAITING).await == "10000000"
    })
    .await;
    let log = standby.log();
    assert!(
        log.contains("action=\"settings_change\"") && log.contains("max_waiting"),
        "audited with what changed: {log}"
    );
    assert!(!log.contains(TOKEN), "a token is never logged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_added_to_the_schedulers_is_served_by_the_worker_without_a_redeploy() {
    use queuegate_shared::{Prefix, QueueId, QueueKeys};
    let stack = EdgeStack::start_with(
        Settings {
            entry_budget_per_minute: 0,
            ..Settings::default()
        },
        "anonymous",
        RedisServer::start(),
        &[("ENTRY_CHALLENGE", "off"), ("QUEUES", "main,other,drop-*")],
    )
    .await;
    let drop7 = QueueKeys::new(&Prefix::default(), &QueueId::new("drop-7").unwrap());
    let mut v = stack.visitor();

    // The pattern allows the name, but nobody runs the queue yet: closed,
    // and nothing is written for it.
    let before = stack.snapshot().await;
    let r = v
        .send("POST", "/queue/enter?queue=drop-7", None, None)
        .await;
    assert_eq!((r.status, r.error()), (503, "queue_closed"), "{:?}", r.json);
    let after = stack.snapshot().await;
    assert!(
        after.keys().all(|k| !k.contains("{drop-7}")),
        "nothing written for a queue nobody runs: {:?}",
        after
            .keys()
            .filter(|k| !before.contains_key(*k))
            .collect::<Vec<_>>()
    );
    // A name outside the pattern: unknown, as before.
    let r = v
        .send("POST", "/queue/enter?queue=drip-7", None, None)
        .await;
    assert_eq!((r.status, r.error()), (404, "unknown_queue"));

    // The scheduler gets the queue by a reload (no restart), the worker
    // serves it at once (no redeploy).
    let mut sched = Scheduler::builder(&stack.redis.url())
        .queue("main", &[])
        .start();
    let path = sched.config_path().to_path_buf();
    let text = std::fs::read_to_string(&path).expect("config");
    std::fs::write(&path, format!("{text}\n[[queue]]\nid = \"drop-7\"\n")).expect("add drop-7");
    sched.sighup();
    let mut conn = stack.queue.conn.clone();
    until("drop-7's settings are published", || {
        let mut conn = conn.clone();
        let key = drop7.config();
        async move {
            let state: Option<String> = redis::cmd("HGET")
                .arg(key)
                .arg(cf::STATE)
                .query_async(&mut conn)
                .await
                .unwrap_or(None);
            state.is_some()
        }
    })
    .await;
    let r = v
        .send("POST", "/queue/enter?queue=drop-7", None, None)
        .await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    assert!(matches!(r.state(), "waiting" | "admitted"), "{:?}", r.json);
    assert_eq!(r.json["queue"], "drop-7");
    let _: () = redis::cmd("PING")
        .query_async(&mut conn)
        .await
        .expect("ping");
    assert!(sched.is_running());
}
