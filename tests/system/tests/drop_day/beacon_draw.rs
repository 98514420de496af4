//! The draw's public randomness beacon (issue #41), on the real stack: a
//! stand-in drand on loopback; `schedule --beacon drand` names the first
//! round after the opening before anyone registers, the commitment record
//! shows it, the reveal waits for the round and mixes its value into the
//! draw's key, and `queuegate-verify --beacon-url` accepts the record and
//! refuses one whose beacon value was changed. Bad input changes nothing.

use std::time::Duration;

use queuegate_scheduler::config::format_time;
use queuegate_shared::beacon::ChainInfo;
use queuegate_shared::draw_proof::{commitment, draw_key, parse_hash};
use queuegate_shared::fields::config as cf;
use queuegate_shared::Settings;
use queuegate_system_tests::drop_day::{in_ms, open_now};
use queuegate_system_tests::edge::EdgeStack;
use queuegate_testkit::scheduler::{command, Scheduler};
use queuegate_testkit::RedisServer;

use super::verified_draw::{get_json, pre_queue_from, read_until, serve_record, verify};

const CHAIN: &str = "52db9ba70e0cc0f6eaf7803dd07447a1f5477735fd3f661792ba94600c84e971";
const PERIOD_S: u64 = 3;

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
}

/// The stand-in's randomness of `round`: SHA-256 of the round number.
fn randomness(round: u64) -> String {
    let mut b = [0u8; 32];
    b[..8].copy_from_slice(&round.to_be_bytes());
    hex::encode(commitment(&b))
}

