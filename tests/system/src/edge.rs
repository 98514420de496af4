//! The whole edge path for tests: redis-server → redis-rest gateway → the
//! built worker under workerd → a test origin, plus a visitor client that
//! keeps its own cookies.

use std::collections::BTreeMap;

use queuegate_shared::Settings;
use queuegate_testkit::gateway::Gateway;
use queuegate_testkit::{set_cookie_pair, RedisServer, Wrangler};

use crate::origin::TestOrigin;
use crate::TestQueue;

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
    pub worker: Wrangler,
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
        let worker = tokio::task::spawn_blocking(move || worker.start())
            .await
            .expect("start wrangler");
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

    /// A new visitor with no cookies.
    pub fn visitor(&self) -> Visitor {
        Visitor {
            base: self.worker.url(),
            http: reqwest::Client::new(),
            cookies: BTreeMap::new(),
            bearer: None,
        }
    }

    /// Every key and its DUMP: equal snapshots mean Redis did not change.
    pub async fn snapshot(&self) -> BTreeMap<String, Vec<u8>> {
        self.queue.snapshot().await
    }
}

/// One reply as a test sees it.
#[derive(Debug)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// Retry-After, if any.
    pub retry_after: Option<u64>,
    /// Set-Cookie values.
    pub set_cookies: Vec<String>,
    /// The Allow header, if any.
    pub allow: Option<String>,
    /// The JSON body (Null if not JSON).
    pub json: serde_json::Value,
}

impl Reply {
    /// `json["state"]` as text.
    pub fn state(&self) -> &str {
        self.json["state"].as_str().unwrap_or_default()
    }

    /// `json["error"]` as text.
    pub fn error(&self) -> &str {
        self.json["error"].as_str().unwrap_or_default()
    }
}

/// A browser-like visitor: keeps the cookies the worker sets.
#[derive(Debug, Clone)]
pub struct Visitor {
    base: String,
    http: reqwest::Client,
    /// Cookie name → value.
    pub cookies: BTreeMap<String, String>,
    /// A bearer token for JWT mode.
    pub bearer: Option<String>,
}

impl Visitor {
    /// The visitor id inside the signed cookie.
    pub fn id(&self) -> Option<String> {
        let v = self.cookies.get("qg_visitor")?;
        Some(v.split('.').next()?.to_string())
    }

    /// Sends a request and records the cookies set.
    pub async fn send(
        &mut self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&str>,
    ) -> Reply {
        self.send_with(method, path, token, body, &[]).await
    }

    /// [`Visitor::send`] with extra headers.
    pub async fn send_with(
        &mut self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&str>,
        headers: &[(&str, &str)],
    ) -> Reply {
        let url = format!("{}{path}", self.base);
        let mut req = self
            .http
            .request(method.parse().expect("method"), url)
            .timeout(std::time::Duration::from_secs(20));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if !self.cookies.is_empty() {
            let header: Vec<String> = self
                .cookies
                .iter()
                .filter(|(k, _)| k.as_str() != "qg_token")
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            req = req.header("cookie", header.join("; "));
        }
        if let Some(b) = &self.bearer {
            req = req.header("authorization", format!("Bearer {b}"));
        }
        if let Some(t) = token {
            req = req.header("x-entry-token", t);
        }
        if let Some(b) = body {
            req = req
                .header("content-type", "application/json")
                .body(b.to_string());
        }
        let resp = req.send().await.expect("request to the worker");
        let status = resp.status().as_u16();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok());
        let allow = resp
            .headers()
            .get("allow")
            .and_then(|v| v.to_str().ok())
            .map(String::from);
        let set_cookies: Vec<String> = resp
            .headers()
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok().map(String::from))
            .collect();
        for (k, v) in set_cookies.iter().filter_map(|c| set_cookie_pair(c)) {
            self.cookies.insert(k.to_string(), v.to_string());
        }
        let text = resp.text().await.unwrap_or_default();
        Reply {
            status,
            retry_after,
            set_cookies,
            allow,
            json: serde_json::from_str(&text).unwrap_or(serde_json::Value::Null),
        }
    }

    /// `POST /queue/enter`.
    pub async fn enter(&mut self) -> Reply {
        self.send("POST", "/queue/enter", None, None).await
    }

    /// `GET /queue/position`.
    pub async fn position(&mut self) -> Reply {
        self.send("GET", "/queue/position", None, None).await
    }

    /// `POST /orders` with an entry token.
    pub async fn order(&mut self, token: Option<&str>) -> Reply {
        self.send("POST", "/orders", token, Some(r#"{"item":"ticket"}"#))
            .await
    }
}
