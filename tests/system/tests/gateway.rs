//! The `redis-rest` gateway as a process in front of a real redis-server:
//! every request form, every error class, base64 mode with binary values,
//! pipelines and transactions, scripts, and Redis restarting under it.

use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use queuegate_testkit::gateway::Gateway;
use queuegate_testkit::RedisServer;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

/// A redis-server, a gateway in front of it and an HTTP client.
struct Rig {
    redis: RedisServer,
    gateway: Gateway,
    http: reqwest::Client,
}

/// One answer: status, the sync-token header and the JSON body.
#[derive(Debug)]
struct Answer {
    status: StatusCode,
    sync_token: Option<String>,
    body: Value,
}

impl Rig {
    fn start() -> Rig {
        let redis = RedisServer::start();
        let gateway = Gateway::start(&redis.url());
        Rig::with(redis, gateway)
    }

    fn with(redis: RedisServer, gateway: Gateway) -> Rig {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .expect("HTTP client");
        Rig {
            redis,
            gateway,
            http,
        }
    }

    fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.gateway.url()))
            .bearer_auth(self.gateway.token())
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Answer {
        let response = request.send().await.expect("gateway answers");
        let status = response.status();
        let sync_token = response
            .headers()
            .get("upstash-sync-token")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let text = response.text().await.expect("body");
        let body = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{status}: body is not JSON ({e}): {text:?}"));
        Answer {
            status,
            sync_token,
            body,
        }
    }

    /// `POST /` with a JSON command.
    async fn cmd(&self, command: Value) -> Answer {
        self.send(self.request(Method::POST, "/").json(&command))
            .await
    }

    /// `POST /` with `Upstash-Encoding: base64`.
    async fn cmd64(&self, command: Value) -> Answer {
        self.send(
            self.request(Method::POST, "/")
                .header("Upstash-Encoding", "base64")
                .json(&command),
        )
        .await
    }

    /// The `result` of a command that must succeed.
    async fn ok(&self, command: Value) -> Value {
        let answer = self.cmd(command.clone()).await;
        assert_eq!(answer.status, StatusCode::OK, "{command}: {answer:?}");
        answer.body["result"].clone()
    }
}

fn unbase64(value: &Value) -> Vec<u8> {
    BASE64
        .decode(value.as_str().expect("a base64 string"))
        .expect("valid base64")
}

#[tokio::test]
async fn json_body_form_and_reply_types() {
    let rig = Rig::start();
    assert_eq!(rig.ok(json!(["SET", "k", "v"])).await, json!("OK"));
    assert_eq!(rig.ok(json!(["GET", "k"])).await, json!("v"));
    assert_eq!(rig.ok(json!(["GET", "missing"])).await, Value::Null);
    assert_eq!(rig.ok(json!(["INCRBY", "n", 41])).await, json!(41));
    assert_eq!(rig.ok(json!(["INCRBYFLOAT", "f", 1.5])).await, json!("1.5"));
    rig.ok(json!(["RPUSH", "l", "a", "b"])).await;
    assert_eq!(
        rig.ok(json!(["MGET", "k", "missing", "n"])).await,
        json!(["v", null, "41"])
    );
    assert_eq!(
        rig.ok(json!(["EVAL", "return {1, 'x', {2, false}}", 0]))
            .await,
        json!([1, "x", [2, null]])
    );
    assert_eq!(rig.ok(json!(["PING"])).await, json!("PONG"));
}

