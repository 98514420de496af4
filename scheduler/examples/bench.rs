//! Scheduler benchmark: realized ÷ configured admission rate over 60 s (one
//! scheduler, then three sharing the queue), the admit script's cost at
//! 1M waiting (batch 18 and 1,000), and fail-over time after kill -9 and
//! after SIGTERM. Starts its own redis-server on a free port.
//!
//! `bench/scheduler.sh` builds and runs it; `--quick` shortens every part
//! for a smoke run (the figures are then not the ones to report).

use std::time::{Duration, Instant};

use queuegate_scheduler::engine;
use queuegate_shared::ops::{Admit, AdmitReply, Configure, Enter};
use queuegate_shared::token::Grant;
use queuegate_shared::{
    script, Operation, Prefix, QueueId, QueueKeys, QueueState, Settings, UserId,
};
use queuegate_testkit::measure::{mean, percentile};
use queuegate_testkit::scheduler::{Scheduler, SchedulerBuilder};
use queuegate_testkit::{wait_until, RedisServer};
use redis::aio::MultiplexedConnection;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

struct Plan {
    rate_window: Duration,
    waiting: usize,
    admit_calls_18: usize,
    admit_calls_1000: usize,
    failovers: usize,
}

fn main() -> Res<()> {
    let quick = std::env::args().any(|a| a == "--quick");
    let plan = if quick {
        Plan {
            rate_window: Duration::from_secs(5),
            waiting: 100_000,
            admit_calls_18: 100,
            admit_calls_1000: 20,
            failovers: 2,
        }
    } else {
        Plan {
            rate_window: Duration::from_secs(60),
            waiting: 1_000_000,
            admit_calls_18: 500,
            admit_calls_1000: 100,
            failovers: 5,
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    println!(
        "# queuegate-scheduler benchmark{}",
        if quick { " (quick)" } else { "" }
    );
    // `--part rate|admit|failover` runs one part only.
    let args: Vec<String> = std::env::args().collect();
    let part = args
        .iter()
        .position(|a| a == "--part")
        .and_then(|i| args.get(i + 1).cloned());
    let runs = |name: &str| part.as_deref().is_none_or(|p| p == name);
    if runs("rate") {
        rate(&rt, &plan, 1)?;
        rate(&rt, &plan, 3)?;
    }
    if runs("admit") {
        admit_cost(&rt, &plan)?;
    }
    if runs("failover") {
        failover(&rt, &plan)?;
    }
    Ok(())
}

fn keys(id: &str) -> QueueKeys {
    QueueKeys::new(
        &Prefix::default(),
        &QueueId::new(id).unwrap_or_else(|e| panic!("{e}")),
    )
}

async fn connect(redis: &RedisServer) -> Res<MultiplexedConnection> {
    Ok(redis::Client::open(redis.url())?
        .get_multiplexed_async_connection()
        .await?)
}

async fn stat(conn: &mut MultiplexedConnection, keys: &QueueKeys, field: &str) -> Res<i64> {
    let v: Option<i64> = redis::cmd("HGET")
        .arg(keys.stats())
        .arg(field)
        .query_async(conn)
        .await?;
    Ok(v.unwrap_or(0))
}

/// Enters users `0..n` with pipelined EVALSHA (1,000 per round trip).
async fn fill(conn: &mut MultiplexedConnection, keys: &QueueKeys, n: usize) -> Res<()> {
    for s in script::all() {
        let _: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(s.source())
            .query_async(conn)
            .await?;
    }
    for start in (0..n).step_by(1_000) {
        let mut pipe = redis::pipe();
        for i in start..(start + 1_000).min(n) {
            let user = UserId::new(&format!("bench-{i}"))?;
            let inv = Enter {
                keys,
                user: &user,
                guard: queuegate_shared::guard::EntryGuard::default(),
                token: None,
            }
            .invocation();
            engine::pipe_evalsha(&mut pipe, &inv);
            pipe.ignore();
        }
        let () = pipe.query_async(conn).await?;
    }
    Ok(())
}

fn builder(redis: &RedisServer, id: &str, s: &Settings) -> SchedulerBuilder {
    Scheduler::builder(&redis.url())
        .queue_settings(id, s)
        .env("RUST_LOG", "warn")
}

/// Parses `name{queue="id"} value` from a metrics text.
fn sample(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(f64::NAN)
}

fn rate(rt: &tokio::runtime::Runtime, plan: &Plan, schedulers: usize) -> Res<()> {
    let redis = RedisServer::start();
    let k = keys("rate");
    let settings = Settings {
        max_active: 1_000_000,
        abandon_after_ms: 600_000,
        ..Settings::default()
    };
    let b = builder(&redis, "rate", &settings);
    let fleet: Vec<Scheduler> = (0..schedulers).map(|_| b.clone().start()).collect();
    let mut conn = rt.block_on(connect(&redis))?;
    let need = (settings.admit_rate_per_second * (plan.rate_window.as_secs_f64() + 10.0)) as usize;
    rt.block_on(fill(&mut conn, &k, need))?;
    std::thread::sleep(Duration::from_secs(2));
    let (t0, a0) = (
        Instant::now(),
        rt.block_on(stat(&mut conn, &k, "admitted"))?,
    );
    std::thread::sleep(plan.rate_window);
    let (t1, a1) = (
        Instant::now(),
        rt.block_on(stat(&mut conn, &k, "admitted"))?,
    );
    let realized = (a1 - a0) as f64 / (t1 - t0).as_secs_f64();
    let leader = fleet
        .iter()
        .map(Scheduler::metrics)
        .find(|m| sample(m, "queuegate_lease_held{queue=\"rate\"}") == 1.0)
        .unwrap_or_default();
    let ticks = sample(
        &leader,
        "queuegate_tick_duration_seconds_count{queue=\"rate\"}",
    );
    let tick_sum = sample(
        &leader,
        "queuegate_tick_duration_seconds_sum{queue=\"rate\"}",
    );
    println!(
        "rate, {schedulers} scheduler(s), {:.0} s: {} admitted, {realized:.2}/s realized \
         vs {:.0}/s configured = {:.4}x; leader's mean tick {:.3} ms over {ticks:.0} ticks",
        (t1 - t0).as_secs_f64(),
        a1 - a0,
        settings.admit_rate_per_second,
        realized / settings.admit_rate_per_second,
        1000.0 * tick_sum / ticks,
    );
    Ok(())
}

fn grants(n: usize) -> Res<Vec<Grant>> {
    let mut bytes = vec![0u8; n * 24];
    getrandom::getrandom(&mut bytes).map_err(|e| e.to_string())?;
    Ok(bytes
        .chunks_exact(24)
        .map(|c| {
            let mut seed = [0u8; 24];
            seed.copy_from_slice(c);
            Grant::from_random(seed, 2_000)
        })
        .collect())
}

async fn usec_per_call(conn: &mut MultiplexedConnection) -> Res<f64> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await?;
    Ok(info
        .lines()
        .find(|l| l.starts_with("cmdstat_evalsha:"))
        .and_then(|l| l.split("usec_per_call=").nth(1))
        .and_then(|v| v.split(',').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN))
}

fn admit_cost(rt: &tokio::runtime::Runtime, plan: &Plan) -> Res<()> {
    let redis = RedisServer::start();
    let k = keys("big");
    let settings = Settings {
        max_active: 10_000_000,
        max_waiting: 2_000_000,
        abandon_after_ms: 600_000,
        ..Settings::default()
    };
    rt.block_on(async {
        let mut conn = connect(&redis).await?;
        engine::run(
            &mut conn,
            &Configure {
                keys: &k,
                settings: &settings,
                initial_state: QueueState::Open,
            },
        )
        .await?;
        let started = Instant::now();
        fill(&mut conn, &k, plan.waiting).await?;
        let waiting: u64 = redis::cmd("ZCARD")
            .arg(k.waiting())
            .query_async(&mut conn)
            .await?;
        println!(
            "fill: {waiting} waiting in {:.1} s (pipelined enter script)",
            started.elapsed().as_secs_f64()
        );
        let () = redis::cmd("SET")
            .arg(k.lock())
            .arg("bench")
            .query_async(&mut conn)
            .await?;
        // The rolling leaver scan is part of every tick; the middle series
        // turns it off to show what it costs.
        let no_scan = Settings {
            leaver_scan_per_tick: 0,
            ..settings.clone()
        };
        for (batch, calls, s) in [
            (18usize, plan.admit_calls_18, &settings),
            (18, plan.admit_calls_18, &no_scan),
            (1_000, plan.admit_calls_1000, &settings),
        ] {
            let () = redis::cmd("CONFIG")
                .arg("RESETSTAT")
                .query_async(&mut conn)
                .await?;
            let mut took = Vec::with_capacity(calls);
            for _ in 0..calls {
                let g = grants(batch)?;
                let op = Admit {
                    keys: &k,
                    owner: "bench",
                    allowance: batch as u64,
                    settings: s,
                    rate_estimate: Some(175.0),
                    // Batches back to back: the shared rate bucket must
                    // not bind, the bench measures whole batches.
                    rate_in_force: 1e9,
                    grants: &g,
                    idle_lease: false,
                };
                let t = Instant::now();
                let reply = engine::run(&mut conn, &op).await?;
                took.push(t.elapsed().as_secs_f64() * 1000.0);
                match reply {
                    AdmitReply::Ran(c) if c.admitted == batch as u64 => {}
                    other => return Err(format!("admit {batch}: {other:?}").into()),
                }
            }
            let server = usec_per_call(&mut conn).await?;
            took.sort_by(f64::total_cmp);
            println!(
                "admit batch {batch} (leaver scan {}) at ~{waiting} waiting, {calls} calls: \
                 client p50 {:.3} ms, p99 {:.3} ms, mean {:.3} ms; server {:.1} us per EVALSHA",
                s.leaver_scan_per_tick,
                percentile(&took, 50.0),
                percentile(&took, 99.0),
                mean(&took),
                server
            );
        }
        Ok::<(), Box<dyn std::error::Error>>(())
    })
}

fn failover(rt: &tokio::runtime::Runtime, plan: &Plan) -> Res<()> {
    let redis = RedisServer::start();
    let k = keys("fo");
    let settings = Settings {
        max_active: 1_000_000,
        abandon_after_ms: 600_000,
        ..Settings::default()
    };
    let b = builder(&redis, "fo", &settings);
    let mut conn = rt.block_on(connect(&redis))?;
    let mut fleet = vec![b.clone().start(), b.clone().start()];
    rt.block_on(fill(&mut conn, &k, 4 * 175 * plan.failovers * 4))?;
    for graceful in [false, true] {
        let mut times = Vec::new();
        for _ in 0..plan.failovers {
            let holder = |conn: &mut MultiplexedConnection| -> Option<u32> {
                let owner: Option<String> = rt
                    .block_on(redis::cmd("GET").arg(k.lock()).query_async(conn))
                    .ok()?;
                owner?.split('/').nth(1)?.parse().ok()
            };
            let mut leader = None;
            let ready = wait_until(Duration::from_secs(10), || {
                let pid = holder(&mut conn);
                leader = fleet.iter().position(|s| s.pid() == pid && pid.is_some());
                leader.is_some()
            });
            if !ready {
                return Err("no leader".into());
            }
            // Let the standby settle into its polling rhythm.
            std::thread::sleep(Duration::from_millis(500));
            let mut victim = fleet.remove(leader.unwrap_or_default());
            let old = victim.pid();
            let before = rt.block_on(stat(&mut conn, &k, "admitted"))?;
            let t = Instant::now();
            if graceful {
                victim.sigterm();
            } else {
                victim.kill();
            }
            let mut done = None;
            while t.elapsed() < Duration::from_secs(10) {
                let pid = holder(&mut conn);
                if pid.is_some()
                    && pid != old
                    && rt.block_on(stat(&mut conn, &k, "admitted"))? > before
                {
                    done = Some(t.elapsed());
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            times.push(done.ok_or("no take-over")?.as_secs_f64() * 1000.0);
            let _ = victim.wait_exit(Duration::from_secs(5));
            fleet.push(b.clone().start());
        }
        times.sort_by(f64::total_cmp);
        println!(
            "failover after {}: {} runs, min {:.0} ms, median {:.0} ms, max {:.0} ms \
             (tick {} ms, lease {} ms)",
            if graceful { "SIGTERM" } else { "kill -9" },
            times.len(),
            times[0],
            percentile(&times, 50.0),
            times[times.len() - 1],
            settings.tick_ms,
            settings.lease_ttl_ms
        );
    }
    Ok(())
}
