//! Staff and QA bypass links (issue 26) on the real stack: redis-server,
//! the gateway, the wasm under workerd, a test origin and the scheduler's
//! binary for the operator's commands. A link minted with `bypass create`
//! sets its cookie when opened, passes the queue's gate without a token or
//! a slot, signed to the origin like every gated request, counted per use;
//! a revoked or expired link stops at the next request; a forged one, or
//! one for another queue, gets nothing; the number of live links is capped.

use queuegate_edge::signing::USER_HEADER;
use queuegate_shared::bypass;
use queuegate_shared::fields::stats as sf;
use queuegate_shared::ops::{Bypass, BypassCall, BypassReply};
use queuegate_shared::Settings;
use queuegate_system_tests::edge::{EdgeStack, Visitor};
use queuegate_testkit::{scheduler, RedisServer};

const ORDER: &str = r#"{"item":"ticket"}"#;

/// Opens `path` without following its redirect; returns the status, the
/// Location and the visitor with the cookies it set.
async fn open(base: &str, path: &str, mut v: Visitor) -> (u16, Option<String>, Visitor) {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let resp = http
        .get(format!("{base}{path}"))
        .send()
        .await
        .expect("the worker answers");
    let status = resp.status().as_u16();
    let location = resp
        .headers()
        .get("location")
        .and_then(|l| l.to_str().ok())
        .map(String::from);
    for c in resp.headers().get_all("set-cookie") {
        let c = c.to_str().unwrap_or_default();
        if let Some((k, v2)) = queuegate_testkit::set_cookie_pair(c) {
            v.cookies.insert(k.to_string(), v2.to_string());
        }
    }
    (status, location, v)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bypass_link_passes_the_gate_until_it_is_revoked_or_expires() {
    let stack = EdgeStack::start(
        Settings {
            idle_passthrough: false,
            ..Settings::default()
        },
        "anonymous",
        RedisServer::start(),
    )
    .await;
    // A visitor in line, so nobody passes without a token.
    stack.visitor().enter().await;
    let operator = scheduler::Operator::new(&stack.redis.url(), &["main", "other"]);
    let cli = |args: &[&str]| operator.run(args);

    let (code, out, err) = cli(&[
        "bypass",
        "create",
        "main",
        "--name",
        "qa alice",
        "--minutes",
        "30",
    ]);
    assert_eq!(code, Some(0), "{out}{err}");
    let link = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("/queue/bypass?"))
        .map(|q| format!("/queue/bypass?{q}"))
        .expect("the link is printed");
    let key = link.split("key=").nth(1).expect("key").to_string();
    let id = bypass::parts(&key).expect("a key's shape").id;
    assert!(
        err.contains("action=\"bypass_create\"") && !err.contains(&key),
        "{err}"
    );

    // Without the link: refused as anyone.
    let mut staff = stack.visitor();
    let r = staff.send("POST", "/orders", None, Some(ORDER)).await;
    assert_eq!(
        (r.status, r.error()),
        (403, "queue_required"),
        "{:?}",
        r.json
    );

    // Opened: its cookie, then on to `return`.
    let (status, location, mut staff) = open(
        &stack.worker.url(),
        &format!("{link}&return=/tickets/7"),
        staff,
    )
    .await;
    assert_eq!((status, location.as_deref()), (303, Some("/tickets/7")));
    assert_eq!(
        staff.cookies.get("qg_bypass").map(String::as_str),
        Some(format!("main.{key}").as_str())
    );
    for _ in 0..2 {
        let r = staff.send("POST", "/orders", None, Some(ORDER)).await;
        assert_eq!(r.status, 200, "{:?}", r.json);
    }
    // Signed to the origin as every gated request, under the link's id;
    // no slot taken, each use counted.
    let hits = stack.origin.hits();
    assert_eq!(hits.len(), 2);
    assert_eq!(
        hits[0].header(USER_HEADER),
        Some(format!("bypass-{id}").as_str())
    );
    assert!(hits[0]
        .header("cookie")
        .is_none_or(|c| !c.contains("qg_bypass")));
    assert_eq!(stack.queue.zcard(&stack.queue.keys.active()).await, 0);
    assert_eq!(stack.queue.stat(sf::BYPASSED).await, 2);
    let (_, status, _) = cli(&["status", "main"]);
    assert!(status.contains("bypassed    2 requests"), "{status}");
    let (code, out, _) = cli(&["bypass", "list", "main", "--json"]);
    assert_eq!(code, Some(0));
    let listed: serde_json::Value = serde_json::from_str(&out).expect("JSON list");
    assert_eq!(listed[0]["id"], id.as_str());
    assert_eq!(listed[0]["name"], "qa alice");
    assert_eq!(listed[0]["status"], "live");
    assert_eq!(listed[0]["uses"], 2);
    assert!(!out.contains(&key), "the key is never listed");

    // Not for another queue, and not forged.
    let mut elsewhere = stack.visitor();
    elsewhere
        .cookies
        .insert("qg_bypass".into(), format!("other.{key}"));
    let r = elsewhere.send("POST", "/orders", None, Some(ORDER)).await;
    assert_eq!(r.status, 403, "another queue's cookie passes nothing");
    let forged = bypass::mint([1; 32]);
    let mut forger = stack.visitor();
    forger
        .cookies
        .insert("qg_bypass".into(), format!("main.{forged}"));
    assert_eq!(
        forger
            .send("POST", "/orders", None, Some(ORDER))
            .await
            .status,
        403
    );
    let (status, _, _) = open(
        &stack.worker.url(),
        &format!("/queue/bypass?queue=main&key={forged}"),
        stack.visitor(),
    )
    .await;
    assert_eq!(status, 403);
    assert_eq!(
        stack.origin.hits().len(),
        2,
        "nothing else reached the origin"
    );

    // Revoked: the next request queues like anyone's.
    let (code, out, err) = cli(&["bypass", "revoke", "main", "--id", &id]);
    assert_eq!(code, Some(0), "{out}{err}");
    let r = staff.send("POST", "/orders", None, Some(ORDER)).await;
    assert_eq!(
        (r.status, r.error()),
        (403, "queue_required"),
        "{:?}",
        r.json
    );
    let (status, _, _) = open(&stack.worker.url(), &link, stack.visitor()).await;
    assert_eq!(status, 403);
    let (_, out, _) = cli(&["bypass", "list", "main", "--json"]);
    assert!(out.contains("\"revoked\""), "{out}");
    let (code, _, err) = cli(&["bypass", "revoke", "main", "--id", "000000000000"]);
    assert_eq!(code, Some(1), "{err}");
    let (code, _, err) = cli(&["bypass", "revoke", "main", "--id", "nope"]);
    assert_eq!(code, Some(2), "{err}");
    let (code, _, err) = cli(&["bypass", "create", "main", "--name", "a|b"]);
    assert_eq!(code, Some(2), "{err}");
    let (code, _, err) = cli(&["bypass", "create", "main", "--name", "x", "--minutes", "0"]);
    assert_eq!(code, Some(2), "{err}");

    // Expired: a link whose time is up passes nothing.
    let (_, out, _) = cli(&[
        "bypass",
        "create",
        "main",
        "--name",
        "qa bob",
        "--minutes",
        "1",
    ]);
    let bob_key = out
        .split("key=")
        .nth(1)
        .map(str::trim)
        .expect("key")
        .to_string();
    let bob = bypass::parts(&bob_key).expect("key").id;
    let mut conn = stack.queue.conn.clone();
    let record: String = redis::cmd("HGET")
        .arg(stack.queue.keys.bypass())
        .arg(&bob)
        .query_async(&mut conn)
        .await
        .expect("record");
    let mut fields: Vec<&str> = record.split('|').collect();
    fields[1] = "1000";
    let _: () = redis::cmd("HSET")
        .arg(stack.queue.keys.bypass())
        .arg(&bob)
        .arg(fields.join("|"))
        .query_async(&mut conn)
        .await
        .expect("age the record");
    let (status, _, _) = open(
        &stack.worker.url(),
        &format!("/queue/bypass?queue=main&key={bob_key}"),
        stack.visitor(),
    )
    .await;
    assert_eq!(status, 403, "an expired link");

    // At most MAX_LIVE live links at once.
    for n in 0..bypass::MAX_LIVE {
        let mut random = [0u8; 32];
        random[..8].copy_from_slice(&n.to_le_bytes());
        random[31] = 0xee;
        let k = bypass::mint(random);
        let parts = bypass::parts(&k).expect("key");
        let r = stack
            .queue
            .run(&Bypass {
                keys: &stack.queue.keys,
                call: BypassCall::Create {
                    key: &parts,
                    ttl_ms: 600_000,
                    name: "load",
                },
            })
            .await
            .expect("create");
        assert!(matches!(r, BypassReply::Created { .. }), "{n}: {r:?}");
    }
    let (code, _, err) = cli(&["bypass", "create", "main", "--name", "one more"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("live bypass links already"), "{err}");
}