#[tokio::test]
async fn path_form_decodes_segments_and_appends_body_and_query() {
    let rig = Rig::start();
    // Key "a/b c", value "😀" — percent-encoded segments.
    let answer = rig
        .send(rig.request(Method::GET, "/set/a%2Fb%20c/%F0%9F%98%80"))
        .await;
    assert_eq!(answer.body, json!({"result": "OK"}));
    assert_eq!(rig.ok(json!(["GET", "a/b c"])).await, json!("😀"));

    // Raw binary body as the value, query parameters after it.
    let bytes: Vec<u8> = (0..=255u8).collect();
    let answer = rig
        .send(
            rig.request(Method::POST, "/set/bin?EX=100")
                .body(bytes.clone()),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let ttl = rig.ok(json!(["TTL", "bin"])).await.as_i64().unwrap();
    assert!((1..=100).contains(&ttl), "{ttl}");
    let answer = rig.cmd64(json!(["GET", "bin"])).await;
    assert_eq!(unbase64(&answer.body["result"]), bytes);

    let answer = rig
        .send(rig.request(Method::PUT, "/hset/h/f").body("put"))
        .await;
    assert_eq!(answer.body, json!({"result": 1}));
    assert_eq!(rig.ok(json!(["HGET", "h", "f"])).await, json!("put"));
}

#[tokio::test]
async fn auth_is_required_in_both_styles() {
    let rig = Rig::start();
    let url = rig.gateway.url();
    let token = rig.gateway.token();
    let cases = [
        (
            rig.http.get(format!("{url}/ping")),
            StatusCode::UNAUTHORIZED,
        ),
        (
            rig.http.get(format!("{url}/ping")).bearer_auth("wrong"),
            StatusCode::UNAUTHORIZED,
        ),
        (
            rig.http.get(format!("{url}/ping?_token=wrong")),
            StatusCode::UNAUTHORIZED,
        ),
        (
            rig.http
                .post(format!("{url}/pipeline"))
                .body("[[\"PING\"]]"),
            StatusCode::UNAUTHORIZED,
        ),
        (
            rig.http.get(format!("{url}/ping?_token={token}")),
            StatusCode::OK,
        ),
        (
            rig.http.get(format!("{url}/ping")).bearer_auth(token),
            StatusCode::OK,
        ),
    ];
    for (request, expected) in cases {
        let answer = rig.send(request).await;
        assert_eq!(answer.status, expected, "{answer:?}");
        if expected == StatusCode::UNAUTHORIZED {
            assert_eq!(answer.body, json!({"error": "Unauthorized"}));
        } else {
            assert_eq!(answer.body, json!({"result": "PONG"}));
        }
    }
}

#[tokio::test]
async fn every_error_class_is_json_with_its_status() {
    let redis = RedisServer::start();
    let gateway = Gateway::builder(&redis.url())
        .arg("--max-body-bytes")
        .arg("4096")
        .start();
    let rig = Rig::with(redis, gateway);

    let answer = rig.send(rig.request(Method::POST, "/pipeline/extra")).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND, "{answer:?}");
    assert_eq!(answer.body, json!({"error": "Not Found"}));

    for (method, path) in [(Method::DELETE, "/get/k"), (Method::GET, "/pipeline")] {
        let answer = rig.send(rig.request(method, path)).await;
        assert_eq!(answer.status, StatusCode::METHOD_NOT_ALLOWED, "{answer:?}");
        assert_eq!(answer.body, json!({"error": "Method Not Allowed"}));
    }

    let big = json!(["SET", "k", "x".repeat(5000)]);
    let answer = rig.cmd(big).await;
    assert_eq!(answer.status, StatusCode::PAYLOAD_TOO_LARGE, "{answer:?}");
    assert!(answer.body["error"].as_str().unwrap().contains("4096"));

    let answer = rig
        .send(rig.request(Method::POST, "/").body("[\"GET\", \"k\""))
        .await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert!(answer.body["error"]
        .as_str()
        .unwrap()
        .starts_with("ERR the body is not valid JSON"));

    // Redis's own error text, with 400.
    let answer = rig.cmd(json!(["GET"])).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        answer.body,
        json!({"error": "ERR wrong number of arguments for 'get' command"})
    );
    rig.ok(json!(["RPUSH", "list", "a"])).await;
    let answer = rig.cmd(json!(["GET", "list"])).await;
    assert_eq!(
        answer.body,
        json!({"error": "WRONGTYPE Operation against a key holding the wrong kind of value"})
    );

    // A command that would break the shared connection is refused.
    let answer = rig.cmd(json!(["SUBSCRIBE", "c"])).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert!(answer.body["error"]
        .as_str()
        .unwrap()
        .contains("not supported"));
    // ...and the connection still works for everyone.
    assert_eq!(rig.ok(json!(["PING"])).await, json!("PONG"));
}

