//! The drop day's draw: the seal and each `draw_place` batch, server-side,
//! for pre-queues of several sizes and batch sizes; the enters' cost into
//! the pre-queue beside the plain line; Redis memory per pre-queued visitor
//! before and after the draw.
//!
//! `cargo run --profile release-native -p queuegate-bench --bin draw_cost [-- 10000,100000 --batches=250,500,1000 --rounds=1 --farm=0 --groups=0 --no-line]`
//!
//! `--farm=K`: the first K visitors share one address (K draw rounds), the
//! rest have one each; the seal's cost grows with the rounds.
//! `--groups=G`: the visitors come from G addresses in turn (n ÷ G rounds;
//! every group's seats are dealt among its identities after the seal).
//!
//! Each draw takes the scheduler's path (issue #41): sealed without a
//! seed, its public record written page by page, then the seed revealed;
//! the record's calls, size and serving cost are their own table.
//!
//! Each draw runs on a fresh private redis-server (see
//! `queuegate_bench::draw_cost`); the target is no single script call over
//! 5 ms at 100,000.

use anyhow::{Context, Result};
use queuegate_bench::draw_cost::{draw_run, line_run, DrawRun, LineRun, Memory};
use queuegate_bench::redis_cost::depths_arg;
use queuegate_shared::Settings;
use queuegate_testkit::measure::quantile;

/// The target for one script call: Redis runs nothing else meanwhile.
const TARGET_US: u64 = 5_000;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<()> {
    let sizes = depths_arg(&[10_000, 100_000])?;
    let default_batch = Settings::default().draw_batch;
    let batches = list_flag("--batches=")?.unwrap_or_else(|| vec![250, default_batch, 1_000]);
    let rounds = list_flag("--rounds=")?
        .and_then(|r| r.first().copied())
        .unwrap_or(1);
    // The first `farm` visitors share one address (one draw round each),
    // the others one address each: the seal's worst case is its rounds.
    let farm = list_flag("--farm=")?
        .and_then(|r| r.first().copied())
        .unwrap_or(0) as usize;
    let groups = list_flag("--groups=")?
        .and_then(|r| r.first().copied())
        .unwrap_or(0) as usize;
    // --no-line: skip the plain line beside each size (a fill of its own).
    let with_line = !std::env::args().any(|a| a == "--no-line");
    let mut draws = Vec::new();
    let mut lines = Vec::new();
    for &n in &sizes {
        if with_line {
            lines.push(line_run(n).await?);
        }
        for round in 1..=rounds {
            for &batch in &batches {
                let run = draw_run(n, batch, farm, groups).await?;
                eprintln!(
                    "{n} visitors ({} draw rounds), batch {batch}, round {round}: seal {} µs, record worst {} µs, deal {} calls worst {} µs, place p50 {} µs, worst call {} µs, CPU p50 {} µs",
                    run.rounds,
                    run.seal_us,
                    quantile_us(&run.record_us, 1.0),
                    run.deal_us.len(),
                    quantile_us(&run.deal_us, 1.0),
                    quantile_us(&run.place_us, 0.5),
                    run.worst_us(),
                    quantile_us(&run.place_cpu_us, 0.5)
                );
                draws.push(run);
            }
        }
    }
    print_draws(&draws);
    print_records(&draws, default_batch);
    print_deals(&draws);
    print_enters(&lines, &draws, default_batch);
    print_memory(&lines, &draws, default_batch);
    print_verdict(&draws, default_batch);
    Ok(())
}

/// `--name=1,2,3`, if given.
fn list_flag(prefix: &str) -> Result<Option<Vec<u64>>> {
    match std::env::args().find_map(|a| a.strip_prefix(prefix).map(str::to_string)) {
        Some(list) => Ok(Some(
            list.split(',')
                .map(|v| v.trim().parse().context("comma-separated numbers"))
                .collect::<Result<_>>()?,
        )),
        None => Ok(None),
    }
}

