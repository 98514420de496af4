//! The workerd benchmark end to end with a short load, so it cannot rot:
//! the built worker and the floor come up under the `workerd` binary, every
//! route gets its right answer from the worker (waiting for position and
//! enter, the shop's 201 for an order with a real token), and the CPU
//! reading from /proc is non-zero for both. No timing is asserted. Needs the
//! built worker, `npm ci` and `cargo build --bins` (scripts/test does all).

use std::time::Duration;

use queuegate_tools::edge_bench::{self, Options, Rig, Route, Side};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_and_floor_answer_every_route_under_workerd() {
    let opts = Options {
        waiting: 20,
        concurrency: 4,
        window: Duration::from_millis(700),
        rounds: 1,
        warmup: Duration::from_millis(200),
        orders: 3_000,
        routes: vec![Route::Position, Route::Enter, Route::Order],
        variants: Vec::new(),
    };
    let mut rig = Rig::start().await.expect("the rig starts");
    let http = reqwest::Client::new();
    let figures = edge_bench::measure(&mut rig, &http, &opts)
        .await
        .expect("the measurement runs");
    let table = edge_bench::table(&figures);
    assert_eq!(figures.len(), 6, "{table}");
    for f in &figures {
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
}
