//! docs/scheduler-openapi.yaml is the admin API's contract: every
//! documented operation is driven into every documented status against the
//! running scheduler (real redis-server, the scheduler binary), and each
//! reply's status, headers, content type and body are checked against the
//! document. A documented status no request reached fails the test.

use std::collections::BTreeSet;
use std::time::Duration;

use queuegate_scheduler::config::token_hash;
use queuegate_system_tests::openapi::{Reply, Spec};
use queuegate_testkit::scheduler::Scheduler;
use queuegate_testkit::RedisServer;

const TOKEN: &str = "qga_openapi-test-token-0123456789abcdef";

struct Checker {
    spec: Spec,
    base: String,
    http: reqwest::Client,
    seen: BTreeSet<(String, String, String)>,
}

impl Checker {
    /// Sends `method path` (the document's `template` path) with `body`,
    /// with the token unless `anonymous`, and checks the reply's status
    /// is `want` and that it matches the document.
    async fn check(
        &mut self,
        method: &str,
        template: &str,
        path: &str,
        body: Option<&str>,
        anonymous: bool,
        want: u16,
    ) -> serde_json::Value {
        self.check_as(method, method, template, path, body, anonymous, want)
            .await
    }

    /// [`Self::check`] sending `sent` where the document lists `method`
    /// (a 405 is documented on the methods a route has).
    #[allow(clippy::too_many_arguments)]
    async fn check_as(
        &mut self,
        sent: &str,
        method: &str,
        template: &str,
        path: &str,
        body: Option<&str>,
        anonymous: bool,
        want: u16,
    ) -> serde_json::Value {
        let mut req = self
            .http
            .request(
                sent.parse().expect("method"),
                format!("{}{path}", self.base),
            )
            .timeout(Duration::from_secs(10));
        if !anonymous {
            req = req.bearer_auth(TOKEN);
        }
        if let Some(b) = body {
            req = req
                .header("content-type", "application/json")
                .body(b.to_string());
        }
        let resp = req.send().await.expect("the admin API answers");
        let status = resp.status().as_u16();
        let headers = resp
            .headers()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_string()))
            .collect();
        let reply = Reply {
            method: sent.to_string(),
            status,
            headers,
            body: resp.text().await.unwrap_or_default(),
        };
        let what = format!("{sent} {path}");
        assert_eq!(status, want, "{what}: {}", reply.body);
        let m = method.to_ascii_lowercase();
        let (response, key) = self.spec.response(template, &m, status);
        self.spec.check_response(response, &reply, &what);
        self.seen
            .insert((template.to_string(), method.to_string(), key));
        reply.json()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_admin_status_matches_the_document() {
    let mut redis = RedisServer::start();
    let url = redis.url();
    let hash = token_hash(TOKEN);
    let s = tokio::task::spawn_blocking(move || {
        Scheduler::builder(&url)
            .queue("main", &[])
            .queue("other", &[])
            .admin_tokens(&[("ops", &hash)])
            .start()
    })
    .await
    .unwrap();
    let mut ck = Checker {
        spec: Spec::load("docs/scheduler-openapi.yaml"),
        base: s.admin_url().expect("admin API on"),
        http: reqwest::Client::new(),
        seen: BTreeSet::new(),
    };
    const LIST: &str = "/admin/v1/queues";
    const ONE: &str = "/admin/v1/queues/{queue}";
    const SWITCH: &str = "/admin/v1/queues/{queue}/{switch}";
    const SCHEDULE: &str = "/admin/v1/queues/{queue}/schedule";
    const NOTICE: &str = "/admin/v1/queues/{queue}/notice";
    const RESET: &str = "/admin/v1/queues/{queue}/reset";
    const BYPASSES: &str = "/admin/v1/queues/{queue}/bypasses";
    const BYPASS: &str = "/admin/v1/queues/{queue}/bypasses/{id}";
    const VISITOR: &str = "/admin/v1/queues/{queue}/visitors/{user}";
    const REVOCATION: &str = "/admin/v1/queues/{queue}/visitors/{user}/revocation";
    const SETTINGS: &str = "/admin/v1/queues/{queue}/settings";
    const STOCK: &str = "/admin/v1/queues/{queue}/stock";
    let big = format!(r#"{{"text":"{}"}}"#, "x".repeat(20_000));

    ck.check("GET", LIST, LIST, None, false, 200).await;
    ck.check("GET", ONE, "/admin/v1/queues/main", None, false, 200)
        .await;
    for (sw, want) in [
        ("pause", 200),
        ("resume", 200),
        ("drain", 200),
        ("close", 200),
        ("resume", 409),
        ("open", 200),
    ] {
        ck.check(
            "POST",
            SWITCH,
            &format!("/admin/v1/queues/main/{sw}"),
            None,
            false,
            want,
        )
        .await;
    }
    let at = r#"{"opens_at":"2030-01-01T00:00:00Z","closes_at":"2030-01-02T00:00:00Z"}"#;
    ck.check(
        "PUT",
        SCHEDULE,
        "/admin/v1/queues/main/schedule",
        Some(at),
        false,
        200,
    )
    .await;
    let backwards = r#"{"opens_at":"2030-01-02T00:00:00Z","closes_at":"2030-01-01T00:00:00Z"}"#;
    ck.check(
        "PUT",
        SCHEDULE,
        "/admin/v1/queues/main/schedule",
        Some(backwards),
        false,
        409,
    )
    .await;
    ck.check(
        "PUT",
        SCHEDULE,
        "/admin/v1/queues/main/schedule",
        Some("{}"),
        false,
        400,
    )
    .await;
    // A beacon: an unknown source, or drand with no `[beacon]` configured.
    for beacon in ["nist", "drand"] {
        let body = format!(r#"{{"opens_at":"2030-01-01T00:00:00Z","beacon":"{beacon}"}}"#);
        ck.check(
            "PUT",
            SCHEDULE,
            "/admin/v1/queues/main/schedule",
            Some(&body),
            false,
            400,
        )
        .await;
    }
    ck.check(
        "PUT",
        SCHEDULE,
        "/admin/v1/queues/main/schedule",
        Some(&big),
        false,
        413,
    )
    .await;
    ck.check(
        "DELETE",
        SCHEDULE,
        "/admin/v1/queues/main/schedule",
        None,
        false,
        200,
    )
    .await;
    ck.check(
        "PUT",
        NOTICE,
        "/admin/v1/queues/main/notice",
        Some(r#"{"text":"Sold out"}"#),
        false,
        200,
    )
    .await;
    ck.check(
        "PUT",
        NOTICE,
        "/admin/v1/queues/main/notice",
        Some(r#"{"text":" "}"#),
        false,
        400,
    )
    .await;
    ck.check(
        "PUT",
        NOTICE,
        "/admin/v1/queues/main/notice",
        Some(r#"{"text":"Sold out","texts":{"de":"Ausverkauft","zh-Hant":"已售完"}}"#),
        false,
        200,
    )
    .await;
    ck.check(
        "PUT",
        NOTICE,
        "/admin/v1/queues/main/notice",
        Some(r#"{"text":"Sold out","texts":{"xx":"?"}}"#),
        false,
        400,
    )
    .await;
    ck.check(
        "PUT",
        NOTICE,
        "/admin/v1/queues/main/notice",
        Some(&big),
        false,
        413,
    )
    .await;
    ck.check(
        "DELETE",
        NOTICE,
        "/admin/v1/queues/main/notice",
        None,
        false,
        200,
    )
    .await;
    // The stock: none kept, then set, changed, refused, cleared.
    let stock = "/admin/v1/queues/main/stock";
    let none = ck.check("GET", STOCK, stock, None, false, 200).await;
    assert_eq!(none["left"], serde_json::Value::Null, "{none}");
    ck.check("PUT", STOCK, stock, Some(r#"{"add":5}"#), false, 409)
        .await;
    let set = ck
        .check("PUT", STOCK, stock, Some(r#"{"set":10}"#), false, 200)
        .await;
    assert_eq!(
        (set["left"].clone(), set["sold_out"].clone()),
        (10.into(), false.into())
    );
    for good in [
        r#"{"add":-4}"#,
        r#"{"overbook":25}"#,
        r#"{"overbook":51.0}"#,
        r#"{"overbook":"auto"}"#,
    ] {
        ck.check("PUT", STOCK, stock, Some(good), false, 200).await;
    }
    for bad in [
        "{}",
        r#"{"set":1,"add":1}"#,
        r#"{"set":-1}"#,
        r#"{"add":0}"#,
        r#"{"overbook":101}"#,
        r#"{"overbook":"lots"}"#,
        r#"{"set":2.5}"#,
        r#"{"units":1}"#,
        "[]",
    ] {
        ck.check("PUT", STOCK, stock, Some(bad), false, 400).await;
    }
    ck.check("PUT", STOCK, stock, Some(r#"{"refund":1}"#), false, 409)
        .await;
    ck.check("PUT", STOCK, stock, Some(&big), false, 413).await;
    let left = ck.check("GET", STOCK, stock, None, false, 200).await;
    assert_eq!(left["left"], 6, "a refusal changed nothing: {left}");
    let cleared = ck.check("DELETE", STOCK, stock, None, false, 200).await;
    assert_eq!(cleared["left"], serde_json::Value::Null);

    let main = |tail: &str| format!("/admin/v1/queues/main/{tail}");
    ck.check("POST", RESET, &main("reset"), None, false, 409)
        .await;
    ck.check("POST", SWITCH, &main("close"), None, false, 200)
        .await;
    ck.check("POST", RESET, &main("reset?force=yes"), None, false, 400)
        .await;
    ck.check("POST", RESET, &main("reset?force=true"), None, false, 200)
        .await;

    // A visitor: unknown, then in line.
    ck.check("GET", VISITOR, &main("visitors/user-1"), None, false, 200)
        .await;
    ck.check("GET", VISITOR, &main("visitors/a%20b"), None, false, 400)
        .await;
    // Revoked, looked up, lifted; then nothing to lift.
    let revocation = main("visitors/user-1/revocation");
    ck.check("PUT", REVOCATION, &revocation, None, false, 200)
        .await;
    ck.check(
        "PUT",
        REVOCATION,
        &revocation,
        Some(r#"{"minutes":5}"#),
        false,
        200,
    )
    .await;
    let seen = ck
        .check("GET", VISITOR, &main("visitors/user-1"), None, false, 200)
        .await;
    assert_eq!(seen["state"], "revoked", "{seen}");
    for bad in [r#"{"minutes":0}"#, r#"{"minutes":"5"}"#, "[]", "{"] {
        ck.check("PUT", REVOCATION, &revocation, Some(bad), false, 400)
            .await;
    }
    ck.check("PUT", REVOCATION, &revocation, Some(&big), false, 413)
        .await;
    ck.check("DELETE", REVOCATION, &revocation, None, false, 200)
        .await;
    ck.check("DELETE", REVOCATION, &revocation, None, false, 409)
        .await;
    ck.check(
        "DELETE",
        REVOCATION,
        &main("visitors/a%7Bb/revocation"),
        None,
        false,
        400,
    )
    .await;

    // Run-time settings: the document names every setting, and only those.
    let mut names: Vec<String> = ck.spec.doc["components"]["schemas"]["SettingName"]["enum"]
        .as_array()
        .expect("a SettingName enum")
        .iter()
        .filter_map(|n| n.as_str().map(String::from))
        .collect();
    names.sort_unstable();
    assert_eq!(names, queuegate_shared::Settings::field_names());
    // Shown, changed, refused, cleared.
    let settings = main("settings");
    ck.check("GET", SETTINGS, &settings, None, false, 200).await;
    ck.check(
        "PUT",
        SETTINGS,
        &settings,
        Some(r#"{"max_active":50}"#),
        false,
        200,
    )
    .await;
    for bad in [r#"{"max_active":0}"#, r#"{"speed":1}"#, "{}", "[]"] {
        ck.check("PUT", SETTINGS, &settings, Some(bad), false, 400)
            .await;
    }
    let big_settings = format!(r#"{{"max_active":{}}}"#, "1".repeat(20_000));
    ck.check("PUT", SETTINGS, &settings, Some(&big_settings), false, 413)
        .await;
    ck.check("DELETE", SETTINGS, &settings, None, false, 200)
        .await;

    // Bypass links.
    let qa = r#"{"name":"qa alice","ttl_minutes":30}"#;
    let created = ck
        .check("POST", BYPASSES, &main("bypasses"), Some(qa), false, 201)
        .await;
    let id = created["id"].as_str().expect("an id").to_string();
    ck.check("GET", BYPASSES, &main("bypasses"), None, false, 200)
        .await;
    for bad in [r#"{"name":"a|b"}"#, r#"{"name":"x","ttl_minutes":0}"#, "{}"] {
        ck.check("POST", BYPASSES, &main("bypasses"), Some(bad), false, 400)
            .await;
    }
    ck.check("POST", BYPASSES, &main("bypasses"), Some(&big), false, 413)
        .await;
    ck.check(
        "DELETE",
        BYPASS,
        &main(&format!("bypasses/{id}")),
        None,
        false,
        200,
    )
    .await;
    ck.check("DELETE", BYPASS, &main("bypasses/nope"), None, false, 400)
        .await;
    ck.check(
        "DELETE",
        BYPASS,
        &main("bypasses/0123456789ab"),
        None,
        false,
        404,
    )
    .await;
    for _ in 0..queuegate_shared::bypass::MAX_LIVE {
        ck.http
            .post(format!("{}{}", ck.base, main("bypasses")))
            .bearer_auth(TOKEN)
            .body(qa)
            .send()
            .await
            .expect("create");
    }
    ck.check("POST", BYPASSES, &main("bypasses"), Some(qa), false, 409)
        .await;

    // Every operation as a concrete request on `queue`, with a body the
    // route takes.
    let path_of = |template: &str, queue: &str| {
        template
            .replace("{queue}", queue)
            .replace("{switch}", "pause")
            .replace("{id}", "0123456789ab")
            .replace("{user}", "user-1")
    };
    let body_of = |template: &str| match template {
        SCHEDULE => Some(at),
        NOTICE => Some(r#"{"text":"x"}"#),
        BYPASSES => Some(r#"{"name":"x"}"#),
        SETTINGS => Some(r#"{"max_active":60}"#),
        STOCK => Some(r#"{"set":1}"#),
        _ => None,
    };

    // 401 and 404 and 405 on every operation.
    let ops: Vec<(String, String)> = ck
        .spec
        .documented()
        .into_iter()
        .map(|(p, m, _)| (p, m))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    for (template, method) in &ops {
        let (concrete, body) = (path_of(template, "main"), body_of(template));
        ck.check(method, template, &concrete, body, true, 401).await;
        if template != LIST {
            let unknown = path_of(template, "nope");
            ck.check(method, template, &unknown, body, false, 404).await;
        }
        ck.check_as("PATCH", method, template, &concrete, None, false, 405)
            .await;
    }

    // Redis gone: 503, nothing changed (there is nothing to change).
    redis.stop();
    for (template, method) in &ops {
        let (concrete, body) = (path_of(template, "main"), body_of(template));
        ck.check(method, template, &concrete, body, false, 503)
            .await;
    }

    // A settings write that lost a race to another writer (409) cannot
    // be provoked from one client; runtime_settings.rs drives the
    // script's refusal of a stale read directly.
    for method in ["PUT", "DELETE"] {
        ck.seen
            .insert((SETTINGS.to_string(), method.to_string(), "409".to_string()));
    }
    let missing: Vec<_> = ck.spec.documented().difference(&ck.seen).cloned().collect();
    assert!(missing.is_empty(), "documented but never seen: {missing:?}");
    drop(s);
}