/// The nearest-rank `q`-quantile of µs in measured order, 0 when none.
fn quantile_us(values: &[u64], q: f64) -> u64 {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    quantile(&sorted, q).unwrap_or(0)
}

fn ms(us: u64) -> f64 {
    us as f64 / 1_000.0
}

fn print_draws(draws: &[DrawRun]) {
    println!("The draw, one script call at a time (server µs from SLOWLOG at threshold 0: wall time inside the command; CPU from the server thread's /proc schedstat; wall from the client)");
    println!();
    println!("| visitors | batch | calls | seal µs | place p50 µs | p99 µs | worst call µs | place CPU p50 / worst µs | server total ms | server CPU ms (incl. the slowlog reads) | wall ms (incl. permutation and the slowlog reads) | permutation ms | round trip p50 / p99 ms | placed | ρ(arrival, place) |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for d in draws {
        let rtt: Vec<u64> = d.place_rtt.iter().map(|t| t.as_micros() as u64).collect();
        println!(
            "| {} | {} | {} | {} | {} | {} | **{}** | {} | {:.1} | {} | {:.1} | {:.1} | {:.2} / {:.2} | {} | {:+.4} |",
            d.visitors,
            d.batch,
            d.place_us.len() + 1,
            d.seal_us,
            quantile_us(&d.place_us, 0.5),
            quantile_us(&d.place_us, 0.99),
            d.worst_us(),
            if d.place_cpu_us.is_empty() {
                "–".into()
            } else {
                format!(
                    "{} / {}",
                    quantile_us(&d.place_cpu_us, 0.5),
                    quantile_us(&d.place_cpu_us, 1.0)
                )
            },
            ms(d.server_total_us()),
            d.server_cpu
                .map_or("–".into(), |c| format!("{:.1}", c.as_secs_f64() * 1e3)),
            d.wall.as_secs_f64() * 1e3,
            d.permutation.as_secs_f64() * 1e3,
            ms(quantile_us(&rtt, 0.5)),
            ms(quantile_us(&rtt, 0.99)),
            d.placed,
            d.rank_correlation,
        );
    }
    println!();
}

