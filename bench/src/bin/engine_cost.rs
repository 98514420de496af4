//! Redis-side cost of each queue script at several queue depths, beside a
//! bare ZRANK / ZADD at the same depth, and Redis memory per waiting user.
//!
//! `cargo run --profile release-native -p queuegate-bench --bin engine_cost [-- 1000,100000,1000000]`
//!
//! Cost is `INFO commandstats` usec_per_call, reset before each phase, so
//! client and network time are excluded; every phase runs on one private
//! redis-server with the same data.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use queuegate_bench::redis_cost::{
    add_evalsha, bench_user as uid, commands_per_call, phase, prepare_queue, reset_stats,
    usec_per_call, used_memory,
};
use queuegate_scheduler::engine;
use queuegate_shared::ops::{Admit, AdmitReply, Consume, Enter, Outcome, Position, Settle};
use queuegate_shared::token::{EntryToken, Grant};
use queuegate_shared::{Prefix, QueueId, QueueKeys, Settings, UserId};
use queuegate_testkit::RedisServer;
use redis::aio::MultiplexedConnection;

const CALLS: usize = 2_000;
/// Enters per pipeline while filling.
const FILL_PIPELINE: usize = 1_000;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let depths = queuegate_bench::redis_cost::depths_arg(&[1_000, 100_000, 1_000_000])?;
    let mut table: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
    let mut memory = Vec::new();
    for &depth in &depths {
        let redis = RedisServer::start();
        let client = redis::Client::open(redis.url())?;
        let mut conn = client.get_multiplexed_async_connection().await?;
        let q = Bench::new(conn.clone(), depth).await?;
        let before = used_memory(&mut conn).await?;
        let started = std::time::Instant::now();
        q.fill(depth).await?;
        let after = used_memory(&mut conn).await?;
        eprintln!(
            "depth {depth}: filled in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        let mut m = q.memory(before, after).await?;
        let (costs, admitted) = q.measure().await?;
        for (name, cost) in costs {
            table.entry(name).or_default().push(cost);
        }
        m.admitted = admitted;
        memory.push(m);
        eprintln!("depth {depth}: done");
    }
    print_report(&depths, &table, &memory);
    Ok(())
}

