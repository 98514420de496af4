//! A draw anyone can verify (issue #41), on the real stack: redis-server →
//! gateway → the wasm worker under workerd, and the scheduler binary,
//! which commits to the seed before anyone pre-queues, fixes the
//! registrants' Merkle root at the seal, then reveals the seed; the public
//! record at `GET /queue/draw`, each drawn visitor's receipt, and
//! `queuegate-verify` accepting the record, a receipt and the live line —
//! and refusing a line with two places swapped, a receipt with a changed
//! place and a record whose seed does not open its commitment.

use std::process::Command;
use std::time::Duration;

use queuegate_shared::draw_proof::{commitment, parse_hash};
use queuegate_shared::ops::{Change, SetState, StateSwitch};
use queuegate_shared::QueueState;
use queuegate_shared::Settings;
use queuegate_system_tests::drop_day::{in_ms, open_now, schedule};
use queuegate_system_tests::edge::{EdgeStack, Reply, Visitor};
use queuegate_testkit::scheduler::Scheduler;
use queuegate_testkit::{target_bin, RedisServer};

const VISITORS: usize = 60;

pub(super) async fn get_json(url: &str) -> (u16, serde_json::Value, Option<String>) {
    let resp = reqwest::get(url).await.expect("GET");
    let status = resp.status().as_u16();
    let cache = resp
        .headers()
        .get("cache-control")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    (status, resp.json().await.unwrap_or_default(), cache)
}

