//! The visitor as a browser is to the worker: one HTTP client that keeps
//! the cookies the worker sets and sends them back, with the JSON replies
//! as the tests read them. The system tests' visitor, and the edge bench's.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::set_cookie_pair;

/// How long one request may take before the test fails on it.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

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
    /// A new visitor with no cookies, calling the worker at `base`
    /// (`http://127.0.0.1:PORT`). Clones share the connection pool.
    pub fn new(base: &str) -> Visitor {
        Visitor::with_client(base, reqwest::Client::new())
    }

    /// [`Visitor::new`] on a client (a pool) the caller shares among many
    /// visitors.
    pub fn with_client(base: &str, http: reqwest::Client) -> Visitor {
        Visitor {
            base: base.to_string(),
            http,
            cookies: BTreeMap::new(),
            bearer: None,
        }
    }

    /// The worker this visitor calls.
    pub fn base(&self) -> &str {
        &self.base
    }

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
        self.try_send_with(method, path, token, body, headers)
            .await
            .expect("request to the worker")
    }

    /// [`Visitor::send_with`] that returns a failed exchange (no answer, a
    /// timeout) instead of failing the test: for the tools.
    pub async fn try_send_with(
        &mut self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&str>,
        headers: &[(&str, &str)],
    ) -> Result<Reply, reqwest::Error> {
        let url = format!("{}{path}", self.base);
        let mut req = self
            .http
            .request(method.parse().expect("method"), url)
            .timeout(REQUEST_TIMEOUT);
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
        let resp = req.send().await?;
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
        Ok(Reply {
            status,
            retry_after,
            set_cookies,
            allow,
            json: serde_json::from_str(&text).unwrap_or(serde_json::Value::Null),
        })
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
