//! Runs the edge stack of the system tests (redis-server, gateway, the
//! built worker under workerd, a test origin) for tools outside Rust, e.g.
//! scripts/schemathesis. Prints `QG_EDGE_URL=…` and `QG_VISITOR_COOKIE=…`
//! (a signed visitor that has entered queue `main`), then `QG_READY`, and
//! runs until stdin closes or SIGTERM/ctrl-c; everything stops on exit.
//!
//! `cargo run -p queuegate-system-tests --bin edge-stack` (build the
//! worker and `redis-rest` first, as scripts/test does).

use std::io::{Read, Write};

use queuegate_edge::identity;
use queuegate_shared::ops::Enter;
use queuegate_shared::Settings;
use queuegate_system_tests::edge::{EdgeStack, IDENTITY_SECRET};
use queuegate_testkit::RedisServer;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let stack = EdgeStack::start(Settings::default(), "anonymous", RedisServer::start()).await;
    let (user, cookie) = identity::mint_visitor(IDENTITY_SECRET.as_bytes(), [7; 16]);
    stack
        .queue
        .run(&Enter {
            keys: &stack.queue.keys,
            user: &user,
            guard: queuegate_shared::guard::EntryGuard::default(),
            token: None,
        })
        .await
        .expect("the visitor enters");
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "QG_EDGE_URL={}", stack.worker.url());
        let _ = writeln!(out, "QG_VISITOR_COOKIE={cookie}");
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
    drop(stack);
}
