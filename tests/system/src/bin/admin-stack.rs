//! Runs a scheduler with its admin API on (redis-server and the scheduler
//! binary, queues `main` and `other`) for tools outside Rust, e.g.
//! `scripts/schemathesis --admin`. Prints `QG_ADMIN_URL=…` and
//! `QG_ADMIN_TOKEN=…`, then `QG_READY`, and runs until stdin closes or
//! SIGTERM/ctrl-c; everything stops on exit.
//!
//! `cargo run -p queuegate-system-tests --bin admin-stack` (build the
//! scheduler first, as scripts/test does).

use std::io::{Read, Write};

use queuegate_scheduler::config::token_hash;
use queuegate_testkit::scheduler::Scheduler;
use queuegate_testkit::RedisServer;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let redis = RedisServer::start();
    let mut bytes = [0u8; 24];
    getrandom::getrandom(&mut bytes).expect("OS randomness");
    let token = format!("qga_{}", hex::encode(bytes));
    let hash = token_hash(&token);
    let url = redis.url();
    let scheduler = tokio::task::spawn_blocking(move || {
        Scheduler::builder(&url)
            .queue("main", &[])
            .queue("other", &[])
            .admin_tokens(&[("schemathesis", &hash)])
            .start()
    })
    .await
    .expect("start the scheduler");
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(
            out,
            "QG_ADMIN_URL={}",
            scheduler.admin_url().expect("admin API on")
        );
        let _ = writeln!(out, "QG_ADMIN_TOKEN={token}");
        let _ = writeln!(out, "QG_READY");
        let _ = out.flush();
    }
    let stdin_closed = tokio::task::spawn_blocking(|| {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
    });
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("SIGTERM handler");
    tokio::select! {
        _ = stdin_closed => {}
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    drop(scheduler);
    drop(redis);
}
