//! The edge worker end to end: real redis-server, the redis-rest gateway,
//! the built wasm under the `workerd` binary (the edge stack) and a test origin.

use std::time::{Duration, Instant};

use queuegate_edge::identity;
use queuegate_shared::Settings;
use queuegate_system_tests::edge::{
    EdgeStack, Visitor, IDENTITY_SECRET, JWT_SECRET, ORIGIN_SECRET,
};
use queuegate_system_tests::{fast_settings, grants, user};
use queuegate_testkit::{since_epoch, RedisServer};

/// Settings for the tests about the line: with idle passthrough on, an idle
/// room admits its first visitors at once (drop_day/passthrough.rs covers that).
fn line(settings: Settings) -> Settings {
    Settings {
        idle_passthrough: false,
        ..settings
    }
}

async fn eventually_state(v: &mut Visitor, state: &str) -> serde_json::Value {
    for _ in 0..100 {
        let r = v.position().await;
        if r.state() == state {
            return r.json;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("visitor never reached {state}: {:?}", v.position().await);
}

fn token_of(reply_json: &serde_json::Value) -> String {
    reply_json["token"]
        .as_str()
        .unwrap_or_else(|| panic!("an admitted reply has a token: {reply_json}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enter_refresh_position_and_admission() {
    let stack =
        EdgeStack::start(line(Settings::default()), "anonymous", RedisServer::start()).await;
    let mut health = stack.visitor();
    let h = health.send("GET", "/queue/health", None, None).await;
    assert_eq!(
        (h.status, h.json.clone()),
        (200, serde_json::json!({"redis": "ok"}))
    );

    let (mut ann, mut bob) = (stack.visitor(), stack.visitor());
    let a = ann.enter().await;
    assert_eq!(a.status, 200, "{:?}", a.json);
    let cookie = a
        .set_cookies
        .iter()
        .find(|c| c.starts_with("qg_visitor="))
        .expect("identity cookie");
    for attr in ["HttpOnly", "SameSite=Lax", "Secure", "Path=/"] {
        assert!(cookie.contains(attr), "{cookie} lacks {attr}");
    }
    assert_eq!(a.json["state"], "waiting");
    assert_eq!(a.json["queue"], "main");
    assert_eq!(a.json["position"], 1);
    let mut keys: Vec<&String> = a.json.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        ["etaSeconds", "position", "queue", "retryAfterMs", "state"]
    );
    let retry_ms = a.json["retryAfterMs"].as_u64().unwrap();
    assert_eq!(a.retry_after, Some(retry_ms.div_ceil(1000)));

    assert_eq!(bob.enter().await.json["position"], 2);
    // A refresh keeps the place and mints no new identity (only the place
    // cookie is signed again, with the time of this Redis request).
    let again = ann.enter().await;
    assert_eq!(again.json["position"], 1);
    assert!(
        again.set_cookies.iter().all(|c| c.starts_with("qg_place=")),
        "{:?}",
        again.set_cookies
    );
    let p = bob.position().await;
    assert_eq!(
        (p.status, p.state(), p.json["position"].as_u64()),
        (200, "waiting", Some(2))
    );
    assert!(p.retry_after.is_some());

    // The scheduler's admit step lets Ann in.
    stack.admit(1, 0).await;
    let p = ann.position().await;
    assert_eq!(p.state(), "admitted", "{:?}", p.json);
    assert_eq!(p.json["token"].as_str().map(str::len), Some(32));
    assert!(p.json["activateAt"].as_u64().unwrap() <= p.json["expiresAt"].as_u64().unwrap());
    assert!(
        p.set_cookies.iter().any(|c| c.starts_with("qg_token=")),
        "token cookie"
    );
    assert_eq!(bob.position().await.json["position"], 1, "Bob moved up");

    // Queue selection and bad input.
    let other = stack
        .visitor()
        .send("POST", "/queue/enter?queue=other", None, None)
        .await;
    assert_eq!(
        (other.status, other.json["queue"].as_str()),
        (200, Some("other"))
    );
    let unknown = stack
        .visitor()
        .send("POST", "/queue/enter?queue=nope", None, None)
        .await;
    assert_eq!((unknown.status, unknown.error()), (404, "unknown_queue"));
    let invalid = stack
        .visitor()
        .send("POST", "/queue/enter?queue=Bad%20Id", None, None)
        .await;
    assert_eq!((invalid.status, invalid.error()), (400, "invalid_queue"));
    let anonymous = stack.visitor().position().await;
    assert_eq!(
        (anonymous.status, anonymous.error()),
        (401, "identity_required")
    );
    assert!(anonymous.json["message"].as_str().is_some());
    let wrong_method = stack
        .visitor()
        .send("GET", "/queue/enter", None, None)
        .await;
    assert_eq!(
        (wrong_method.status, wrong_method.error()),
        (405, "method_not_allowed")
    );
    assert_eq!(wrong_method.allow.as_deref(), Some("POST"));
    // A method workers-rs does not know must not be taken for GET.
    let unknown_method = stack
        .visitor()
        .send("QUERY", "/queue/health", None, None)
        .await;
    assert_eq!(
        (unknown_method.status, unknown_method.allow.as_deref()),
        (405, Some("GET, HEAD"))
    );
    let missing = stack
        .visitor()
        .send("GET", "/queue/nothing", None, None)
        .await;
    assert_eq!((missing.status, missing.error()), (404, "not_found"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gate_spends_each_token_once_and_signs_what_it_forwards() {
    let stack = EdgeStack::start(Settings::default(), "anonymous", RedisServer::start()).await;
    // Someone is in line already, so Ann and Bob line up behind them (idle
    // passthrough stays on).
    stack.queue.enter(&user(0)).await;
    let (mut ann, mut bob) = (stack.visitor(), stack.visitor());
    assert_eq!(ann.enter().await.state(), "waiting");
    assert_eq!(bob.enter().await.state(), "waiting");

    // Ann's token activates in 5 s; Bob's at once.
    stack.queue.set_lock("test").await;
    let mut g = grants(3, 0);
    g[1].jitter_ms = 5_000;
    stack.queue.admit("test", 3, &g).await;
    let ann_token = token_of(&ann.position().await.json);
    let bob_token = token_of(&bob.position().await.json);

    // Without a token, while someone waits: join the queue; nothing changes.
    stack.queue.enter(&user(1)).await;
    let before = stack.snapshot().await;
    // Bob holds a token: he is told to send it; a newcomer to join.
    for (mut v, told) in [(bob.clone(), "X-Entry-Token"), (stack.visitor(), "join")] {
        let none = v.order(None).await;
        assert_eq!((none.status, none.error()), (403, "queue_required"));
        assert_eq!(none.json["queueUrl"], "/queue?queue=main");
        let message = none.json["message"].as_str().unwrap_or_default();
        assert!(message.contains(told), "{message}");
    }
    assert_eq!(stack.snapshot().await, before, "a token-less request wrote");
    let wrong = bob.order(Some(&"0".repeat(32))).await;
    assert_eq!((wrong.status, wrong.error()), (403, "token_invalid"));
    let garbage = bob.order(Some("not-a-token")).await;
    assert_eq!(garbage.status, 403);
    let someone_elses = bob.order(Some(&ann_token)).await;
    assert_eq!(someone_elses.status, 403, "another user's token");
    let early = ann.order(Some(&ann_token)).await;
    assert_eq!((early.status, early.error()), (429, "not_yet_active"));
    assert!(
        matches!(early.retry_after, Some(1..=5)),
        "{:?}",
        early.retry_after
    );
    assert_eq!(
        token_of(&ann.position().await.json),
        ann_token,
        "the early token survives"
    );
    assert!(stack.origin.hits().is_empty(), "nothing reached the origin");

    let ok = bob.order(Some(&bob_token)).await;
    assert_eq!(ok.status, 200, "{:?}", ok.json);
    assert_eq!(
        ok.json["origin"], true,
        "the origin's own reply passes through"
    );
    let hits = stack.origin.hits();
    assert_eq!(hits.len(), 1);
    let hit = &hits[0];
    assert_eq!(
        (hit.method.as_str(), hit.path.as_str()),
        ("POST", "/orders")
    );
    assert_eq!(hit.body, br#"{"item":"ticket"}"#);
    let user = bob.id().unwrap();
    assert_eq!(hit.header("x-queuegate-user"), Some(user.as_str()));
    assert_eq!(hit.header("x-queuegate-queue"), Some("main"));
    assert!(
        hit.header("x-entry-token").is_none(),
        "the token is not forwarded"
    );
    let time: u64 = hit.header("x-queuegate-time").unwrap().parse().unwrap();
    let expected = queuegate_edge::signing::sign(
        ORIGIN_SECRET.as_bytes(),
        "main",
        &user,
        time,
        "POST",
        "/orders",
    );
    assert_eq!(hit.header("x-queuegate-signature"), Some(expected.as_str()));

    eventually_state(&mut bob, "ordered").await;
    let replay = bob.order(Some(&bob_token)).await;
    assert_eq!((replay.status, replay.error()), (409, "token_used"));

    // 100 parallel replays of one fresh token reach the origin once.
    let mut carol = stack.visitor();
    carol.enter().await;
    stack.admit(2, 0).await; // user 1, then Carol
    let carol_token = token_of(&carol.position().await.json);
    let before = stack.origin.hits().len();
    let tasks: Vec<_> = (0..100)
        .map(|_| {
            let (mut v, t) = (carol.clone(), carol_token.clone());
            tokio::spawn(async move { v.order(Some(&t)).await.status })
        })
        .collect();
    let mut statuses = Vec::new();
    for t in tasks {
        statuses.push(t.await.unwrap());
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        1,
        "{statuses:?}"
    );
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 409),
        "{statuses:?}"
    );
    assert_eq!(stack.origin.hits().len() - before, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origin_failure_restores_the_token_and_states_are_told_apart() {
    // Abandonment is not under test: a grace long enough that a loaded
    // machine's pause between enter and the tick drops nobody; a token
    // TTL that a pause between the tick and the poll does not outlast.
    let settings = Settings {
        abandon_after_ms: 10_000,
        token_ttl_ms: 2_000,
        status_ttl_ms: 10_000,
        ..line(fast_settings())
    };
    let stack = EdgeStack::start(settings, "anonymous", RedisServer::start()).await;
    let (mut ann, mut idle) = (stack.visitor(), stack.visitor());
    ann.enter().await;
    idle.enter().await;
    stack.admit(2, 0).await;
    let token = token_of(&ann.position().await.json);

    stack.origin.set_status(503);
    let failed = ann.order(Some(&token)).await;
    assert_eq!(failed.status, 503, "the origin's failure is passed on");
    let restored = eventually_state(&mut ann, "admitted").await;
    assert_eq!(token_of(&restored), token, "the same token is restored");
    stack.origin.set_status(201);
    let retried = ann.order(Some(&token)).await;
    assert_eq!(retried.status, 201);
    eventually_state(&mut ann, "ordered").await;

    // Idle never used the token: after its TTL and a sweep it is expired.
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    stack.admit(0, 0).await;
    assert_eq!(idle.position().await.state(), "expired");
    assert_eq!(ann.position().await.state(), "ordered");
    // A valid identity that never entered is not in the queue.
    let (_, value) = identity::mint_visitor(IDENTITY_SECRET.as_bytes(), [3; 16]);
    let mut stranger = stack.visitor();
    stranger.cookies.insert("qg_visitor".into(), value);
    let s = stranger.position().await;
    assert_eq!((s.status, s.state()), (200, "not_in_queue"));
    // An expired visitor may enter again, at the back.
    assert_eq!(idle.enter().await.state(), "waiting");
}

/// An origin that does not answer in time: 504 `origin_timeout` at
/// `ORIGIN_TIMEOUT_MS`, not whenever the origin gets round to it, and the
/// token comes back for a retry like after any failed order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_origin_times_out_and_the_token_comes_back() {
    let settings = Settings {
        entry_budget_per_minute: 0,
        ..line(fast_settings())
    };
    let vars = [("ENTRY_CHALLENGE", "off"), ("ORIGIN_TIMEOUT_MS", "300")];
    let stack = EdgeStack::start_with(settings, "anonymous", RedisServer::start(), &vars).await;
    let mut ann = stack.visitor();
    ann.enter().await;
    stack.admit(1, 0).await;
    let token = token_of(&ann.position().await.json);

    stack.origin.set_delay(Duration::from_secs(6));
    let sent = Instant::now();
    let slow = ann.order(Some(&token)).await;
    let waited = sent.elapsed();
    assert_eq!((slow.status, slow.error()), (504, "origin_timeout"));
    assert!(
        waited < Duration::from_secs(4),
        "answered at the timeout, not with the origin after 6 s: {waited:?}"
    );
    assert_eq!(
        stack.origin.hits().len(),
        1,
        "the order did reach the origin"
    );
    let restored = eventually_state(&mut ann, "admitted").await;
    assert_eq!(token_of(&restored), token, "the same token is restored");

    stack.origin.set_delay(Duration::ZERO);
    let retried = ann.order(Some(&token)).await;
    assert_eq!(retried.status, 200);
    eventually_state(&mut ann, "ordered").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_identities_and_foreign_tokens_change_nothing() {
    let stack = EdgeStack::start(Settings::default(), "anonymous", RedisServer::start()).await;
    let mut ann = stack.visitor();
    ann.enter().await;
    stack.admit(1, 0).await;
    let token = token_of(&ann.position().await.json);
    let before = stack.snapshot().await;

    // A cookie with another id under Ann's signature; a made-up cookie.
    let sig = ann.cookies["qg_visitor"]
        .split_once('.')
        .unwrap()
        .1
        .to_string();
    let (other, _) = identity::mint_visitor(IDENTITY_SECRET.as_bytes(), [7; 16]);
    for forged in [format!("{}.{sig}", other.as_str()), "abc.def".to_string()] {
        let mut mallory = stack.visitor();
        mallory.cookies.insert("qg_visitor".into(), forged);
        for reply in [
            mallory.enter().await,
            mallory.position().await,
            mallory.order(Some(&token)).await,
        ] {
            assert_eq!(
                (reply.status, reply.error()),
                (401, "identity_invalid"),
                "{:?}",
                reply.json
            );
        }
    }
    // A real visitor presenting Ann's token.
    let mut eve = stack.visitor();
    let (_, eve_cookie) = identity::mint_visitor(IDENTITY_SECRET.as_bytes(), [9; 16]);
    eve.cookies.insert("qg_visitor".into(), eve_cookie);
    assert_eq!(eve.order(Some(&token)).await.status, 403);
    assert_eq!(stack.snapshot().await, before, "Redis is unchanged");
    assert!(stack.origin.hits().is_empty());
    // Ann's token still works.
    assert_eq!(ann.order(Some(&token)).await.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jwt_mode_takes_the_user_from_sub_and_refuses_tampering() {
    let stack = EdgeStack::start(line(Settings::default()), "jwt", RedisServer::start()).await;
    let now = since_epoch().as_secs_f64();
    let jwt = identity::sign_jwt(
        JWT_SECRET.as_bytes(),
        &serde_json::json!({"sub": "shopper-1", "exp": now + 600.0}),
    );
    let mut shopper = stack.visitor();
    shopper.bearer = Some(jwt.clone());
    let r = shopper.enter().await;
    assert_eq!((r.status, r.state()), (200, "waiting"), "{:?}", r.json);
    assert!(
        !r.set_cookies.iter().any(|c| c.starts_with("qg_visitor=")),
        "no visitor cookie in jwt mode: {:?}",
        r.set_cookies
    );
    // Only the place, signed for the JWT's user.
    assert_eq!(r.set_cookies.len(), 1, "{:?}", r.set_cookies);
    assert!(
        r.set_cookies[0].starts_with("qg_place=main."),
        "{:?}",
        r.set_cookies
    );
    let mut conn = stack.queue.conn.clone();
    let rank: Option<u64> = redis::cmd("ZRANK")
        .arg(stack.queue.keys.waiting())
        .arg("shopper-1")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(rank, Some(0), "the user id is the JWT's sub");

    // The JWT also works from the configured cookie.
    let mut by_cookie = stack.visitor();
    by_cookie.cookies.insert("shop_session".into(), jwt.clone());
    assert_eq!(by_cookie.position().await.json["position"], 1);

    let before = stack.snapshot().await;
    let mut parts: Vec<String> = jwt.split('.').map(String::from).collect();
    use base64::Engine;
    parts[1] = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(serde_json::json!({"sub": "admin", "exp": now + 600.0}).to_string());
    let expired = identity::sign_jwt(
        JWT_SECRET.as_bytes(),
        &serde_json::json!({"sub": "late", "exp": now - 600.0}),
    );
    let wrong_key = identity::sign_jwt(
        b"another-key-another-key-another-key!",
        &serde_json::json!({"sub": "x", "exp": now + 600.0}),
    );
    for bad in [parts.join("."), expired, wrong_key, "garbage".to_string()] {
        let mut mallory = stack.visitor();
        mallory.bearer = Some(bad);
        let r = mallory.enter().await;
        assert_eq!(
            (r.status, r.error()),
            (401, "identity_invalid"),
            "{:?}",
            r.json
        );
    }
    let r = stack.visitor().enter().await;
    assert_eq!((r.status, r.error()), (401, "identity_required"));
    assert_eq!(stack.snapshot().await, before, "Redis is unchanged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_outage_fails_closed_and_visitors_carry_on_after() {
    let redis = RedisServer::builder().aof(true).start();
    let mut stack = EdgeStack::start(line(Settings::default()), "anonymous", redis).await;
    let (mut ann, mut bob) = (stack.visitor(), stack.visitor());
    ann.enter().await;
    bob.enter().await;

    stack.redis.stop();
    for reply in [
        bob.position().await,
        stack.visitor().enter().await,
        ann.order(Some(&"a".repeat(32))).await,
    ] {
        assert_eq!(
            (reply.status, reply.error()),
            (503, "unavailable"),
            "{:?}",
            reply.json
        );
        assert_eq!(reply.retry_after, Some(5));
    }
    let health = stack
        .visitor()
        .send("GET", "/queue/health", None, None)
        .await;
    assert_eq!(
        (health.status, health.json["redis"].as_str()),
        (503, Some("unreachable"))
    );

    stack.redis.restart();
    let mut back = false;
    for _ in 0..100 {
        if bob.position().await.status == 200 {
            back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(back, "the edge recovers when Redis returns");
    assert_eq!(ann.position().await.json["position"], 1);
    assert_eq!(bob.position().await.json["position"], 2);
}

/// `calls` of `command` in `INFO commandstats` (0 when never called).
async fn command_calls(conn: &mut redis::aio::MultiplexedConnection, command: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .expect("INFO commandstats");
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:calls=")))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_lost_by_redis_are_sent_again_from_the_assets() {
    // The wasm carries the scripts' hashes only; their text is one of the
    // worker's static assets. After SCRIPT FLUSH (a Redis that restarted,
    // failed over or was flushed) every operation still works: NOSCRIPT,
    // then EVAL with the text read from the assets, which Redis hashes to
    // the pinned hash (later calls are EVALSHA again).
    let stack =
        EdgeStack::start(line(Settings::default()), "anonymous", RedisServer::start()).await;
    let mut conn = stack.queue.conn.clone();
    let mut ann = stack.visitor();
    assert_eq!(ann.enter().await.status, 200);
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut conn)
        .await
        .unwrap();
    let evals = command_calls(&mut conn, "eval").await;
    let mut bob = stack.visitor();
    let b = bob.enter().await;
    assert_eq!(
        (b.status, b.json["position"].as_u64()),
        (200, Some(2)),
        "{:?}",
        b.json
    );
    let p = ann.position().await;
    assert_eq!(
        (p.status, p.json["position"].as_u64()),
        (200, Some(1)),
        "{:?}",
        p.json
    );
    assert!(
        command_calls(&mut conn, "eval").await >= evals + 2,
        "enter and position each fell back to EVAL once"
    );
    // Redis now holds the scripts under their pinned hashes.
    let enter_sha = queuegate_shared::script::ENTER.sha1();
    let exists: Vec<u8> = redis::cmd("SCRIPT")
        .arg("EXISTS")
        .arg(enter_sha)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(exists, [1], "the asset's text hashes to the pinned hash");
    let evals = command_calls(&mut conn, "eval").await;
    assert_eq!(stack.visitor().enter().await.status, 200);
    assert_eq!(
        command_calls(&mut conn, "eval").await,
        evals,
        "EVALSHA again"
    );

    stack.admit(1, 0).await;
    let token = token_of(&eventually_state(&mut ann, "admitted").await);
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut conn)
        .await
        .unwrap();
    let order = ann.order(Some(&token)).await;
    assert_eq!(order.status, 200, "{:?}", order.json);
}
