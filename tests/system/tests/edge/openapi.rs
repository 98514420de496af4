//! docs/openapi.yaml is the edge contract: every documented operation is
//! driven into every documented status against the running worker, and
//! each reply's status, required headers, header values, content type and
//! body are checked against the document (JSON Schema 2020-12, `$ref`s
//! resolved). A documented status that no request reached fails the test.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use queuegate_edge::altcha;
use queuegate_edge::identity;
use queuegate_shared::ops::{Bypass, BypassCall, BypassReply, Consume, ConsumeReply, SetState};
use queuegate_shared::token::EntryToken;
use queuegate_shared::{Prefix, QueueId, QueueKeys, QueueState, Settings, UserId};
use queuegate_system_tests::edge::{EdgeStack, IDENTITY_SECRET};
use queuegate_system_tests::openapi::{Reply, Spec};
use queuegate_system_tests::origin::TestOrigin;
use queuegate_system_tests::{fast_settings, TestQueue};
use queuegate_testkit::{now_ms, RedisServer};
use serde_json::{json, Value};

/// Sends requests to the worker and checks each reply against the spec.
struct Checker {
    spec: Spec,
    base: String,
    http: reqwest::Client,
    seen: BTreeSet<(String, String, String)>,
}

/// One request: method, path (with query), cookie and other headers.
#[derive(Default, Clone)]
struct Call<'a> {
    method: &'a str,
    path: &'a str,
    cookie: Option<String>,
    token: Option<String>,
    body: Option<&'a str>,
    headers: Vec<(&'static str, String)>,
}

fn call<'a>(method: &'a str, path: &'a str) -> Call<'a> {
    Call {
        method,
        path,
        ..Call::default()
    }
}

impl<'a> Call<'a> {
    fn cookie(mut self, c: &str) -> Self {
        self.cookie = Some(c.to_string());
        self
    }
    fn visitor(self, v: &Visitor) -> Self {
        self.cookie(&format!("qg_visitor={}", v.cookie))
    }
    fn token(mut self, t: &str) -> Self {
        self.token = Some(t.to_string());
        self
    }
    fn body(mut self, b: &'a str) -> Self {
        self.body = Some(b);
        self
    }
    fn header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.push((name, value.to_string()));
        self
    }
}

impl Checker {
    async fn send(&self, c: &Call<'_>) -> Reply {
        let mut req = self
            .http
            .request(
                c.method.parse().expect("method"),
                format!("{}{}", self.base, c.path),
            )
            .timeout(Duration::from_secs(20));
        if let Some(cookie) = &c.cookie {
            req = req.header("cookie", cookie);
        }
        if let Some(t) = &c.token {
            req = req.header("x-entry-token", t);
        }
        for (k, v) in &c.headers {
            req = req.header(*k, v);
        }
        if let Some(b) = c.body {
            req = req
                .header("content-type", "application/json")
                .body(b.to_string());
        }
        let resp = req.send().await.expect("request to the worker");
        let status = resp.status().as_u16();
        let headers = resp
            .headers()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_string()))
            .collect();
        Reply {
            method: c.method.to_string(),
            status,
            headers,
            body: resp.text().await.unwrap_or_default(),
        }
    }

    /// Sends `c`, expects `status`, and checks the reply against the
    /// documented operation (`path` is the document's path key).
    async fn expect(&mut self, c: Call<'_>, status: u16) -> Reply {
        let reply = self.send(&c).await;
        let what = format!("{} {} -> {}", c.method, c.path, reply.status);
        assert_eq!(reply.status, status, "{what}: {}", reply.body);
        let path = c.path.split('?').next().unwrap_or_default();
        let method = c.method.to_ascii_lowercase();
        let (response, key) = self.spec.response(path, &method, status);
        self.spec.check_response(response, &reply, &what);
        self.seen
            .insert((path.to_string(), c.method.to_string(), key));
        reply
    }

    /// Like [`Checker::expect`] for a reply the document describes in
    /// `components/responses` (405, 404 not_found), not per operation.
    async fn expect_component(&mut self, c: Call<'_>, status: u16, component: &str) {
        let reply = self.send(&c).await;
        let what = format!("{} {} -> {}", c.method, c.path, reply.status);
        assert_eq!(reply.status, status, "{what}: {}", reply.body);
        let response = &self.spec.doc["components"]["responses"][component];
        assert!(response.is_object(), "components/responses/{component}");
        self.spec.check_response(response, &reply, &what);
    }
}

