//! The drop day's draw on a private redis-server: a pre-queue filled with
//! the enter script itself before a scheduled opening, the opening moved
//! into the past, then the seal (`draw_open`) and every `draw_place` batch
//! timed as the scheduler sends them (one at a time), from the server's
//! side (`SLOWLOG` at threshold 0: the command's own execution time) and
//! the client's; Redis memory per visitor before and after the draw.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use queuegate_scheduler::reveal::{Reveal, Revealed};
use queuegate_scheduler::{draw::Placement, engine};
use queuegate_shared::guard::{ClientAddress, EntryGuard};
use queuegate_shared::ops::{Change, DrawOpen, DrawState, Enter, Placed, Schedule};
use queuegate_shared::script::{DRAW_OPEN, DRAW_PLACE};
use queuegate_shared::{Operation, Prefix, QueueId, QueueKeys, Settings};
use queuegate_testkit::{now_ms, RedisServer};
use redis::aio::MultiplexedConnection;

use crate::cpu_time::main_thread_cpu_time;
use crate::redis_cost::{
    add_evalsha, bench_user, prepare_queue, reset_stats, usec_per_call, used_memory,
};

/// Enters per pipeline while filling.
const FILL_PIPELINE: usize = 1_000;

/// Redis memory held for a crowd, measured at one moment.
#[derive(Debug, Clone, Copy, Default)]
pub struct Memory {
    /// `used_memory` less the clients' buffers (`mem_clients_normal`: a
    /// pipeline of enters leaves a large query buffer for a while), now
    /// minus before the fill, in bytes.
    pub used_delta: i64,
    /// `MEMORY USAGE … SAMPLES 0` of the set holding the crowd (`pre`
    /// before the draw, `waiting` after it).
    pub set_bytes: u64,
    /// The same for every `seen:*` bitmap, summed.
    pub seen_bytes: u64,
    /// How many `seen:*` keys there are.
    pub seen_keys: usize,
}

/// One draw of `visitors` pre-queued visitors in batches of `batch`.
#[derive(Debug, Clone)]
pub struct DrawRun {
    /// Pre-queued visitors.
    pub visitors: usize,
    /// Visitors per `draw_place` call.
    pub batch: u64,
    /// The draw's rounds (1 without a farm: see [`draw_run`]).
    pub rounds: usize,
    /// usec_per_call of the fill's enters (new places in the pre-queue).
    pub enter_usec: f64,
    /// Memory after the fill, before the opening.
    pub before: Memory,
    /// Memory once the draw is over (`draw` unlinked and freed).
    pub after: Memory,
    /// Client-side time to compute every place once (the scheduler
    /// computes each batch's places as it places it; this is their sum).
    pub permutation: Duration,
    /// Server-side µs of the seal (`draw_open`).
    pub seal_us: u64,
    /// Server-side µs of each command of the record before the reveal
    /// (per page: the `ZRANGE` of the sealed pre-queue and the
    /// `draw_reveal` that writes its leaves; last the header), in order.
    pub record_us: Vec<u64>,
    /// The Redis thread's CPU µs over each step of the record (a page: its
    /// `ZRANGE` and its `draw_reveal`; the first also reads the commitment,
    /// the last is the header), if readable: robust to a loaded machine.
    pub record_cpu_us: Vec<u64>,
    /// Client-side time of the whole record, its hashing included.
    pub record_wall: Duration,
    /// `MEMORY USAGE` of the record (`draw_record:<n>`, every field).
    pub record_bytes: u64,
    /// Pages of leaves.
    pub record_pages: u64,
    /// usec_per_call of `HMGET record header p<k>`, what an isolate's
    /// first read of a page costs Redis (over up to 200 pages).
    pub serve_usec: f64,
    /// Address groups the visitors came from round-robin (0: see `farm`).
    pub groups: usize,
    /// Server-side µs of each call of the deal (`draw_members` pages read
    /// with HSCAN, then `draw_shuffle` batches), in order; empty when no
    /// address group had more than one identity.
    pub deal_us: Vec<u64>,
    /// Client-side time of the whole deal, its computation included.
    pub deal_wall: Duration,
    /// Server-side µs of each `draw_place` call, in order.
    pub place_us: Vec<u64>,
    /// The server main thread's CPU µs over each `draw_place` call (read
    /// while it waits for the next command, so exact; includes reading the
    /// command and writing the reply), if readable.
    pub place_cpu_us: Vec<u64>,
    /// Round trip of each `draw_place` call, as the client saw it.
    pub place_rtt: Vec<Duration>,
    /// From sending `draw_open` to the last `draw_place` reply, the
    /// permutation included.
    pub wall: Duration,
    /// CPU time of the server's main thread over the draw, if readable.
    pub server_cpu: Option<Duration>,
    /// Visitors the draw placed in line.
    pub placed: u64,
    /// Visitors it dropped as leavers (0 here: everyone polled just now).
    pub dropped: u64,
    /// Spearman's rank correlation between arrival and place in line.
    pub rank_correlation: f64,
}

