//! The scheduler's admin API on the real stack (redis-server and the
//! scheduler binary): off without a token, every route refused without a
//! configured token, each action the same as its CLI command (one
//! implementation), every refusal a JSON error that changed nothing, and
//! every action in the audit log under the token's name and in the metrics.

use std::time::Duration;

use queuegate_scheduler::config::token_hash;
use queuegate_shared::fields::config as cf;
use queuegate_shared::Settings;
use queuegate_system_tests::TestQueue;
use queuegate_testkit::scheduler::{self, Scheduler};
use queuegate_testkit::RedisServer;
use reqwest::{Client, Method, StatusCode};
use serde_json::{json, Value};

const OPS: &str = "qga_0123456789abcdef0123456789abcdef-ops";
const BOT: &str = "qga_fedcba9876543210fedcba9876543210-bot";

struct Api {
    base: String,
    http: Client,
}

impl Api {
    async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<&str>,
    ) -> (StatusCode, Value, reqwest::header::HeaderMap) {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .timeout(Duration::from_secs(10));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req
                .header("content-type", "application/json")
                .body(b.to_string());
        }
        let resp = req.send().await.expect("admin API answers");
        let status = resp.status();
        let headers = resp.headers().clone();
        let text = resp.text().await.unwrap_or_default();
        let json = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, json, headers)
    }

    async fn ops(&self, method: Method, path: &str, body: Option<&str>) -> (StatusCode, Value) {
        let (s, j, _) = self.call(method, path, Some(OPS), body).await;
        (s, j)
    }
}

/// What operators change in a queue's config hash (the scheduler itself
/// rewrites other fields every tick).
async fn operator_fields(q: &TestQueue) -> Vec<String> {
    let mut out = Vec::new();
    for f in [
        cf::STATE,
        cf::NOTICE,
        cf::NOTICE_TEXTS,
        cf::OPENS_AT,
        cf::CLOSES_AT,
    ] {
        out.push(q.config_field(f).await);
    }
    out
}

async fn start(redis: &RedisServer) -> (Scheduler, Api, TestQueue) {
    let q = TestQueue::open(&redis.url(), "main", Settings::default()).await;
    let url = redis.url();
    let (ops, bot) = (token_hash(OPS), token_hash(BOT));
    let s = tokio::task::spawn_blocking(move || {
        Scheduler::builder(&url)
            .queue("main", &[])
            .queue("other", &[])
            .admin_tokens(&[("ops", &ops), ("deploy-bot", &bot)])
            .start()
    })
    .await
    .expect("start the scheduler");
    let api = Api {
        base: s.admin_url().expect("the admin API is on"),
        http: Client::new(),
    };
    (s, api, q)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_configured_token_gets_in_and_refusals_are_counted() {
    let redis = RedisServer::start();
    let (s, api, q) = start(&redis).await;
    let before = operator_fields(&q).await;
    for (token, path, method) in [
        (None, "/admin/v1/queues", Method::GET),
        (Some("qga_wrong"), "/admin/v1/queues", Method::GET),
        (Some(""), "/admin/v1/queues/main/pause", Method::POST),
        (
            Some(&OPS[..OPS.len() - 1]),
            "/admin/v1/queues/main/close",
            Method::POST,
        ),
        (None, "/admin/v1/nothing-here", Method::GET),
    ] {
        let (status, body, headers) = api.call(method, path, token, None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path} {body}");
        assert_eq!(body["error"], "unauthorized", "{body}");
        assert_eq!(
            headers
                .get("www-authenticate")
                .and_then(|v| v.to_str().ok()),
            Some("Bearer realm=\"queuegate-admin\"")
        );
    }
    // Basic auth with the right token is not a bearer token.
    let resp = api
        .http
        .get(format!("{}/admin/v1/queues", api.base))
        .basic_auth("ops", Some(OPS))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        operator_fields(&q).await,
        before,
        "refused requests change nothing"
    );
    assert_eq!(
        s.metric("queuegate_admin_actions_total{action=\"auth\",outcome=\"unauthorized\"}"),
        Some(6.0)
    );
    // The admin API is not on the open /metrics and /healthz listener.
    let open = scheduler_get(&s, "/admin/v1/queues").await;
    assert_eq!(open, 404);
    assert!(!s.log().contains(OPS), "a token is never logged");
}