#[tokio::test]
async fn base64_mode_is_binary_safe_and_leaves_ok() {
    let rig = Rig::start();
    let emoji = "naïve 😀 — ✓";
    assert_eq!(
        rig.cmd64(json!(["SET", "e", emoji])).await.body,
        json!({"result": "OK"})
    );
    let answer = rig.cmd64(json!(["GET", "e"])).await;
    assert_eq!(unbase64(&answer.body["result"]), emoji.as_bytes());
    // Plain mode returns the same text as a JSON string.
    assert_eq!(rig.ok(json!(["GET", "e"])).await, json!(emoji));

    // Bytes that are not UTF-8 (set through the raw body).
    let binary = vec![0xff, 0xfe, 0x00, 0x80, b'x'];
    rig.send(rig.request(Method::POST, "/set/b").body(binary.clone()))
        .await;
    let answer = rig.cmd64(json!(["GET", "b"])).await;
    assert_eq!(unbase64(&answer.body["result"]), binary);

    // Numbers and nil untouched, nested strings encoded, PONG encoded.
    rig.ok(json!(["SET", "n", "7"])).await;
    let answer = rig.cmd64(json!(["MGET", "e", "nope", "b"])).await;
    let items = answer.body["result"].as_array().unwrap().clone();
    assert_eq!(unbase64(&items[0]), emoji.as_bytes());
    assert_eq!(items[1], Value::Null);
    assert_eq!(unbase64(&items[2]), binary);
    assert_eq!(
        rig.cmd64(json!(["INCR", "n"])).await.body,
        json!({"result": 8})
    );
    assert_eq!(
        unbase64(&rig.cmd64(json!(["PING"])).await.body["result"]),
        b"PONG"
    );
}

#[tokio::test]
async fn pipeline_keeps_order_and_errors_in_place() {
    let rig = Rig::start();
    let answer = rig
        .send(rig.request(Method::POST, "/pipeline").json(&json!([
            ["SET", "p", "1"],
            ["INCR", "p"],
            ["LPUSH", "p", "x"],
            ["NOSUCHCOMMAND"],
            ["INCR", "p"],
            ["GET", "p"],
        ])))
        .await;
    assert_eq!(answer.status, StatusCode::OK);
    let items = answer.body.as_array().unwrap();
    assert_eq!(items.len(), 6);
    assert_eq!(items[0], json!({"result": "OK"}));
    assert_eq!(items[1], json!({"result": 2}));
    assert!(items[2]["error"].as_str().unwrap().starts_with("WRONGTYPE"));
    assert!(items[3]["error"]
        .as_str()
        .unwrap()
        .starts_with("ERR unknown command"));
    assert_eq!(items[4], json!({"result": 3}));
    assert_eq!(items[5], json!({"result": "3"}));
    assert!(answer.sync_token.is_some());
}

#[tokio::test]
async fn multi_exec_runs_atomically_or_not_at_all() {
    let rig = Rig::start();
    let answer = rig
        .send(rig.request(Method::POST, "/multi-exec").json(&json!([
            ["SET", "t", "1"],
            ["INCR", "t"],
            ["LPUSH", "t", "x"],
            ["GET", "t"],
        ])))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let items = answer.body.as_array().unwrap();
    assert_eq!(items[0], json!({"result": "OK"}));
    assert_eq!(items[1], json!({"result": 2}));
    // A runtime error stays with its command; the rest ran.
    assert!(items[2]["error"].as_str().unwrap().starts_with("WRONGTYPE"));
    assert_eq!(items[3], json!({"result": "2"}));

    // A command Redis cannot queue discards the whole transaction.
    let answer = rig
        .send(
            rig.request(Method::POST, "/multi-exec")
                .json(&json!([["SET", "t", "changed"], ["GET"],])),
        )
        .await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{answer:?}");
    assert_eq!(
        answer.body,
        json!({"error": "EXECABORT Transaction discarded because of previous errors."})
    );
    assert_eq!(rig.ok(json!(["GET", "t"])).await, json!("2"));
}

