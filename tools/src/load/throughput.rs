//! Position requests per second: a bounded concurrent load of
//! `GET /queue/position` through the worker served by the `workerd` binary
//! directly (the crowd itself runs through `wrangler dev`), beside the same script run by
//! `redis-benchmark` straight against Redis (the ceiling the edge sits on).
//! The queue is paused meanwhile, so the line holds still and every call
//! takes the script's full waiting path.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use queuegate_shared::ops::Position;
use queuegate_shared::{Operation, QueueKeys, UserId};
use queuegate_testkit::measure::percentile;
use redis::aio::MultiplexedConnection;

/// Requests per second and latency of one side.
#[derive(Debug, Clone, Copy, Default)]
pub struct Side {
    /// Successful requests per second.
    pub rps: f64,
    /// Median latency (ms).
    pub p50_ms: f64,
    /// 99th percentile latency (ms).
    pub p99_ms: f64,
    /// Requests that were answered with a waiting state.
    pub ok: u64,
    /// Requests that failed.
    pub failed: u64,
}

/// Both sides at the same concurrency.
#[derive(Debug, Clone, Copy, Default)]
pub struct Throughput {
    /// Concurrent requests on each side.
    pub concurrency: usize,
    /// Waiting visitors the positions were asked for.
    pub depth: u64,
    /// Through the worker (workerd → gateway → Redis).
    pub worker: Side,
    /// `redis-benchmark` → Redis.
    pub redis: Side,
}

/// Settings of the measurement.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The worker's URL.
    pub base: String,
    /// Redis port (loopback).
    pub redis_port: u16,
    /// Visitors to enter for the measurement.
    pub visitors: usize,
    /// Concurrent requests.
    pub concurrency: usize,
    /// How long the worker side runs.
    pub duration: Duration,
    /// Requests redis-benchmark sends.
    pub redis_requests: u64,
}

/// Pauses the queue (via the scheduler's operator CLI), enters
/// `plan.visitors`, measures both sides, and opens the queue again.
pub async fn measure(
    http: &reqwest::Client,
    conn: &mut MultiplexedConnection,
    keys: &QueueKeys,
    scheduler_config: &Path,
    plan: &Plan,
) -> anyhow::Result<Throughput> {
    operator(scheduler_config, "pause").await?;
    let result = measure_paused(http, conn, keys, plan).await;
    operator(scheduler_config, "open").await?;
    result
}

async fn measure_paused(
    http: &reqwest::Client,
    conn: &mut MultiplexedConnection,
    keys: &QueueKeys,
    plan: &Plan,
) -> anyhow::Result<Throughput> {
    let cookies = enter_many(http, &plan.base, plan.visitors).await?;
    let depth: u64 = redis::cmd("ZCARD")
        .arg(keys.waiting())
        .query_async(conn)
        .await?;
    let worker = worker_side(http, &plan.base, &cookies, plan.concurrency, plan.duration).await;
    let users: Vec<String> = redis::cmd("ZRANGE")
        .arg(keys.waiting())
        .arg(depth / 2)
        .arg(depth / 2)
        .query_async(conn)
        .await?;
    let user = users
        .first()
        .context("nobody waiting for redis-benchmark")?;
    let redis = redis_side(conn, keys, &UserId::new(user)?, plan).await?;
    Ok(Throughput {
        concurrency: plan.concurrency,
        depth,
        worker,
        redis,
    })
}