/// A drand-like HTTP server on loopback: `/{chain}/info`, and
/// `/{chain}/public/{round}` once the round's time has come (425 before).
async fn serve_drand(genesis_time: u64) -> String {
    use axum::extract::Path;
    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    let app = axum::Router::new()
        .route(
            &format!("/{CHAIN}/info"),
            axum::routing::get(move || async move {
                axum::Json(serde_json::json!({
                    "period": PERIOD_S,
                    "genesis_time": genesis_time,
                    "hash": CHAIN,
                }))
            }),
        )
        .route(
            &format!("/{CHAIN}/public/{{round}}"),
            axum::routing::get(move |Path(round): Path<u64>| async move {
                let published_at = genesis_time + (round.max(1) - 1) * PERIOD_S;
                if now_s() < published_at {
                    return StatusCode::TOO_EARLY.into_response();
                }
                axum::Json(serde_json::json!({
                    "round": round,
                    "randomness": randomness(round),
                    "signature": "00",
                }))
                .into_response()
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().expect("its address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_draw_mixes_in_a_beacon_round_named_in_advance() {
    let genesis_time = now_s() - 30;
    let drand = serve_drand(genesis_time).await;
    let settings = Settings {
        idle_passthrough: false,
        entry_budget_per_minute: 0,
        ..Settings::default()
    };
    let stack = EdgeStack::start(settings.clone(), "anonymous", RedisServer::start()).await;
    let q = &stack.queue;
    let base = stack.worker.url();
    let url = stack.redis.url();
    let section = format!("[beacon]\nurl = {drand:?}\nchain_hash = {CHAIN:?}");
    let builder = Scheduler::builder(&url)
        .queue_settings("main", &settings)
        .section(&section);
    // The operator's commands run before the scheduler starts, as on the
    // day (an idle holder commits on its first tick).
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("scheduler.toml");
    std::fs::write(&config, builder.config_text(0, 0)).expect("write the config");
    let run = |args: Vec<String>| {
        let config = config.clone();
        async move {
            let out = tokio::task::spawn_blocking(move || {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                command(&config, &args)
            })
            .await
            .expect("run the command");
            (
                out.status.code(),
                format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ),
            )
        }
    };
    let schedule_fields = || {
        let mut conn = q.conn.clone();
        let config = q.keys.config();
        async move {
            let v: Vec<Option<String>> = redis::cmd("HMGET")
                .arg(&config)
                .arg(cf::OPENS_AT)
                .arg(cf::DRAW_BEACON)
                .query_async(&mut conn)
                .await
                .expect("HMGET");
            v
        }
    };
    let opening = format_time(in_ms(12_000));
    let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();

    // Bad input: a beacon without an opening, an unknown beacon.
    let (code, out) = run(args(&["schedule", "main", "--beacon", "drand"])).await;
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("give --opens-at"), "{out}");
    let (code, out) = run(args(&[
        "schedule",
        "main",
        "--opens-at",
        &opening,
        "--beacon",
        "nist",
    ]))
    .await;
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("not a beacon"), "{out}");
    assert_eq!(schedule_fields().await, vec![None, None], "nothing changed");

    // The round is named with the opening, before anyone registers.
    let (code, out) = run(args(&[
        "schedule",
        "main",
        "--opens-at",
        &opening,
        "--beacon",
        "drand",
    ]))
    .await;
    assert_eq!(code, Some(0), "{out}");
    let sched = tokio::task::spawn_blocking(move || builder.start())
        .await
        .expect("start the scheduler");
    let draw_url = format!("{base}/queue/draw?queue=main");
    let pending = read_until(
        "the commitment with its beacon",
        &draw_url,
        |status, json| status == 200 && json.get("beacon").is_some_and(|b| !b.is_null()),
    )
    .await;
    assert_eq!(pending["state"], "committed", "{pending}");
    assert!(pending.get("seed").is_none(), "{pending}");
    let opens_at = pending["opensAt"].as_u64().expect("opensAt");
    let round = ChainInfo {
        period: PERIOD_S,
        genesis_time,
    }
    .round_after(opens_at)
    .expect("a round");
    assert_eq!(
        pending["beacon"],
        serde_json::json!({"source": format!("{drand}/{CHAIN}"), "round": round}),
        "{pending}"
    );
    assert!(out.contains(&format!("round {round}")), "{out}");

    for i in 0..5 {
        pre_queue_from(&stack, &format!("198.51.100.{}", i + 1)).await;
    }

    // Opened early: the draw is sealed, but not revealed before the round
    // is out (it is after the opening named for it).
    open_now(q).await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let (_, sealed, _) = get_json(&draw_url).await;
    assert!(
        sealed.get("seed").is_none(),
        "revealed before its beacon: {sealed}"
    );
    let record = read_until("the reveal", &draw_url, |_, json| {
        json.get("seed").is_some()
    })
    .await;
    assert_eq!(
        record["beacon"],
        serde_json::json!({
            "source": format!("{drand}/{CHAIN}"),
            "round": round,
            "value": randomness(round),
        }),
        "{record}"
    );
    assert!(
        sched.log().contains("waits for its beacon round"),
        "the wait is logged: {}",
        sched.log()
    );

    // The verifier accepts the record and the beacon's value.
    let (code, out) = verify(&["--url", &base, "--queue", "main", "--beacon-url", &drand]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("publishes the record's value for round {round}")),
        "{out}"
    );

    // A changed beacon value: the draw key no longer follows.
    let n = record["draw"].as_u64().unwrap();
    let (_, page, _) = get_json(&format!("{draw_url}&draw={n}&page=0")).await;
    let other = randomness(round + 1);
    let mut changed = record.clone();
    changed["beacon"]["value"] = other.clone().into();
    let fake = serve_record(changed.clone(), page.clone()).await;
    let (code, out) = verify(&["--url", &fake, "--queue", "main"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("draw key"), "{out}");

    // …and with a draw key made to follow, the beacon refuses it.
    let seed = parse_hash("seed", record["seed"].as_str().unwrap()).unwrap();
    let root = parse_hash("root", record["root"].as_str().unwrap()).unwrap();
    changed["drawKey"] = hex::encode(draw_key(&seed, &root, &hex::decode(&other).unwrap())).into();
    let fake = serve_record(changed, page).await;
    let (code, out) = verify(&["--url", &fake, "--queue", "main"]);
    assert_eq!(code, 0, "consistent without the beacon's word: {out}");
    let (code, out) = verify(&["--url", &fake, "--queue", "main", "--beacon-url", &drand]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("is not round {round}'s randomness")),
        "{out}"
    );
    drop(sched);
}
