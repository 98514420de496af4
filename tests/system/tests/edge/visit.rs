//! A buyer's turn is a visit (issue 36): an admitted session lets the
//! checkout's pages through any number of times (reloads, back, a second
//! tab, a prefetch, a link from another site) while the order stays
//! one-time; nothing the browser does by itself spends a turn; paths are
//! matched as the origin routes them. Real redis-server, the gateway, the
//! built wasm under workerd.

use std::collections::BTreeMap;
use std::time::Duration;

use queuegate_shared::Settings;
use queuegate_system_tests::edge::{raw_request, EdgeStack, RawReply};
use queuegate_system_tests::user;
use queuegate_testkit::RedisServer;

/// What Chromium sends when a person navigates.
const NAVIGATION: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";

/// One request with `cookies` and extra headers, no redirect followed.
async fn send(
    base: &str,
    method: &str,
    path: &str,
    cookies: &BTreeMap<String, String>,
    headers: &[(&str, &str)],
) -> RawReply {
    raw_request(base, method, path, cookies, headers).await
}

/// Takes the `Set-Cookie`s of `r` into `jar`, as a browser would.
fn keep(jar: &mut BTreeMap<String, String>, r: &RawReply) {
    for c in r.set_cookies() {
        let pair = c.split(';').next().unwrap_or_default();
        if let Some((k, v)) = pair.split_once('=') {
            jar.insert(k.to_string(), v.to_string());
        }
    }
}

const ROUTES: &str = "POST /orders, GET /tickets/*, spend GET /claim/*";

async fn stack(idle_passthrough: bool) -> EdgeStack {
    EdgeStack::start_with(
        Settings {
            entry_budget_per_minute: 0,
            idle_passthrough,
            ..Settings::default()
        },
        "anonymous",
        RedisServer::start(),
        &[("ENTRY_CHALLENGE", "off"), ("PROTECTED_ROUTES", ROUTES)],
    )
    .await
}

/// An admitted visitor's cookies (visitor and token), in a busy room.
async fn admitted(stack: &EdgeStack) -> BTreeMap<String, String> {
    let mut ann = stack.visitor();
    assert_eq!(ann.enter().await.state(), "waiting");
    // Whoever is ahead is admitted too.
    stack.admit(2, 0).await;
    let state = ann.position().await;
    assert_eq!(state.state(), "admitted", "{:?}", state.json);
    assert!(ann.cookies.contains_key("qg_token"), "{:?}", ann.cookies);
    ann.cookies.clone()
}

