//! The built wasm runs under workerd (`wrangler dev --local`) and answers
//! `/queue/health` with JSON: not configured without Redis secrets, ok with
//! a reachable Redis behind the REST gateway. Calling it costs Redis at most
//! one command a second per isolate, and a database refusing for its plan's
//! limit is a 503 with a long Retry-After, never a 500.

use std::time::Duration;

use queuegate_shared::Settings;
use queuegate_system_tests::{fast_settings, TestQueue};
use queuegate_testkit::gateway::Gateway;
use queuegate_testkit::{RedisServer, Wrangler};

const SECRET: &str = "health-test-secret-0123456789abcdef";

async fn health(url: &str) -> (u16, String, serde_json::Value) {
    let resp = reqwest::get(format!("{url}/queue/health"))
        .await
        .expect("request /queue/health");
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    (status, content_type, resp.json().await.expect("JSON body"))
}

#[tokio::test]
async fn health_answers_json_from_the_built_wasm() {
    let bare = tokio::task::spawn_blocking(|| {
        Wrangler::builder()
            .secret("IDENTITY_SECRET", SECRET)
            .secret("ORIGIN_SIGNING_SECRET", SECRET)
            .start()
    })
    .await
    .unwrap();
    let (status, content_type, body) = health(&bare.url()).await;
    assert!(
        content_type.starts_with("application/json"),
        "{content_type}"
    );
    assert_eq!(
        (status, body),
        (503, serde_json::json!({"redis": "not_configured"}))
    );

    let redis = RedisServer::start();
    let gateway = Gateway::start(&redis.url());
    let worker = behind(&gateway, &[]).await;
    let (status, _, body) = health(&worker.url()).await;
    assert_eq!((status, body), (200, serde_json::json!({"redis": "ok"})));
}

/// Requests the gateway served so far (its authenticated counters).
async fn served(gateway: &Gateway) -> u64 {
    let stats: serde_json::Value = reqwest::Client::new()
        .get(format!("{}/_stats", gateway.url()))
        .bearer_auth(gateway.token())
        .send()
        .await
        .expect("gateway stats")
        .json()
        .await
        .expect("stats JSON");
    stats["requests"].as_u64().expect("a request count")
}

/// The gateway refuses as an Upstash database whose plan quota ran out
/// after this many requests.
const QUOTA: u64 = 60;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_is_cached_per_isolate_and_a_spent_plan_is_503_not_500() {
    let redis = RedisServer::start();
    let settings = Settings {
        entry_budget_per_minute: 0,
        idle_passthrough: false,
        ..fast_settings()
    };
    TestQueue::open(&redis.url(), "main", settings).await;
    let gateway = Gateway::builder(&redis.url())
        .arg("--max-requests")
        .arg(&QUOTA.to_string())
        .start();
    let worker = behind(&gateway, &[("ENTRY_CHALLENGE", "off")]).await;
    let base = worker.url();

    // 40 health calls within well under a second, 20 of them at once: one
    // Redis command at most for the lot (plus the start-up check that made
    // the worker ready, which may have been the one reused).
    let before = served(&gateway).await;
    for _ in 0..20 {
        assert_eq!(health(&base).await.0, 200);
    }
    let burst: Vec<_> = (0..20)
        .map(|_| tokio::spawn(health_at(base.clone())))
        .collect();
    for call in burst {
        assert_eq!(call.await.unwrap(), 200);
    }
    let cost = served(&gateway).await - before;
    assert!(cost <= 1, "40 health calls cost Redis {cost} requests");
    // A second later the next call checks again.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let before = served(&gateway).await;
    assert_eq!(health(&base).await.0, 200);
    assert_eq!(
        served(&gateway).await - before,
        1,
        "a stale answer is checked again"
    );

    // Spend the quota with enters: every refusal is a 503 `unavailable`
    // with Retry-After 30, never a 500.
    let http = reqwest::Client::new();
    let mut limited = None;
    for _ in 0..QUOTA {
        let r = http
            .post(format!("{base}/queue/enter"))
            .header("cf-connecting-ip", "203.0.113.9")
            .send()
            .await
            .expect("enter");
        let status = r.status().as_u16();
        assert_ne!(status, 500, "{:?}", r.text().await);
        if status == 503 {
            let retry = r.headers().get("retry-after").cloned();
            limited = Some((retry, r.json::<serde_json::Value>().await.unwrap()));
            break;
        }
        assert_eq!(status, 200);
    }
    let (retry, body) = limited.expect("the quota ran out within QUOTA enters");
    assert_eq!(retry.as_ref().and_then(|v| v.to_str().ok()), Some("30"));
    assert_eq!(body["error"], "unavailable", "{body}");
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let (status, _, body) = health(&base).await;
    assert_eq!(
        (status, body),
        (503, serde_json::json!({"redis": "limited"}))
    );
}

