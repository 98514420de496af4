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

/// The reply's notice for a poll whose browser asks for `accept_language`.
async fn notice_in(v: &mut Visitor, accept_language: &str) -> Option<String> {
    let r = v
        .send_with(
            "GET",
            "/queue/position?queue=main",
            None,
            None,
            &[("accept-language", accept_language)],
        )
        .await;
    assert_eq!(r.status, 200, "{:?}", r.json);
    r.json
        .get("notice")
        .and_then(|n| n.as_str())
        .map(String::from)
}

/// The notice in several languages (issue 36): `--lang` gives a text per
/// language of the page, each reply carries the one for the language the
/// page is in (chosen from Accept-Language as the page is, zh-TW getting
/// Traditional Chinese), everybody else the default; an unknown language,
/// a text too long, a language twice or too many languages are refused
/// and change nothing; a new notice without texts drops the old ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_notice_speaks_each_visitors_language_and_bad_texts_change_nothing() {
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
    for n in 0..2 {
        stack.queue.enter(&user(n)).await;
    }
    let mut ann = stack.visitor();
    assert_eq!(ann.enter().await.state(), "waiting");
    stack.admit(0, 0).await;

    let default = "Sizes S and M are sold out";
    let (code, text) = cli(&[
        "notice",
        "main",
        "--set",
        default,
        "--lang",
        "de=Größen S und M sind ausverkauft",
        "--lang",
        "zh-Hant=S 與 M 尺寸已售完",
        "--lang",
        "fr=Tailles S et M <b>épuisées</b>",
    ]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains(r#"de: "Größen S und M sind ausverkauft""#),
        "{text}"
    );
    notice_becomes(&mut ann, Some(default)).await;
    let (_, status) = cli(&["status", "main"]);
    assert!(
        status.contains(&format!("  notice      {default:?}\n"))
            && status.contains("    zh-Hant   \"S 與 M 尺寸已售完\"\n"),
        "{status}"
    );
    for (asked, want) in [
        ("de-AT,de;q=0.9,en;q=0.5", "Größen S und M sind ausverkauft"),
        ("zh-TW", "S 與 M 尺寸已售完"),
        ("zh-HK,en;q=0.5", "S 與 M 尺寸已售完"),
        // Simplified Chinese has no text of its own: the default.
        ("zh-CN", default),
        ("fr-CA", "Tailles S et M <b>épuisées</b>"),
        ("ja", default),
        ("sv-SE", default),
    ] {
        assert_eq!(
            notice_in(&mut ann, asked).await.as_deref(),
            Some(want),
            "{asked}"
        );
    }

    // Refused before Redis is asked, each with its reason: nothing changes.
    let before = stack.snapshot().await;
    let long = format!("de={}", "ü".repeat(281));
    let many: Vec<String> = [
        "en", "de", "es", "fr", "ja", "ko", "pt", "zh", "zh-Hant", "de",
    ]
    .iter()
    .map(|l| format!("{l}=x"))
    .collect();
    let mut too_many = vec!["notice", "main", "--set", "x"];
    for l in &many {
        too_many.extend(["--lang", l.as_str()]);
    }
    for (args, why) in [
        (
            vec!["notice", "main", "--set", "x", "--lang", "xx=?"],
            "--lang: \"xx\" is not a language of the page",
        ),
        (
            vec!["notice", "main", "--set", "x", "--lang", "zh-TW=?"],
            "use one of: en, de, es, fr, ja, ko, pt, zh, zh-Hant",
        ),
        (
            vec!["notice", "main", "--set", "x", "--lang", long.as_str()],
            "--lang: the \"de\" text: the notice is longer than 280 characters",
        ),
        (
            vec![
                "notice", "main", "--set", "x", "--lang", "de=a", "--lang", "de=b",
            ],
            "--lang: \"de\" is given twice",
        ),
        (
            vec!["notice", "main", "--set", "x", "--lang", "Ausverkauft"],
            "give a language and its text as LANG=TEXT",
        ),
        (too_many, "--lang: too many languages: 10 given, at most 9"),
    ] {
        let (code, text) = cli(&args);
        assert_eq!(code, Some(2), "{args:?}: {text}");
        assert!(text.contains(why), "{args:?}: {text}");
    }
    assert_eq!(stack.snapshot().await, before, "a refused notice wrote");
    assert_eq!(
        notice_in(&mut ann, "de").await.as_deref(),
        Some("Größen S und M sind ausverkauft")
    );

    // A new notice without texts per language: the old texts go with the
    // old notice, so nobody reads a stale translation.
    let (code, text) = cli(&["notice", "main", "--set", "Back at 3 pm"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains(r#"was "Sizes S and M are sold out", de: "#),
        "{text}"
    );
    notice_becomes(&mut ann, Some("Back at 3 pm")).await;
    assert_eq!(
        notice_in(&mut ann, "de").await.as_deref(),
        Some("Back at 3 pm")
    );
    let (code, _) = cli(&["notice", "main", "--clear"]);
    assert_eq!(code, Some(0));
    notice_becomes(&mut ann, None).await;
}