/// `queuegate-verify` with `args`: (exit code, stdout + stderr).
pub(super) fn verify(args: &[&str]) -> (i32, String) {
    let out = Command::new(target_bin("queuegate-verify"))
        .args(args)
        .output()
        .expect("run queuegate-verify");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

/// Reads `url` until `done` holds for its JSON (30 s at most).
pub(super) async fn read_until(
    what: &str,
    url: &str,
    done: impl Fn(u16, &serde_json::Value) -> bool,
) -> serde_json::Value {
    for _ in 0..300 {
        let (status, json, _) = get_json(url).await;
        if done(status, &json) {
            return json;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

/// The fixture of the draw tests: the edge stack with an opening an hour
/// away and a scheduler holding the lease (it commits to the seed).
async fn scheduled_stack() -> (EdgeStack, Scheduler) {
    let settings = Settings {
        idle_passthrough: false,
        entry_budget_per_minute: 0,
        ..Settings::default()
    };
    let stack = EdgeStack::start(settings.clone(), "anonymous", RedisServer::start()).await;
    schedule(&stack.queue, Change::Set(in_ms(3_600_000)), Change::Keep).await;
    let url = stack.redis.url();
    let sched = tokio::task::spawn_blocking(move || {
        Scheduler::builder(&url)
            .queue_settings("main", &settings)
            .start()
    })
    .await
    .expect("start the scheduler");
    (stack, sched)
}

/// A new visitor from address `ip`, pre-queued.
pub(crate) async fn pre_queue_from(stack: &EdgeStack, ip: &str) -> Visitor {
    let mut v = stack.visitor();
    let r: Reply = v
        .send_with(
            "POST",
            "/queue/enter",
            None,
            None,
            &[("cf-connecting-ip", ip)],
        )
        .await;
    assert_eq!((r.status, r.state()), (200, "pre_queue"), "{:?}", r.json);
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draw_anyone_can_verify() {
    let (stack, sched) = scheduled_stack().await;
    let q = &stack.queue;
    let base = stack.worker.url();

    // Before anyone pre-queues: a commitment and no seed.
    let draw_url = format!("{base}/queue/draw?queue=main");
    let pending = read_until("the commitment", &draw_url, |status, _| status == 200).await;
    assert_eq!(pending["state"], "committed", "{pending}");
    let committed = pending["commitment"]
        .as_str()
        .expect("commitment")
        .to_string();
    assert_eq!(committed.len(), 64);
    assert!(pending.get("seed").is_none(), "{pending}");

    // 60 visitors from 60 addresses pre-queue.
    let mut visitors: Vec<Visitor> = Vec::new();
    for i in 0..VISITORS {
        visitors.push(pre_queue_from(&stack, &format!("198.51.100.{}", i + 1)).await);
    }
    let (_, still, _) = get_json(&draw_url).await;
    assert!(
        still.get("seed").is_none(),
        "no seed before the seal: {still}"
    );

    // The opening: the scheduler seals, writes the record, reveals, places
    // (paused: nobody is admitted, so everyone waits on a drawn place).
    let paused = q
        .run(&SetState {
            keys: &q.keys,
            state: QueueState::Paused,
            expect: None,
        })
        .await
        .expect("pause");
    assert!(matches!(paused, StateSwitch::Switched(_)));
    open_now(q).await;
    let record = read_until("the reveal", &draw_url, |_, json| {
        json.get("seed").is_some()
    })
    .await;
    let seed = parse_hash("seed", record["seed"].as_str().unwrap()).unwrap();
    assert_eq!(
        hex::encode(commitment(&seed)),
        committed,
        "the seed opens the commitment"
    );
    assert_eq!(record["commitment"], committed.as_str());
    assert_eq!(record["registrants"], VISITORS);
    assert_eq!(record["rounds"], serde_json::json!([VISITORS]));
    let n = record["draw"].as_u64().unwrap();
    let (status, by_number, cache) = get_json(&format!("{draw_url}&draw={n}")).await;
    assert_eq!((status, &by_number), (200, &record));
    assert_eq!(
        cache.as_deref(),
        Some("public, max-age=31536000, immutable")
    );
    let (status, page, _) = get_json(&format!("{draw_url}&draw={n}&page=0")).await;
    assert_eq!(status, 200);
    assert_eq!(page["leaves"].as_array().unwrap().len(), VISITORS);

    // Every drawn visitor's reply carries a receipt whose place is its own.
    let mut receipts = Vec::new();
    for v in &mut visitors {
        // A visitor is told its drawn place at the edge while the draw
        // still places it; the receipt comes once it is in line.
        let mut r = v.send("GET", "/queue/position?receipt=1", None, None).await;
        for _ in 0..100 {
            if r.json.get("receipt").is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            r = v.send("GET", "/queue/position?receipt=1", None, None).await;
        }
        assert_eq!((r.status, r.state()), (200, "waiting"), "{:?}", r.json);
        let receipt = r.json["receipt"].clone();
        assert_eq!(receipt["place"], r.json["position"], "{:?}", r.json);
        assert_eq!(receipt["visitor"].as_str(), v.id().as_deref());
        receipts.push(receipt);
    }
    let mut places: Vec<u64> = receipts
        .iter()
        .map(|r| r["place"].as_u64().unwrap())
        .collect();
    places.sort_unstable();
    assert_eq!(places, (1..=VISITORS as u64).collect::<Vec<_>>());

    // The verifier accepts the record, a receipt and the live line.
    let receipt = receipts[7].to_string();
    let redis_url = stack.redis.url();
    let (code, out) = verify(&[
        "--url",
        &base,
        "--queue",
        "main",
        "--receipt",
        &receipt,
        "--redis",
        &redis_url,
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("60 places verified"), "{out}");
    assert!(out.contains("60 drawn visitors in line"), "{out}");

    // A receipt with a changed place is refused.
    let mut changed = receipts[7].clone();
    let place = changed["place"].as_u64().unwrap();
    changed["place"] = (place % VISITORS as u64 + 1).into();
    let (code, out) = verify(&[
        "--url",
        &base,
        "--queue",
        "main",
        "--receipt",
        &changed.to_string(),
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("the receipt says place"), "{out}");

    // Two visitors' places swapped in Redis: the live line is refused.
    swap(
        q,
        receipts[0]["visitor"].as_str().unwrap(),
        receipts[1]["visitor"].as_str().unwrap(),
    )
    .await;
    let (code, out) = verify(&["--url", &base, "--queue", "main", "--redis", &redis_url]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("the draw gives it ticket"), "{out}");

    // A record whose seed does not open its commitment (served by a
    // stand-in for a cheating room) is refused.
    let mut forged = record.clone();
    forged["seed"] = hex::encode([7u8; 32]).into();
    let fake = serve_record(forged, page).await;
    let (code, out) = verify(&["--url", &fake, "--queue", "main"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("does not open the commitment"), "{out}");
    drop(sched);
}

/// A stand-in room serving `record` and its one page of leaves.
pub(super) async fn serve_record(record: serde_json::Value, page: serde_json::Value) -> String {
    use axum::extract::RawQuery;
    let app = axum::Router::new().route(
        "/queue/draw",
        axum::routing::get(move |RawQuery(q): RawQuery| {
            let (record, page) = (record.clone(), page.clone());
            async move {
                let body = if q.unwrap_or_default().contains("page=") {
                    page
                } else {
                    record
                };
                axum::Json(body)
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().expect("its address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

/// Swaps the tickets of users `a` and `b` in `waiting`.
async fn swap(q: &queuegate_system_tests::TestQueue, a: &str, b: &str) {
    let waiting = q.keys.waiting();
    let mut conn = q.conn.clone();
    let mut score = Vec::new();
    for u in [a, b] {
        let s: f64 = redis::cmd("ZSCORE")
            .arg(&waiting)
            .arg(u)
            .query_async(&mut conn)
            .await
            .expect("ZSCORE");
        score.push(s);
    }
    let _: () = redis::cmd("ZADD")
        .arg(&waiting)
        .arg(score[1])
        .arg(a)
        .arg(score[0])
        .arg(b)
        .query_async(&mut conn)
        .await
        .expect("ZADD");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draw_dealt_among_shared_addresses_is_verified_around_the_deal() {
    let (stack, sched) = scheduled_stack().await;
    let q = &stack.queue;
    let base = stack.worker.url();
    let draw_url = format!("{base}/queue/draw?queue=main");
    read_until("the commitment", &draw_url, |status, _| status == 200).await;

    // 10 people from 10 addresses, and 5 addresses with 2 identities each:
    // their seats are dealt among their identities after the seal.
    let mut singles = Vec::new();
    for i in 0..15 {
        let ips: &[String] = &if i < 10 {
            vec![format!("198.51.100.{}", i + 1)]
        } else {
            vec![format!("203.0.113.{}", i); 2]
        };
        for ip in ips {
            let v = pre_queue_from(&stack, ip).await;
            if i < 10 {
                singles.push(v.id().expect("a visitor id"));
            }
        }
    }
    let paused = q
        .run(&SetState {
            keys: &q.keys,
            state: QueueState::Paused,
            expect: None,
        })
        .await
        .expect("pause");
    assert!(matches!(paused, StateSwitch::Switched(_)));
    open_now(q).await;
    let record = read_until("the reveal", &draw_url, |_, json| {
        json.get("seed").is_some()
    })
    .await;
    assert_eq!(record["rounds"], serde_json::json!([15, 5]));
    // Placed and dealt.
    let mut placed = false;
    for _ in 0..300 {
        let dealt = q.config_field("draw_shuffle").await == "dealt";
        if dealt && q.zcard(&q.keys.waiting()).await == 20 {
            placed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(placed, "the draw was not placed and dealt");

    let redis_url = stack.redis.url();
    let (code, out) = verify(&["--url", &base, "--queue", "main", "--redis", &redis_url]);
    assert_eq!(code, 0, "the deal is no mismatch: {out}");
    assert!(out.contains("20 drawn visitors in line"), "{out}");

    // Two people from their own addresses swapped: still refused.
    swap(q, &singles[2], &singles[5]).await;
    let (code, out) = verify(&["--url", &base, "--queue", "main", "--redis", &redis_url]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("the draw gives it ticket"), "{out}");
    drop(sched);
}