/// Waits until the origin has been reached `n` times and the settles that
/// follow in `wait_until` are done (the visitor's state says so).
async fn settled(stack: &EdgeStack, state: &str, cookies: &BTreeMap<String, String>) {
    let base = stack.worker.url();
    for _ in 0..100 {
        let r = send(&base, "GET", "/queue/position", cookies, &[]).await;
        if r.body.contains(&format!(r#""state":"{state}""#)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the visitor never reached {state}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admitted_buyer_reloads_prefetches_and_follows_links_and_orders_once() {
    let stack = stack(false).await;
    let base = stack.worker.url();
    // Someone waits: the room is busy, so nothing passes on idleness.
    stack.queue.enter(&user(0)).await;
    let ann = admitted(&stack).await;
    let nav = [("accept", NAVIGATION), ("sec-fetch-site", "same-origin")];

    // Three loads of a checkout page (a reload, back, a second tab).
    for i in 0..3 {
        let r = send(&base, "GET", "/tickets/7", &ann, &nav).await;
        assert_eq!(r.status, 200, "load {i}: {}", r.body);
    }
    // A prefetch of another page, and a link from another site.
    let prefetch = [("accept", NAVIGATION), ("sec-purpose", "prefetch")];
    let r = send(&base, "GET", "/tickets/8", &ann, &prefetch).await;
    assert_eq!(r.status, 200, "prefetch: {}", r.body);
    let cross = [("accept", NAVIGATION), ("sec-fetch-site", "cross-site")];
    let r = send(&base, "GET", "/tickets/7", &ann, &cross).await;
    assert_eq!(r.status, 200, "cross-site navigation: {}", r.body);
    // HEAD follows the GET route.
    let r = send(&base, "HEAD", "/tickets/7", &ann, &nav).await;
    assert_eq!(r.status, 200, "HEAD");
    // The token was not spent by any of it: the order passes, once.
    let api = [
        ("accept", "application/json"),
        ("sec-fetch-site", "same-origin"),
    ];
    let order = send(&base, "POST", "/orders", &ann, &api).await;
    assert_eq!(order.status, 200, "the order: {}", order.body);
    settled(&stack, "ordered", &ann).await;
    // The confirmation page after the order still loads; a second order is
    // refused.
    let r = send(&base, "GET", "/tickets/7/confirmation", &ann, &nav).await;
    assert_eq!(r.status, 200, "the page after the order: {}", r.body);
    let again = send(&base, "POST", "/orders", &ann, &api).await;
    assert_eq!((again.status, again.error().as_str()), (409, "token_used"));

    let hits = stack.origin.hits();
    let orders = hits.iter().filter(|h| h.path == "/orders").count();
    assert_eq!(orders, 1, "one order reached the shop: {hits:?}");
    assert_eq!(
        hits.len(),
        3 + 1 + 1 + 1 + 1 + 1,
        "every load reached the shop"
    );
    // A stranger without cookies does not pass the busy room.
    let none = BTreeMap::new();
    let r = send(&base, "GET", "/tickets/7", &none, &nav).await;
    assert_eq!(r.status, 303, "a stranger: {}", r.body);
    stack.queue.assert_conserved().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_the_browser_does_by_itself_spends_a_turn() {
    let stack = stack(false).await;
    let base = stack.worker.url();
    stack.queue.enter(&user(0)).await;
    let ann = admitted(&stack).await;
    let api = [("accept", "application/json")];

    // A prefetch of a spend route never consumes: declined, token intact.
    for purpose in [
        ("sec-purpose", "prefetch"),
        ("sec-purpose", "prefetch;prerender"),
        ("purpose", "prefetch"),
        ("next-router-prefetch", "1"),
    ] {
        let r = send(&base, "GET", "/claim/1", &ann, &[api[0], purpose]).await;
        assert_eq!(
            (r.status, r.error().as_str()),
            (503, "prefetch_declined"),
            "{purpose:?}"
        );
        assert_eq!(r.header("cache-control"), Some("no-store"));
    }
    // Another site's request carries no token: its cookie is not used.
    let cross = [api[0], ("sec-fetch-site", "cross-site")];
    let r = send(&base, "POST", "/orders", &ann, &cross).await;
    assert_eq!((r.status, r.error().as_str()), (403, "queue_required"));
    let r = send(&base, "GET", "/claim/1", &ann, &cross).await;
    assert_eq!((r.status, r.error().as_str()), (403, "queue_required"));
    assert!(stack.origin.hits().is_empty(), "nothing reached the shop");
    // The visitor's own request still has its turn.
    let own = [api[0], ("sec-fetch-site", "same-origin")];
    let r = send(&base, "GET", "/claim/1", &ann, &own).await;
    assert_eq!(r.status, 200, "{}", r.body);
    settled(&stack, "ordered", &ann).await;

    // A stranger's prefetch of a page writes nothing and passes nothing.
    let before = stack.snapshot().await;
    let none = BTreeMap::new();
    let r = send(
        &base,
        "GET",
        "/tickets/9",
        &none,
        &[api[0], ("sec-purpose", "prefetch")],
    )
    .await;
    assert_eq!((r.status, r.error().as_str()), (503, "prefetch_declined"));
    assert_eq!(stack.snapshot().await, before, "a prefetch wrote to Redis");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spellings_of_a_protected_path_cannot_skip_the_gate() {
    let stack = stack(false).await;
    let base = stack.worker.url();
    stack.queue.enter(&user(0)).await;
    let none = BTreeMap::new();
    let api = [("accept", "application/json")];
    for (method, path) in [
        ("GET", "/Tickets/7"),
        ("GET", "/TICKETS/7"),
        ("GET", "/tickets/%2e/7"),
        ("GET", "//tickets/7"),
        ("GET", "/tickets//7"),
        ("GET", "/%74ickets/7"),
        ("GET", "/tickets;x=1/7"),
        ("GET", "/tickets"),
        ("HEAD", "/tickets/7"),
        ("POST", "/Orders"),
        ("POST", "/orders/"),
        ("POST", "/x/%2e%2e/orders"),
        ("GET", "/CLAIM/1"),
    ] {
        let r = send(&base, method, path, &none, &api).await;
        assert_eq!(r.status, 403, "{method} {path}: {}", r.body);
        if method != "HEAD" {
            assert_eq!(r.error(), "queue_required", "{method} {path}");
        }
    }
    assert!(stack.origin.hits().is_empty(), "{:?}", stack.origin.hits());
    // Other paths are still the origin's.
    let r = send(&base, "GET", "/ticketsx", &none, &api).await;
    assert_eq!(r.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_room_admits_a_page_with_a_token_for_the_order() {
    let stack = stack(true).await;
    let base = stack.worker.url();
    let mut jar = BTreeMap::new();
    let nav = [("accept", NAVIGATION)];
    // A newcomer's page passes at once: a visitor and an order token come
    // with it (the token cookie SameSite=Strict: no other site spends it).
    let r = send(&base, "GET", "/tickets/7", &jar, &nav).await;
    assert_eq!(r.status, 200, "{}", r.body);
    keep(&mut jar, &r);
    let token = r
        .set_cookies()
        .into_iter()
        .find(|c| c.starts_with("qg_token="))
        .expect("a token cookie");
    assert!(token.contains("SameSite=Strict"), "{token}");
    assert!(jar.contains_key("qg_visitor"), "{jar:?}");
    // Reloads pass on the session; the order spends the token once.
    for _ in 0..2 {
        assert_eq!(
            send(&base, "GET", "/tickets/7", &jar, &nav).await.status,
            200
        );
    }
    let order = send(
        &base,
        "POST",
        "/orders",
        &jar,
        &[("accept", "application/json")],
    )
    .await;
    assert_eq!(order.status, 200, "{}", order.body);
    settled(&stack, "ordered", &jar).await;
    assert_eq!(
        send(&base, "GET", "/tickets/7", &jar, &nav).await.status,
        200
    );
    let again = send(
        &base,
        "POST",
        "/orders",
        &jar,
        &[("accept", "application/json")],
    )
    .await;
    assert_eq!((again.status, again.error().as_str()), (409, "token_used"));
    // The order freed the slot: the session lives on without one.
    let mut conn = stack.queue.conn.clone();
    let active: u64 = redis::cmd("ZCARD")
        .arg(stack.queue.keys.active())
        .query_async(&mut conn)
        .await
        .expect("ZCARD");
    assert_eq!(active, 0, "the order settled and freed its slot");
    stack.queue.assert_conserved().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_nobody_comes_for_ends_its_session_and_a_visit_holds_the_slot_for_it() {
    let stack = EdgeStack::start_with(
        Settings {
            entry_budget_per_minute: 0,
            idle_passthrough: false,
            token_ttl_ms: 1_500,
            activation_jitter_ms: 0,
            ..Settings::default()
        },
        "anonymous",
        RedisServer::start(),
        &[("ENTRY_CHALLENGE", "off"), ("PROTECTED_ROUTES", ROUTES)],
    )
    .await;
    let base = stack.worker.url();
    stack.queue.enter(&user(0)).await;
    let nav = [("accept", NAVIGATION)];
    let conn = stack.queue.conn.clone();
    let slot = |uid: String| {
        let mut conn = conn.clone();
        let key = stack.queue.keys.active();
        async move {
            redis::cmd("ZSCORE")
                .arg(key)
                .arg(uid)
                .query_async::<Option<u64>>(&mut conn)
                .await
                .expect("ZSCORE")
        }
    };

    // Bea comes: her first page makes token and slot last the session (10
    // minutes by default), not the 1.5 s a turn waits for its visitor.
    let bea = admitted(&stack).await;
    let bea_id = bea["qg_visitor"].split('.').next().unwrap().to_string();
    let before = slot(bea_id.clone()).await.expect("a slot");
    assert_eq!(
        send(&base, "GET", "/tickets/1", &bea, &nav).await.status,
        200
    );
    let after = slot(bea_id.clone()).await.expect("a slot");
    assert!(
        after >= before + 590_000,
        "the visit holds the slot for the session: {before} → {after}"
    );
    // Cal is admitted and never comes: his turn runs out, and his session
    // with it.
    let cal = admitted(&stack).await;
    tokio::time::sleep(Duration::from_millis(1_800)).await;
    stack.admit(0, 0).await;
    let r = send(&base, "GET", "/tickets/1", &cal, &nav).await;
    assert_eq!(r.status, 303, "a lapsed turn has no session: {}", r.body);
    assert_eq!(
        send(&base, "GET", "/tickets/1", &bea, &nav).await.status,
        200
    );
    assert!(
        slot(bea_id).await.is_some(),
        "Bea's slot outlived the turn's TTL"
    );
    stack.queue.assert_conserved().await;
}

/// The abuse case: page loads in an idle room need no proof of work, and
/// each holds a slot for a session, so junk loads from fresh identities
/// could hold every slot for 10 minutes. They fill at most half; orders and
/// the line keep the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn junk_page_loads_in_an_idle_room_hold_at_most_half_the_slots() {
    let stack = EdgeStack::start_with(
        Settings {
            entry_budget_per_minute: 0,
            idle_passthrough: true,
            max_active: 4,
            ..Settings::default()
        },
        "anonymous",
        RedisServer::start(),
        &[("ENTRY_CHALLENGE", "off"), ("PROTECTED_ROUTES", ROUTES)],
    )
    .await;
    let base = stack.worker.url();
    let none = BTreeMap::new();
    let api = [("accept", "application/json")];
    let mut passed = 0;
    for _ in 0..5 {
        let r = send(&base, "GET", "/tickets/7", &none, &api).await;
        match r.status {
            200 => passed += 1,
            403 => assert_eq!(r.error(), "queue_required"),
            other => panic!("{other}: {}", r.body),
        }
    }
    assert_eq!(passed, 2, "half of 4 slots");
    // An order without a token still passes on a free slot.
    let order = send(&base, "POST", "/orders", &none, &api).await;
    assert_eq!(order.status, 200, "{}", order.body);
    stack.queue.assert_conserved().await;
}

/// A person's form POST to the order route in a busy room is kept in the
/// room's page (sent again on Continue: tests/js/page-visit.test.mjs), never
/// turned into a GET; another site's form is not kept (re-sent with the
/// visitor's token it would be a forged order), nor is a file upload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_form_sent_before_the_turn_is_kept_only_from_our_own_pages() {
    let stack = stack(false).await;
    let base = stack.worker.url();
    stack.queue.enter(&user(0)).await;
    let before = stack.snapshot().await;
    let form = |site: &'static str, content_type: &'static str| {
        [
            ("accept", NAVIGATION),
            ("sec-fetch-site", site),
            ("content-type", content_type),
        ]
    };
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let post = |headers: [(&'static str, &'static str); 3], body: &'static str| {
        let mut req = http.post(format!("{base}/orders")).body(body);
        for (k, v) in headers {
            req = req.header(k, v);
        }
        async move {
            let resp = req.send().await.expect("POST");
            (
                resp.status().as_u16(),
                resp.text().await.unwrap_or_default(),
            )
        }
    };
    let urlencoded = "application/x-www-form-urlencoded";
    let (status, page) = post(form("same-origin", urlencoded), "item=ticket&seat=A+12%26b").await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains(
            r#""form":{"action":"/orders","fields":[["item","ticket"],["seat","A 12&b"]]}"#
        ),
        "{page}"
    );
    assert!(page.contains(r#""continueUrl":"/orders""#));
    for (site, content_type) in [
        ("cross-site", urlencoded),
        ("same-site", urlencoded),
        ("same-origin", "multipart/form-data; boundary=x"),
    ] {
        let (status, page) = post(form(site, content_type), "item=ticket").await;
        assert_eq!(status, 200, "{site} {content_type}");
        assert!(!page.contains(r#""form":"#), "{site} {content_type}: kept");
        assert!(!page.contains(r#""continueUrl":"/orders""#));
    }
    assert!(stack.origin.hits().is_empty());
    assert_eq!(
        stack.snapshot().await,
        before,
        "keeping a form wrote to Redis"
    );
}

/// `session_renew`: each page moves the session's end to now +
/// `session_ms`, never past its cap (30 minutes after it opened). The cap
/// is tested on a session record made old by hand: its cap 3 s away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_session_moves_with_each_page_but_never_past_its_cap() {
    let stack = EdgeStack::start_with(
        Settings {
            entry_budget_per_minute: 0,
            idle_passthrough: false,
            session_ms: 60_000,
            token_ttl_ms: 30_000,
            session_renew: true,
            ..Settings::default()
        },
        "anonymous",
        RedisServer::start(),
        &[("ENTRY_CHALLENGE", "off"), ("PROTECTED_ROUTES", ROUTES)],
    )
    .await;
    let base = stack.worker.url();
    stack.queue.enter(&user(0)).await;
    let ann = admitted(&stack).await;
    let id = ann["qg_visitor"].split('.').next().unwrap().to_string();
    let key = stack
        .queue
        .keys
        .session(&queuegate_shared::UserId::new(&id).unwrap());
    let mut conn = stack.queue.conn.clone();
    let nav = [("accept", NAVIGATION)];
    let record = |conn: &mut redis::aio::MultiplexedConnection| {
        let (conn, key) = (conn.clone(), key.clone());
        async move {
            let mut conn = conn;
            let rec: String = redis::cmd("GET")
                .arg(&key)
                .query_async(&mut conn)
                .await
                .expect("a session record");
            rec.split('|')
                .map(|f| f.parse::<u64>().unwrap())
                .collect::<Vec<u64>>()
        }
    };
    assert_eq!(
        send(&base, "GET", "/tickets/1", &ann, &nav).await.status,
        200
    );
    let first = record(&mut conn).await;
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    assert_eq!(
        send(&base, "GET", "/tickets/1", &ann, &nav).await.status,
        200
    );
    let second = record(&mut conn).await;
    assert!(
        second[1] >= first[1] + 1_000,
        "renewed: {first:?} → {second:?}"
    );
    assert_eq!(second[2], first[2], "the cap never moves");
    // Age the session: its cap 3 s from now, its turn (token and slot,
    // which a session's pages make end with it) ending with it. A page
    // moves the end to the cap, not a minute on.
    let now = second[1] - 60_000;
    let aged = format!("{}|{}|{}|1", second[0], now + 2_000, now + 3_000);
    let _: () = redis::cmd("SET")
        .arg(&key)
        .arg(aged)
        .arg("PX")
        .arg(2_000)
        .query_async(&mut conn)
        .await
        .expect("SET");
    let token_key = stack
        .queue
        .keys
        .token(&queuegate_shared::UserId::new(&id).unwrap());
    let token: String = redis::cmd("GET")
        .arg(&token_key)
        .query_async(&mut conn)
        .await
        .expect("a token record");
    let mut t: Vec<String> = token.split('|').map(str::to_string).collect();
    t[2] = (now + 2_000).to_string();
    let _: () = redis::cmd("SET")
        .arg(&token_key)
        .arg(t.join("|"))
        .arg("PX")
        .arg(2_000)
        .query_async(&mut conn)
        .await
        .expect("SET");
    assert_eq!(
        send(&base, "GET", "/tickets/1", &ann, &nav).await.status,
        200
    );
    let capped = record(&mut conn).await;
    assert!(capped[1] <= now + 3_000, "never past the cap: {capped:?}");
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    let r = send(&base, "GET", "/tickets/1", &ann, &nav).await;
    assert_eq!(r.status, 303, "the session ended at its cap: {}", r.body);
}

/// Script calls Redis has run so far (EVALSHA and EVAL).
async fn script_calls(stack: &EdgeStack) -> u64 {
    let mut conn = stack.queue.conn.clone();
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await
        .expect("INFO");
    info.lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// The cost the 2,000 requests/s target counts: a session's pages ask
/// Redis once, then pass on the signed session pass (edge/src/session.rs)
/// however many there are; a forged or borrowed pass is worth nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_pages_cost_redis_one_request() {
    let stack = stack(false).await;
    let base = stack.worker.url();
    stack.queue.enter(&user(0)).await;
    let mut ann = admitted(&stack).await;
    let nav = [("accept", NAVIGATION)];
    // The first page asks Redis (EVALSHA, and EVAL once while the script
    // is new to Redis); the next pages do not.
    let first = send(&base, "GET", "/tickets/1", &ann, &nav).await;
    assert_eq!(first.status, 200);
    keep(&mut ann, &first);
    assert!(ann.contains_key("qg_session"), "{:?}", first.set_cookies());
    let before = script_calls(&stack).await;
    for i in 0..5 {
        let r = send(&base, "GET", &format!("/tickets/{i}"), &ann, &nav).await;
        assert_eq!(r.status, 200);
    }
    assert_eq!(script_calls(&stack).await, before, "the next pages do not");
    // Another visitor with Ann's pass (not her identity) gets nothing from
    // it; a pass with a later end does not verify.
    let bea = admitted(&stack).await;
    let mut borrowed = bea.clone();
    borrowed.insert("qg_session".into(), ann["qg_session"].clone());
    let mut conn = stack.queue.conn.clone();
    let bea_id = bea["qg_visitor"].split('.').next().unwrap().to_string();
    let _: () = redis::cmd("DEL")
        .arg(
            stack
                .queue
                .keys
                .session(&queuegate_shared::UserId::new(&bea_id).unwrap()),
        )
        .arg(
            stack
                .queue
                .keys
                .token(&queuegate_shared::UserId::new(&bea_id).unwrap()),
        )
        .query_async(&mut conn)
        .await
        .expect("DEL");
    let r = send(&base, "GET", "/tickets/1", &borrowed, &nav).await;
    assert_eq!(r.status, 303, "a borrowed pass: {}", r.body);
    let mut forged = ann.clone();
    let pass = ann["qg_session"].clone();
    let (queue, rest) = pass.split_once('.').unwrap();
    let (ends, tail) = rest.split_once('-').unwrap();
    let later: u64 = ends.parse::<u64>().unwrap() + 3_600_000;
    forged.insert("qg_session".into(), format!("{queue}.{later}-{tail}"));
    let calls = script_calls(&stack).await;
    let r = send(&base, "GET", "/tickets/1", &forged, &nav).await;
    assert_eq!(r.status, 200, "Ann's session is live: Redis says so");
    assert_eq!(
        script_calls(&stack).await,
        calls + 1,
        "a forged pass goes to Redis"
    );
}