#[tokio::test]
async fn scripts_evalsha_noscript_and_eval() {
    let rig = Rig::start();
    let script = "return redis.call('INCRBY', KEYS[1], ARGV[1])";
    let sha = rig.ok(json!(["SCRIPT", "LOAD", script])).await;
    let sha = sha.as_str().unwrap().to_string();
    assert_eq!(rig.ok(json!(["EVALSHA", sha, 1, "c", 5])).await, json!(5));
    rig.ok(json!(["SCRIPT", "FLUSH"])).await;
    let answer = rig.cmd(json!(["EVALSHA", sha, 1, "c", 5])).await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        answer.body,
        json!({"error": "NOSCRIPT No matching script. Please use EVAL."})
    );
    assert_eq!(rig.ok(json!(["EVAL", script, 1, "c", 5])).await, json!(10));
    let answer = rig
        .cmd(json!(["EVAL", "return redis.error_reply('BOOM x')", 0]))
        .await;
    assert_eq!(answer.body, json!({"error": "BOOM x"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_share_one_connection() {
    let rig = Rig::start();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..64 {
        let request = rig
            .request(Method::POST, "/")
            .json(&json!(["INCR", "hits"]));
        tasks.spawn(async move { request.send().await.map(|r| r.status()) });
    }
    while let Some(done) = tasks.join_next().await {
        assert_eq!(done.unwrap().unwrap(), StatusCode::OK);
    }
    assert_eq!(rig.ok(json!(["GET", "hits"])).await, json!("64"));
}

/// `--redis-timeout-ms` is the bound on a call to Redis, both ways: a Redis
/// held still for 900 ms (a long script, a fork, a failover) is waited for
/// under a 2 s bound, and one held past the bound is a 504 at the bound.
/// Before, the Redis client's own 500 ms response timeout cut every call
/// short whatever the flag said.
#[tokio::test]
async fn redis_timeout_ms_is_the_bound_on_a_slow_redis() {
    let redis = RedisServer::start();
    let gateway = Gateway::builder(&redis.url())
        .arg("--redis-timeout-ms")
        .arg("2000")
        .start();
    let rig = Rig::with(redis, gateway);
    assert_eq!(rig.ok(json!(["SET", "k", "v"])).await, json!("OK"));
    let pause = |ms: u64| {
        let reply = rig
            .redis
            .raw_command(&format!("CLIENT PAUSE {ms} ALL"))
            .expect("CLIENT PAUSE");
        assert!(reply.starts_with("+OK"), "{reply:?}");
    };

    pause(900);
    let started = Instant::now();
    let answer = rig.cmd(json!(["GET", "k"])).await;
    assert_eq!(
        answer.status,
        StatusCode::OK,
        "{answer:?}\n{}",
        rig.gateway.log()
    );
    assert_eq!(answer.body, json!({"result": "v"}));
    assert!(
        started.elapsed() >= Duration::from_millis(500),
        "the call waited for the pause ({:?})",
        started.elapsed()
    );

    pause(3_000);
    let started = Instant::now();
    let answer = rig.cmd(json!(["GET", "k"])).await;
    let took = started.elapsed();
    assert_eq!(answer.status, StatusCode::GATEWAY_TIMEOUT, "{answer:?}");
    assert!(
        (Duration::from_millis(1_900)..Duration::from_millis(2_900)).contains(&took),
        "answered at the bound, not before it nor after the pause: {took:?}"
    );
    // Let the pause end before Redis is stopped.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
}

#[tokio::test]
async fn recovers_when_redis_restarts_on_the_same_port() {
    let mut rig = Rig::start();
    assert_eq!(rig.ok(json!(["SET", "k", "before"])).await, json!("OK"));

    rig.redis.stop();
    let started = Instant::now();
    let answer = rig.cmd(json!(["GET", "k"])).await;
    assert!(answer.status.is_server_error(), "{answer:?}");
    assert!(answer.body["error"].as_str().is_some(), "{answer:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "a down Redis took {:?} to report",
        started.elapsed()
    );

    rig.redis.restart();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let answer = rig.cmd(json!(["PING"])).await;
        if answer.status == StatusCode::OK {
            assert_eq!(answer.body, json!({"result": "PONG"}));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "gateway did not recover: {answer:?}\n{}",
            rig.gateway.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A fresh server (no persistence): the old key is gone, writes work.
    assert_eq!(rig.ok(json!(["GET", "k"])).await, Value::Null);
    assert_eq!(rig.ok(json!(["SET", "k", "after"])).await, json!("OK"));
}

#[tokio::test]
async fn sigterm_shuts_down_gracefully() {
    let mut rig = Rig::start();
    rig.ok(json!(["PING"])).await;
    assert_eq!(rig.gateway.terminate(Duration::from_secs(10)), Some(0));
    assert!(
        rig.gateway.log().contains("stopped"),
        "{}",
        rig.gateway.log()
    );
}