async fn health_at(base: String) -> u16 {
    health(&base).await.0
}

/// The built worker with `vars`, its Redis behind `gateway`.
async fn behind(gateway: &Gateway, vars: &[(&'static str, &'static str)]) -> Wrangler {
    let (url, token) = (gateway.url(), gateway.token().to_string());
    let vars = vars.to_vec();
    tokio::task::spawn_blocking(move || {
        let mut builder = Wrangler::builder()
            .secret("UPSTASH_REDIS_REST_URL", &url)
            .secret("UPSTASH_REDIS_REST_TOKEN", &token)
            .secret("IDENTITY_SECRET", SECRET)
            .secret("ORIGIN_SIGNING_SECRET", SECRET);
        for (k, v) in vars {
            builder = builder.var(k, v);
        }
        builder.start()
    })
    .await
    .expect("start wrangler")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_deployed_without_its_assets_says_so() {
    // The page and the scripts' text are static assets beside the wasm
    // (wrangler.toml's [assets]). A deploy that left them out keeps
    // answering what needs neither, and says what is missing for the rest:
    // 500 `misconfigured`, never a page without its texts.
    let build = tempfile::tempdir().unwrap();
    let built = queuegate_testkit::repo_root().join("worker/build");
    queuegate_testkit::fresh::assert_worker_fresh(&built, "scripts/build-worker");
    for f in ["index.js", "index_bg.wasm"] {
        std::fs::copy(built.join(f), build.path().join(f)).unwrap();
    }
    std::fs::create_dir(build.path().join("assets")).unwrap();
    let redis = RedisServer::start();
    let gateway = Gateway::start(&redis.url());
    let (url, token) = (gateway.url(), gateway.token().to_string());
    let script = queuegate_testkit::workerd::Script::BuiltIn(build.path().to_path_buf());
    let worker = tokio::task::spawn_blocking(move || {
        Wrangler::builder()
            .var("ENTRY_CHALLENGE", "off")
            .secret("UPSTASH_REDIS_REST_URL", &url)
            .secret("UPSTASH_REDIS_REST_TOKEN", &token)
            .secret("IDENTITY_SECRET", SECRET)
            .secret("ORIGIN_SIGNING_SECRET", SECRET)
            .start_workerd_from(script)
    })
    .await
    .unwrap();
    let (status, _, body) = health(&worker.url()).await;
    assert_eq!((status, body), (200, serde_json::json!({"redis": "ok"})));

    let http = reqwest::Client::new();
    let page = http
        .get(format!("{}/queue", worker.url()))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(page.status().as_u16(), 500);
    let body: serde_json::Value = page.json().await.unwrap();
    assert_eq!(body["error"], "misconfigured", "{body}");
    // Redis has no scripts yet: the first EVALSHA is NOSCRIPT, and the
    // script's text is not there to send.
    let enter = http
        .post(format!("{}/queue/enter", worker.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(enter.status().as_u16(), 500);
    let body: serde_json::Value = enter.json().await.unwrap();
    assert_eq!(body["error"], "misconfigured", "{body}");
    let log = worker.log();
    assert!(
        log.contains("the asset page/waiting-room.html is missing")
            && log.contains("the asset lua/enter.lua is missing"),
        "the operator's log names the missing files: {log}"
    );
}