/// The entry guard's route and refusals, on a stack of their own with the
/// challenge on, a budget of two new places per address and a line of four
/// (half full, the difficulty level rises: a stale solution is refused).
async fn guarded_routes(ck: &mut Checker) {
    let settings = Settings {
        entry_budget_per_minute: 2,
        entry_budget_burst: 2,
        challenge_max_number: 1_000,
        max_waiting: 4,
        challenge_crowd: 4,
        idle_passthrough: false,
        ..Settings::default()
    };
    let mut stack = EdgeStack::start_with(
        settings.clone(),
        "anonymous",
        RedisServer::start(),
        &[("ENTRY_CHALLENGE", "on")],
    )
    .await;
    let base = std::mem::replace(&mut ck.base, stack.worker.url());
    async fn solve(ck: &mut Checker) -> String {
        let c = ck.expect(call("GET", "/queue/challenge"), 200).await.json();
        let c: altcha::Challenge = serde_json::from_value(c).expect("challenge JSON");
        altcha::payload(&c, altcha::solve(&c).expect("solvable"))
    }
    ck.expect(call("GET", "/queue/challenge?queue=Bad%20Id"), 400)
        .await;
    ck.expect(call("GET", "/queue/challenge?queue=nope"), 404)
        .await;
    ck.expect_component(call("POST", "/queue/challenge"), 405, "MethodNotAllowed")
        .await;
    let ip = "203.0.113.50";
    let need = ck
        .expect(
            call("POST", "/queue/enter").header("cf-connecting-ip", ip),
            403,
        )
        .await;
    assert_eq!(need.json()["error"], "challenge_required");
    // Solved at level 0, while the line is empty; used once it is half full.
    let early = solve(ck).await;
    let solution = solve(ck).await;
    let enter = |v: &Visitor, s: &str| {
        call("POST", "/queue/enter")
            .visitor(v)
            .header("cf-connecting-ip", ip)
            .header("x-altcha", s)
    };
    ck.expect(enter(&visitor(31), &solution), 200).await;
    let reused = ck.expect(enter(&visitor(32), &solution), 409).await;
    assert_eq!(reused.json()["error"], "challenge_reused");
    // A refused reuse spent no budget: one more place, then the budget.
    let fresh = solve(ck).await;
    ck.expect(enter(&visitor(33), &fresh), 200).await;
    let fresh = solve(ck).await;
    let over = ck.expect(enter(&visitor(34), &fresh), 429).await;
    assert_eq!(over.json()["error"], "too_many_entries");
    let stale = call("POST", "/queue/enter")
        .visitor(&visitor(35))
        .header("cf-connecting-ip", "203.0.113.51")
        .header("x-altcha", &early);
    let stale = ck.expect(stale, 403).await;
    assert_eq!(stale.json()["error"], "challenge_stale");
    // Idle passthrough asks what a place asks: once the line is empty and
    // passthrough on, a token-less order is still sent to the room while
    // places need a proof of work (drop_day/passthrough.rs has it spend
    // the same budget where no check is asked).
    stack.admit(2, 0).await;
    let passing = Settings {
        idle_passthrough: true,
        ..settings
    };
    TestQueue::open(&stack.redis.url(), "main", passing).await;
    let pass = ck
        .expect(
            call("POST", "/orders")
                .header("cf-connecting-ip", ip)
                .body(ORDER),
            403,
        )
        .await;
    assert_eq!(pass.json()["error"], "queue_required");
    stack.redis.stop();
    let down = ck.expect(call("GET", "/queue/challenge"), 503).await;
    assert_eq!(down.json()["error"], "unavailable");

    // Without a check to ask, idle passthrough spends the entry budget
    // `enter` spends: a burst of one, then 429.
    let open = Settings {
        entry_budget_per_minute: 1,
        entry_budget_burst: 1,
        idle_passthrough: true,
        ..Settings::default()
    };
    let unchecked = EdgeStack::start_with(
        open,
        "anonymous",
        RedisServer::start(),
        &[("ENTRY_CHALLENGE", "off")],
    )
    .await;
    ck.base = unchecked.worker.url();
    let order = || {
        call("POST", "/orders")
            .header("cf-connecting-ip", ip)
            .body(ORDER)
    };
    ck.expect(order(), 200).await;
    let over = ck.expect(order(), 429).await;
    assert_eq!(over.json()["error"], "too_many_entries");
    ck.base = base;
}

