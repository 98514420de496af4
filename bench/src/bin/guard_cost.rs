//! Redis-side cost of `enter` for a new place with the entry guard and
//! without, at several queue depths (issue 12: with the guard ≤ 1.3×).
//!
//! `cargo run --profile release-native -p queuegate-bench --bin guard_cost [-- 1000,100000]`
//!
//! Same setup as `engine_cost`: one private redis-server per depth, filled
//! with the enter script itself, 2,000 pipelined EVALSHA per phase. Each
//! phase reports `INFO commandstats` usec_per_call (reset per phase: wall
//! time inside the command) and the CPU time of the server's main thread
//! per call (which also holds reading and answering the command, but not
//! waiting for a core: the steadier figure on a shared machine). The
//! variants run interleaved for several rounds, and every phase is undone
//! afterwards (its users leave, its budget and solution keys are deleted),
//! so each runs at the nominal depth.
//!
//! With `--instructions` the server runs under valgrind's callgrind and the
//! bench reports the instructions it executes per call instead: the same
//! work gives the same count whatever else the machine does, so the ratios
//! hold still on a shared machine (3 rounds; slow: the server runs ~50×
//! slower, so the default depths are 1,000 and 10,000).

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use queuegate_bench::callgrind::Callgrind;
use queuegate_bench::cpu_time::main_thread_cpu_time;
use queuegate_bench::redis_cost::{
    bench_user as uid, fill, prepare_queue, reset_stats, server_pid, usec_per_call, PIPELINE,
};
use queuegate_bench::seeded::SplitMix64;
use queuegate_edge::altcha::{self, Verified};
use queuegate_shared::guard::{ClientAddress, EntryGuard};
use queuegate_shared::ops::Enter;
use queuegate_shared::{Invocation, Operation, Prefix, QueueId, QueueKeys, Settings, UserId};
use queuegate_testkit::now_ms;
use queuegate_testkit::RedisServer;
use redis::aio::MultiplexedConnection;
use redis::AsyncConnectionConfig;
use std::time::Duration;

const CALLS: usize = 2_000;
const ROUNDS: usize = 9;
/// Instruction counts barely move between rounds.
const COUNTED_ROUNDS: usize = 3;
/// Small enough that solving the challenges beforehand takes a moment;
/// the enter script's work does not depend on the difficulty.
const EASY_MAX_NUMBER: u64 = 1_000;
const SECRET: &[u8] = b"bench-secret-bench-secret-bench-s";
/// The fixed cost of any script call: same KEYS and ARGV as (a).
const NOOP: &str = "return 0";

/// What the guard hands the script for each new place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Variant {
    /// `EntryGuard::default()`: no budget, no solution.
    Bare,
    /// A client address seen for the first time (no budget record yet).
    Address,
    /// Addresses taking 20 places each (the budget record exists; burst 40).
    AddressSeen,
    /// A first-time address and a verified solution, spent by the script.
    Solution,
    /// `return 0` with (a)'s KEYS and ARGV: no place taken.
    Floor,
}

impl Variant {
    const ALL: [Variant; 5] = [
        Variant::Bare,
        Variant::Address,
        Variant::AddressSeen,
        Variant::Solution,
        Variant::Floor,
    ];

    fn label(self) -> &'static str {
        match self {
            Variant::Bare => "(a) no guard",
            Variant::Address => "(b) address, first place",
            Variant::AddressSeen => "(b') address, 20 places each",
            Variant::Solution => "(c) address + solution",
            Variant::Floor => "EVALSHA `return 0`, same KEYS/ARGV",
        }
    }
}

/// One phase's cost per call, in µs.
#[derive(Debug, Clone, Copy)]
struct Cost {
    /// `INFO commandstats` usec_per_call.
    usec_per_call: f64,
    /// The server main thread's CPU time ÷ calls.
    cpu: f64,
    /// Instructions the server executed ÷ calls (NaN unless counted).
    instructions: f64,
}