impl DrawRun {
    /// Server-side µs of every draw call: the seal, the deal and the
    /// batches.
    pub fn server_total_us(&self) -> u64 {
        self.seal_us
            + self.record_us.iter().sum::<u64>()
            + self.deal_us.iter().sum::<u64>()
            + self.place_us.iter().sum::<u64>()
    }

    /// The slowest single script call of the draw, server-side µs.
    pub fn worst_us(&self) -> u64 {
        self.place_us
            .iter()
            .chain(&self.deal_us)
            .chain(&self.record_us)
            .copied()
            .max()
            .unwrap_or(0)
            .max(self.seal_us)
    }
}

/// The same crowd entering a plain line (no opening scheduled), for
/// comparison.
#[derive(Debug, Clone, Copy)]
pub struct LineRun {
    /// Waiting visitors.
    pub visitors: usize,
    /// usec_per_call of their enters (new tickets).
    pub enter_usec: f64,
    /// Memory after the fill.
    pub memory: Memory,
}

/// The bench's queue on a fresh server, its settings published and the
/// lease held by `bench`.
struct Bench {
    _redis: RedisServer,
    conn: MultiplexedConnection,
    keys: QueueKeys,
    pid: u32,
}

impl Bench {
    async fn start() -> Result<Bench> {
        let redis = RedisServer::start();
        // A draw call on a loaded machine may take longer than the
        // client's default 500 ms: the bench measures it, it must not fail.
        let config =
            redis::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(60)));
        let mut conn = redis::Client::open(redis.url())?
            .get_multiplexed_async_connection_with_config(&config)
            .await?;
        let keys = QueueKeys::new(&Prefix::default(), &QueueId::new("bench")?);
        // No address budget: a farm's identities (`draw_run`'s `farm`)
        // must all get in.
        let settings = Settings {
            max_waiting: 10_000_000,
            max_active: 10_000_000,
            entry_budget_per_minute: 0,
            ..Settings::default()
        };
        prepare_queue(&mut conn, &keys, &settings).await?;
        let pid = crate::redis_cost::server_pid(&mut conn).await?;
        Ok(Bench {
            _redis: redis,
            conn,
            keys,
            pid,
        })
    }

    async fn schedule(&mut self, opens_at: Change) -> Result<()> {
        engine::run(
            &mut self.conn,
            &Schedule {
                keys: &self.keys,
                opens_at,
                closes_at: Change::Keep,
            },
        )
        .await?;
        Ok(())
    }

    /// `n` new places through the enter script (EVALSHA, pipelined, no
    /// guard checks); returns its usec_per_call. With `farm > 0` each has an
    /// address: the first `farm` share one (one draw round each), the rest
    /// one each (`10.x.y.z`); with `groups > 0` the visitors come from
    /// that many addresses in turn (about n ÷ groups rounds, every group's
    /// seats dealt after the seal); with both 0, none (one round).
    async fn fill(&mut self, n: usize, farm: usize, groups: usize) -> Result<f64> {
        reset_stats(&mut self.conn).await?;
        for start in (0..n).step_by(FILL_PIPELINE) {
            let mut pipe = redis::pipe();
            for i in start..(start + FILL_PIPELINE).min(n) {
                let user = bench_user(i);
                let address = (farm > 0 || groups > 0).then(|| {
                    let at = if groups > 0 {
                        i % groups
                    } else if i < farm {
                        0
                    } else {
                        i + 1
                    };
                    let [_, x, y, z] = (at as u32).to_be_bytes();
                    ClientAddress::parse(&format!("10.{x}.{y}.{z}")).expect("an IPv4 address")
                });
                let enter = Enter {
                    keys: &self.keys,
                    user: &user,
                    guard: EntryGuard {
                        address: address.as_ref(),
                        ..Default::default()
                    },
                    token: None,
                };
                add_evalsha(&mut pipe, &enter.invocation());
            }
            let _: Vec<redis::Value> = pipe.query_async(&mut self.conn).await?;
        }
        usec_per_call(&mut self.conn, "evalsha").await
    }

    async fn card(&mut self, key: &str) -> Result<u64> {
        Ok(redis::cmd("ZCARD")
            .arg(key)
            .query_async(&mut self.conn)
            .await?)
    }

    async fn key_bytes(&mut self, key: &str) -> Result<u64> {
        let bytes: Option<u64> = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(key)
            .arg("SAMPLES")
            .arg(0)
            .query_async(&mut self.conn)
            .await?;
        Ok(bytes.unwrap_or(0))
    }

    /// Memory now, against `baseline` (used_memory before the fill). Waits
    /// for lazily freed keys (the draw UNLINKs `draw`) to be gone first.
    async fn memory(&mut self, baseline: i64, set_key: &str) -> Result<Memory> {
        let until = Instant::now() + Duration::from_secs(10);
        while lazyfree_pending(&mut self.conn).await? > 0 {
            if Instant::now() > until {
                bail!("lazy free still pending after 10 s");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let pattern = format!("{}seen:*", self.keys.base());
        let seen: Vec<String> = redis::cmd("KEYS")
            .arg(pattern)
            .query_async(&mut self.conn)
            .await?;
        let mut seen_bytes = 0;
        for key in &seen {
            seen_bytes += self.key_bytes(key).await?;
        }
        Ok(Memory {
            used_delta: data_memory(&mut self.conn).await? - baseline,
            set_bytes: self.key_bytes(set_key).await?,
            seen_bytes,
            seen_keys: seen.len(),
        })
    }
}

/// A number from `INFO memory`, 0 when the server does not report it.
async fn memory_field(conn: &mut MultiplexedConnection, field: &str) -> Result<i64> {
    let text: String = redis::cmd("INFO").arg("memory").query_async(conn).await?;
    Ok(text
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0))
}

