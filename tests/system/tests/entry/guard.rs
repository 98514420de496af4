//! The entry guard end to end (redis-server → gateway → the wasm worker
//! under workerd): a new place costs a proof of work and a share of the
//! address's budget; forgeries, reuse and stale levels are refused with
//! nothing written; the difficulty counts the line, the pre-queue and a
//! running draw; Turnstile against a local stand-in of its documented
//! `siteverify`.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::Form;
use queuegate_edge::altcha::{self, Challenge};
use queuegate_shared::ops::Change;
use queuegate_shared::{QueueId, Settings};
use queuegate_system_tests::drop_day::{in_ms, open_now, schedule};
use queuegate_system_tests::edge::{EdgeStack, Visitor, ORIGIN_SECRET};
use queuegate_testkit::RedisServer;

/// The worker's vars of a guarded stack: its defaults.
const CHALLENGE_ON: &[(&str, &str)] = &[];

/// Guard on, at a difficulty a debug-built test solves in milliseconds.
fn guarded(budget: u64) -> Settings {
    Settings {
        entry_budget_per_minute: budget,
        entry_budget_burst: budget,
        challenge_max_number: 1_000,
        // Places are what these tests count: no one passes straight
        // through the idle room.
        idle_passthrough: false,
        ..Settings::default()
    }
}

