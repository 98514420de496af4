//! The router driven without a socket (axum examples style): auth, 404,
//! 405, 413, bad JSON and a down Redis, none of which needs a live server.

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use tower::ServiceExt;

use super::*;

const TOKEN: &str = "test-token";

/// A backend whose Redis is a port nothing listens on.
fn down_backend(timeout: Duration) -> Backend {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap();
    Backend::connect_lazy(&format!("redis://127.0.0.1:{port}"), timeout).unwrap()
}

/// A router whose Redis is down.
fn app(max_body_bytes: usize) -> Router {
    router(AppState::new(
        down_backend(Duration::from_millis(500)),
        TOKEN,
        max_body_bytes,
    ))
}

async fn send(app: Router, request: Request<Body>) -> (StatusCode, HeaderMap, JsonValue) {
    let response = app.oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    let json = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("body is not JSON ({e}): {bytes:?}"));
    (status, headers, json)
}

fn authed(method: &str, uri: &str, body: impl Into<Body>) -> Request<Body> {
    Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .body(body.into())
        .unwrap()
}

#[tokio::test]
async fn missing_or_wrong_token_is_401_json_everywhere() {
    for uri in [
        "/",
        "/get/k",
        "/pipeline",
        "/nope/x/y",
        "/get/k?_token=wrong",
    ] {
        let request = Request::builder()
            .method("POST")
            .uri(uri)
            .body(Body::from("[\"PING\"]"))
            .unwrap();
        let (status, headers, body) = send(app(1024), request).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{uri}");
        assert_eq!(body["error"], "Unauthorized");
        assert!(headers.contains_key(SYNC_TOKEN_HEADER));
    }
    let request = Request::builder()
        .uri("/get/k")
        .header(header::AUTHORIZATION, "Bearer wrong")
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(app(1024), request).await.0, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn unknown_routes_and_methods_are_json() {
    let (status, _, body) = send(app(1024), authed("POST", "/pipeline/extra", "")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"], "Not Found");
    let (status, _, _) = send(app(1024), authed("GET", "//get", "")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    for (method, uri) in [("GET", "/"), ("GET", "/pipeline"), ("DELETE", "/get/k")] {
        let (status, _, body) = send(app(1024), authed(method, uri, "")).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {uri}");
        assert_eq!(body["error"], "Method Not Allowed");
    }
}

#[tokio::test]
async fn oversized_body_is_413_json() {
    let big = format!("[\"SET\",\"k\",\"{}\"]", "x".repeat(2048));
    for uri in ["/", "/set/k", "/pipeline", "/multi-exec"] {
        let (status, _, body) = send(app(1024), authed("POST", uri, big.clone())).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{uri}");
        assert!(body["error"].as_str().unwrap().contains("1024"), "{body}");
    }
}

#[tokio::test]
async fn malformed_commands_are_400_before_redis() {
    for (uri, body) in [
        ("/", "{not json"),
        ("/", "{\"cmd\":\"get\"}"),
        ("/", "[]"),
        ("/", "[\"get\", null]"),
        ("/pipeline", "[\"get\",\"k\"]"),
        ("/multi-exec", "[]"),
        ("/", "[\"SUBSCRIBE\",\"c\"]"),
        ("/multi-exec", "[[\"SET\",\"k\",\"v\"],[\"WATCH\",\"k\"]]"),
    ] {
        let (status, _, json) = send(app(1024), authed("POST", uri, body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{uri} {body}");
        assert!(
            json["error"].as_str().unwrap().starts_with("ERR "),
            "{json}"
        );
    }
}

#[tokio::test]
async fn refused_command_in_a_pipeline_fails_alone() {
    // Nothing else runs (all refused), so no Redis is needed.
    let body = "[[\"MULTI\"],[\"BLPOP\",\"l\",\"0\"]]";
    let (status, _, json) = send(app(1024), authed("POST", "/pipeline", body)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(json.as_array().unwrap().len(), 2);
    assert!(json[0]["error"].as_str().unwrap().contains("multi"));
}

#[tokio::test]
async fn down_redis_is_a_fast_5xx_json() {
    let started = Instant::now();
    let (status, _, json) = send(app(1024), authed("GET", "/ping", "")).await;
    assert!(status.is_server_error(), "{status}");
    assert!(json["error"].as_str().unwrap().contains("Redis"), "{json}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn stats_count_requests_and_round_trips_behind_the_token() {
    let app = app(1024);
    let request = Request::builder()
        .uri("/_stats")
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(app.clone(), request).await.0, StatusCode::UNAUTHORIZED);
    // Redis is down: the round trip is still attempted, and counted.
    send(app.clone(), authed("GET", "/ping", "")).await;
    let (status, _, json) = send(app.clone(), authed("POST", "/", "[\"MULTI\"]")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _, stats) = send(app.clone(), authed("GET", "/_stats", "")).await;
    assert_eq!(status, StatusCode::OK, "{json}");
    assert_eq!(stats["requests"], 2, "{stats}");
    assert_eq!(stats["roundTrips"], 1, "{stats}");
    assert_eq!(stats["commands"]["PING"], 1, "{stats}");
    assert!(
        stats["commands"].get("MULTI").is_none(),
        "refused: never sent"
    );
}

#[tokio::test]
async fn a_spent_quota_refuses_with_upstash_text_and_stats_stay_readable() {
    let backend = down_backend(Duration::from_millis(200));
    let app = router(AppState::new(backend, TOKEN, 1024).with_quota(2));
    // Within the quota the request reaches Redis (down here: 503).
    for _ in 0..2 {
        let (status, _, _) = send(app.clone(), authed("POST", "/", "[\"PING\"]")).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    }
    let (status, _, body) = send(app.clone(), authed("POST", "/", "[\"PING\"]")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body["error"],
        "ERR max requests limit exceeded. Limit: 2, Usage: 2"
    );
    let (status, _, stats) = send(app.clone(), authed("GET", STATS_PATH, "")).await;
    assert_eq!(status, StatusCode::OK, "the counters are no request");
    assert_eq!(stats["requests"], 3);
    // Unauthorized requests spend nothing and still get 401.
    let anon = Request::builder()
        .method("POST")
        .uri("/")
        .body(Body::from("[\"PING\"]"))
        .unwrap();
    assert_eq!(send(app, anon).await.0, StatusCode::UNAUTHORIZED);
}