async fn lazyfree_pending(conn: &mut MultiplexedConnection) -> Result<i64> {
    memory_field(conn, "lazyfree_pending_objects").await
}

/// `used_memory` less the clients' buffers.
async fn data_memory(conn: &mut MultiplexedConnection) -> Result<i64> {
    Ok(used_memory(conn).await? - memory_field(conn, "mem_clients_normal").await?)
}

/// Fills a pre-queue of `visitors`, opens it and draws it in batches of
/// `batch`, on a fresh redis-server.
pub async fn draw_run(visitors: usize, batch: u64, farm: usize, groups: usize) -> Result<DrawRun> {
    if visitors == 0 || batch == 0 {
        bail!("visitors and batch must be positive");
    }
    let mut b = Bench::start().await?;
    b.schedule(Change::Set(now_ms() + 3_600_000)).await?;
    let baseline = data_memory(&mut b.conn).await?;
    let enter_usec = b.fill(visitors, farm.min(visitors), groups).await?;
    let (pre, waiting) = (b.keys.pre(), b.keys.waiting());
    if b.card(&pre).await? != visitors as u64 || b.card(&waiting).await? != 0 {
        bail!("the fill did not pre-queue all {visitors} visitors");
    }
    let before = b.memory(baseline, &pre).await?;

    b.schedule(Change::Set(now_ms().saturating_sub(1))).await?;
    slowlog_all(&mut b.conn, true).await?;
    let cpu_before = main_thread_cpu_time(b.pid);
    let started = Instant::now();
    // The scheduler's own path: sealed without a seed (the commitment is
    // made at the seal here: nobody committed before), the record written
    // page by page, then the seed revealed.
    let commit = queuegate_scheduler::draw::fresh_commit()
        .map_err(|e| anyhow::anyhow!("the OS CSPRNG: {e}"))?;
    let open = DrawOpen {
        keys: &b.keys,
        owner: "bench",
        seed: None,
        commit: Some(&commit),
    };
    let DrawState::Sealed(sealed) = engine::run(&mut b.conn, &open).await? else {
        bail!("draw_open did not seal a draw waiting for its seed");
    };
    let seal_us = last_logged(&mut b.conn, DRAW_OPEN.sha1()).await?;
    let record_key = b.keys.draw_record(sealed.number);
    let record_started = Instant::now();
    let mut reveal = Reveal::new(sealed);
    let (mut record_us, mut record_cpu_us) = (Vec::new(), Vec::new());
    loop {
        redis::cmd("SLOWLOG")
            .arg("RESET")
            .exec_async(&mut b.conn)
            .await?;
        let cpu = main_thread_cpu_time(b.pid);
        let step = reveal.step(&mut b.conn, &b.keys, "bench").await?;
        if let (Some(a), Some(z)) = (cpu, main_thread_cpu_time(b.pid)) {
            record_cpu_us.push(z.saturating_sub(a).as_micros() as u64);
        }
        record_us.extend(logged_since_reset(&mut b.conn).await?);
        match step {
            Revealed::Page => {}
            Revealed::Done(_) => break,
            Revealed::Moved => bail!("the record's draw moved"),
            Revealed::Waiting(_, e) => bail!("no beacon is named, yet: {e}"),
        }
    }
    let record_wall = record_started.elapsed();
    let record_bytes: u64 = redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(&record_key)
        .arg("SAMPLES")
        .arg(0)
        .query_async(&mut b.conn)
        .await?;
    let record_pages = (visitors as u64).div_ceil(queuegate_shared::draw_proof::PAGE_SIZE);
    reset_stats(&mut b.conn).await?;
    for k in 0..record_pages.min(200) {
        let _: Vec<Option<String>> = redis::cmd("HMGET")
            .arg(&record_key)
            .arg("header")
            .arg(format!("p{k}"))
            .query_async(&mut b.conn)
            .await?;
    }
    let serve_usec = usec_per_call(&mut b.conn, "hmget").await?;
    let DrawState::Drawing(drawing) = engine::run(&mut b.conn, &open).await? else {
        bail!("draw_open did not start the revealed draw");
    };
    let rounds = drawing.rounds.len();
    let mut placement = Placement::new(drawing);
    // The deal: the same steps the scheduler takes before placing anyone.
    let deal_started = Instant::now();
    let mut deal_us = Vec::new();
    while placement.drawing().deal_pending {
        let reply = placement.step(&mut b.conn, &b.keys, "bench", batch).await?;
        deal_us.push(newest_logged(&mut b.conn).await?);
        if !matches!(reply, Placed::Batch { placed: 0, .. }) {
            bail!("a step of the deal answered {reply:?}");
        }
    }
    let deal_wall = deal_started.elapsed();
    let perm_started = Instant::now();
    let size = placement.drawing().size();
    std::hint::black_box(placement.places(0, size));
    let permutation_time = perm_started.elapsed();
    let (mut place_us, mut place_rtt, mut place_cpu_us) = (Vec::new(), Vec::new(), Vec::new());
    loop {
        let cpu = main_thread_cpu_time(b.pid);
        let sent = Instant::now();
        let reply = placement.step(&mut b.conn, &b.keys, "bench", batch).await?;
        place_rtt.push(sent.elapsed());
        if let (Some(a), Some(z)) = (cpu, main_thread_cpu_time(b.pid)) {
            place_cpu_us.push(z.saturating_sub(a).as_micros() as u64);
        }
        place_us.push(last_logged(&mut b.conn, DRAW_PLACE.sha1()).await?);
        let Placed::Batch { left, .. } = reply else {
            bail!("draw_place answered {reply:?}");
        };
        if left == 0 {
            break;
        }
    }
    let (placed, dropped) = (placement.placed(), placement.dropped());
    let wall = started.elapsed();
    let server_cpu = match (cpu_before, main_thread_cpu_time(b.pid)) {
        (Some(a), Some(z)) => Some(z.saturating_sub(a)),
        _ => None,
    };
    slowlog_all(&mut b.conn, false).await?;
    if placed + dropped != visitors as u64 || b.card(&waiting).await? != placed {
        bail!("the draw placed {placed} and dropped {dropped} of {visitors}");
    }
    let after = b.memory(baseline, &waiting).await?;
    let rank_correlation = rank_correlation(&mut b.conn, &waiting).await?;
    Ok(DrawRun {
        visitors,
        batch,
        rounds,
        enter_usec,
        before,
        after,
        permutation: permutation_time,
        seal_us,
        record_us,
        record_cpu_us,
        record_wall,
        record_bytes,
        record_pages,
        serve_usec,
        groups,
        deal_us,
        deal_wall,
        place_us,
        place_cpu_us,
        place_rtt,
        wall,
        server_cpu,
        placed,
        dropped,
        rank_correlation,
    })
}