/// A duration from the environment, or `default`.
fn env_ms(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Redis memory at one depth, read right after the fill.
struct Memory {
    depth: usize,
    /// `used_memory` before and after the fill.
    before: i64,
    after: i64,
    /// `used_memory_rss` and `mem_clients_normal` (the clients' buffers,
    /// inside used_memory) after the fill.
    rss: i64,
    clients: i64,
    /// The `seen:*` bitmaps after the fill: how many, and their `MEMORY
    /// USAGE` summed.
    seen_keys: usize,
    seen_bytes: u64,
    /// Mean `MEMORY USAGE` of an admitted visitor's token and status keys,
    /// read after the admit phase.
    admitted: (f64, f64),
}

struct Bench {
    conn: MultiplexedConnection,
    keys: QueueKeys,
    settings: Settings,
    depth: usize,
}

impl Bench {
    async fn new(mut conn: MultiplexedConnection, depth: usize) -> Result<Bench> {
        let keys = QueueKeys::new(&Prefix::default(), &QueueId::new("bench")?);
        let settings = Settings {
            max_waiting: 10_000_000,
            max_active: 10_000_000,
            activation_jitter_ms: 0,
            // Nobody polls during the fill: with the default 90 s a fill
            // longer than that (10M takes minutes) turns the head of the line
            // into leavers, which admit drops instead of admitting. An hour
            // outlasts any fill; the near zone must cover abandon_after +
            // 2 × poll_max (settings.rs), so it grows with it.
            // QG_BENCH_ABANDON_MS and QG_BENCH_GRACE_MS override both, to
            // compare the sleep grace off (the grace at most the abandon
            // timeout) and on: at the default hour it is off (the grace is
            // at most 30 min).
            abandon_after_ms: env_ms("QG_BENCH_ABANDON_MS", 3_600_000),
            sleep_grace_ms: env_ms("QG_BENCH_GRACE_MS", Settings::default().sleep_grace_ms),
            exact_zone_ms: env_ms("QG_BENCH_ABANDON_MS", 3_600_000)
                + 2 * Settings::default().poll_max_ms,
            // QG_BENCH_SCAN overrides the rolling leaver scan per tick, to
            // split admit's cost between admission and the scan.
            leaver_scan_per_tick: std::env::var("QG_BENCH_SCAN")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(Settings::default().leaver_scan_per_tick),
            ..Settings::default()
        };
        prepare_queue(&mut conn, &keys, &settings).await?;
        Ok(Bench {
            conn,
            keys,
            settings,
            depth,
        })
    }

    /// `depth` waiting users, built with the enter script itself. EVALSHA
    /// (prepare_queue loaded the script), not `redis_cost::fill`'s EVAL:
    /// the same script, without sending its ~20 KB source with every call,
    /// which made the client, not Redis, the bottleneck of a 10M fill.
    async fn fill(&self, depth: usize) -> Result<()> {
        let mut conn = self.conn.clone();
        for start in (0..depth).step_by(FILL_PIPELINE) {
            let mut pipe = redis::pipe();
            for n in start..(start + FILL_PIPELINE).min(depth) {
                let u = uid(n);
                let enter = Enter {
                    keys: &self.keys,
                    user: &u,
                    guard: Default::default(),
                    token: None,
                };
                add_evalsha(&mut pipe, &queuegate_shared::Operation::invocation(&enter));
            }
            let _: Vec<redis::Value> = pipe.query_async(&mut conn).await?;
        }
        Ok(())
    }

    /// Memory after a fill (`before`, `after`: its used_memory).
    async fn memory(&self, before: i64, after: i64) -> Result<Memory> {
        let mut conn = self.conn.clone();
        let seen: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{}seen:*", self.keys.base()))
            .query_async(&mut conn)
            .await?;
        let mut seen_bytes = 0;
        for key in &seen {
            seen_bytes += key_bytes(&mut conn, key).await?;
        }
        Ok(Memory {
            depth: self.depth,
            before,
            after,
            rss: memory_field(&mut conn, "used_memory_rss").await?,
            clients: memory_field(&mut conn, "mem_clients_normal").await?,
            seen_keys: seen.len(),
            seen_bytes,
            admitted: (0.0, 0.0),
        })
    }

    /// The cost of each operation, and the mean `MEMORY USAGE` of the
    /// token and status keys of the visitors the admit phase admitted.
    async fn measure(&self) -> Result<(Vec<(&'static str, f64)>, (f64, f64))> {
        let mut out = Vec::new();
        // Spread over the whole line, and a different set of users for the
        // bare ZRANK and for position, so neither runs on nodes the other
        // has just brought into the cache.
        let step = (self.depth / CALLS).max(2);
        let sample_at = |offset: usize| -> Vec<UserId> {
            (0..CALLS)
                .map(|i| uid((i * step + offset) % self.depth))
                .collect()
        };
        let (ranked, polled) = (sample_at(0), sample_at(step / 2));

        out.push((
            "ZRANK (bare)",
            self.phase("zrank", |p, i| {
                p.cmd("ZRANK")
                    .arg(self.keys.waiting())
                    .arg(ranked[i].as_str());
            })
            .await?,
        ));
        out.push((
            "position",
            self.phase("evalsha", |p, i| {
                let inv = queuegate_shared::Operation::invocation(&Position {
                    keys: &self.keys,
                    user: &polled[i],
                });
                add_evalsha(p, &inv);
            })
            .await?,
        ));
        out.push(("position, commands/call", self.per_call().await?));
        out.push((
            "ZADD (bare)",
            self.phase("zadd", |p, i| {
                p.cmd("ZADD")
                    .arg("qg:{bench}:bare")
                    .arg(i)
                    .arg(uid(self.depth + i).as_str());
            })
            .await?,
        ));
        out.push((
            "enter (new)",
            self.phase("evalsha", |p, i| {
                let u = uid(self.depth + CALLS + i);
                add_evalsha(
                    p,
                    &queuegate_shared::Operation::invocation(&Enter {
                        keys: &self.keys,
                        user: &u,
                        guard: queuegate_shared::guard::EntryGuard::default(),
                        token: None,
                    }),
                );
            })
            .await?,
        ));
        out.push(("enter, commands/call", self.per_call().await?));

        // admit: batches of 18 (the default tick at 175/s).
        let grants: Vec<Grant> = (0..18)
            .map(|i| Grant::from_random([i as u8 + 1; 24], 0))
            .collect();
        let admit_calls = 100;
        let mut conn = self.conn.clone();
        reset_stats(&mut conn).await?;
        for _ in 0..admit_calls {
            let reply = engine::run(
                &mut conn,
                &Admit {
                    keys: &self.keys,
                    owner: "bench",
                    allowance: 18,
                    settings: &self.settings,
                    rate_estimate: Some(175.0),
                    // Back-to-back ticks: the shared rate bucket must not
                    // bind, the bench measures full ticks.
                    rate_in_force: 1e9,
                    grants: &grants,
                    idle_lease: false,
                },
            )
            .await?;
            if !matches!(reply, AdmitReply::Ran(c) if c.admitted == 18) {
                bail!("admit did not admit 18: {reply:?}");
            }
        }
        out.push((
            "admit (18/tick)",
            usec_per_call(&mut conn, "evalsha").await?,
        ));
        out.push(("admit, commands/call", self.per_call().await?));

        // consume + settle for the users just admitted.
        let admitted: Vec<String> = redis::cmd("ZRANGE")
            .arg(self.keys.active())
            .arg(0)
            .arg(-1)
            .query_async(&mut conn)
            .await?;
        let n = admitted.len().max(1) as f64;
        let mut pairs = Vec::new();
        let (mut token_bytes, mut status_bytes) = (0, 0);
        for id in &admitted {
            let user = UserId::new(id)?;
            token_bytes += key_bytes(&mut conn, &self.keys.token(&user)).await?;
            status_bytes += key_bytes(&mut conn, &self.keys.status(&user)).await?;
            let rec: String = redis::cmd("GET")
                .arg(self.keys.token(&user))
                .query_async(&mut conn)
                .await?;
            let token = EntryToken::parse(rec.split('|').next().unwrap_or_default())
                .context("token record")?;
            pairs.push((user, token));
        }
        reset_stats(&mut conn).await?;
        for (user, token) in &pairs {
            engine::run(
                &mut conn,
                &Consume {
                    keys: &self.keys,
                    user,
                    token,
                },
            )
            .await?;
        }
        out.push(("consume", usec_per_call(&mut conn, "evalsha").await?));
        out.push(("consume, commands/call", self.per_call().await?));
        reset_stats(&mut conn).await?;
        for (user, token) in &pairs {
            engine::run(
                &mut conn,
                &Settle {
                    keys: &self.keys,
                    user,
                    token,
                    outcome: Outcome::Success,
                    latency_ms: 20,
                    units: 1,
                },
            )
            .await?;
        }
        out.push(("settle", usec_per_call(&mut conn, "evalsha").await?));
        out.push(("settle, commands/call", self.per_call().await?));
        Ok((out, (token_bytes as f64 / n, status_bytes as f64 / n)))
    }

    /// Commands per script call in the phase just run (the script and what
    /// it ran inside: what a per-command bill counts).
    async fn per_call(&self) -> Result<f64> {
        commands_per_call(&mut self.conn.clone(), "evalsha").await
    }

    /// Resets the stats, sends CALLS commands in pipelines, returns the
    /// usec_per_call of `stat`.
    async fn phase(&self, stat: &str, add: impl FnMut(&mut redis::Pipeline, usize)) -> Result<f64> {
        phase(&mut self.conn.clone(), CALLS, stat, add).await
    }
}

/// `MEMORY USAGE key SAMPLES 0` (0 for a missing key): the key's own
/// allocations, without its entry in the expires dict.
async fn key_bytes(conn: &mut MultiplexedConnection, key: &str) -> Result<u64> {
    let bytes: Option<u64> = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(key)
        .arg("SAMPLES")
        .arg(0)
        .query_async(conn)
        .await?;
    Ok(bytes.unwrap_or(0))
}

/// A number from `INFO memory`.
async fn memory_field(conn: &mut MultiplexedConnection, field: &str) -> Result<i64> {
    let text: String = redis::cmd("INFO").arg("memory").query_async(conn).await?;
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .with_context(|| format!("no {field} in INFO memory"))?
        .trim()
        .parse()
        .with_context(|| format!("{field} is not a number"))
}

fn print_report(depths: &[usize], table: &BTreeMap<&'static str, Vec<f64>>, memory: &[Memory]) {
    let header: Vec<String> = depths.iter().map(|d| format!("{d:>10}")).collect();
    println!("usec_per_call (Redis-side) by queue depth");
    println!("{:<18}{}  last÷first", "operation", header.join(""));
    for (name, costs) in table {
        let cells: Vec<String> = costs.iter().map(|c| format!("{c:>10.2}")).collect();
        let growth = costs.last().unwrap_or(&0.0) / costs.first().unwrap_or(&1.0);
        println!("{name:<18}{}  {growth:>8.2}×", cells.join(""));
    }
    if let (Some(pos), Some(rank)) = (table.get("position"), table.get("ZRANK (bare)")) {
        let ratios: Vec<String> = pos
            .iter()
            .zip(rank)
            .map(|(p, r)| format!("{:>10.2}", p / r))
            .collect();
        println!("{:<18}{}", "position÷ZRANK", ratios.join(""));
    }
    println!();
    for m in memory {
        let (depth, delta) = (m.depth, m.after - m.before);
        let bytes = delta as f64 / depth as f64;
        println!("memory per waiting user at depth {depth}: {bytes:.1} bytes (used_memory delta ÷ users)");
        println!(
            "  used_memory {} → {} (delta {delta}); after the fill: used_memory_rss {}, \
             mem_clients_normal {}, {} seen bitmaps of {} bytes (MEMORY USAGE)",
            m.before, m.after, m.rss, m.clients, m.seen_keys, m.seen_bytes
        );
        println!(
            "  per admitted visitor: token key {:.1} bytes, status key {:.1} bytes \
             (mean MEMORY USAGE after the admit phase)",
            m.admitted.0, m.admitted.1
        );
    }
}
