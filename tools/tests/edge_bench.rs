//! The workerd benchmark end to end with a short load, so it cannot rot:
//! the built worker and the floor come up under the `workerd` binary, every
//! route gets its right answer from the worker (waiting for position and
//! enter, the shop's 201 for an order with a real token, an approximate
//! waiting state for a far-back poll), and the CPU reading from /proc is
//! non-zero for both. A far-back poll costs the worker (near) no Redis
//! command, and the floor's (a static reply) none at all. Signed in, the
//! worker answers JWT-bearing polls, exact and far back. No timing is
//! asserted. Needs the built
//! worker, `npm ci` and `cargo build --bins` (scripts/test does all).

use std::time::Duration;

use queuegate_tools::edge_bench::{self, Identity, Options, Rig, Route, Side};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_and_floor_answer_every_route_under_workerd() {
    let opts = Options {
        waiting: 20,
        concurrency: 4,
        rate: None,
        window: Duration::from_millis(700),
        rounds: 1,
        warmup: Duration::from_millis(200),
        orders: 3_000,
        routes: vec![Route::Position, Route::Enter, Route::Order, Route::FarBack],
        far_back: 20,
        far_gap: 100,
        near_zone: 10,
        variants: Vec::new(),
        identity: Identity::Anonymous,
    };
    let mut rig = Rig::start().await.expect("the rig starts");
    let http = reqwest::Client::new();
    let report = edge_bench::measure(&mut rig, &http, &opts)
        .await
        .expect("the measurement runs");
    let figures = &report.figures;
    let table = edge_bench::table(figures);
    assert_eq!(figures.len(), 8, "{table}");
    for f in figures {
        assert_eq!(
            f.failed,
            0,
            "{} {:?}: {:?}\n{table}\nworker log:\n{}",
            f.route.name(),
            f.side,
            f.first_failure,
            rig.worker.log()
        );
        assert!(f.ok > 0, "{table}");
        assert!(
            f.cpu_ms_per_request > 0.0,
            "no CPU read from /proc\n{table}"
        );
    }
    // Orders spent real tokens: each one only once.
    let worker_orders = figures
        .iter()
        .find(|f| f.route == Route::Order && f.side == Side::Worker)
        .map(|f| f.ok)
        .unwrap_or_default();
    assert!(worker_orders <= opts.orders as u64, "{table}");

    // Far back: the first tick put the far-back visitors beyond a near
    // zone of 10, and ticks kept the snapshot fresh throughout.
    let notes = report.far_back.as_ref().expect("far-back notes");
    let lines = format!(
        "{table}{}{}",
        notes.describe(),
        edge_bench::far_back_lines(figures)
    );
    assert_eq!(notes.zone_count, 10, "{lines}");
    assert!(notes.tickets.0 > notes.zone_front, "{lines}");
    assert!(notes.ticks >= 2 && notes.tick_failures == 0, "{lines}");
    assert!(notes.sample.contains("\"approximate\":true"), "{lines}");
    let far = |side: Side| {
        figures
            .iter()
            .find(|f| f.route == Route::FarBack && f.side == side)
            .expect("a far-back row")
    };
    let (worker, floor) = (far(Side::Worker), far(Side::Floor));
    // Every far-back reply of the worker came from its snapshot: at most
    // one HMGET a second, no position script.
    assert_eq!(worker.not_approximate, 0, "{lines}");
    assert!(
        !worker.redis_commands.keys().any(|c| c.starts_with("EVAL")),
        "{lines}"
    );
    assert!(
        worker.redis_commands.values().sum::<u64>() <= 3,
        "at most one snapshot read a second\n{lines}"
    );
    assert!(worker.redis_per_request < 0.05, "{lines}");
    // The floor answers far back with a static reply (no subrequest); the
    // worker's exact poll is one subrequest.
    assert_eq!(floor.redis_per_request, 0.0, "{lines}");
    let exact = figures
        .iter()
        .find(|f| f.route == Route::Position && f.side == Side::Worker)
        .expect("a position row");
    assert!(exact.redis_per_request >= 1.0, "{lines}");
}

/// Signed in (`IDENTITY_MODE=jwt`), every poll brings the visitor's bearer
/// JWT: the worker answers exact polls with one subrequest each and far-back
/// ones from its snapshot, for visitors it knows only by their JWT's `sub`.
/// Paced (`--rate`): every side serves the rate asked, not more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_in_polls_are_answered_under_workerd() {
    let opts = Options {
        waiting: 10,
        concurrency: 4,
        rate: Some(RATE),
        window: Duration::from_millis(700),
        rounds: 1,
        warmup: Duration::from_millis(200),
        orders: 0,
        routes: vec![Route::Position, Route::FarBack],
        far_back: 10,
        far_gap: 100,
        near_zone: 10,
        variants: Vec::new(),
        identity: Identity::Jwt,
    };
    let mut rig = Rig::start_with(&[], Identity::Jwt)
        .await
        .expect("the rig starts");
    let http = reqwest::Client::new();
    let report = edge_bench::measure(&mut rig, &http, &opts)
        .await
        .expect("the measurement runs");
    let figures = &report.figures;
    let table = edge_bench::table(figures);
    assert_eq!(figures.len(), 4, "{table}");
    for f in figures {
        assert_eq!(f.failed, 0, "{:?}\n{table}", f.first_failure);
        assert!(f.ok > 0, "{table}");
    }
    let worker = |route: Route| {
        figures
            .iter()
            .find(|f| f.route == route && f.side == Side::Worker)
            .expect("a worker row")
    };
    assert!(worker(Route::Position).redis_per_request >= 1.0, "{table}");
    assert_eq!(worker(Route::FarBack).not_approximate, 0, "{table}");
    assert!(worker(Route::FarBack).redis_per_request < 0.05, "{table}");
    // Paced: about RATE a second on every side (unpaced, four loops on
    // loopback send hundreds a second), never more.
    for f in figures {
        assert!(
            f.rps <= RATE * 1.25 && f.rps >= RATE * 0.5,
            "{} {:?} at {:.1}/s, paced at {RATE}\n{table}",
            f.route.name(),
            f.side,
            f.rps
        );
    }
}

/// The signed-in test's pace: requests a second.
const RATE: f64 = 40.0;