type Rounds = Vec<Cost>;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let counting = std::env::args().any(|a| a == "--instructions");
    let (default_depths, round_count) = if counting {
        (&[1_000, 10_000][..], COUNTED_ROUNDS)
    } else {
        (&[1_000, 100_000][..], ROUNDS)
    };
    let depths = queuegate_bench::redis_cost::depths_arg(default_depths)?;
    // Per variant, per depth, the rounds.
    let mut results: BTreeMap<Variant, Vec<Rounds>> = BTreeMap::new();
    let mut bench = Bench::new();
    for &depth in &depths {
        let dumps = std::env::temp_dir().join(format!("qg-callgrind-{}", std::process::id()));
        let redis = if counting {
            std::fs::create_dir_all(&dumps)?;
            RedisServer::builder()
                .wrapper(Callgrind::wrapper(&dumps))
                .start()
        } else {
            RedisServer::start()
        };
        let client = redis::Client::open(redis.url())?;
        // A pipeline of 2,000 calls can take longer than the client's
        // default 500 ms, under valgrind far longer.
        let patient =
            AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(600)));
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&patient)
            .await?;
        bench.open(&mut conn, depth).await?;
        bench.callgrind = counting.then(|| Callgrind::attach(bench.pid, &dumps));
        let mut order = Variant::ALL;
        let mut rounds: BTreeMap<Variant, Rounds> = BTreeMap::new();
        for _ in 0..round_count {
            for &v in &order {
                let cost = bench.measure(&mut conn, depth, v).await?;
                rounds.entry(v).or_default().push(cost);
            }
            // Rotate so that no variant always runs first.
            order.rotate_left(1);
        }
        for (v, costs) in rounds {
            results.entry(v).or_default().push(costs);
        }
        drop(redis);
        if counting {
            std::fs::remove_dir_all(&dumps)?;
        }
        eprintln!("depth {depth}: done");
    }
    if counting {
        print_table(
            "server instructions per call (callgrind, thousands)",
            round_count,
            &depths,
            &results,
            |c| c.instructions / 1000.0,
        );
        return Ok(());
    }
    print_table(
        "server CPU µs per call (main thread CPU time ÷ calls)",
        round_count,
        &depths,
        &results,
        |c| c.cpu,
    );
    println!();
    print_table(
        "usec_per_call from INFO commandstats (wall time inside the command)",
        round_count,
        &depths,
        &results,
        |c| c.usec_per_call,
    );
    Ok(())
}

/// One queue's keys, the server's pid, and the counters that keep users,
/// addresses and solutions unique across phases.
struct Bench {
    keys: QueueKeys,
    queue: QueueId,
    pid: u32,
    callgrind: Option<Callgrind>,
    noop_sha: String,
    next_user: usize,
    next_address: u32,
    rng: SplitMix64,
}

impl Bench {
    fn new() -> Bench {
        // A constant, valid queue id.
        let queue = QueueId::new("bench").expect("a valid queue id");
        Bench {
            keys: QueueKeys::new(&Prefix::default(), &queue),
            queue,
            pid: 0,
            callgrind: None,
            noop_sha: String::new(),
            next_user: 0,
            next_address: 0,
            rng: SplitMix64::new(0x9a7d),
        }
    }

    /// Publishes the default settings (budget on: 40 a minute, burst 40)
    /// with room for the whole line, and fills it to `depth`.
    async fn open(&mut self, conn: &mut MultiplexedConnection, depth: usize) -> Result<()> {
        let settings = Settings {
            max_waiting: 10_000_000,
            max_active: 10_000_000,
            activation_jitter_ms: 0,
            ..Settings::default()
        };
        prepare_queue(conn, &self.keys, &settings).await?;
        let budget: Option<u64> = redis::cmd("HGET")
            .arg(self.keys.config())
            .arg("entry_budget_per_minute")
            .query_async(conn)
            .await?;
        if budget != Some(settings.entry_budget_per_minute) || budget == Some(0) {
            bail!("the budget is not published as configured: {budget:?}");
        }
        self.noop_sha = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(NOOP)
            .query_async(conn)
            .await?;
        self.pid = server_pid(conn).await?;
        fill(conn, &self.keys, depth, uid).await?;
        self.next_user = depth;
        Ok(())
    }

    /// `n` fresh addresses 10.x.y.z.
    fn addresses(&mut self, n: usize) -> Vec<ClientAddress> {
        (0..n)
            .filter_map(|_| {
                let a = self.next_address;
                self.next_address += 1;
                let [_, x, y, z] = a.to_be_bytes();
                ClientAddress::parse(&format!("10.{x}.{y}.{z}"))
            })
            .collect()
    }

    /// `n` verified solutions, solved here beforehand.
    fn solutions(&mut self, n: usize) -> Result<Vec<Verified>> {
        let now = now_ms();
        let expires = now + Settings::default().challenge_ttl_ms;
        (0..n)
            .map(|_| {
                let number = self.rng.up_to(EASY_MAX_NUMBER);
                let issue = altcha::Issue {
                    level: 0,
                    max_number: EASY_MAX_NUMBER,
                    expires_at_ms: expires,
                };
                let c = altcha::create(SECRET, &self.queue, issue, self.rng.bytes12(), number);
                let found = altcha::solve(&c).context("unsolvable challenge")?;
                Ok(altcha::verify(
                    SECRET,
                    &altcha::payload(&c, found),
                    &self.queue,
                    now,
                )?)
            })
            .collect()
    }