/// Waits (up to 10 s) until the running scheduler has admitted `n`.
async fn slots_held(q: &TestQueue, n: u64) {
    for _ in 0..200 {
        if q.zcard(&q.keys.active()).await == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the scheduler did not admit {n} visitors within 10 s");
}

async fn scheduler_get(s: &Scheduler, path: &str) -> u16 {
    reqwest::get(format!("http://127.0.0.1:{}{path}", s.port()))
        .await
        .map(|r| r.status().as_u16())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_cli_action_works_over_http_and_is_audited() {
    let redis = RedisServer::start();
    let (s, api, q) = start(&redis).await;

    let (status, all) = api.ops(Method::GET, "/admin/v1/queues", None).await;
    assert_eq!(status, StatusCode::OK, "{all}");
    let ids: Vec<&str> = all["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["queue"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["main", "other"]);
    let (status, one) = api.ops(Method::GET, "/admin/v1/queues/main", None).await;
    assert_eq!(
        (status, one["state"].as_str()),
        (StatusCode::OK, Some("open"))
    );
    assert!(
        one["waiting"].is_u64() && one["origin"].is_object(),
        "{one}"
    );

    // The state switches, as the CLI's.
    for (action, state, previous) in [
        ("pause", "paused", "open"),
        ("resume", "open", "paused"),
        ("drain", "draining", "open"),
        ("close", "closed", "draining"),
        ("open", "open", "closed"),
    ] {
        let (status, body) = api
            .ops(
                Method::POST,
                &format!("/admin/v1/queues/main/{action}"),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{action}: {body}");
        assert_eq!(
            body,
            json!({"queue": "main", "state": state, "previous": previous, "changed": true})
        );
        assert_eq!(q.config_field(cf::STATE).await, state);
    }
    let (_, again) = api
        .ops(Method::POST, "/admin/v1/queues/main/open", None)
        .await;
    assert_eq!(again["changed"], false);

    // A refusal is a JSON error and changes nothing (resume leaves paused
    // only: a closed queue stays closed).
    api.ops(Method::POST, "/admin/v1/queues/main/close", None)
        .await;
    let before = operator_fields(&q).await;
    // Ten texts: more than the page has languages.
    let too_many = format!(
        r#"{{"text":"Sold out","texts":{{{}}}}}"#,
        ["en", "de", "es", "fr", "ja", "ko", "pt", "zh", "zh-Hant", "it"]
            .iter()
            .map(|l| format!(r#""{l}":"x""#))
            .collect::<Vec<_>>()
            .join(",")
    );
    for (method, path, body, want, code) in [
        (
            Method::POST,
            "/admin/v1/queues/main/resume",
            None,
            StatusCode::CONFLICT,
            "refused",
        ),
        (
            Method::POST,
            "/admin/v1/queues/main/frobnicate",
            None,
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            Method::POST,
            "/admin/v1/queues/nope/pause",
            None,
            StatusCode::NOT_FOUND,
            "unknown_queue",
        ),
        (
            Method::GET,
            "/admin/v1/queues/nope",
            None,
            StatusCode::NOT_FOUND,
            "unknown_queue",
        ),
        (
            Method::GET,
            "/admin/v1/queues/main/pause",
            None,
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        ),
        (
            Method::PUT,
            "/admin/v1/queues/main/schedule",
            Some(r#"{"opens_at":"tomorrow"}"#),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            Method::PUT,
            "/admin/v1/queues/main/schedule",
            Some(r#"{"opens_at":"2030-01-02T00:00:00Z","closes_at":"2030-01-01T00:00:00Z"}"#),
            StatusCode::CONFLICT,
            "conflict",
        ),
        (
            Method::PUT,
            "/admin/v1/queues/main/schedule",
            Some("{}"),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            Method::PUT,
            "/admin/v1/queues/main/schedule",
            Some(r#"{"opens":"2030-01-01T00:00:00Z"}"#),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            Method::PUT,
            "/admin/v1/queues/main/schedule",
            Some(r#"{"opens_at":"2030-01-01T00:00:00Z","closes_at":null}"#),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            Method::PUT,
            "/admin/v1/queues/main/notice",
            Some(r#"{"text":"two\nlines"}"#),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            Method::PUT,
            "/admin/v1/queues/main/notice",
            Some("not json"),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            Method::PUT,
            "/admin/v1/queues/main/notice",
            Some(&format!(r#"{{"text":"{}"}}"#, "x".repeat(20_000))),
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
        ),
        // Texts per language (issue 36): an unknown language, a text too
        // long, too many languages, a text that is no string.
        (
            Method::PUT,
            "/admin/v1/queues/main/notice",
            Some(r#"{"text":"Sold out","texts":{"xx":"?"}}"#),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            Method::PUT,
            "/admin/v1/queues/main/notice",
            Some(&format!(
                r#"{{"text":"Sold out","texts":{{"de":"{}"}}}}"#,
                "ü".repeat(281)
            )),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            Method::PUT,
            "/admin/v1/queues/main/notice",
            Some(&too_many),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            Method::PUT,
            "/admin/v1/queues/main/notice",
            Some(r#"{"text":"Sold out","texts":{"de":null}}"#),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            Method::PUT,
            "/admin/v1/queues/main/notice",
            Some(r#"{"text":"Sold out","texts":["de","Ausverkauft"]}"#),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
    ] {
        let (status, reply) = api.ops(method.clone(), path, body).await;
        assert_eq!(
            (status, reply["error"].as_str()),
            (want, Some(code)),
            "{method} {path}: {reply}"
        );
        assert!(
            reply["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{reply}"
        );
    }
    assert_eq!(operator_fields(&q).await, before, "refusals change nothing");
    // Each notice refusal says what is wrong.
    for (body, why) in [
        (
            r#"{"text":"Sold out","texts":{"xx":"?"}}"#.to_string(),
            "texts: \"xx\" is not a language of the page (use one of: en, de, es, fr, ja, ko, pt, zh, zh-Hant)",
        ),
        (
            format!(r#"{{"text":"Sold out","texts":{{"de":"{}"}}}}"#, "ü".repeat(281)),
            "texts: the \"de\" text: the notice is longer than 280 characters",
        ),
        (
            too_many.clone(),
            "texts: too many languages: 10 given, at most 9",
        ),
    ] {
        let (_, reply) = api
            .ops(Method::PUT, "/admin/v1/queues/main/notice", Some(&body))
            .await;
        let message = reply["message"].as_str().unwrap_or_default();
        assert!(message.contains(why), "{body}: {reply}");
    }
    assert_eq!(operator_fields(&q).await, before, "refusals change nothing");

    // Schedule and notice.
    let (status, body) = api
        .ops(
            Method::PUT,
            "/admin/v1/queues/main/schedule",
            Some(r#"{"opens_at":"2030-01-01T00:00:00Z"}"#),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["opens_at"], "2030-01-01T00:00:00Z");
    assert!(!q.config_field(cf::OPENS_AT).await.is_empty());
    let (status, body) = api
        .ops(Method::DELETE, "/admin/v1/queues/main/schedule", None)
        .await;
    assert_eq!(
        (status, &body["opens_at"]),
        (StatusCode::OK, &Value::Null),
        "{body}"
    );
    let (status, body) = api
        .ops(
            Method::PUT,
            "/admin/v1/queues/main/notice",
            Some(r#"{"text":"Sizes S and M are sold out"}"#),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"queue": "main", "notice": "Sizes S and M are sold out", "texts": {},
            "previous": null, "previous_texts": {}})
    );
    assert_eq!(
        q.config_field(cf::NOTICE).await,
        "Sizes S and M are sold out"
    );
    // With texts per language: stored beside the default, reported back.
    let (status, body) = api
        .ops(
            Method::PUT,
            "/admin/v1/queues/main/notice",
            Some(r#"{"text":"Sold out","texts":{"de":"Ausverkauft","zh-Hant":"已售完"}}"#),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"queue": "main", "notice": "Sold out",
            "texts": {"de": "Ausverkauft", "zh-Hant": "已售完"},
            "previous": "Sizes S and M are sold out", "previous_texts": {}})
    );
    let stored: Value = serde_json::from_str(&q.config_field(cf::NOTICE_TEXTS).await)
        .expect("the texts are a JSON object");
    assert_eq!(stored, json!({"de": "Ausverkauft", "zh-Hant": "已售完"}));
    let (_, body) = api
        .ops(Method::DELETE, "/admin/v1/queues/main/notice", None)
        .await;
    assert_eq!(body["previous"], "Sold out");
    assert_eq!(body["previous_texts"]["de"], "Ausverkauft");
    assert_eq!(
        q.config_field(cf::NOTICE_TEXTS).await,
        "",
        "cleared with it"
    );

    // The stock: set, read, refused below zero (nothing changed).
    let (status, body) = api
        .ops(
            Method::PUT,
            "/admin/v1/queues/main/stock",
            Some(r#"{"set": 12}"#),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        (body["left"].clone(), body["sold_out"].clone()),
        (json!(12), json!(false))
    );
    let (status, body) = api
        .ops(
            Method::PUT,
            "/admin/v1/queues/main/stock",
            Some(r#"{"add": -13}"#),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let (_, body) = api
        .ops(Method::GET, "/admin/v1/queues/main/stock", None)
        .await;
    assert_eq!(body["left"], 12);
    assert_eq!(q.config_field(cf::STOCK_LEFT).await, "12");

    // One implementation: the CLI's pause is what the API then reads, and
    // the CLI's action is in its own audit line.
    let out = scheduler::command(s.config_path(), &["pause", "other"]);
    let text = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("admin action") && text.contains("who=\"cli:"),
        "{text}"
    );
    let (_, other) = api.ops(Method::GET, "/admin/v1/queues/other", None).await;
    assert_eq!(other["state"], "paused");

    // The audit trail: who (the token's name) and what, and the counts.
    let log = s.log();
    for needle in [
        "who=\"ops\" action=\"pause\" queue=\"main\" outcome=\"done\"",
        "who=\"ops\" action=\"resume\" queue=\"main\" outcome=\"refused\"",
        "who=\"ops\" action=\"notice\" queue=\"main\" outcome=\"bad_input\"",
        "who=\"ops\" action=\"status\" queue=\"*\" outcome=\"done\"",
        "who=\"ops\" action=\"stock_set\" queue=\"main\" outcome=\"done\"",
        "who=\"ops\" action=\"stock_add\" queue=\"main\" outcome=\"refused\"",
    ] {
        assert!(log.contains(needle), "the audit log lacks {needle}:\n{log}");
    }
    assert!(
        !log.contains(OPS) && !log.contains(BOT),
        "a token is never logged"
    );
    assert_eq!(
        s.metric("queuegate_admin_actions_total{action=\"pause\",outcome=\"done\"}"),
        Some(1.0)
    );
    assert_eq!(
        s.metric("queuegate_admin_actions_total{action=\"resume\",outcome=\"refused\"}"),
        Some(1.0)
    );
    // A second token works under its own name.
    let (status, _, _) = api
        .call(Method::POST, "/admin/v1/queues/main/pause", Some(BOT), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(s.log().contains("who=\"deploy-bot\" action=\"pause\""));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_api_is_off_without_a_token() {
    let redis = RedisServer::start();
    let url = redis.url();
    let s =
        tokio::task::spawn_blocking(move || Scheduler::builder(&url).queue("main", &[]).start())
            .await
            .unwrap();
    assert_eq!(s.admin_url(), None);
    assert!(!s.log().contains("admin API on"), "{}", s.log());
    assert!(s.log().contains("scheduler starting"));
    assert_eq!(scheduler_get(&s, "/admin/v1/queues").await, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_empties_a_closed_queue_and_keeps_its_settings() {
    use queuegate_system_tests::user;
    let redis = RedisServer::start();
    let (s, api, q) = start(&redis).await;
    // Three visitors admitted by the running scheduler (slots held), two
    // waiting behind a pause, a notice and counters.
    for n in 0..3 {
        q.enter(&user(n)).await;
    }
    slots_held(&q, 3).await;
    api.ops(Method::POST, "/admin/v1/queues/main/pause", None)
        .await;
    for n in 3..5 {
        q.enter(&user(n)).await;
    }
    api.ops(
        Method::PUT,
        "/admin/v1/queues/main/notice",
        Some(r#"{"text":"Rehearsal"}"#),
    )
    .await;
    assert_eq!(q.zcard(&q.keys.waiting()).await, 2);
    assert!(q.stat("entered").await >= 5);
    let (status, staff) = api
        .ops(
            Method::POST,
            "/admin/v1/queues/main/bypasses",
            Some(r#"{"name":"rehearsal staff"}"#),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{staff}");

    // Not while it could take visitors; not while tokens are in flight.
    let (status, body) = api
        .ops(Method::POST, "/admin/v1/queues/main/reset", None)
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::CONFLICT, Some("refused"))
    );
    assert!(
        body["message"].as_str().unwrap().contains("close it first"),
        "{body}"
    );
    api.ops(Method::POST, "/admin/v1/queues/main/close", None)
        .await;
    let (status, body) = api
        .ops(Method::POST, "/admin/v1/queues/main/reset", None)
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::CONFLICT, Some("refused"))
    );
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("3 admitted visitors"),
        "{body}"
    );
    let (status, body) = api
        .ops(
            Method::POST,
            "/admin/v1/queues/main/reset?force=maybe",
            None,
        )
        .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("bad_request"))
    );
    assert_eq!(
        q.zcard(&q.keys.waiting()).await,
        2,
        "refusals change nothing"
    );
    assert_eq!(
        q.zcard(&q.keys.active()).await,
        3,
        "refusals change nothing"
    );

    let (status, body) = api
        .ops(Method::POST, "/admin/v1/queues/main/reset?force=true", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["tokens_dropped"], 3);
    assert!(body["removed_keys"].as_u64().unwrap() >= 10, "{body}");
    assert_eq!(q.zcard(&q.keys.waiting()).await, 0);
    assert_eq!(q.zcard(&q.keys.active()).await, 0);
    assert_eq!(q.stat("entered").await, 0, "the statistics start again");
    assert!(q.token_of(&user(0)).await.is_none(), "tokens are gone");
    // What an operator set stays: settings, state, notice, bypass links;
    // the lease too.
    assert_eq!(q.config_field(cf::STATE).await, "closed");
    assert_eq!(q.config_field(cf::NOTICE).await, "Rehearsal");
    assert!(!q.config_field(cf::MAX_ACTIVE).await.is_empty());
    let mut conn = q.conn.clone();
    let lease: Option<String> = redis::cmd("GET")
        .arg(q.keys.lock())
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(lease.is_some(), "the scheduler keeps its lease");
    let (_, links) = api
        .ops(Method::GET, "/admin/v1/queues/main/bypasses", None)
        .await;
    assert_eq!(links["bypasses"][0]["id"], staff["id"], "bypass links stay");
    // Only this queue was touched.
    let other: u64 = redis::cmd("EXISTS")
        .arg("qg:{other}:config")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(other, 1);
    assert!(s
        .log()
        .contains("who=\"ops\" action=\"reset_forced\" queue=\"main\" outcome=\"done\""));

    // Taking visitors again: the first newcomer is first in line.
    api.ops(Method::POST, "/admin/v1/queues/main/pause", None)
        .await;
    q.enter(&user(9)).await;
    let rank: Option<u64> = redis::cmd("ZRANK")
        .arg(q.keys.waiting())
        .arg(user(9).as_str())
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(rank, Some(0));
    assert_eq!(q.zcard(&q.keys.waiting()).await, 1);

    // The CLI: same action, same refusal.
    let out = scheduler::command(s.config_path(), &["reset", "main"]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("close it first"), "{text}");
    api.ops(Method::POST, "/admin/v1/queues/main/close", None)
        .await;
    let out = scheduler::command(s.config_path(), &["reset", "main"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.starts_with("queue main: reset, "), "{text}");
    assert_eq!(q.zcard(&q.keys.waiting()).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visitor_is_looked_up_without_a_trace_and_without_their_token() {
    use queuegate_system_tests::user;
    let redis = RedisServer::start();
    let (s, api, q) = start(&redis).await;
    // One admitted by the running scheduler, then a pause and two in line.
    q.enter(&user(0)).await;
    slots_held(&q, 1).await;
    api.ops(Method::POST, "/admin/v1/queues/main/pause", None)
        .await;
    q.enter(&user(1)).await;
    q.enter(&user(2)).await;

    // The visitors' own keys (the scheduler's ticks rewrite config and stats).
    let visitors_keys = |all: std::collections::BTreeMap<String, Vec<u8>>| {
        all.into_iter()
            .filter(|(k, _)| {
                ["waiting", "active", "status:", "token:", "seen:"]
                    .iter()
                    .any(|n| k.contains(n))
            })
            .collect::<Vec<_>>()
    };
    let before = visitors_keys(q.snapshot().await);
    assert!(before.len() >= 4, "{before:?}");
    let (status, v) = api
        .ops(Method::GET, "/admin/v1/queues/main/visitors/user-2", None)
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(
        (v["state"].as_str(), v["position"].as_u64()),
        (Some("waiting"), Some(2))
    );
    assert_eq!(
        visitors_keys(q.snapshot().await),
        before,
        "a lookup writes nothing, not even a visit"
    );

    let (_, v) = api
        .ops(Method::GET, "/admin/v1/queues/main/visitors/user-0", None)
        .await;
    assert_eq!(v["state"], "admitted", "{v}");
    assert_eq!(v["last_change"]["status"], "ISSUED");
    assert!(
        v["slot_until"].is_string() && v["token"]["expires_at"].is_string(),
        "{v}"
    );
    let token = q.token_of(&user(0)).await.expect("a token");
    assert!(
        !v.to_string().contains(token.expose()),
        "the token itself is never shown"
    );

    let (_, v) = api
        .ops(Method::GET, "/admin/v1/queues/main/visitors/nobody", None)
        .await;
    assert_eq!(v["state"], "unknown");
    let (status, v) = api
        .ops(Method::GET, "/admin/v1/queues/main/visitors/a%7Bb", None)
        .await;
    assert_eq!(
        (status, v["error"].as_str()),
        (StatusCode::BAD_REQUEST, Some("bad_request"))
    );

    // The CLI, the same lookup.
    let out = scheduler::command(s.config_path(), &["visitor", "main", "--id", "user-1"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("state       waiting") && text.contains("position    1"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_visitor_loses_its_place_or_token_until_lifted_and_it_is_counted() {
    use queuegate_shared::ops::Observed;
    use queuegate_shared::state::UserState;
    use queuegate_system_tests::user;
    let redis = RedisServer::start();
    let (s, api, q) = start(&redis).await;
    // user-0 admitted by the running scheduler; then a pause, two in line.
    q.enter(&user(0)).await;
    slots_held(&q, 1).await;
    api.ops(Method::POST, "/admin/v1/queues/main/pause", None)
        .await;
    q.enter(&user(1)).await;
    q.enter(&user(2)).await;

    // Bad input first: each a 400 that changes nothing.
    let before = q.snapshot().await;
    let revocation = "/admin/v1/queues/main/visitors/user-1/revocation";
    for body in [
        r#"{"minutes": 0}"#,
        r#"{"minutes": 10081}"#,
        r#"{"minutes": null}"#,
        r#"{"minutes": 1.5}"#,
        r#"{"for": 3}"#,
        "[]",
    ] {
        let (status, v) = api.ops(Method::PUT, revocation, Some(body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {v}");
    }
    let (status, _) = api
        .ops(
            Method::PUT,
            "/admin/v1/queues/nope/visitors/user-1/revocation",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, v) = api.ops(Method::DELETE, revocation, None).await;
    assert_eq!(status, StatusCode::CONFLICT, "nothing to lift: {v}");
    let unchanged = |a: &std::collections::BTreeMap<String, Vec<u8>>| {
        a.iter()
            .filter(|(k, _)| {
                ["waiting", "active", "status:", "token:", "history:"]
                    .iter()
                    .any(|n| k.contains(n))
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(unchanged(&q.snapshot().await), unchanged(&before));

    // A waiting visitor: the place is gone, the one behind moves up.
    let (status, v) = api
        .ops(Method::PUT, revocation, Some(r#"{"minutes": 30}"#))
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(
        (v["was"].as_str(), v["for_ms"].as_u64()),
        (Some("waiting"), Some(1_800_000))
    );
    assert!(matches!(
        q.position(&user(1)).await,
        Observed::Settled(UserState::Revoked)
    ));
    assert!(
        matches!(
            q.enter(&user(1)).await,
            queuegate_shared::ops::EnterReply::Entered(Observed::Settled(UserState::Revoked))
        ),
        "a revoked visitor cannot take a new place"
    );
    match q.position(&user(2)).await {
        Observed::Waiting(w) => assert_eq!(w.position, 1),
        other => panic!("user-2 should be first: {other:?}"),
    }

    // An admitted visitor: the token is deleted and its slot freed.
    let token = q.token_of(&user(0)).await.expect("a token");
    let (status, v) = api
        .ops(
            Method::PUT,
            "/admin/v1/queues/main/visitors/user-0/revocation",
            None,
        )
        .await;
    assert_eq!(
        (status, v["was"].as_str()),
        (StatusCode::OK, Some("admitted")),
        "{v}"
    );
    assert!(q.token_of(&user(0)).await.is_none());
    assert_eq!(q.zcard(&q.keys.active()).await, 0, "the slot is free again");
    assert_eq!(
        q.consume(&user(0), &token).await,
        queuegate_shared::ops::ConsumeReply::Invalid,
        "the token no longer opens the gate"
    );

    // The lookup shows the history of states; never the token.
    let (_, v) = api
        .ops(Method::GET, "/admin/v1/queues/main/visitors/user-0", None)
        .await;
    assert_eq!(v["state"], "revoked", "{v}");
    let history: Vec<&str> = v["history"]
        .as_array()
        .expect("a history")
        .iter()
        .filter_map(|c| c["status"].as_str())
        .collect();
    assert_eq!(history, ["ISSUED", "REVOKED"], "{v}");
    assert!(!v.to_string().contains(token.expose()));

    // Lifted: the visitor may enter again, at the back.
    let (status, v) = api.ops(Method::DELETE, revocation, None).await;
    assert_eq!(
        (status, v["lifted"].as_bool()),
        (StatusCode::OK, Some(true)),
        "{v}"
    );
    match q.enter(&user(1)).await {
        queuegate_shared::ops::EnterReply::Entered(Observed::Waiting(w)) => {
            assert_eq!(w.position, 2)
        }
        other => panic!("user-1 should be back in line: {other:?}"),
    }

    // The CLI: the same action, audited under the operator's login.
    let out = scheduler::command(
        s.config_path(),
        &[
            "visitor",
            "main",
            "--id",
            "user-2",
            "--revoke",
            "--minutes",
            "5",
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("revoked (was waiting)") && text.contains("5 min"),
        "{text}"
    );
    let out = scheduler::command(
        s.config_path(),
        &["visitor", "main", "--id", "user-2", "--minutes", "5"],
    );
    assert_ne!(out.status.code(), Some(0), "--minutes needs --revoke");

    // Counted: 3 revocations in Redis, and in the holder's metrics.
    assert_eq!(q.stat("revoked").await, 3);
    let mut counted = None;
    for _ in 0..100 {
        counted = s.metric("queuegate_revoked_total{queue=\"main\"}");
        if counted == Some(3.0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(counted, Some(3.0));
    assert_eq!(
        s.metric("queuegate_admin_actions_total{action=\"visitor_revoke\",outcome=\"done\"}"),
        Some(2.0)
    );
    assert!(s.log().contains("visitor_revoke"), "audited");
    let out = scheduler::command(s.config_path(), &["status", "main"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        text.contains("revoked     3 visitors (2 places withdrawn)"),
        "{text}"
    );
    q.assert_conserved().await;
}
