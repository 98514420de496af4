//! A drop that knows its stock (issue #40), on real processes: the
//! operator's `stock` command, admission that lets out no more turns than
//! the units left allow, the whole line told `sold_out` at once, orders
//! that never reach the shop once the stock is gone (however many race
//! for the last unit), the origin's `Queuegate-Units`, refunds, and a
//! restock that reopens the line in the same order.

use std::time::{Duration, Instant};

use queuegate_shared::ops::{EnterReply, Observed, PassReply};
use queuegate_shared::Settings;
use queuegate_system_tests::drop_day::eventually;
use queuegate_system_tests::edge::{raw_request, EdgeStack, Visitor};
use queuegate_system_tests::{fast_settings, grants, user, TestQueue};
use queuegate_testkit::scheduler::Operator;
use queuegate_testkit::RedisServer;

/// `queuegate-scheduler stock ARGS…` on `redis_url`: exit code and output.
fn stock(op: &Operator, args: &[&str]) -> (Option<i32>, String) {
    let mut all = vec!["stock"];
    all.extend_from_slice(args);
    let (code, out, err) = op.run(&all);
    (code, format!("{out}{err}"))
}

/// The stock as `stock main --json` shows it.
fn shown(op: &Operator) -> serde_json::Value {
    let (code, out, err) = op.run(&["stock", "main", "--json"]);
    assert_eq!(code, Some(0), "{out}{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// POST /orders the edge's origin received.
fn orders_at_the_shop(stack: &EdgeStack) -> usize {
    stack
        .origin
        .hits()
        .iter()
        .filter(|h| h.method == "POST" && h.path.starts_with("/orders"))
        .count()
}

/// Polls every visitor once; each admitted one orders at once, all at the
/// same moment. Returns the indexes newly admitted and the orders' statuses.
async fn poll_and_order(crowd: &mut [Visitor], done: &mut [bool]) -> (Vec<usize>, Vec<u16>) {
    let mut admitted = Vec::new();
    for (i, v) in crowd.iter_mut().enumerate() {
        if !done[i] && v.position().await.state() == "admitted" {
            admitted.push(i);
        }
    }
    let statuses = order_at_once(admitted.iter().map(|&i| crowd[i].clone())).await;
    for &i in &admitted {
        done[i] = true;
    }
    (admitted, statuses.into_iter().map(|(s, _)| s).collect())
}

/// Every visitor orders with its token cookie at the same moment: each
/// order's status and error code.
async fn order_at_once(buyers: impl Iterator<Item = Visitor>) -> Vec<(u16, String)> {
    let tasks: Vec<_> = buyers
        .map(|mut v| {
            tokio::spawn(async move {
                let token = v.cookies.get("qg_token").cloned();
                let r = v.order(token.as_deref()).await;
                (r.status, r.error().to_string())
            })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.expect("an order task"));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stock_of_ten_sells_ten_tells_the_line_at_once_and_a_restock_reopens_it_in_order() {
    let stack = EdgeStack::start(
        Settings {
            max_active: 5,
            idle_passthrough: false,
            ..Settings::default()
        },
        "anonymous",
        RedisServer::start(),
    )
    .await;
    let op = Operator::new(&stack.redis.url(), &["main"]);
    let (code, out) = stock(&op, &["main", "--set", "10"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("10 units left"), "{out}");
    // A tick writes the snapshot the edge reads the stock from.
    stack.admit(0, 0).await;

    let mut crowd: Vec<Visitor> = (0..40).map(|_| stack.visitor()).collect();
    for v in &mut crowd {
        assert_eq!(v.enter().await.state(), "waiting");
    }
    // Before any order: a chance is shown, certain within the stock
    // (nothing measured yet: everyone ahead is taken to buy), none beyond.
    let first = crowd[0].position().await;
    assert_eq!(first.json["chance"], 1.0, "{}", first.json);

    // Ticks of up to 5 admissions; whoever is admitted orders at once.
    let mut done = vec![false; crowd.len()];
    let mut accepted = 0;
    let mut tenth_at = None;
    let mut turns = 0;
    for _ in 0..20 {
        stack.admit(5, 0).await;
        let (admitted, statuses) = poll_and_order(&mut crowd, &mut done).await;
        turns += admitted.len();
        for s in &statuses {
            assert!(*s == 200 || *s == 409, "order status {s}");
        }
        accepted += statuses.iter().filter(|s| **s == 200).count();
        if accepted >= 10 {
            tenth_at = Some(Instant::now());
            break;
        }
        // The settles run after each reply: wait for the slots to free.
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let tenth_at = tenth_at.expect("ten orders within 20 ticks");
    assert_eq!(accepted, 10);
    // Admission never let out more turns than the stock allowed.
    assert_eq!(turns, 10, "turns let out for a stock of 10");

    // Within 3 s of the 10th order every visitor still in line is told.
    let told = eventually(Duration::from_secs(3), || async {
        shown(&op)["left"] == 0 && shown(&op)["held"] == 0
    })
    .await;
    assert!(told, "the last unit was not sold: {}", shown(&op));
    let mut still = Vec::new();
    for (i, v) in crowd.iter_mut().enumerate() {
        if done[i] {
            continue;
        }
        let r = v.position().await;
        assert_eq!(r.state(), "sold_out", "visitor {i}: {}", r.json);
        assert!(r.json.get("position").is_none(), "{}", r.json);
        still.push(i);
    }
    let took = tenth_at.elapsed();
    assert!(took < Duration::from_secs(3), "told after {took:?}");
    assert_eq!(still.len(), 30);
    assert_eq!(orders_at_the_shop(&stack), 10, "the shop got more orders");

    // No new place while sold out; the line keeps its places.
    let waiting = stack.queue.zcard(&stack.queue.keys.waiting()).await;
    let mut late = stack.visitor();
    let r = late.enter().await;
    assert_eq!(r.status, 200, "{}", r.json);
    assert_eq!(r.state(), "sold_out", "{}", r.json);
    assert_eq!(late.position().await.state(), "sold_out");
    assert_eq!(
        stack.queue.zcard(&stack.queue.keys.waiting()).await,
        waiting
    );
    assert_eq!(waiting, 30);
    // A tick admits nobody.
    stack.admit(5, 0).await;
    assert_eq!(stack.queue.zcard(&stack.queue.keys.active()).await, 0);

    // A restock of 5 reopens the line in the same order: the next 5.
    let (code, out) = stock(&op, &["main", "--add", "5"]);
    assert_eq!(code, Some(0), "{out}");
    stack.admit(5, 0).await;
    let mut admitted = Vec::new();
    for &i in &still {
        let r = crowd[i].position().await;
        match r.state() {
            "admitted" => admitted.push(i),
            "waiting" => {}
            other => panic!("visitor {i} after the restock: {other} {}", r.json),
        }
    }
    assert_eq!(admitted, still[..5].to_vec(), "admitted out of order");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_orders_for_the_last_units_never_oversell() {
    let stack = EdgeStack::start(
        Settings {
            max_active: 40,
            idle_passthrough: false,
            ..Settings::default()
        },
        "anonymous",
        RedisServer::start(),
    )
    .await;
    let op = Operator::new(&stack.redis.url(), &["main"]);
    let mut crowd: Vec<Visitor> = (0..40).map(|_| stack.visitor()).collect();
    for v in &mut crowd {
        assert_eq!(v.enter().await.state(), "waiting");
    }
    // Everyone holds a token before the stock is set: 40 orders race for 3.
    stack.admit(40, 0).await;
    for v in &mut crowd {
        assert_eq!(v.position().await.state(), "admitted");
        assert!(v.cookies.contains_key("qg_token"));
    }
    let (code, out) = stock(&op, &["main", "--set", "3"]);
    assert_eq!(code, Some(0), "{out}");
    let replies = order_at_once(crowd.iter().cloned()).await;
    let ok = replies.iter().filter(|(s, _)| *s == 200).count();
    let sold_out = replies
        .iter()
        .filter(|(s, e)| *s == 409 && e == "sold_out")
        .count();
    assert_eq!((ok, sold_out), (3, 37), "{replies:?}");
    assert_eq!(orders_at_the_shop(&stack), 3);
    assert!(
        eventually(Duration::from_secs(5), || async { shown(&op)["held"] == 0 }).await,
        "holds left: {}",
        shown(&op)
    );
    let now = shown(&op);
    assert_eq!(
        (now["left"].clone(), now["sold"].clone()),
        (0.into(), 3.into()),
        "{now}"
    );
    assert_eq!(now["sold_out"], true);
    // A refused order keeps its token for a restock.
    let (code, out) = stock(&op, &["main", "--add", "1"]);
    assert_eq!(code, Some(0), "{out}");
    let refused = replies
        .iter()
        .position(|(s, _)| *s == 409)
        .expect("a refused order");
    let again = order_at_once(std::iter::once(crowd[refused].clone())).await;
    assert_eq!(again[0].0, 200, "{again:?}");
    assert_eq!(orders_at_the_shop(&stack), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_origin_states_the_units_and_refunds_put_them_back() {
    let stack = EdgeStack::start(
        Settings {
            max_active: 5,
            idle_passthrough: false,
            ..Settings::default()
        },
        "anonymous",
        RedisServer::start(),
    )
    .await;
    let op = Operator::new(&stack.redis.url(), &["main"]);

    // Bad input is refused and changes nothing.
    for (args, says) in [
        (&["main", "--add", "3"][..], "no stock is kept"),
        (&["main", "--refund", "1"][..], "no stock is kept"),
        (&["main", "--set", "-1"][..], "error"),
        (
            &["main", "--set", "5", "--add", "1"][..],
            "cannot be used with",
        ),
        (&["main", "--overbook", "150"][..], "at most 100"),
        (&["main", "--overbook", "lots"][..], "percentage"),
        (&["nope", "--set", "1"][..], "not in"),
    ] {
        let (code, out) = stock(&op, args);
        assert_ne!(code, Some(0), "{args:?}: {out}");
        assert!(out.contains(says), "{args:?}: {out}");
    }
    assert_eq!(shown(&op)["left"], serde_json::Value::Null);

    assert_eq!(stock(&op, &["main", "--set", "5"]).0, Some(0));
    let (code, status, _) = op.run(&["status", "main"]);
    assert_eq!(code, Some(0));
    assert!(status.contains("stock       5 left · 0 sold"), "{status}");
    let mut buyer = stack.visitor();
    assert_eq!(buyer.enter().await.state(), "waiting");
    stack.admit(1, 0).await;
    assert_eq!(buyer.position().await.state(), "admitted");
    stack.origin.set_units(Some(2));
    let token = buyer.cookies.get("qg_token").expect("token").clone();
    let r = raw_request(
        &stack.worker.url(),
        "POST",
        "/orders",
        &buyer.cookies,
        &[
            ("x-entry-token", &token),
            ("content-type", "application/json"),
        ],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    // The origin's header is the edge's, never the visitor's.
    assert_eq!(r.header("queuegate-units"), None);
    assert!(
        eventually(Duration::from_secs(5), || async { shown(&op)["sold"] == 2 }).await,
        "{}",
        shown(&op)
    );
    assert_eq!(shown(&op)["left"], 3);
    // A refund beyond what was sold is refused; one within it goes back.
    let (code, out) = stock(&op, &["main", "--refund", "3"]);
    assert_ne!(code, Some(0), "{out}");
    assert!(out.contains("below zero"), "{out}");
    let (code, out) = stock(&op, &["main", "--refund", "2"]);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(
        (shown(&op)["left"].clone(), shown(&op)["sold"].clone()),
        (5.into(), 0.into())
    );
    // Taking units away cannot go below zero; clearing ends the stock.
    let (code, out) = stock(&op, &["main", "--add", "-6"]);
    assert_ne!(code, Some(0), "{out}");
    assert_eq!(stock(&op, &["main", "--overbook", "20"]).0, Some(0));
    assert_eq!(shown(&op)["overbook_percent"], 20);
    assert_eq!(stock(&op, &["main", "--clear"]).0, Some(0));
    assert_eq!(shown(&op)["left"], serde_json::Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sold_out_queue_passes_nobody_and_takes_no_place() {
    let redis = RedisServer::start();
    let q = TestQueue::open(&redis.url(), "main", fast_settings()).await;
    let op = Operator::new(&redis.url(), &["main"]);
    assert_eq!(stock(&op, &["main", "--set", "0"]).0, Some(0));
    // Idle passthrough is on and the room is empty: still nobody passes.
    let token = grants(1, 0).remove(0).token;
    let pass = q
        .run(&queuegate_shared::ops::Pass {
            keys: &q.keys,
            user: &user(1),
            token: &token,
            address: None,
            route: queuegate_shared::ops::RouteKind::Spend,
        })
        .await
        .expect("pass");
    assert_eq!(pass, PassReply::SoldOut);
    assert_eq!(q.enter(&user(2)).await, EnterReply::SoldOut);
    assert_eq!(q.position(&user(2)).await, Observed::SoldOut);
    assert_eq!(q.zcard(&q.keys.waiting()).await, 0);
    assert_eq!(q.zcard(&q.keys.active()).await, 0);
    // With units again, the same visitor enters (idle: admitted at once).
    assert_eq!(stock(&op, &["main", "--add", "2"]).0, Some(0));
    assert!(matches!(q.enter(&user(2)).await, EnterReply::Entered(_)));
}