    /// One phase of CALLS new places; checks every one was taken, then
    /// undoes it.
    async fn measure(
        &mut self,
        conn: &mut MultiplexedConnection,
        depth: usize,
        variant: Variant,
    ) -> Result<Cost> {
        let users: Vec<UserId> = (self.next_user..self.next_user + CALLS).map(uid).collect();
        self.next_user += CALLS;
        let addresses = match variant {
            Variant::Bare | Variant::Floor => Vec::new(),
            Variant::Address | Variant::Solution => self.addresses(CALLS),
            Variant::AddressSeen => self
                .addresses(CALLS / 20)
                .into_iter()
                .flat_map(|a| std::iter::repeat_n(a, 20))
                .collect(),
        };
        let solutions = match variant {
            Variant::Solution => self.solutions(CALLS)?,
            _ => Vec::new(),
        };
        let invocations: Vec<Invocation> = users
            .iter()
            .enumerate()
            .map(|(i, user)| {
                Enter {
                    keys: &self.keys,
                    user,
                    guard: EntryGuard {
                        address: addresses.get(i),
                        solution: solutions.get(i),
                        missing: None,
                    },
                    token: None,
                }
                .invocation()
            })
            .collect();
        let sha = match variant {
            Variant::Floor => self.noop_sha.clone(),
            _ => queuegate_shared::script::ENTER.sha1().to_string(),
        };
        let cost = self.phase(conn, &sha, &invocations).await?;
        let waiting: usize = redis::cmd("ZCARD")
            .arg(self.keys.waiting())
            .query_async(conn)
            .await?;
        let expected = depth + if variant == Variant::Floor { 0 } else { CALLS };
        if waiting != expected {
            bail!(
                "{}: {waiting} waiting, expected {expected} (a place was refused)",
                variant.label()
            );
        }
        // Undo: the line back to `depth`, the guard's keys gone.
        for start in (0..CALLS).step_by(500) {
            let range = start..(start + 500).min(CALLS);
            let mut pipe = redis::pipe();
            pipe.cmd("ZREM").arg(self.keys.waiting()).arg(
                users[range.clone()]
                    .iter()
                    .map(UserId::as_str)
                    .collect::<Vec<_>>(),
            );
            let _: Vec<redis::Value> = pipe.query_async(conn).await?;
        }
        // The budgets and used solutions live in one hash.
        let _: () = redis::cmd("DEL")
            .arg(self.keys.guard())
            .query_async(conn)
            .await?;
        Ok(cost)
    }

    /// The first call outside the window; the rest pipelined, with the
    /// server's CPU time read around them.
    async fn phase(
        &self,
        conn: &mut MultiplexedConnection,
        sha: &str,
        invocations: &[Invocation],
    ) -> Result<Cost> {
        let send = |pipe: &mut redis::Pipeline, inv: &Invocation| {
            pipe.cmd("EVALSHA")
                .arg(sha)
                .arg(inv.keys.len())
                .arg(&inv.keys)
                .arg(&inv.args);
        };
        let (first, rest) = invocations.split_first().context("no calls")?;
        let mut warm = redis::pipe();
        send(&mut warm, first);
        let _: Vec<redis::Value> = warm.query_async(conn).await?;
        reset_stats(conn).await?;
        if let Some(cg) = &self.callgrind {
            cg.zero()?;
        }
        let cpu0 = main_thread_cpu_time(self.pid).context("no schedstat for redis-server")?;
        for chunk in rest.chunks(PIPELINE) {
            let mut pipe = redis::pipe();
            for inv in chunk {
                send(&mut pipe, inv);
            }
            let _: Vec<redis::Value> = pipe.query_async(conn).await?;
        }
        let cpu1 = main_thread_cpu_time(self.pid).context("no schedstat for redis-server")?;
        let instructions = match &self.callgrind {
            Some(cg) => cg.instructions()? as f64 / rest.len() as f64,
            None => f64::NAN,
        };
        Ok(Cost {
            instructions,
            usec_per_call: usec_per_call(conn, "evalsha").await?,
            cpu: (cpu1 - cpu0).as_secs_f64() * 1e6 / rest.len() as f64,
        })
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Median [min–max] of the rounds per depth, and the median ÷ (a)'s.
fn print_table(
    title: &str,
    rounds: usize,
    depths: &[usize],
    results: &BTreeMap<Variant, Vec<Rounds>>,
    metric: impl Fn(&Cost) -> f64,
) {
    let medians = |per_depth: &[Rounds]| -> Vec<f64> {
        per_depth
            .iter()
            .map(|r| median(r.iter().map(&metric).collect()))
            .collect()
    };
    let bare = results
        .get(&Variant::Bare)
        .map(|d| medians(d))
        .unwrap_or_default();
    println!("{title}: median of {rounds} rounds of {CALLS} calls [min–max], and ÷ (a)");
    println!();
    let head: Vec<String> = depths
        .iter()
        .map(|d| format!(" depth {d} | ÷ (a) |"))
        .collect();
    println!("| variant |{}", head.join(""));
    println!("|---|{}", "---:|---:|".repeat(depths.len()));
    for (variant, per_depth) in results {
        let cells: Vec<String> = per_depth
            .iter()
            .zip(medians(per_depth))
            .zip(&bare)
            .map(|((rounds, m), base)| {
                let values: Vec<f64> = rounds.iter().map(&metric).collect();
                let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                format!(" {m:.2} [{lo:.2}–{hi:.2}] | {:.2}× |", m / base)
            })
            .collect();
        println!("| {} |{}", variant.label(), cells.join(""));
    }
}