/// The same crowd into a plain line on a fresh redis-server.
pub async fn line_run(visitors: usize) -> Result<LineRun> {
    let mut b = Bench::start().await?;
    let baseline = data_memory(&mut b.conn).await?;
    let enter_usec = b.fill(visitors, 0, 0).await?;
    let waiting = b.keys.waiting();
    if b.card(&waiting).await? != visitors as u64 {
        bail!("the fill did not put all {visitors} visitors in line");
    }
    let memory = b.memory(baseline, &waiting).await?;
    Ok(LineRun {
        visitors,
        enter_usec,
        memory,
    })
}

/// Logs every command from now (`on`) or back to the server's default.
async fn slowlog_all(conn: &mut MultiplexedConnection, on: bool) -> Result<()> {
    let (threshold, len) = if on { (0, 16) } else { (10_000, 128) };
    redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg(threshold)
        .arg("slowlog-max-len")
        .arg(len)
        .exec_async(conn)
        .await?;
    // Emptied both ways: before the draw, and after it so its entries do
    // not count as the crowd's memory.
    redis::cmd("SLOWLOG").arg("RESET").exec_async(conn).await?;
    Ok(())
}

/// The server-side µs of the last EVALSHA of `sha` (read right after the
/// call, so it is among the newest entries: a long draw would outgrow any
/// log kept to the end).
/// Server-side µs of every call logged since the last `SLOWLOG RESET`
/// (threshold 0), but the slowlog's own and the commands scripts ran.
async fn logged_since_reset(conn: &mut MultiplexedConnection) -> Result<Vec<u64>> {
    let entries: Vec<redis::Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(16)
        .query_async(conn)
        .await?;
    let mut out = Vec::new();
    for entry in &entries {
        let redis::Value::Array(fields) = entry else {
            bail!("a slowlog entry is not an array: {entry:?}");
        };
        let (Some(redis::Value::Int(micros)), Some(redis::Value::Array(args))) =
            (fields.get(2), fields.get(3))
        else {
            bail!("unexpected slowlog entry {entry:?}");
        };
        let slowlog = matches!(args.first(), Some(redis::Value::BulkString(b)) if b.eq_ignore_ascii_case(b"slowlog"));
        // A command a script ran is logged too, from client "?:0": it is
        // part of its script's time, not a call of its own.
        let inner =
            matches!(fields.get(4), Some(redis::Value::BulkString(c)) if c.as_slice() == b"?:0");
        if !slowlog && !inner {
            out.push(u64::try_from(*micros)?);
        }
    }
    Ok(out)
}

