//! The built wasm runs under workerd (`wrangler dev --local`) and answers.

use queuegate_testkit::Wrangler;

#[tokio::test]
async fn health_answers_json_from_the_built_wasm() {
    let worker = Wrangler::builder().start();
    let resp = reqwest::get(format!("{}/queue/health", worker.url()))
        .await
        .expect("request /queue/health");
    let status = resp.status().as_u16();
    let content_type = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body: serde_json::Value = resp.json().await.expect("JSON body");
    assert!(
        content_type.starts_with("application/json"),
        "{content_type}"
    );
    assert!(status == 200 || status == 503, "status {status}");
    assert!(body.get("redis").is_some(), "{body}");
}