async fn challenge(v: &mut Visitor, queue: &str) -> Challenge {
    let r = v
        .send(
            "GET",
            &format!("/queue/challenge?queue={queue}"),
            None,
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    serde_json::from_value(r.json).expect("ALTCHA challenge JSON")
}

/// A solution as the page's Web Worker would find it.
async fn solution(v: &mut Visitor, queue: &str) -> String {
    let c = challenge(v, queue).await;
    let n = altcha::solve(&c).expect("solvable");
    altcha::payload(&c, n)
}

async fn enter(
    v: &mut Visitor,
    ip: &str,
    altcha: Option<&str>,
) -> queuegate_system_tests::edge::Reply {
    let mut headers = vec![("cf-connecting-ip", ip)];
    if let Some(a) = altcha {
        headers.push(("x-altcha", a));
    }
    v.send_with("POST", "/queue/enter", None, None, &headers)
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cookieless_enters_without_a_solution_take_no_place() {
    let stack =
        EdgeStack::start_with(guarded(40), "anonymous", RedisServer::start(), CHALLENGE_ON).await;
    let before = stack.snapshot().await;
    let mut tasks = Vec::new();
    for chunk in 0..10 {
        let base = stack.visitor();
        tasks.push(tokio::spawn(async move {
            let mut statuses = Vec::new();
            for _ in 0..30 {
                let mut v = base.clone();
                let r = enter(&mut v, &format!("203.0.113.{chunk}"), None).await;
                statuses.push((r.status, r.error().to_string()));
            }
            statuses
        }));
    }
    let mut refused = 0;
    for t in tasks {
        for (status, error) in t.await.unwrap() {
            assert_eq!((status, error.as_str()), (403, "challenge_required"));
            refused += 1;
        }
    }
    assert_eq!(refused, 300);
    assert_eq!(stack.queue.zcard(&stack.queue.keys.waiting()).await, 0);
    assert_eq!(stack.queue.stat("refused_challenge").await, 300);
    let after = stack.snapshot().await;
    let changed: Vec<&String> = after
        .keys()
        .filter(|k| before.get(*k) != after.get(*k))
        .collect();
    assert_eq!(
        changed,
        [&stack.queue.keys.stats()],
        "only the counter moved"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_gets_its_budget_and_a_place_refreshes_for_free() {
    let stack =
        EdgeStack::start_with(guarded(5), "anonymous", RedisServer::start(), CHALLENGE_ON).await;
    let mut first = None;
    let mut statuses = Vec::new();
    for _ in 0..8 {
        let mut v = stack.visitor();
        let a = solution(&mut v, "main").await;
        let r = enter(&mut v, "203.0.113.7", Some(&a)).await;
        if r.status == 429 {
            assert_eq!(r.error(), "too_many_entries");
            let wait = r.retry_after.expect("Retry-After");
            assert!((1..=12).contains(&wait), "{wait}");
        }
        statuses.push(r.status);
        first.get_or_insert(v);
    }
    assert_eq!(statuses, [200, 200, 200, 200, 200, 429, 429, 429]);
    assert_eq!(stack.queue.stat("refused_budget").await, 3);

    // Another address has its own budget; IPv6 counts per /64.
    for ip in ["198.51.100.9", "2001:db8:1:2::1", "2001:db8:1:2::ffff"] {
        let mut v = stack.visitor();
        let a = solution(&mut v, "main").await;
        let r = enter(&mut v, ip, Some(&a)).await;
        assert_eq!(r.status, 200, "{ip}: {:?}", r.json);
    }

    // A visitor with a place re-enters without a solution, over budget, and
    // keeps the place.
    let mut ann = first.expect("a first visitor");
    for _ in 0..3 {
        let r = enter(&mut ann, "203.0.113.7", None).await;
        assert_eq!((r.status, r.state()), (200, "waiting"), "{:?}", r.json);
        assert_eq!(r.json["position"], 1);
    }
    assert_eq!(stack.queue.zcard(&stack.queue.keys.waiting()).await, 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn solutions_are_single_use_and_forgeries_change_nothing() {
    let stack =
        EdgeStack::start_with(guarded(40), "anonymous", RedisServer::start(), CHALLENGE_ON).await;
    let ip = "203.0.113.20";
    let mut v = stack.visitor();
    let good = solution(&mut v, "main").await;
    assert_eq!(enter(&mut v, ip, Some(&good)).await.status, 200);

    // The same solution for a second new visitor: refused, only counted.
    let mut w = stack.visitor();
    let before = stack.snapshot().await;
    let r = enter(&mut w, ip, Some(&good)).await;
    assert_eq!((r.status, r.error()), (409, "challenge_reused"));
    assert_eq!(stack.queue.stat("refused_reused").await, 1);

    let before = {
        let after = stack.snapshot().await;
        let moved: Vec<&String> = after
            .keys()
            .filter(|k| before.get(*k) != after.get(*k))
            .collect();
        assert_eq!(moved, [&stack.queue.keys.stats()]);
        after
    };

    // Forged, wrong, expired and other-queue solutions never reach Redis.
    let c = challenge(&mut w, "main").await;
    let n = altcha::solve(&c).unwrap();
    let mut forged = c.clone();
    forged.signature = "00".repeat(32);
    let secret =
        queuegate_edge::signing::derive_key(ORIGIN_SECRET.as_bytes(), "queuegate challenge v1");
    let main = QueueId::new("main").unwrap();
    let expired = altcha::create(
        &secret,
        &main,
        altcha::Issue {
            level: 0,
            max_number: 1_000,
            expires_at_ms: 1_000,
        },
        [1; 12],
        7,
    );
    let other = {
        let o = challenge(&mut w, "other").await;
        altcha::payload(&o, altcha::solve(&o).unwrap())
    };
    let cases = [
        (altcha::payload(&forged, n), "challenge_invalid"),
        (altcha::payload(&c, (n + 1) % 1_001), "challenge_invalid"),
        (altcha::payload(&expired, 7), "challenge_expired"),
        (other, "challenge_invalid"),
        ("bm90IGpzb24=".to_string(), "challenge_invalid"),
    ];
    for (payload, code) in cases {
        let r = enter(&mut w, ip, Some(&payload)).await;
        assert_eq!((r.status, r.error()), (403, code), "{:?}", r.json);
    }
    assert_eq!(stack.snapshot().await, before, "nothing was written");
    // The real solution of that challenge still works.
    let r = enter(&mut w, ip, Some(&altcha::payload(&c, n))).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
}

/// One form's fields, in order.
type FormFields = Vec<(String, String)>;

/// What the stand-in received, and how many of its answers were never
/// sent because the caller hung up first.
#[derive(Clone, Default)]
struct StandIn {
    calls: Arc<Mutex<Vec<FormFields>>>,
    hung_up: Arc<AtomicU32>,
}

/// Counts an answer dropped before it was sent (the server drops the
/// handler when its client closes the connection).
struct Pending(Option<Arc<AtomicU32>>);

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(n) = self.0.take() {
            n.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// A local stand-in of Turnstile's documented `siteverify`: the token
/// decides the answer (`pass`, `fail`, `slow` for a timeout).
async fn siteverify(
    State(s): State<StandIn>,
    Form(form): Form<FormFields>,
) -> axum::Json<serde_json::Value> {
    let token = form
        .iter()
        .find(|(k, _)| k == "response")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    s.calls.lock().expect("calls lock").push(form);
    match token.as_str() {
        "pass" => axum::Json(serde_json::json!({
            "success": true, "error-codes": [], "hostname": "127.0.0.1", "action": "enter"
        })),
        // A valid token solved on another site.
        "elsewhere" => axum::Json(serde_json::json!({
            "success": true, "error-codes": [], "hostname": "shop.evil.example", "action": "enter"
        })),
        "slow" => {
            let mut pending = Pending(Some(s.hung_up.clone()));
            tokio::time::sleep(SLOW).await;
            pending.0 = None;
            axum::Json(serde_json::json!({"success": true, "error-codes": []}))
        }
        _ => axum::Json(serde_json::json!({
            "success": false, "error-codes": ["invalid-input-response"]
        })),
    }
}

/// Starts the stand-in on a loopback port: its state, its siteverify URL
/// and the server's task (abort it at the end).
async fn start_stand_in() -> (
    StandIn,
    String,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let stand_in = StandIn::default();
    let app = axum::Router::new()
        .route("/siteverify", axum::routing::post(siteverify))
        .with_state(stand_in.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let url = format!(
        "http://{}/siteverify",
        listener.local_addr().expect("its address")
    );
    (
        stand_in,
        url,
        tokio::spawn(async move { axum::serve(listener, app).await }),
    )
}

/// How long the stand-in takes to answer `slow`: far past the edge's
/// deadline (500 ms).
const SLOW: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turnstile_against_a_local_siteverify() {
    let (stand_in, url, server) = start_stand_in().await;
    let vars = [
        ("ENTRY_CHALLENGE", "off"),
        ("TURNSTILE_SECRET_KEY", "stand-in-secret"),
        ("TURNSTILE_SITE_KEY", "stand-in-site"),
        ("TURNSTILE_VERIFY_URL", url.as_str()),
        ("TURNSTILE_TIMEOUT_MS", "500"),
    ];
    let stack = EdgeStack::start_with(guarded(40), "anonymous", RedisServer::start(), &vars).await;
    let ip = "203.0.113.30";
    let send = |token: Option<&'static str>| {
        let mut v = stack.visitor();
        async move {
            let mut h = vec![("cf-connecting-ip", ip)];
            if let Some(t) = token {
                h.push(("x-turnstile-token", t));
            }
            v.send_with("POST", "/queue/enter", None, None, &h).await
        }
    };
    let before = stack.snapshot().await;
    let r = send(None).await;
    assert_eq!((r.status, r.error()), (403, "turnstile_required"));
    let r = send(Some("fail")).await;
    assert_eq!((r.status, r.error()), (403, "turnstile_failed"));
    // Passed, but on another site: refused like a failed check.
    let r = send(Some("elsewhere")).await;
    assert_eq!((r.status, r.error()), (403, "turnstile_failed"));
    let asked = Instant::now();
    let r = send(Some("slow")).await;
    assert_eq!((r.status, r.error()), (503, "turnstile_unavailable"));
    assert_eq!(r.retry_after, Some(5));
    // The deadline aborts the subrequest itself: the stand-in sees its
    // caller hang up long before its answer was due.
    let deadline = asked + Duration::from_secs(4);
    while stand_in.hung_up.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        stand_in.hung_up.load(Ordering::SeqCst) == 1 && asked.elapsed() < SLOW,
        "the slow siteverify call was left running past the deadline"
    );
    let after = stack.snapshot().await;
    let moved: Vec<&String> = after
        .keys()
        .filter(|k| before.get(*k) != after.get(*k))
        .collect();
    assert_eq!(moved, [&stack.queue.keys.stats()], "refusals only count");
    let r = send(Some("pass")).await;
    assert_eq!((r.status, r.state()), (200, "waiting"), "{:?}", r.json);
    // siteverify hears the visitor's own address, not the budget's /64.
    let v6 = "2001:db8:7:1::42";
    let mut v = stack.visitor();
    let r = v
        .send_with(
            "POST",
            "/queue/enter",
            None,
            None,
            &[("cf-connecting-ip", v6), ("x-turnstile-token", "pass")],
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.json);

    let calls = stand_in.calls.lock().unwrap().clone();
    assert_eq!(
        calls.len(),
        5,
        "asked for fail, elsewhere, slow and pass twice"
    );
    for (i, form) in calls.iter().enumerate() {
        let get = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("secret"), Some("stand-in-secret"));
        assert_eq!(get("remoteip"), Some(if i == 4 { v6 } else { ip }));
        assert_eq!(get("idempotency_key").map(str::len), Some(36));
    }
    server.abort();
}

/// Idle passthrough asks what a place asks (issue #38): with Turnstile on,
/// 60 token-less orders from one /48 passed straight to the shop in an
/// idle room, with neither a proof of work nor Turnstile. Now each is sent
/// to the room (403 `queue_required` naming it; a person's navigation
/// gets 303 there) and none reaches the shop, and nothing is written in
/// Redis. A person who takes a place with Turnstile is admitted at once by
/// the idle room and orders with the token. The same holds with the proof
/// of work on (the worker's default for anonymous visitors).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_less_order_asks_what_a_place_asks() {
    let (_stand_in, url, server) = start_stand_in().await;
    let idle = Settings {
        idle_passthrough: true,
        ..guarded(40)
    };
    let turnstile = [
        ("ENTRY_CHALLENGE", "off"),
        ("TURNSTILE_SECRET_KEY", "stand-in-secret"),
        ("TURNSTILE_SITE_KEY", "stand-in-site"),
        ("TURNSTILE_VERIFY_URL", url.as_str()),
        ("TURNSTILE_TIMEOUT_MS", "2000"),
    ];
    let pow = [("ENTRY_CHALLENGE", "on")];
    for vars in [&turnstile[..], &pow[..]] {
        let stack =
            EdgeStack::start_with(idle.clone(), "anonymous", RedisServer::start(), vars).await;
        let before = stack.snapshot().await;
        for k in 0..60u32 {
            let ip = format!("2001:db8:38:{k:x}::1");
            let mut v = stack.visitor();
            let r = v
                .send_with(
                    "POST",
                    "/orders",
                    None,
                    Some(r#"{"item":"ticket"}"#),
                    &[("cf-connecting-ip", &ip)],
                )
                .await;
            assert_eq!(
                (r.status, r.error()),
                (403, "queue_required"),
                "{:?}",
                r.json
            );
            assert!(
                r.json["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("/queue?queue=main")),
                "{:?}",
                r.json
            );
        }
        // A person's order form posted to the route gets the room itself
        // (which keeps the form for Continue; README, *Protected routes*).
        let raw = queuegate_system_tests::edge::raw_request(
            &stack.worker.url(),
            "POST",
            "/orders",
            &Default::default(),
            &[
                ("cf-connecting-ip", "203.0.113.61"),
                ("accept", "text/html"),
                ("content-type", "application/x-www-form-urlencoded"),
                ("sec-fetch-mode", "navigate"),
                ("sec-fetch-dest", "document"),
                ("sec-fetch-site", "same-origin"),
            ],
        )
        .await;
        assert!(
            raw.body.contains("<h1 id=\"heading\">Waiting room</h1>"),
            "{} {}",
            raw.status,
            raw.body
        );
        assert!(stack.origin.hits().is_empty(), "no order reached the shop");
        assert_eq!(stack.snapshot().await, before, "nothing written in Redis");
        if vars.len() > 1 {
            // Turnstile: the person takes a place with the check, the
            // idle room admits at once, the token orders.
            let mut v = stack.visitor();
            let r = v
                .send_with(
                    "POST",
                    "/queue/enter",
                    None,
                    None,
                    &[
                        ("cf-connecting-ip", "203.0.113.60"),
                        ("x-turnstile-token", "pass"),
                    ],
                )
                .await;
            assert_eq!((r.status, r.state()), (200, "admitted"), "{:?}", r.json);
            let token = r.json["token"].as_str().expect("token").to_string();
            let r = v.order(Some(&token)).await;
            assert_eq!(r.status, 200, "{:?}", r.json);
            assert_eq!(stack.origin.hits().len(), 1);
        }
    }
    server.abort();
}

/// `GET /queue/challenge` cost a script per call, so a flood of fresh
/// clients asking for challenges (no identity, nothing spent) was a flood
/// of scripts. Each isolate now reads the terms at most once a second per
/// queue: 100 challenges in a burst cost at most a couple of scripts, and
/// every one still carries the level in force.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_challenge_requests_costs_about_one_script_a_second() {
    let stack = EdgeStack::start_with(
        guarded(40),
        "anonymous",
        RedisServer::start(),
        &[("ENTRY_CHALLENGE", "on")],
    )
    .await;
    // A first one warms the isolate (its Redis client, its scripts).
    challenge(&mut stack.visitor(), "main").await;
    let scripts = || async {
        let sent = stack.sent().await;
        ["EVALSHA", "EVAL"]
            .iter()
            .map(|c| sent.get(*c).copied().unwrap_or(0))
            .sum::<u64>()
    };
    let before = scripts().await;
    let started = Instant::now();
    for _ in 0..100 {
        let c = challenge(&mut stack.visitor(), "main").await;
        assert_eq!(level_of(&c).0, "0", "the level in force");
    }
    let secs = started.elapsed().as_secs_f64();
    let spent = scripts().await - before;
    eprintln!("100 challenges in {secs:.2} s: {spent} scripts");
    assert!(
        spent as f64 <= secs.ceil() + 1.0,
        "{spent} scripts for 100 challenges in {secs:.2} s"
    );
}

/// The ALTCHA level a challenge's salt carries, and its `maxnumber`.
fn level_of(c: &Challenge) -> (String, u64) {
    let level = c
        .salt
        .split('&')
        .find_map(|kv| kv.strip_prefix("level="))
        .unwrap_or("none")
        .to_string();
    (level, c.maxnumber)
}

async fn enter_at(
    v: &mut Visitor,
    queue: &str,
    ip: &str,
    altcha: &str,
) -> queuegate_system_tests::edge::Reply {
    let headers = [("cf-connecting-ip", ip), ("x-altcha", altcha)];
    v.send_with(
        "POST",
        &format!("/queue/enter?queue={queue}"),
        None,
        None,
        &headers,
    )
    .await
}

/// A place taken in `queue` through a fresh challenge.
async fn take_place(stack: &EdgeStack, queue: &str, ip: &str) -> String {
    let mut v = stack.visitor();
    let a = solution(&mut v, queue).await;
    let r = enter_at(&mut v, queue, ip, &a).await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    r.state().to_string()
}

/// A challenge fetched while the line was short is refused once the line
/// has grown past a level (403 `challenge_stale`, only the counter
/// written); a fresh one, harder and carrying the new level, takes the
/// place. The difficulty counts the pre-queue and a running draw: a crowd
/// gathering before the opening raises it before the opening.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_challenge_carries_its_level_and_a_stale_one_is_refused() {
    let settings = Settings {
        max_waiting: 8,
        challenge_crowd: 8,
        ..guarded(40)
    };
    let stack =
        EdgeStack::start_with(settings, "anonymous", RedisServer::start(), CHALLENGE_ON).await;
    let ip = "203.0.113.30";

    // Fetched and solved at level 0, while the line is empty.
    let mut late = stack.visitor();
    let early = challenge(&mut late, "main").await;
    assert_eq!(level_of(&early), ("0".to_string(), 1_000));
    let early = altcha::payload(&early, altcha::solve(&early).unwrap());

    // The line fills to half: level 1, twice the work.
    for _ in 0..4 {
        assert_eq!(take_place(&stack, "main", ip).await, "waiting");
    }
    let mut probe = stack.visitor();
    assert_eq!(
        level_of(&challenge(&mut probe, "main").await),
        ("1".to_string(), 2_000)
    );

    let before = stack.snapshot().await;
    let r = enter_at(&mut late, "main", ip, &early).await;
    assert_eq!(
        (r.status, r.error()),
        (403, "challenge_stale"),
        "{:?}",
        r.json
    );
    assert!(r.json["message"]
        .as_str()
        .unwrap()
        .contains("/queue/challenge"));
    assert_eq!(stack.queue.stat("refused_stale").await, 1);
    let after = stack.snapshot().await;
    let moved: Vec<&String> = after
        .keys()
        .filter(|k| before.get(*k) != after.get(*k))
        .collect();
    assert_eq!(moved, [&stack.queue.keys.stats()], "only the counter moved");

    // A fresh challenge (level 1) takes the place, behind the four.
    let fresh = solution(&mut late, "main").await;
    let r = enter_at(&mut late, "main", ip, &fresh).await;
    assert_eq!((r.status, r.state()), (200, "waiting"), "{:?}", r.json);
    assert_eq!(r.json["position"], 5);

    // Drop day on the other queue: the pre-queue counts before the opening.
    let other = queuegate_system_tests::TestQueue::open(
        &stack.redis.url(),
        "other",
        Settings {
            max_waiting: 8,
            challenge_crowd: 8,
            ..guarded(40)
        },
    )
    .await;
    schedule(&other, Change::Set(in_ms(3_600_000)), Change::Keep).await;
    let mut probe = stack.visitor();
    assert_eq!(
        level_of(&challenge(&mut probe, "other").await),
        ("0".to_string(), 1_000)
    );
    for _ in 0..4 {
        assert_eq!(take_place(&stack, "other", ip).await, "pre_queue");
    }
    assert_eq!(other.zcard(&other.keys.waiting()).await, 0);
    assert_eq!(
        level_of(&challenge(&mut probe, "other").await),
        ("1".to_string(), 2_000),
        "four pre-queued of eight: half full before the opening"
    );
    for _ in 0..2 {
        assert_eq!(take_place(&stack, "other", ip).await, "pre_queue");
    }
    assert_eq!(
        level_of(&challenge(&mut probe, "other").await),
        ("2".to_string(), 4_000)
    );

    // The opening passes; the next entry seals the pre-queue into a draw
    // that no scheduler runs here, so its six places stay to be given out
    // and still count: the newcomer is one in line, the difficulty stays.
    open_now(&other).await;
    assert_eq!(take_place(&stack, "other", ip).await, "waiting");
    assert_eq!(other.zcard(&other.keys.pre()).await, 0);
    assert_eq!(other.zcard(&other.keys.waiting()).await, 1);
    assert_eq!(
        level_of(&challenge(&mut probe, "other").await),
        ("2".to_string(), 4_000),
        "one in line and six still to draw"
    );
}