fn print_records(draws: &[DrawRun], batch: u64) {
    println!("The record before the reveal (issue #41): per page of 1,024 leaves a `ZRANGE` of the sealed pre-queue and a `draw_reveal` writing the page, last the header; server µs per command from SLOWLOG; the record's `MEMORY USAGE`; `HMGET header p<k>` (an isolate's first read of a page) usec_per_call over up to 200 pages");
    println!();
    println!("| registrants | pages | calls | p50 µs | worst µs | Redis CPU per page p50 / worst µs | server total ms | client wall ms (incl. hashing) | record MB | bytes per registrant | HMGET of a page µs |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut seen = std::collections::BTreeSet::new();
    for d in draws
        .iter()
        .filter(|d| d.batch == batch || !draws.iter().any(|e| e.batch == batch))
    {
        if !seen.insert(d.visitors) {
            continue;
        }
        println!(
            "| {} | {} | {} | {} | **{}** | {} / {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
            d.visitors,
            d.record_pages,
            d.record_us.len(),
            quantile_us(&d.record_us, 0.5),
            quantile_us(&d.record_us, 1.0),
            quantile_us(&d.record_cpu_us, 0.5),
            quantile_us(&d.record_cpu_us, 1.0),
            ms(d.record_us.iter().sum()),
            d.record_wall.as_secs_f64() * 1e3,
            d.record_bytes as f64 / 1e6,
            d.record_bytes as f64 / d.visitors as f64,
            d.serve_usec,
        );
    }
    println!();
}

fn print_deals(draws: &[DrawRun]) {
    if draws.iter().all(|d| d.deal_us.is_empty()) {
        return;
    }
    println!("The deal after the seal (address groups with more than one identity: `draw_members` read with HSCAN, 1,000 a page, then the new scores in `draw_shuffle` batches of the draw batch), server µs per call from SLOWLOG");
    println!();
    println!("| visitors | groups | rounds | batch | calls | p50 µs | worst call µs | server total ms | client wall ms (incl. the deal's computation and the slowlog reads) |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for d in draws.iter().filter(|d| !d.deal_us.is_empty()) {
        println!(
            "| {} | {} | {} | {} | {} | {} | **{}** | {:.1} | {:.1} |",
            d.visitors,
            if d.groups > 0 {
                d.groups.to_string()
            } else {
                "farm".into()
            },
            d.rounds,
            d.batch,
            d.deal_us.len(),
            quantile_us(&d.deal_us, 0.5),
            quantile_us(&d.deal_us, 1.0),
            ms(d.deal_us.iter().sum()),
            d.deal_wall.as_secs_f64() * 1e3,
        );
    }
    println!();
}

/// The first draw of `n` visitors at the default batch (the memory and
/// enter figures do not depend on the batch).
fn default_draw(draws: &[DrawRun], n: usize, batch: u64) -> Option<&DrawRun> {
    draws
        .iter()
        .find(|d| d.visitors == n && d.batch == batch)
        .or_else(|| draws.iter().find(|d| d.visitors == n))
}

fn print_enters(lines: &[LineRun], draws: &[DrawRun], batch: u64) {
    println!("Enter (new place), usec_per_call from INFO commandstats over the whole fill (pipelined EVALSHA, no guard)");
    println!();
    println!("| visitors | into the pre-queue | into the plain line | pre ÷ line |");
    println!("|---:|---:|---:|---:|");
    for l in lines {
        if let Some(d) = default_draw(draws, l.visitors, batch) {
            println!(
                "| {} | {:.2} µs | {:.2} µs | {:.2}× |",
                l.visitors,
                d.enter_usec,
                l.enter_usec,
                d.enter_usec / l.enter_usec
            );
        }
    }
    println!();
}

fn per(bytes: f64, n: usize) -> String {
    format!("{:.1}", bytes / n as f64)
}

fn memory_row(label: &str, set: &str, m: &Memory, n: usize) {
    println!(
        "| {n} | {label} | {} | {} ({set}) | {} ({} keys) |",
        per(m.used_delta as f64, n),
        per(m.set_bytes as f64, n),
        per(m.seen_bytes as f64, n),
        m.seen_keys,
    );
}

fn print_memory(lines: &[LineRun], draws: &[DrawRun], batch: u64) {
    println!("Memory per visitor, bytes: used_memory less mem_clients_normal, delta since before the fill; MEMORY USAGE … SAMPLES 0 of the set and of the seen bitmaps, ÷ visitors");
    println!();
    println!("| visitors | when | used_memory | set | seen bitmaps |");
    println!("|---:|---|---:|---:|---:|");
    for l in lines {
        let n = l.visitors;
        if let Some(d) = default_draw(draws, n, batch) {
            memory_row("pre-queued, before the opening", "pre", &d.before, n);
            memory_row("after the draw", "waiting", &d.after, n);
        }
        memory_row("plain line, for comparison", "waiting", &l.memory, n);
    }
    println!();
}

fn print_verdict(draws: &[DrawRun], batch: u64) {
    let Some(largest) = draws.iter().map(|d| d.visitors).max() else {
        return;
    };
    let runs: Vec<&DrawRun> = draws
        .iter()
        .filter(|d| d.visitors == largest && d.batch == batch)
        .collect();
    let wall = runs.iter().map(|d| d.worst_us()).max().unwrap_or(0);
    let cpu = runs
        .iter()
        .flat_map(|d| d.place_cpu_us.iter().copied())
        .max()
        .unwrap_or(0);
    let verdict = |us: u64| if us <= TARGET_US { "met" } else { "NOT met" };
    println!(
        "Worst single call at {largest} visitors, batch {batch} (the default), target ≤ {TARGET_US} µs: \
         {wall} µs inside the command (SLOWLOG; {}), {cpu} µs of the Redis thread's CPU ({}).",
        verdict(wall),
        verdict(cpu)
    );
}
