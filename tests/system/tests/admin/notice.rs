//! A message to the line (issue 25): the operator sets a short notice with
//! `queuegate-scheduler notice`, and every state reply carries it, the
//! exact ones and those answered at the edge, within the isolate's
//! snapshot interval; a bad notice is refused and changes nothing; clearing
//! it takes it off. Real redis-server, the gateway, the wasm under workerd,
//! the scheduler's binary.

use std::time::{Duration, Instant};

use queuegate_shared::snapshot::REFRESH_MS;
use queuegate_shared::Settings;
use queuegate_system_tests::edge::{EdgeStack, Visitor};
use queuegate_system_tests::user;
use queuegate_testkit::{scheduler, RedisServer};

/// Polls until the reply's notice is `want`; panics past a bound a little
/// over the snapshot interval.
async fn notice_becomes(v: &mut Visitor, want: Option<&str>) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_millis(REFRESH_MS + 3_000);
    loop {
        let r = v.position().await;
        assert_eq!(r.status, 200, "{:?}", r.json);
        if r.json.get("notice").and_then(|n| n.as_str()) == want {
            return r.json;
        }
        assert!(
            Instant::now() < deadline,
            "the notice never became {want:?}: {:?}",
            r.json
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_notice_reaches_every_reply_and_bad_ones_change_nothing() {
    let stack = EdgeStack::start(
        Settings {
            idle_passthrough: false,
            ..Settings::default()
        },
        "anonymous",
        RedisServer::start(),
    )
    .await;
    let operator = scheduler::Operator::new(&stack.redis.url(), &["main"]);
    let cli = |args: &[&str]| {
        let (code, out, err) = operator.run(args);
        (code, format!("{out}{err}"))
    };

    // A line: one visitor at the head (exact answers), a tick for the
    // snapshot the edge reads.
    for n in 0..3 {
        stack.queue.enter(&user(n)).await;
    }
    let mut ann = stack.visitor();
    assert_eq!(ann.enter().await.state(), "waiting");
    stack.admit(0, 0).await;
    let first = ann.position().await;
    assert_eq!(first.state(), "waiting");
    assert!(first.json.get("notice").is_none(), "{:?}", first.json);

    // Refused before Redis is asked: nothing changes.
    let before = stack.snapshot().await;
    for bad in ["", "   ", "two\nlines", &"x".repeat(281)] {
        let (code, text) = cli(&["notice", "main", "--set", bad]);
        assert_eq!(code, Some(2), "{bad:?}: {text}");
        assert!(text.contains("--set: the notice"), "{text}");
    }
    let (code, text) = cli(&["notice", "main"]);
    assert_eq!(code, Some(2), "neither --set nor --clear: {text}");
    assert_eq!(stack.snapshot().await, before, "a refused notice wrote");

    // Set: every reply carries it within the snapshot interval.
    let notice = "Sizes S and M are sold out — L and XL remain.";
    let (code, text) = cli(&["notice", "main", "--set", notice]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("(was none)"), "{text}");
    let json = notice_becomes(&mut ann, Some(notice)).await;
    assert_eq!(json["state"], "waiting");
    // A newcomer's enter and an admitted visitor's reply too.
    let mut bob = stack.visitor();
    let entered = bob.enter().await;
    assert_eq!(entered.json["notice"], notice, "{:?}", entered.json);
    stack.admit(10, 0).await;
    let admitted = ann.position().await;
    assert_eq!(
        (admitted.state(), admitted.json["notice"].as_str()),
        ("admitted", Some(notice))
    );
    let (_, status) = cli(&["status", "main"]);
    assert!(
        status.contains(&format!("notice      {notice:?}")),
        "{status}"
    );

    // Cleared: gone from the replies.
    let (code, text) = cli(&["notice", "main", "--clear"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("notice cleared (was"), "{text}");
    notice_becomes(&mut bob, None).await;
}
