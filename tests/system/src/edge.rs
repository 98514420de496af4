//! The whole edge path for tests: redis-server → redis-rest gateway → the
//! built worker under the `workerd` binary itself → a test origin, and
//! the testkit's visitor client that calls it.
//!
//! The worker is served by workerd with the bindings `wrangler dev` would
//! give it, but without wrangler's Node proxy in front: that proxy cost
//! more CPU than the worker itself (drop day: 60 s of Node against 64 s of
//! workerd), so tests that measure what a loaded edge answers measured the
//! proxy too. `wrangler dev` itself stays under test where the worker is
//! started as a shop starts it locally: edge/worker_health.rs,
//! edge/refusals.rs and `scripts/dev`'s stack (the page tests).

use std::collections::BTreeMap;

use queuegate_shared::Settings;
use queuegate_testkit::gateway::Gateway;
use queuegate_testkit::workerd::Workerd;
use queuegate_testkit::{RedisServer, Wrangler};

use crate::origin::TestOrigin;
use crate::TestQueue;

/// The visitor client (the testkit's), here beside the stack it calls.
pub use queuegate_testkit::visitor::{Reply, Visitor};
/// Secrets the test worker runs with (the testkit's local preset).
pub use queuegate_testkit::{IDENTITY_SECRET, ORIGIN_SECRET};
/// The secret the JWTs of the jwt-mode tests are signed with.
pub const JWT_SECRET: &str = "test-jwt-secret-0123456789abcdefghijkl";

/// A running edge stack.
#[derive(Debug)]
pub struct EdgeStack {
    /// The Redis behind everything.
    pub redis: RedisServer,
    /// The REST gateway the worker talks to.
    pub gateway: Gateway,
    /// The origin behind the gate.
    pub origin: TestOrigin,
    /// The worker under workerd.
    pub worker: Workerd,
    /// Direct access to the queue `main` (admit ticks, assertions).
    pub queue: TestQueue,
}

impl EdgeStack {
    /// Starts everything with `settings` published for queue `main` (and
    /// `other`), in identity mode `mode` ("anonymous" or "jwt"), with the
    /// entry guard off (no challenge, no address budget): the fixture of
    /// the tests about everything after a place is taken.
    pub async fn start(settings: Settings, mode: &str, redis: RedisServer) -> EdgeStack {
        let unguarded = Settings {
            entry_budget_per_minute: 0,
            ..settings
        };
        Self::start_with(unguarded, mode, redis, &[("ENTRY_CHALLENGE", "off")]).await
    }

    /// Like [`EdgeStack::start`] with the guard as `settings` and the
    /// worker's defaults make it, plus extra worker vars.
    pub async fn start_with(
        settings: Settings,
        mode: &str,
        redis: RedisServer,
        vars: &[(&str, &str)],
    ) -> EdgeStack {
        Self::start_behind(settings, mode, redis, vars, &[]).await
    }

    /// Like [`EdgeStack::start_with`], the gateway started with extra
    /// flags (its test-only faults).
    pub async fn start_behind(
        settings: Settings,
        mode: &str,
        redis: RedisServer,
        vars: &[(&str, &str)],
        gateway_args: &[&str],
    ) -> EdgeStack {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let queue = TestQueue::open(&redis.url(), "main", settings.clone()).await;
        TestQueue::open(&redis.url(), "other", settings).await;
        let gateway = gateway_args
            .iter()
            .fold(Gateway::builder(&redis.url()), |g, a| g.arg(a))
            .start();
        let origin = TestOrigin::start().await;
        let mut worker = Wrangler::local(&gateway, origin.url())
            .var("QUEUES", "main,other")
            .var("IDENTITY_MODE", mode)
            .var("JWT_COOKIE", "shop_session");
        // A JWKS replaces the shared secret (the worker refuses both).
        if !vars.iter().any(|(k, _)| k == "JWKS_URL") {
            worker = worker.secret("JWT_SECRET", JWT_SECRET);
        }
        for (k, v) in &vars {
            worker = worker.var(k, v);
        }
        let worker = tokio::task::spawn_blocking(move || worker.start_workerd())
            .await
            .expect("start workerd");
        EdgeStack {
            redis,
            gateway,
            origin,
            worker,
            queue,
        }
    }

    /// One admit tick of up to `n` users whose tokens activate after
    /// `jitter_ms` (the tests' stand-in for a scheduler tick).
    pub async fn admit(&self, n: usize, jitter_ms: u64) {
        self.queue.set_lock("test").await;
        self.queue
            .admit("test", n as u64, &crate::grants(n, jitter_ms))
            .await;
    }

    /// Commands the worker has sent through the gateway so far, by name
    /// (`GET /_stats`; Redis' own `INFO commandstats` would also count the
    /// commands run inside scripts).
    pub async fn sent(&self) -> BTreeMap<String, u64> {
        let stats: serde_json::Value = reqwest::Client::new()
            .get(format!("{}/_stats", self.gateway.url()))
            .bearer_auth(self.gateway.token())
            .send()
            .await
            .expect("GET /_stats")
            .json()
            .await
            .expect("its JSON");
        stats["commands"]
            .as_object()
            .expect("commands")
            .iter()
            .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0)))
            .collect()
    }

    /// A new visitor with no cookies.
    pub fn visitor(&self) -> Visitor {
        Visitor::new(&self.worker.url())
    }

    /// Every key and its DUMP: equal snapshots mean Redis did not change.
    pub async fn snapshot(&self) -> BTreeMap<String, Vec<u8>> {
        self.queue.snapshot().await
    }
}

/// One raw reply of the worker, redirects not followed.
#[derive(Debug)]
pub struct RawReply {
    /// Its status.
    pub status: u16,
    /// Its headers.
    pub headers: reqwest::header::HeaderMap,
    /// Its body as text.
    pub body: String,
}

impl RawReply {
    /// A header's value, if it is text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The body as JSON (`Null` when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// The error code of a JSON error reply, or empty.
    pub fn error(&self) -> String {
        self.json()["error"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Every `Set-Cookie` it carries.
    pub fn set_cookies(&self) -> Vec<String> {
        self.headers
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_string))
            .collect()
    }
}

/// One request to `base` as a browser would send it, with `cookies` (our
/// own included) and extra `headers`, never following a redirect.
pub async fn raw_request(
    base: &str,
    method: &str,
    path: &str,
    cookies: &BTreeMap<String, String>,
    headers: &[(&str, &str)],
) -> RawReply {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(std::time::Duration::from_secs(20))
        .build()
        .expect("client");
    let mut req = http.request(method.parse().expect("method"), format!("{base}{path}"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    if !cookies.is_empty() {
        let header: Vec<String> = cookies.iter().map(|(k, v)| format!("{k}={v}")).collect();
        req = req.header("cookie", header.join("; "));
    }
    let resp = req.send().await.expect("request to the worker");
    RawReply {
        status: resp.status().as_u16(),
        headers: resp.headers().clone(),
        body: resp.text().await.unwrap_or_default(),
    }
}
