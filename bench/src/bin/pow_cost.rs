//! Native cost of the entry guard's proof of work: `altcha::solve` on one
//! core at each difficulty a queue hands out, the edge's `altcha::verify`
//! per call, and what a bot must spend per place under the defaults.
//!
//! `cargo run --profile release-native -p queuegate-bench --bin pow_cost [-- 50]`
//!
//! The argument is the number of challenges per difficulty (default 50).
//! Their secret numbers are uniform in `0..=maxnumber`, drawn from a
//! SplitMix64 with a fixed seed, so every run solves the same challenges.
//! Times are wall clock per solve and, per batch, the thread's CPU time
//! (on a busy machine wall time includes waiting for a core).

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use queuegate_bench::cpu_time::thread_cpu_time;
use queuegate_bench::seeded::SplitMix64;
use queuegate_edge::altcha;
use queuegate_shared::{QueueId, Settings};
use queuegate_testkit::measure::quantile;
use queuegate_testkit::now_ms;

const SECRET: &[u8] = b"bench-secret-bench-secret-bench-s";
const SEED: u64 = 0x5eed_a17c;
const VERIFY_CALLS: u32 = 20_000;

/// What one batch of solves at one difficulty took.
struct Batch {
    max_number: u64,
    /// Wall time of each solve, ascending.
    times: Vec<Duration>,
    /// Hashes each solve computed (the number found, plus one).
    hashes: u64,
    wall: Duration,
    cpu: Option<Duration>,
}

fn main() -> Result<()> {
    let count: usize = match std::env::args().nth(1) {
        Some(n) => n.parse().context("challenges per difficulty: a number")?,
        None => 50,
    };
    let base = Settings::default().challenge_max_number;
    // The default, its steps under pressure (x2, x4), easier and harder.
    let difficulties = [base / 4, base / 2, base, base * 2, base * 4, base * 10];
    let queue = QueueId::new("bench")?;
    let expires_at_ms = now_ms() + Settings::default().challenge_ttl_ms;
    let mut rng = SplitMix64::new(SEED);
    let mut batches = Vec::new();
    for max_number in difficulties {
        batches.push(solve_batch(
            &queue,
            max_number,
            expires_at_ms,
            count,
            &mut rng,
        )?);
        eprintln!("maxnumber {max_number}: done");
    }
    // A fresh expiry: the solves above may outlast a challenge's life.
    let expires_at_ms = now_ms() + Settings::default().challenge_ttl_ms;
    let verify_us = verify_cost(&queue, expires_at_ms, &mut rng)?;
    print_solves(&batches, count);
    println!();
    println!(
        "altcha::verify (valid payload, the edge's check): {verify_us:.2} µs per call \
         ({VERIFY_CALLS} calls)"
    );
    println!();
    print_bot_cost(base, &batches);
    Ok(())
}

fn solve_batch(
    queue: &QueueId,
    max_number: u64,
    expires_at_ms: u64,
    count: usize,
    rng: &mut SplitMix64,
) -> Result<Batch> {
    let challenges: Vec<(altcha::Challenge, u64)> = (0..count)
        .map(|_| {
            let number = rng.up_to(max_number);
            let c = altcha::create(
                SECRET,
                queue,
                altcha::Issue {
                    level: 0,
                    max_number,
                    expires_at_ms,
                },
                rng.bytes12(),
                number,
            );
            (c, number)
        })
        .collect();
    let (cpu0, wall0) = (thread_cpu_time(), Instant::now());
    let mut times = Vec::with_capacity(count);
    let mut hashes = 0;
    for (c, number) in &challenges {
        let t = Instant::now();
        let found = altcha::solve(c);
        times.push(t.elapsed());
        if found != Some(*number) {
            bail!("solve found {found:?}, the secret was {number}");
        }
        hashes += number + 1;
    }
    let wall = wall0.elapsed();
    let cpu = thread_cpu_time()
        .zip(cpu0)
        .map(|(b, a)| b.saturating_sub(a));
    times.sort_unstable();
    Ok(Batch {
        max_number,
        times,
        hashes,
        wall,
        cpu,
    })
}

