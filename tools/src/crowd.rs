//! A synthetic crowd: visitors arrive over a ramp, poll as the server says,
//! some leave, the admitted ones order. Bounded by its own deadline.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Crowd counters, for a status line.
#[derive(Debug, Default)]
pub struct CrowdStats {
    /// Visitors who entered.
    pub entered: AtomicU64,
    /// Polls sent.
    pub polls: AtomicU64,
    /// Visitors admitted.
    pub admitted: AtomicU64,
    /// Orders the origin accepted.
    pub ordered: AtomicU64,
    /// Visitors who gave up on purpose.
    pub left: AtomicU64,
    /// Requests that failed.
    pub errors: AtomicU64,
}

impl CrowdStats {
    /// One line for the terminal.
    pub fn line(&self) -> String {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        format!(
            "crowd: entered {} · admitted {} · ordered {} · left {} · polls {} · errors {}",
            g(&self.entered),
            g(&self.admitted),
            g(&self.ordered),
            g(&self.left),
            g(&self.polls),
            g(&self.errors)
        )
    }
}

/// Sends `n` visitors to the worker at `base` over `ramp`; `leave_share` of
/// them stop polling at some point. Returns when all are done or `deadline`
/// passes.
pub async fn run(
    base: String,
    n: u64,
    ramp: Duration,
    leave_share: f64,
    deadline: Duration,
    stats: Arc<CrowdStats>,
) {
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()
        .unwrap_or_default();
    let end = Instant::now() + deadline;
    let mut tasks = Vec::new();
    for i in 0..n {
        let (http, base, stats) = (http.clone(), base.clone(), stats.clone());
        let start_after = ramp.mul_f64(i as f64 / n.max(1) as f64);
        // A deterministic spread of leavers: visitor i leaves when the
        // running count of leavers (i × share) steps up.
        let leaves = ((i + 1) as f64 * leave_share).floor() > (i as f64 * leave_share).floor();
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep(start_after).await;
            visitor(&http, &base, leaves, end, &stats).await;
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
}

async fn visitor(
    http: &reqwest::Client,
    base: &str,
    leaves: bool,
    end: Instant,
    stats: &CrowdStats,
) {
    let mut cookie = String::new();
    let mut path = "/queue/enter";
    let mut method = reqwest::Method::POST;
    let mut polls_before_leaving = if leaves { 3 } else { u64::MAX };
    while Instant::now() < end {
        let mut req = http.request(method.clone(), format!("{base}{path}"));
        if !cookie.is_empty() {
            req = req.header("cookie", cookie.clone());
        }
        let Ok(resp) = req.timeout(Duration::from_secs(10)).send().await else {
            stats.errors.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_secs(2)).await;
            continue;
        };
        if let Some(c) = resp
            .headers()
            .get("set-cookie")
            .and_then(|v| v.to_str().ok())
        {
            if let Some(kv) = c
                .split(';')
                .next()
                .filter(|kv| kv.starts_with("qg_visitor="))
            {
                cookie = kv.to_string();
                stats.entered.fetch_add(1, Ordering::Relaxed);
            }
        }
        let retry = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        let body: serde_json::Value = resp.json().await.unwrap_or_default();
        match body["state"].as_str() {
            Some("waiting") => {
                stats.polls.fetch_add(1, Ordering::Relaxed);
                polls_before_leaving = polls_before_leaving.saturating_sub(1);
                if polls_before_leaving == 0 {
                    stats.left.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                let wait = body["retryAfterMs"].as_u64().unwrap_or(1_000);
                tokio::time::sleep(Duration::from_millis(wait)).await;
                (method, path) = (reqwest::Method::GET, "/queue/position");
            }
            Some("admitted") => {
                stats.admitted.fetch_add(1, Ordering::Relaxed);
                let token = body["token"].as_str().unwrap_or_default().to_string();
                let now_ms = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_millis() as u64)
                    .unwrap_or_default();
                let wait = body["activateAt"]
                    .as_u64()
                    .unwrap_or(now_ms)
                    .saturating_sub(now_ms);
                tokio::time::sleep(Duration::from_millis(wait.min(10_000))).await;
                order(http, base, &cookie, &token, end, stats).await;
                return;
            }
            Some(_) => return,
            None => {
                stats.errors.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_secs(retry.unwrap_or(2))).await;
            }
        }
    }
}

async fn order(
    http: &reqwest::Client,
    base: &str,
    cookie: &str,
    token: &str,
    end: Instant,
    stats: &CrowdStats,
) {
    while Instant::now() < end {
        let resp = http
            .post(format!("{base}/orders"))
            .header("cookie", cookie)
            .header("x-entry-token", token)
            .header("content-type", "application/json")
            .body(r#"{"item":"ticket"}"#)
            .timeout(Duration::from_secs(10))
            .send()
            .await;
        match resp.map(|r| r.status().as_u16()) {
            Ok(s) if s < 300 => {
                stats.ordered.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Ok(429) => tokio::time::sleep(Duration::from_millis(500)).await,
            _ => {
                stats.errors.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
    }
}
