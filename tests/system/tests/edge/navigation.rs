//! Sent to the room and back (issue 25): a person who opens a protected
//! page without a usable entry token is answered 303 to the waiting room
//! with the path they wanted; JSON clients keep the 403; the room's
//! Continue leads back there, and the page the token opens is the one they
//! wanted. Real redis-server, the gateway, the built wasm under workerd.

use std::collections::BTreeMap;
use std::time::Duration;

use queuegate_shared::Settings;
use queuegate_system_tests::edge::{raw_request, EdgeStack, RawReply, ORIGIN_SECRET};
use queuegate_system_tests::user;
use queuegate_testkit::RedisServer;

/// What Chromium sends when a person navigates.
const NAVIGATION: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7";

/// A request as a browser would send it with `accept`, cookies included
/// (the entry token's too), never following a redirect.
async fn raw(
    base: &str,
    method: &str,
    path: &str,
    accept: &str,
    cookies: &BTreeMap<String, String>,
) -> RawReply {
    raw_request(base, method, path, cookies, &[("accept", accept)]).await
}

async fn stack() -> EdgeStack {
    EdgeStack::start_with(
        Settings {
            entry_budget_per_minute: 0,
            idle_passthrough: false,
            ..Settings::default()
        },
        "anonymous",
        RedisServer::start(),
        &[
            ("ENTRY_CHALLENGE", "off"),
            // The page spends the token (a one-time page); browse pages are
            // tests/system/tests/edge/visit.rs's.
            ("PROTECTED_ROUTES", "POST /orders, spend GET /tickets/*"),
            ("CONTINUE_URL", "/checkout"),
        ],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_without_a_token_is_sent_to_the_room_and_api_clients_keep_json() {
    let stack = stack().await;
    let base = stack.worker.url();
    stack.queue.enter(&user(0)).await;
    let before = stack.snapshot().await;
    let none = BTreeMap::new();

    // A person opening a protected page: 303 to the room, the wanted path
    // and query in one `return` parameter.
    let r = raw(&base, "GET", "/tickets/7?size=M&n=2", NAVIGATION, &none).await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(
        r.header("location"),
        Some("/queue?queue=main&return=/tickets/7%3Fsize%3DM%26n%3D2")
    );
    assert_eq!(r.header("vary"), Some("accept"));
    assert_eq!(r.header("cache-control"), Some("no-store"));
    // A POST to a protected route is never answered 303 (the browser
    // would GET its action after the room): the room itself, whose
    // Continue leads to CONTINUE_URL for a body it did not keep (a form
    // it keeps: tests/system/tests/edge/visit.rs).
    let form = raw(&base, "POST", "/orders", "text/html", &none).await;
    assert_eq!((form.status, form.header("location")), (200, None));
    assert!(
        form.body.contains(r#""continueUrl":"/checkout""#),
        "{}",
        form.body
    );
    assert!(!form.body.contains(r#""form":"#));
    // API clients and fetch() keep the JSON refusal, which varies too.
    for accept in [
        "application/json",
        "*/*",
        "text/html;q=0.5, application/json",
    ] {
        let r = raw(&base, "GET", "/tickets/7", accept, &none).await;
        assert_eq!(r.status, 403, "{accept}: {}", r.body);
        assert_eq!(r.json()["error"], "queue_required", "{accept}");
        assert_eq!(r.header("vary"), Some("accept"));
        assert_eq!(r.header("location"), None);
    }
    // An unprotected path is the origin's, whatever the Accept.
    let open = raw(&base, "GET", "/about", NAVIGATION, &none).await;
    assert_eq!(open.status, 200);
    assert_eq!(stack.snapshot().await, before, "a redirect wrote to Redis");
    let hits = stack.origin.hits();
    assert_eq!(hits.len(), 1, "only /about reached the origin: {hits:?}");

    // The room's page keeps the return target: Continue leads back there.
    let page = raw(
        &base,
        "GET",
        "/queue?queue=main&return=/tickets/7%3Fsize%3DM%26n%3D2",
        NAVIGATION,
        &none,
    )
    .await;
    assert_eq!(page.status, 200);
    assert!(
        page.body
            .contains(r#""continueUrl":"/tickets/7?size=M&n=2""#),
        "{}",
        page.body
    );
    let plain = raw(&base, "GET", "/queue?queue=main", NAVIGATION, &none).await;
    assert!(plain.body.contains(r#""continueUrl":"/checkout""#));

    // A return target that is not a path on this site is refused in plain
    // words: never an open redirect, and nothing changes.
    for bad in [
        "https://evil.example/",
        "//evil.example/",
        "%2F%2Fevil.example",
        "/%5Cevil.example",
        "/%09/evil.example",
        "javascript:alert(1)",
        "/queue%3Fqueue%3Dmain",
        "%FF",
    ] {
        let r = raw(
            &base,
            "GET",
            &format!("/queue?queue=main&return={bad}"),
            NAVIGATION,
            &none,
        )
        .await;
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
        assert_eq!(r.json()["error"], "bad_request", "{bad}");
        assert!(r.json()["message"]
            .as_str()
            .unwrap_or_default()
            .contains("`return`"));
        assert!(!r.body.contains("evil.example"), "{bad}: echoed");
    }
    let long = format!("/queue?queue=main&return=/{}", "a".repeat(2_100));
    assert_eq!(
        raw(&base, "GET", &long, NAVIGATION, &none).await.status,
        400
    );
    // A wanted path too long to come back is left out of the redirect.
    let far = format!("/tickets/{}", "9".repeat(2_100));
    let r = raw(&base, "GET", &far, NAVIGATION, &none).await;
    assert_eq!(
        (r.status, r.header("location")),
        (303, Some("/queue?queue=main"))
    );
    assert_eq!(stack.snapshot().await, before, "a refusal wrote to Redis");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_opens_the_page_that_was_wanted_once_then_the_room_again() {
    let stack = stack().await;
    let base = stack.worker.url();
    stack.queue.enter(&user(0)).await;
    let mut ann = stack.visitor();
    assert_eq!(ann.enter().await.state(), "waiting");
    stack.admit(2, 0).await;
    let admitted = ann.position().await;
    assert_eq!(admitted.state(), "admitted", "{:?}", admitted.json);
    assert!(
        ann.cookies.contains_key("qg_token"),
        "the admitted reply sets the token cookie: {:?}",
        ann.cookies
    );

    // The browser follows Continue to the page it wanted, its cookies with
    // it: the gate spends the token and forwards the GET, signed.
    let r = raw(&base, "GET", "/tickets/7", NAVIGATION, &ann.cookies).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let hits = stack.origin.hits();
    assert_eq!(hits.len(), 1);
    let hit = &hits[0];
    assert_eq!(
        (hit.method.as_str(), hit.path.as_str()),
        ("GET", "/tickets/7")
    );
    let user = ann.id().expect("visitor id");
    let time: u64 = hit
        .header("x-queuegate-time")
        .and_then(|t| t.parse().ok())
        .expect("signed time");
    let expected = queuegate_edge::signing::sign(
        ORIGIN_SECRET.as_bytes(),
        "main",
        &user,
        time,
        "GET",
        "/tickets/7",
    );
    assert_eq!(hit.header("x-queuegate-signature"), Some(expected.as_str()));

    // The token is spent: a reload of the page sends the person to the
    // room (which shows their state), an API client gets the JSON 409.
    for _ in 0..100 {
        if ann.position().await.state() == "ordered" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let again = raw(&base, "GET", "/tickets/7", NAVIGATION, &ann.cookies).await;
    assert_eq!(
        (again.status, again.header("location")),
        (303, Some("/queue?queue=main&return=/tickets/7"))
    );
    let api = raw(&base, "GET", "/tickets/7", "application/json", &ann.cookies).await;
    assert_eq!(
        (api.status, api.json()["error"].as_str()),
        (409, Some("token_used"))
    );
    // A forged token is no way in either.
    let mut forged = ann.cookies.clone();
    forged.insert("qg_token".into(), "0".repeat(32));
    let r = raw(&base, "GET", "/tickets/7", NAVIGATION, &forged).await;
    assert_eq!(r.status, 303);
    assert_eq!(
        stack.origin.hits().len(),
        1,
        "nothing else reached the origin"
    );
}
