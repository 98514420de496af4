//! The built wasm runs under workerd (`wrangler dev --local`) and answers
//! `/queue/health` with JSON: not configured without Redis secrets, ok with
//! a reachable Redis behind the REST gateway.

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
    let (url, token) = (gateway.url(), gateway.token().to_string());
    let worker = tokio::task::spawn_blocking(move || {
        Wrangler::builder()
            .secret("UPSTASH_REDIS_REST_URL", &url)
            .secret("UPSTASH_REDIS_REST_TOKEN", &token)
            .secret("IDENTITY_SECRET", SECRET)
            .secret("ORIGIN_SIGNING_SECRET", SECRET)
            .start()
    })
    .await
    .unwrap();
    let (status, _, body) = health(&worker.url()).await;
    assert_eq!((status, body), (200, serde_json::json!({"redis": "ok"})));
}
