//! Forwarded bodies stream through the worker: the built wasm served by
//! `workerd` itself (so its process's memory is the worker's own), a real
//! redis-server behind the gateway, and a test origin that counts what it
//! receives. 50 MB uploads reach the origin whole while a visitor in the
//! line keeps getting answers, and leave no 50 MB behind in the isolate.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use queuegate_edge::identity;
use queuegate_shared::Settings;
use queuegate_system_tests::TestQueue;
use queuegate_testkit::gateway::Gateway;
use queuegate_testkit::{RedisServer, Wrangler, IDENTITY_SECRET};

/// The upload.
const UPLOAD: usize = 50 * 1024 * 1024;
/// Uploads, one after the other.
const ROUNDS: usize = 3;

/// An origin that reads any request's body to its end and answers with
/// its length in bytes.
async fn counting_origin() -> String {
    async fn count(body: Body) -> String {
        match axum::body::to_bytes(body, usize::MAX).await {
            Ok(bytes) => bytes.len().to_string(),
            Err(e) => format!("error: {e}"),
        }
    }
    let app = axum::Router::new().fallback(count);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the origin");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    url
}

/// The resident set of process `pid`, in bytes (`VmRSS` in /proc).
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    kb * 1024
}

/// The lowest RSS over a second (the runtime frees memory in its own time).
async fn settled_rss(pid: u32) -> u64 {
    let mut low = u64::MAX;
    for _ in 0..10 {
        low = low.min(rss(pid));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    low
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_upload_streams_through_and_leaves_no_copy_behind() {
    let redis = RedisServer::start();
    let gateway = Gateway::start(&redis.url());
    let origin = counting_origin().await;
    let config = Wrangler::local(&gateway, &origin).var("ENTRY_CHALLENGE", "off");
    let worker = tokio::task::spawn_blocking(move || config.start_workerd())
        .await
        .expect("start workerd");
    let pid = worker.pid().expect("workerd runs");
    let base = worker.url();
    let queue = TestQueue::open(&redis.url(), "main", Settings::default()).await;
    let (user, cookie) = identity::mint_visitor(IDENTITY_SECRET.as_bytes(), [9u8; 16]);
    queue.enter(&user).await;
    let http = reqwest::Client::new();

    // Warm up: the wasm instantiated, a small forward and a few polls.
    for _ in 0..5 {
        let r = http
            .post(format!("{base}/upload"))
            .body(vec![b'x'; 1024])
            .send()
            .await
            .expect("small upload");
        assert_eq!(r.text().await.expect("reply"), "1024");
        let p = http
            .get(format!("{base}/queue/position"))
            .header("cookie", format!("qg_visitor={cookie}"))
            .send()
            .await
            .expect("poll");
        assert_eq!(p.status().as_u16(), 200);
    }
    let before = settled_rss(pid).await;

    // The visitor polls all along the upload.
    let uploading = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let (answered, refused) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let poller = {
        let (http, base, cookie) = (http.clone(), base.clone(), cookie.clone());
        let (uploading, answered, refused) = (uploading.clone(), answered.clone(), refused.clone());
        tokio::spawn(async move {
            while uploading.load(Ordering::Relaxed) {
                let r = http
                    .get(format!("{base}/queue/position"))
                    .header("cookie", format!("qg_visitor={cookie}"))
                    .timeout(Duration::from_secs(10))
                    .send()
                    .await;
                match r {
                    Ok(r) if r.status().as_u16() == 200 => answered.fetch_add(1, Ordering::Relaxed),
                    _ => refused.fetch_add(1, Ordering::Relaxed),
                };
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let started = Instant::now();
    let mut replies = Vec::new();
    for round in 0..ROUNDS {
        let reply = http
            .post(format!("{base}/upload"))
            .body(vec![b'y'; UPLOAD])
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .expect("the upload");
        let status = reply.status().as_u16();
        replies.push((status, reply.text().await.expect("reply")));
        eprintln!("after upload {round}: RSS {} MB", rss(pid) >> 20);
    }
    let took = started.elapsed() / ROUNDS as u32;
    // Let the visitor poll a little after the upload too.
    tokio::time::sleep(Duration::from_millis(300)).await;
    uploading.store(false, Ordering::Relaxed);
    poller.await.expect("poller");
    for (status, text) in replies {
        assert_eq!(
            (status, text.as_str()),
            (200, UPLOAD.to_string().as_str()),
            "the origin got the whole body"
        );
    }
    let (answered, refused) = (
        answered.load(Ordering::Relaxed),
        refused.load(Ordering::Relaxed),
    );
    assert!(answered > 0, "the polling visitor got no answer");
    assert_eq!(refused, 0, "{refused} polls failed during the upload");

    let after = settled_rss(pid).await;
    let grown = after.saturating_sub(before);
    eprintln!(
        "50 MB upload in {:.1} s; workerd RSS {} MB → {} MB; {answered} polls answered",
        took.as_secs_f64(),
        before >> 20,
        after >> 20
    );
    // Buffered in the isolate, one body alone leaves its copies behind
    // (wasm memory never shrinks): hundreds of MB. Streamed, the runtime's
    // own buffers settle at some 20 MB, however many uploads pass.
    assert!(
        grown < UPLOAD as u64,
        "workerd kept {} MB more after {ROUNDS} uploads of {} MB: the body was held in the isolate",
        grown >> 20,
        UPLOAD >> 20
    );

    drop(worker);
}
