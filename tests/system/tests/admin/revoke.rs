//! Revoking a visitor (issue 26) on the real stack: redis-server, the
//! gateway, the wasm under workerd, a test origin and the scheduler's
//! binary for the operator's command. A revoked visitor's place or token
//! ends at once; the worker answers `revoked` to its polls and entries and
//! passes it nowhere, idle passthrough included, until the revocation is
//! lifted; a pre-queued visitor keeps its pre-queue place (the draw's
//! indices stay dense) but is never drawn.

use queuegate_shared::ops::{Change, Revoke, RevokeCall, RevokeReply};
use queuegate_shared::state::UserState;
use queuegate_shared::{Settings, UserId};
use queuegate_system_tests::drop_day::{
    enter_pipelined, in_ms, open_now, position, schedule, DrawRun,
};
use queuegate_system_tests::edge::EdgeStack;
use queuegate_system_tests::{user, TestQueue};
use queuegate_testkit::{scheduler, RedisServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_visitor_is_told_so_and_passes_nowhere_until_lifted() {
    let stack = EdgeStack::start(
        Settings {
            idle_passthrough: true,
            ..Settings::default()
        },
        "anonymous",
        RedisServer::start(),
    )
    .await;
    let operator = scheduler::Operator::new(&stack.redis.url(), &["main"]);
    let cli = |args: &[&str]| operator.run(args);

    // Idle room: token-less orders pass at once, again and again, until
    // the visitor is revoked.
    let mut early = stack.visitor();
    for _ in 0..2 {
        let passed = early.order(None).await;
        assert_eq!(passed.status, 200, "idle passthrough: {:?}", passed.json);
        // The settle runs after the answer: wait until the slot is free.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while early.position().await.state() != "ordered" {
            assert!(
                std::time::Instant::now() < deadline,
                "the order never settled"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    let orders_before = stack.origin.hits().len();
    let early_id = early.id().expect("a visitor id");
    let (code, out, err) = cli(&["visitor", "main", "--id", &early_id, "--revoke"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("revoked (was ordered)"), "{out}");
    let refused = early.order(None).await;
    assert_eq!(
        (refused.status, refused.error()),
        (403, "queue_required"),
        "{:?}",
        refused.json
    );
    assert_eq!(
        stack.origin.hits().len(),
        orders_before,
        "not passed to the shop"
    );
    assert_eq!(
        early.enter().await.state(),
        "revoked",
        "no place while revoked"
    );

    // Two in line (paused: nobody is admitted or passed).
    assert_eq!(cli(&["pause", "main"]).0, Some(0));
    let mut a = stack.visitor();
    let mut b = stack.visitor();
    assert_eq!(a.enter().await.state(), "waiting");
    assert_eq!(b.enter().await.state(), "waiting");
    let a_id = a.id().expect("a visitor id");
    let (code, out, err) = cli(&["visitor", "main", "--id", &a_id, "--revoke"]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("revoked (was waiting)"), "{out}");
    let polled = a.position().await;
    assert_eq!(
        (polled.status, polled.state()),
        (200, "revoked"),
        "{:?}",
        polled.json
    );
    assert_eq!(
        a.enter().await.state(),
        "revoked",
        "no new place while revoked"
    );
    assert_eq!(
        b.position().await.json["position"],
        1,
        "the one behind moves up"
    );

    // An admitted visitor: its token stops working.
    assert_eq!(cli(&["resume", "main"]).0, Some(0));
    stack.admit(1, 0).await;
    let token = b.position().await.json["token"]
        .as_str()
        .expect("b is admitted")
        .to_string();
    let first_id = b.id().expect("an id");
    let (code, out, err) = cli(&[
        "visitor",
        "main",
        "--id",
        &first_id,
        "--revoke",
        "--minutes",
        "2",
    ]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        out.contains("revoked (was admitted)") && out.contains("2 min"),
        "{out}"
    );
    let spent = b.order(Some(&token)).await;
    assert_eq!(
        (spent.status, spent.error()),
        (403, "token_invalid"),
        "{:?}",
        spent.json
    );
    assert_eq!(
        stack.origin.hits().len(),
        orders_before,
        "nothing reached the shop"
    );
    assert_eq!(b.position().await.state(), "revoked");

    // Its history: admitted, then revoked; never the token.
    let (code, out, _) = cli(&["visitor", "main", "--id", &first_id, "--json"]);
    assert_eq!(code, Some(0));
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let kinds: Vec<&str> = v["history"]
        .as_array()
        .expect("history")
        .iter()
        .filter_map(|c| c["status"].as_str())
        .collect();
    assert_eq!(kinds, ["ISSUED", "REVOKED"], "{v}");
    assert!(!out.contains(&token));

    // Bad input changes nothing.
    let before = stack.snapshot().await;
    for args in [
        vec![
            "visitor",
            "main",
            "--id",
            &a_id,
            "--revoke",
            "--minutes",
            "0",
        ],
        vec!["visitor", "main", "--id", "a{b", "--revoke"],
        vec!["visitor", "main", "--id", &a_id, "--revoke", "--lift"],
        vec!["visitor", "main", "--id", &first_id, "--minutes", "3"],
    ] {
        let (code, out, err) = cli(&args);
        assert_ne!(code, Some(0), "{args:?}: {out}");
        assert!(!err.is_empty(), "{args:?} says why");
    }
    assert_eq!(stack.snapshot().await, before);

    // Lifted: the visitor enters anew.
    let (code, out, err) = cli(&["visitor", "main", "--id", &a_id, "--lift"]);
    assert_eq!(code, Some(0), "{out}{err}");
    let back = a.enter().await;
    // The room is idle again, so it may be admitted at once.
    assert!(
        matches!(back.state(), "waiting" | "admitted"),
        "{:?}",
        back.json
    );
    let (code, _, err) = cli(&["visitor", "main", "--id", &a_id, "--lift"]);
    assert_ne!(code, Some(0));
    assert!(err.contains("not revoked"), "{err}");
    assert_eq!(stack.queue.stat("revoked").await, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_pre_queued_visitor_is_never_drawn() {
    const N: usize = 20;
    let redis = RedisServer::start();
    let q = TestQueue::open(&redis.url(), "drop", Settings::default()).await;
    schedule(&q, Change::Set(in_ms(3_600_000)), Change::Keep).await;
    let users: Vec<UserId> = (0..N).map(user).collect();
    enter_pipelined(&q, &users).await;
    let revoked = &users[7];
    let reply = q
        .run(&Revoke {
            keys: &q.keys,
            user: revoked,
            call: RevokeCall::Revoke { for_ms: 60_000 },
        })
        .await
        .expect("revoke");
    assert_eq!(
        reply,
        RevokeReply::Revoked {
            was: "pre_queued".into()
        }
    );
    assert!(matches!(
        q.position(revoked).await,
        queuegate_shared::ops::Observed::Settled(UserState::Revoked)
    ));

    open_now(&q).await;
    let mut run = DrawRun::open(&q, "test", [7; 32]).await.expect("sealed");
    assert_eq!(run.drawing().size(), N as u64, "the pre-queue stays dense");
    run.finish(&q, 6).await;
    assert_eq!(run.placed(), N as u64 - 1, "everyone but the revoked one");
    let mut positions = Vec::new();
    for u in users.iter().filter(|u| *u != revoked) {
        positions.push(position(&q.position(u).await).expect("placed in line"));
    }
    positions.sort_unstable();
    assert_eq!(positions, (1..N as u64).collect::<Vec<_>>());
    assert!(matches!(
        q.position(revoked).await,
        queuegate_shared::ops::Observed::Settled(UserState::Revoked)
    ));
    q.assert_conserved().await;
}
