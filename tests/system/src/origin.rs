//! A stand-in origin for the edge tests: answers every request with a
//! settable status, after a settable delay, and records what it received
//! (on arrival, so a slow answer is counted while it is in flight).

use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::Json;

/// One request the origin received.
#[derive(Debug, Clone)]
pub struct Hit {
    /// HTTP method.
    pub method: String,
    /// Path and query.
    pub path: String,
    /// Headers, lower-case names.
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: Vec<u8>,
}

impl Hit {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Debug, Default)]
struct Shared {
    status: AtomicU16,
    delay_ms: AtomicU64,
    /// The `Queuegate-Units` every answer states (u64::MAX: none).
    units: AtomicU64,
    hits: Mutex<Vec<Hit>>,
}

/// A running test origin on 127.0.0.1; stops when dropped.
#[derive(Debug)]
pub struct TestOrigin {
    url: String,
    shared: Arc<Shared>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl TestOrigin {
    /// Starts the origin on a free port (answers 200 until told otherwise).
    pub async fn start() -> TestOrigin {
        let shared = Arc::new(Shared {
            status: AtomicU16::new(200),
            delay_ms: AtomicU64::new(0),
            units: AtomicU64::new(u64::MAX),
            hits: Mutex::new(Vec::new()),
        });
        let app = axum::Router::new()
            .fallback(record)
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the test origin");
        let addr = listener.local_addr().expect("origin address");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
        TestOrigin {
            url: format!("http://{addr}"),
            shared,
            _stop: stop,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The status every later request gets.
    pub fn set_status(&self, status: u16) {
        self.shared.status.store(status, Ordering::SeqCst);
    }

    /// How long every later request waits before its answer.
    pub fn set_delay(&self, delay: std::time::Duration) {
        self.shared
            .delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    /// The units of stock every later answer says the order sold
    /// (`Queuegate-Units`; None: the header is left out).
    pub fn set_units(&self, units: Option<u64>) {
        self.shared
            .units
            .store(units.unwrap_or(u64::MAX), Ordering::SeqCst);
    }

    /// Everything received so far.
    pub fn hits(&self) -> Vec<Hit> {
        self.shared.hits.lock().expect("hits lock").clone()
    }
}

async fn record(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, HeaderMap, Json<serde_json::Value>) {
    let hit = Hit {
        method: method.to_string(),
        path: uri
            .path_and_query()
            .map(|p| p.to_string())
            .unwrap_or_default(),
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or_default().to_string()))
            .collect(),
        body: body.to_vec(),
    };
    let n = {
        let mut hits = shared.hits.lock().expect("hits lock");
        hits.push(hit);
        hits.len()
    };
    let delay = shared.delay_ms.load(Ordering::SeqCst);
    if delay > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
    }
    let status = StatusCode::from_u16(shared.status.load(Ordering::SeqCst))
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut reply_headers = HeaderMap::new();
    let units = shared.units.load(Ordering::SeqCst);
    if units != u64::MAX {
        reply_headers.insert("queuegate-units", units.into());
    }
    (
        status,
        reply_headers,
        Json(serde_json::json!({ "origin": true, "hit": n })),
    )
}