/// A visitor with a signed identity cookie (as the worker mints them).
struct Visitor {
    user: UserId,
    cookie: String,
}

/// Enters `v`, admits one visitor (`v`, with nobody ahead) and returns the
/// token its position shows; every reply checked against the document.
async fn enter_admitted(ck: &mut Checker, stack: &EdgeStack, v: &Visitor) -> String {
    ck.expect(call("POST", "/queue/enter").visitor(v), 200)
        .await;
    stack.admit(1, 0).await;
    let p = ck
        .expect(call("GET", "/queue/position").visitor(v), 200)
        .await
        .json();
    p["token"].as_str().expect("admitted").to_string()
}

fn visitor(n: u8) -> Visitor {
    let (user, cookie) = identity::mint_visitor(IDENTITY_SECRET.as_bytes(), [n; 16]);
    Visitor { user, cookie }
}

#[test]
fn the_document_refuses_what_the_contract_forbids() {
    let spec = Spec::load("docs/openapi.yaml");
    let state = spec.component("StateReply");
    let ok = |v: Value| assert!(spec.errors(&state, &v).is_empty(), "{v} should pass");
    let bad = |v: Value| assert!(!spec.errors(&state, &v).is_empty(), "{v} should fail");
    ok(
        json!({"state":"waiting","queue":"main","position":1204,"etaSeconds":7,"retryAfterMs":5000}),
    );
    ok(json!({"state":"waiting","queue":"main","position":1,"retryAfterMs":1000}));
    ok(
        json!({"state":"admitted","queue":"main","token":"0123456789abcdef0123456789abcdef","activateAt":1,"expiresAt":2}),
    );
    ok(json!({"state":"in_flight","queue":"q"}));
    ok(json!({"state":"not_in_queue","queue":"q"}));
    bad(json!({"state":"waiting","queue":"main","position":0,"retryAfterMs":1000}));
    bad(json!({"state":"waiting","queue":"main","position":1,"retry_after_ms":1000}));
    bad(json!({"state":"waiting","queue":"main","position":1,"retryAfterMs":1000,"x":1}));
    bad(json!({"state":"admitted","queue":"main","token":"t","activateAt":1,"expiresAt":2}));
    bad(
        json!({"state":"admitted","queue":"main","token":"0123456789abcdef0123456789abcdef","activateAt":1}),
    );
    bad(json!({"state":"ordered","queue":"main","position":1}));
    bad(json!({"state":"paused","queue":"main"}));
    bad(json!({"state":"ordered","queue":"Main"}));
    let error = spec.component("Error");
    assert!(spec
        .errors(&error, &json!({"error":"queue_full","message":"m"}))
        .is_empty());
    for v in [
        json!({"error":"oops","message":"m"}),
        json!({"error":"queue_full"}),
        json!({"error":"queue_full","message":"m","cause":"redis down"}),
    ] {
        assert!(!spec.errors(&error, &v).is_empty(), "{v} should fail");
    }
    let full = spec.component("QueueFullError");
    assert!(!spec
        .errors(&full, &json!({"error":"queue_closed","message":"m"}))
        .is_empty());
}