/// `queuegate-scheduler --config … <verb> main`.
async fn operator(config: &Path, verb: &'static str) -> anyhow::Result<()> {
    let config = config.to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        queuegate_testkit::scheduler::command(&config, &[verb, "main"])
    })
    .await?;
    if !out.status.success() {
        bail!(
            "queuegate-scheduler {verb} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// Enters `n` visitors (16 at a time); their cookies.
async fn enter_many(http: &reqwest::Client, base: &str, n: usize) -> anyhow::Result<Vec<String>> {
    let url = format!("{base}/queue/enter");
    let mut cookies = Vec::with_capacity(n);
    for first in (0..n).step_by(16) {
        let batch: Vec<_> = (first..n.min(first + 16))
            .map(|i| {
                let (http, base, url) = (http.clone(), base.to_string(), url.clone());
                tokio::spawn(async move { enter_one(&http, &base, &url, i as u64).await })
            })
            .collect();
        for call in batch {
            cookies.push(call.await??);
        }
    }
    Ok(cookies)
}

/// One new visitor from an address of its own, through the entry guard as
/// a browser would pass it.
async fn enter_one(
    http: &reqwest::Client,
    base: &str,
    url: &str,
    seed: u64,
) -> anyhow::Result<String> {
    use super::visitor;
    use queuegate_edge::{altcha, CLIENT_IP_HEADER};
    let ip = visitor::synthetic_address(seed ^ 0x7468_726f_7567_6870);
    let mut solution = None;
    // Three tries, and one more per level the line may rise by meanwhile
    // (a `challenge_stale` refusal).
    for _ in 0..3 + queuegate_shared::guard::MAX_LEVEL {
        let mut req = http.post(url).header(CLIENT_IP_HEADER, &ip);
        if let Some(s) = solution.take() {
            req = req.header(altcha::HEADER, s);
        }
        let resp = req.send().await?;
        let cookie = visitor::visitor_cookie(&resp);
        let state: serde_json::Value = resp.json().await?;
        if visitor::wants_challenge(&state) {
            let challenge = http.get(format!("{base}/queue/challenge")).send().await?;
            solution = visitor::solve_challenge(challenge.json().await?).await;
            continue;
        }
        anyhow::ensure!(state["state"] == "waiting", "enter answered {state}");
        return cookie.context("enter set no visitor cookie");
    }
    anyhow::bail!(
        "no place after {} challenges",
        3 + queuegate_shared::guard::MAX_LEVEL
    )
}

async fn worker_side(
    http: &reqwest::Client,
    base: &str,
    cookies: &[String],
    concurrency: usize,
    duration: Duration,
) -> Side {
    let cookies = Arc::new(cookies.to_vec());
    let failed = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let end = started + duration;
    let mut tasks = Vec::new();
    for worker in 0..concurrency {
        let (http, cookies, failed) = (http.clone(), cookies.clone(), failed.clone());
        let url = format!("{base}/queue/position");
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut i = worker;
            while Instant::now() < end {
                let sent = Instant::now();
                let cookie = &cookies[i % cookies.len()];
                i += concurrency;
                let reply = http.get(&url).header("cookie", cookie).send().await;
                let waiting = match reply {
                    Ok(r) if r.status().is_success() => r
                        .json::<serde_json::Value>()
                        .await
                        .is_ok_and(|b| b["state"] == "waiting"),
                    _ => false,
                };
                if waiting {
                    latencies.push(sent.elapsed().as_secs_f64() * 1e3);
                } else {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
            }
            latencies
        }));
    }
    let mut latencies = Vec::new();
    for t in tasks {
        latencies.extend(t.await.unwrap_or_default());
    }
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort_by(f64::total_cmp);
    Side {
        rps: latencies.len() as f64 / elapsed,
        p50_ms: percentile(&latencies, 50.0),
        p99_ms: percentile(&latencies, 99.0),
        ok: latencies.len() as u64,
        failed: failed.load(Ordering::Relaxed),
    }
}

/// `redis-benchmark … EVALSHA <position sha> 5 KEYS… ARGV…` after SCRIPT LOAD.
async fn redis_side(
    conn: &mut MultiplexedConnection,
    keys: &QueueKeys,
    user: &UserId,
    plan: &Plan,
) -> anyhow::Result<Side> {
    let inv = Position { keys, user }.invocation();
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(inv.script.source())
        .query_async(conn)
        .await?;
    let mut args = vec![
        "-h".to_string(),
        "127.0.0.1".into(),
        "-p".into(),
        plan.redis_port.to_string(),
        "-c".into(),
        plan.concurrency.to_string(),
        "-n".into(),
        plan.redis_requests.to_string(),
        "--csv".into(),
        "EVALSHA".into(),
        sha,
        inv.keys.len().to_string(),
    ];
    args.extend(inv.keys);
    args.extend(inv.args);
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("redis-benchmark")
            .args(&args)
            .output()
    })
    .await?
    .context("run redis-benchmark (apt-get install redis-tools)")?;
    if !out.status.success() {
        bail!(
            "redis-benchmark failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    parse_csv(&String::from_utf8_lossy(&out.stdout), plan.redis_requests)
}

/// `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"`
fn parse_csv(text: &str, requests: u64) -> anyhow::Result<Side> {
    let row = text
        .lines()
        .filter(|l| !l.starts_with("\"test\""))
        .find_map(|l| {
            let cells: Vec<f64> = l
                .split("\",\"")
                .skip(1)
                .map(|c| c.trim_matches('"').parse().unwrap_or(f64::NAN))
                .collect();
            (cells.len() >= 6).then_some(cells)
        })
        .with_context(|| format!("no result row in redis-benchmark output: {text}"))?;
    Ok(Side {
        rps: row[0],
        p50_ms: row[3],
        p99_ms: row[5],
        ok: requests,
        failed: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_redis_benchmark_csv() {
        let text = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\"EVALSHA 5ccf qg:{main}:waiting\",\"41152.26\",\"0.730\",\"0.152\",\"0.687\",\"1.127\",\"1.495\",\"3.303\"\n";
        let side = parse_csv(text, 10).unwrap();
        assert!((side.rps - 41152.26).abs() < 1e-6);
        assert!((side.p50_ms - 0.687).abs() < 1e-9);
        assert!((side.p99_ms - 1.495).abs() < 1e-9);
    }
}