/// Microseconds per `verify` of one valid solution.
fn verify_cost(queue: &QueueId, expires_at_ms: u64, rng: &mut SplitMix64) -> Result<f64> {
    let issue = altcha::Issue {
        level: 0,
        max_number: 1_000,
        expires_at_ms,
    };
    let c = altcha::create(SECRET, queue, issue, rng.bytes12(), 500);
    let payload = altcha::payload(&c, 500);
    let now = now_ms();
    let t = Instant::now();
    for _ in 0..VERIFY_CALLS {
        altcha::verify(SECRET, std::hint::black_box(&payload), queue, now)?;
    }
    Ok(t.elapsed().as_secs_f64() * 1e6 / f64::from(VERIFY_CALLS))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

impl Batch {
    /// Hashes per second of CPU time (wall time when CPU time is unknown).
    fn hashes_per_cpu_second(&self) -> f64 {
        self.hashes as f64 / self.cpu.unwrap_or(self.wall).as_secs_f64()
    }
}

fn print_solves(batches: &[Batch], count: usize) {
    println!("altcha::solve, one core, {count} challenges per difficulty (secret uniform in 0..=maxnumber)");
    println!();
    println!("| maxnumber | mean hashes | mean ms | p50 ms | p95 ms | max ms | mean CPU ms | hashes/s (wall) | hashes/s (CPU) | CPU ÷ wall |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for b in batches {
        let n = b.times.len().max(1) as f64;
        let cpu_share = b.cpu.map_or("n/a".to_string(), |c| {
            format!("{:.2}", c.as_secs_f64() / b.wall.as_secs_f64())
        });
        // 0 ms for a batch without solves.
        let at = |q| ms(quantile(&b.times, q).unwrap_or_default());
        println!(
            "| {} | {:.0} | {:.1} | {:.1} | {:.1} | {:.1} | {} | {:.2} M | {:.2} M | {} |",
            b.max_number,
            b.hashes as f64 / n,
            ms(b.wall) / n,
            at(0.5),
            at(0.95),
            at(1.0),
            b.cpu
                .map_or("n/a".to_string(), |c| format!("{:.1}", ms(c) / n)),
            b.hashes as f64 / b.wall.as_secs_f64() / 1e6,
            b.hashes_per_cpu_second() / 1e6,
            cpu_share,
        );
    }
}

/// Arithmetic on the measured rate only (all batches pooled): expected
/// hashes per place are `maxnumber / 2 + 1` (the secret is uniform, the
/// solver counts up from 0).
fn print_bot_cost(base: u64, batches: &[Batch]) {
    let s = Settings::default();
    let hashes: u64 = batches.iter().map(|b| b.hashes).sum();
    let time: f64 = batches
        .iter()
        .map(|b| b.cpu.unwrap_or(b.wall).as_secs_f64())
        .sum();
    let rate = hashes as f64 / time;
    println!(
        "What a place costs a bot running this solver ({:.2} M hashes per CPU-second, \
         all {} solves pooled; default maxnumber {base}, x2 and x4 under pressure):",
        rate / 1e6,
        batches.iter().map(|b| b.times.len()).sum::<usize>(),
    );
    println!();
    println!("| maxnumber | expected hashes per place | CPU-s per place | CPU-s per 1,000 places | cores to take 10,000 places in 60 s |");
    println!("|---:|---:|---:|---:|---:|");
    for b in batches.iter().filter(|b| b.max_number >= base) {
        let hashes = b.max_number as f64 / 2.0 + 1.0;
        let per_place = hashes / rate;
        println!(
            "| {} | {:.0} | {:.4} | {:.1} | {:.2} |",
            b.max_number,
            hashes,
            per_place,
            per_place * 1_000.0,
            per_place * 10_000.0 / 60.0
        );
    }
    let per_minute = s.entry_budget_per_minute;
    let burst = s.entry_budget_burst;
    // A full bucket of `burst`, then one place per 60/per_minute seconds.
    let first_minute = burst + per_minute;
    println!();
    println!(
        "Budget (defaults: {per_minute} new places per address per minute, burst {burst}): \
         {} places per address per hour once the burst is spent; in the first minute {burst} \
         at once, then one every {:.1} s, so {first_minute} by 60 s.",
        per_minute * 60,
        60.0 / per_minute as f64
    );
    println!(
        "Addresses to take 10,000 places: {} within the first minute, {} at once (bursts only).",
        10_000_u64.div_ceil(first_minute.max(1)),
        10_000_u64.div_ceil(burst.max(1)),
    );
}