const ORDER: &str = r#"{"item":"ticket"}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_status_matches_the_openapi_document() {
    // max_waiting 1 makes "full" reachable; fast settings make expiry and
    // abandonment happen within the test; statuses outlive Ann's late token.
    let settings = Settings {
        max_waiting: 1,
        status_ttl_ms: 10_000,
        // The first visitor must wait (the waiting shape is checked), not
        // pass straight through the idle room.
        idle_passthrough: false,
        ..fast_settings()
    };
    // The origin timeout is short, so a slow origin's 504 takes no time.
    let mut stack = EdgeStack::start_with(
        Settings {
            entry_budget_per_minute: 0,
            ..settings
        },
        "anonymous",
        RedisServer::start(),
        &[("ENTRY_CHALLENGE", "off"), ("ORIGIN_TIMEOUT_MS", "500")],
    )
    .await;
    let mut ck = Checker {
        spec: Spec::load("docs/openapi.yaml"),
        base: stack.worker.url(),
        // Redirects are answers to check, not to follow.
        http: reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("client"),
        seen: BTreeSet::new(),
    };

    // Health, the page, and the replies every /queue path shares.
    let h = ck.expect(call("GET", "/queue/health"), 200).await;
    assert_eq!(h.json(), json!({"redis": "ok"}));
    ck.expect(call("HEAD", "/queue/health"), 200).await;
    let page = ck.expect(call("GET", "/queue"), 200).await;
    assert!(page.body.contains("<html") || page.body.contains("<!doctype"));
    ck.expect(call("GET", "/queue?queue=other"), 200).await;
    ck.expect(call("HEAD", "/queue"), 200).await;
    for method in ["GET", "HEAD"] {
        ck.expect(call(method, "/queue?queue=Bad%20Id"), 400).await;
        ck.expect(call(method, "/queue?queue=nope"), 404).await;
    }
    // The draw's record (issue #41): nothing committed yet, a draw number
    // that is not one, then a commitment as the scheduler writes it.
    for method in ["GET", "HEAD"] {
        ck.expect(call(method, "/queue/draw"), 404).await;
        ck.expect(call(method, "/queue/draw?draw=x"), 400).await;
    }
    {
        use queuegate_shared::fields::commit as dc;
        let mut conn = stack.queue.conn.clone();
        let _: () = redis::cmd("HSET")
            .arg(stack.queue.keys.draw_commit())
            .arg(dc::STATE)
            .arg(queuegate_shared::fields::COMMIT_PENDING)
            .arg(dc::COMMITMENT)
            .arg("ab".repeat(32))
            .arg(dc::COMMITTED_AT)
            .arg(1_764_769_000_000u64)
            .arg(dc::OPENS_AT)
            .arg(1_764_770_400_000u64)
            .query_async(&mut conn)
            .await
            .expect("a commitment");
    }
    let committed = ck.expect(call("GET", "/queue/draw"), 200).await;
    assert_eq!(committed.json()["state"], "committed");
    assert!(committed.json().get("seed").is_none());
    ck.expect(call("HEAD", "/queue/draw"), 200).await;
    for (method, path) in [
        ("POST", "/queue/health"),
        ("GET", "/queue/enter"),
        ("DELETE", "/queue/position"),
        ("POST", "/queue"),
    ] {
        ck.expect_component(call(method, path), 405, "MethodNotAllowed")
            .await;
    }
    ck.expect_component(call("GET", "/queue/nothing"), 404, "NotFound")
        .await;

    // Enter: a newcomer gets a cookie and a place; the line is then full.
    let first = ck.expect(call("POST", "/queue/enter"), 200).await;
    let ann_cookie = first.set_cookie("qg_visitor").expect("identity cookie");
    let ann_user = UserId::new(ann_cookie.split('.').next().unwrap()).unwrap();
    let ann = Visitor {
        user: ann_user,
        cookie: ann_cookie,
    };
    assert_eq!(first.json()["state"], "waiting");
    assert!(!first.header_values("retry-after").is_empty());
    let full = ck.expect(call("POST", "/queue/enter"), 429).await;
    assert_eq!(full.json()["error"], "queue_full");
    for path in ["/queue/enter", "/queue/position"] {
        let method = if path.ends_with("enter") {
            "POST"
        } else {
            "GET"
        };
        ck.expect(
            call(method, &format!("{path}?queue=Bad%20Id")).visitor(&ann),
            400,
        )
        .await;
        ck.expect(
            call(method, &format!("{path}?queue=nope")).visitor(&ann),
            404,
        )
        .await;
        let forged = format!("{}.{}", visitor(200).user, "AAAA");
        let bad = ck
            .expect(
                call(method, path).cookie(&format!("qg_visitor={forged}")),
                401,
            )
            .await;
        assert_eq!(bad.json()["error"], "identity_invalid");
        assert_eq!(bad.set_cookie("qg_visitor").as_deref(), Some(""), "cleared");
    }
    let anonymous = ck.expect(call("GET", "/queue/position"), 401).await;
    assert_eq!(anonymous.json()["error"], "identity_required");
    let waiting = ck
        .expect(call("GET", "/queue/position").visitor(&ann), 200)
        .await;
    assert_eq!(waiting.json()["position"], 1);
    let stranger = ck
        .expect(call("GET", "/queue/position").visitor(&visitor(1)), 200)
        .await;
    assert_eq!(stranger.json()["state"], "not_in_queue");

    // Admitted, but the token activates in 3 s: too early.
    stack.admit(1, 3_000).await;
    let admitted = ck
        .expect(call("GET", "/queue/position").visitor(&ann), 200)
        .await;
    let a = admitted.json();
    assert_eq!(a["state"], "admitted", "{a}");
    assert!(admitted.set_cookie("qg_token").is_some());
    let ann_token = a["token"].as_str().unwrap().to_string();
    let ann_expires = a["expiresAt"].as_u64().unwrap();
    let again = ck
        .expect(call("POST", "/queue/enter").visitor(&ann), 200)
        .await;
    assert_eq!(again.json()["token"], ann_token.as_str());
    let early = ck
        .expect(
            call("POST", "/orders")
                .visitor(&ann)
                .token(&ann_token)
                .body(ORDER),
            429,
        )
        .await;
    assert_eq!(early.json()["error"], "not_yet_active");

    // Bob: admitted at once, orders, replays.
    let bob = visitor(2);
    let bob_token = enter_admitted(&mut ck, &stack, &bob).await;
    ck.expect(call("POST", "/orders?queue=Bad%20Id").visitor(&bob), 400)
        .await;
    ck.expect(call("POST", "/orders?queue=nope").visitor(&bob), 404)
        .await;
    ck.expect(call("POST", "/orders").token(&bob_token), 401)
        .await;
    ck.expect(call("POST", "/orders").visitor(&bob), 403).await;
    // A person (a form, Accept preferring HTML) gets the room itself: a
    // POST is never answered 303.
    let room = ck
        .expect(
            call("POST", "/orders")
                .visitor(&bob)
                .header("accept", "text/html,*/*;q=0.8"),
            200,
        )
        .await;
    assert!(room.header_values("location").is_empty());
    assert!(room.body.contains(r#""continueUrl":"#), "{}", room.body);
    ck.expect(call("GET", "/queue?return=//evil.example"), 400)
        .await;
    ck.expect(call("POST", "/orders").visitor(&bob).token(&ann_token), 403)
        .await;
    ck.expect(
        call("POST", "/orders").visitor(&bob).token("not-a-token"),
        403,
    )
    .await;
    let ok = ck
        .expect(
            call("POST", "/orders")
                .visitor(&bob)
                .token(&bob_token)
                .body(ORDER),
            200,
        )
        .await;
    assert_eq!(ok.json()["origin"], true, "the origin's reply");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = ck
            .expect(call("GET", "/queue/position").visitor(&bob), 200)
            .await;
        if r.json()["state"] == "ordered" {
            break;
        }
        assert!(Instant::now() < deadline, "bob never ordered: {}", r.body);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let replay = ck
        .expect(call("POST", "/orders").visitor(&bob).token(&bob_token), 409)
        .await;
    assert_eq!(replay.json()["error"], "token_used");

    // Carol: her token is spent directly, with no settle: in flight.
    let carol = visitor(3);
    ck.expect(call("POST", "/queue/enter").visitor(&carol), 200)
        .await;
    stack.admit(1, 0).await;
    let c = ck
        .expect(call("GET", "/queue/position").visitor(&carol), 200)
        .await
        .json();
    let carol_token = EntryToken::parse(c["token"].as_str().expect("carol admitted")).unwrap();
    let spent = stack
        .queue
        .run(&Consume {
            keys: &stack.queue.keys,
            user: &carol.user,
            token: &carol_token,
        })
        .await
        .unwrap();
    assert_eq!(spent, ConsumeReply::Accepted);
    let f = ck
        .expect(call("GET", "/queue/position").visitor(&carol), 200)
        .await;
    assert_eq!(f.json()["state"], "in_flight");

    // Dave enters and stops polling: dropped as a leaver. Ann's token
    // lapses meanwhile: expired.
    let dave = visitor(4);
    ck.expect(call("POST", "/queue/enter").visitor(&dave), 200)
        .await;
    let until = (ann_expires + 200).max(now_ms() + 1_300);
    tokio::time::sleep(Duration::from_millis(until.saturating_sub(now_ms()))).await;
    stack.admit(0, 0).await;
    let d = ck
        .expect(call("GET", "/queue/position").visitor(&dave), 200)
        .await;
    assert_eq!(d.json()["state"], "abandoned", "{}", d.body);
    let e = ck
        .expect(call("GET", "/queue/position").visitor(&ann), 200)
        .await;
    assert_eq!(e.json()["state"], "expired", "{}", e.body);

    // A closed queue refuses entries.
    let other = QueueKeys::new(&Prefix::default(), &QueueId::new("other").unwrap());
    stack
        .queue
        .run(&SetState {
            keys: &other,
            state: QueueState::Closed,
            expect: None,
        })
        .await
        .unwrap();
    let closed = ck
        .expect(call("POST", "/queue/enter?queue=other").visitor(&ann), 503)
        .await;
    assert_eq!(closed.json()["error"], "queue_closed");

    // The origin is too slow: 504.
    // A staff bypass link: opened, it sets its cookie and leads on; the
    // gate then passes that browser without a token.
    let key = queuegate_shared::bypass::mint([9; 32]);
    let parts = queuegate_shared::bypass::parts(&key).expect("a key");
    let created = stack
        .queue
        .run(&Bypass {
            keys: &stack.queue.keys,
            call: BypassCall::Create {
                key: &parts,
                ttl_ms: 600_000,
                name: "qa",
            },
        })
        .await
        .expect("create a bypass");
    assert!(
        matches!(created, BypassReply::Created { .. }),
        "{created:?}"
    );
    let opened = ck
        .expect(
            call(
                "GET",
                &format!("/queue/bypass?queue=main&key={key}&return=/tickets/7"),
            ),
            303,
        )
        .await;
    assert_eq!(opened.header_values("location"), ["/tickets/7"]);
    let bypass_cookie = format!("qg_bypass=main.{key}");
    // The origin's own status, passed through (`default`).
    stack.origin.set_status(201);
    let passed = ck
        .expect(
            call("POST", "/orders").cookie(&bypass_cookie).body(ORDER),
            201,
        )
        .await;
    stack.origin.set_status(200);
    assert_eq!(passed.status, 201);
    let unknown = queuegate_shared::bypass::mint([8; 32]);
    let refused = ck
        .expect(
            call("GET", &format!("/queue/bypass?queue=main&key={unknown}")),
            403,
        )
        .await;
    assert_eq!(refused.json()["error"], "bypass_invalid");
    ck.expect(call("GET", "/queue/bypass?queue=main&key=qgb_nothex"), 400)
        .await;
    ck.expect(
        call("GET", &format!("/queue/bypass?queue=nope&key={key}")),
        404,
    )
    .await;
    ck.expect_component(call("POST", "/queue/bypass"), 405, "MethodNotAllowed")
        .await;

    let slow_visitor = visitor(6);
    let slow_token = enter_admitted(&mut ck, &stack, &slow_visitor).await;
    stack.origin.set_delay(Duration::from_secs(3));
    let slow = ck
        .expect(
            call("POST", "/orders")
                .visitor(&slow_visitor)
                .token(&slow_token)
                .body(ORDER),
            504,
        )
        .await;
    assert_eq!(slow.json()["error"], "origin_timeout");
    stack.origin.set_delay(Duration::ZERO);

    // The origin goes away: 502, and the token survives.
    let eve = visitor(5);
    let eve_token = enter_admitted(&mut ck, &stack, &eve).await;
    drop(std::mem::replace(
        &mut stack.origin,
        TestOrigin::start().await,
    ));
    let gone = ck
        .expect(
            call("POST", "/orders")
                .visitor(&eve)
                .token(&eve_token)
                .body(ORDER),
            502,
        )
        .await;
    assert_eq!(gone.json()["error"], "origin_unreachable");

    // Redis goes away: everything that needs it fails closed.
    guarded_routes(&mut ck).await;

    stack.redis.stop();
    let down = ck
        .expect(
            call("GET", &format!("/queue/bypass?queue=main&key={key}")),
            503,
        )
        .await;
    assert_eq!(down.json()["error"], "unavailable");
    let down = ck.expect(call("GET", "/queue/health"), 503).await;
    assert_eq!(down.json()["redis"], "unreachable");
    ck.expect(call("HEAD", "/queue/health"), 503).await;
    ck.expect(call("GET", "/queue/draw"), 503).await;
    ck.expect(call("HEAD", "/queue/draw"), 503).await;
    for c in [
        call("POST", "/queue/enter").visitor(&ann),
        call("GET", "/queue/position").visitor(&ann),
        call("POST", "/orders").visitor(&eve).token(&eve_token),
    ] {
        let r = ck.expect(c, 503).await;
        assert_eq!(r.json()["error"], "unavailable");
    }

    let missing: Vec<_> = ck.spec.documented().difference(&ck.seen).cloned().collect();
    assert!(
        missing.is_empty(),
        "documented but never reached: {missing:?}"
    );
}