/// Server-side µs of the newest command in the slowlog (threshold 0: the
/// command sent just before this read).
async fn newest_logged(conn: &mut MultiplexedConnection) -> Result<u64> {
    let entries: Vec<redis::Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(1)
        .query_async(conn)
        .await?;
    match entries.first() {
        Some(redis::Value::Array(fields)) => match fields.get(2) {
            Some(redis::Value::Int(micros)) => Ok(u64::try_from(*micros)?),
            other => bail!("unexpected slowlog entry field {other:?}"),
        },
        other => bail!("unexpected slowlog entry {other:?}"),
    }
}

async fn last_logged(conn: &mut MultiplexedConnection, sha: &str) -> Result<u64> {
    let entries: Vec<redis::Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(4)
        .query_async(conn)
        .await?;
    for entry in &entries {
        let redis::Value::Array(fields) = entry else {
            bail!("a slowlog entry is not an array: {entry:?}");
        };
        let (Some(redis::Value::Int(micros)), Some(redis::Value::Array(args))) =
            (fields.get(2), fields.get(3))
        else {
            bail!("unexpected slowlog entry {entry:?}");
        };
        let text = |v: Option<&redis::Value>| match v {
            Some(redis::Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
            _ => String::new(),
        };
        if text(args.first()).eq_ignore_ascii_case("evalsha") && text(args.get(1)) == sha {
            return Ok(u64::try_from(*micros)?);
        }
    }
    bail!("no EVALSHA {sha} among the newest slowlog entries")
}

/// Spearman's ρ between arrival (the n of `bench_user(n)`) and place in
/// `waiting`: about 0 for a fair draw, 1 for first come, first served.
async fn rank_correlation(conn: &mut MultiplexedConnection, waiting: &str) -> Result<f64> {
    let line: Vec<String> = redis::cmd("ZRANGE")
        .arg(waiting)
        .arg(0)
        .arg(-1)
        .query_async(conn)
        .await?;
    let arrivals = line
        .iter()
        .map(|uid| uid.trim_start_matches('v').parse::<u64>())
        .collect::<Result<Vec<_>, _>>()
        .context("bench user ids are v<number>")?;
    Ok(spearman(&arrivals))
}

/// Spearman's ρ of a line given each place's arrival index (a permutation
/// of `0..n`): `1 − 6 Σ d² / (n (n² − 1))`.
pub fn spearman(arrival_at_place: &[u64]) -> f64 {
    let n = arrival_at_place.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let d2: f64 = arrival_at_place
        .iter()
        .enumerate()
        .map(|(place, &arrived)| (place as f64 - arrived as f64).powi(2))
        .sum();
    1.0 - 6.0 * d2 / (n * (n * n - 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spearman_of_the_extremes() {
        assert_eq!(spearman(&[0, 1, 2, 3]), 1.0);
        assert_eq!(spearman(&[3, 2, 1, 0]), -1.0);
    }
}
