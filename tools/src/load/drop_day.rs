//! Drop mode: the crowd arrives before a scheduled opening, waits in the
//! pre-queue polling as told, and is drawn into line at the opening. One
//! run per `opening_spread_ms`, on a fresh stack each, so the poll rate in
//! the seconds after the opening can be compared with the spread and
//! without; plus the draw's and the admissions' timing and whether the
//! admission order still follows arrival (it should not).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;
use queuegate_shared::fields::config;
use queuegate_shared::QueueKeys;
use queuegate_testkit::measure::percentile;
use queuegate_testkit::now_ms;
use redis::aio::MultiplexedConnection;

use super::visitor::{self, Outcome, Plan, Polling, Record, Route, Shared, StatusReader};
use crate::stack::{schedule_opening, Stack, StackOptions};

/// What to run.
#[derive(Debug, Clone)]
pub struct DropOptions {
    /// Visitors who arrive before the opening (evenly over the first
    /// `arrive_share` of the time until it).
    pub pre_queue: u64,
    /// Visitors who arrive after the opening, over `spike`.
    pub later: u64,
    /// From the start of the crowd to the opening.
    pub opens_in: Duration,
    /// The share of `opens_in` over which the pre-queue arrives.
    pub arrive_share: f64,
    /// The later visitors' arrivals, after the opening.
    pub spike: Duration,
    /// `opening_spread_ms` of each run.
    pub spreads_ms: Vec<u64>,
    /// Admissions per second.
    pub admit_rate: f64,
    /// Order slots.
    pub max_active: u64,
    /// Shortest poll interval.
    pub poll_min_ms: u64,
    /// Longest poll interval (the pre-queue's interval far from the opening).
    pub poll_max_ms: u64,
    /// A visitor silent this long has left (also caps the spread window at
    /// half of it, less `poll_min_ms`).
    pub abandon_after_ms: u64,
    /// Entry token lifetime.
    pub token_ttl_ms: u64,
    /// Spread of token activation.
    pub activation_jitter_ms: u64,
    /// Seconds after the opening whose poll rate is reported.
    pub after_opening: Duration,
    /// Each run's crowd stops by this long after its start.
    pub deadline: Duration,
}

impl DropOptions {
    /// A tiny drop in a few seconds (the smoke test).
    pub fn smoke() -> DropOptions {
        DropOptions {
            pre_queue: 30,
            later: 4,
            // The pre-queue arrives over the first 2 s and has 6 s more to
            // solve its challenges (a debug build on a busy machine) before
            // the opening.
            opens_in: Duration::from_secs(8),
            arrive_share: 0.25,
            spike: Duration::from_secs(1),
            spreads_ms: vec![2_000],
            admit_rate: 20.0,
            max_active: 50,
            poll_min_ms: 500,
            poll_max_ms: 2_000,
            abandon_after_ms: 10_000,
            token_ttl_ms: 30_000,
            activation_jitter_ms: 200,
            after_opening: Duration::from_secs(5),
            deadline: Duration::from_secs(22),
        }
    }

    /// Rejects options that cannot make a meaningful run.
    pub fn validate(&self) -> anyhow::Result<()> {
        let total = self.pre_queue + self.later;
        if self.pre_queue == 0 || total > 100_000 {
            bail!("--pre-queue must be 1 or more, and all visitors at most 100000");
        }
        if self.opens_in < Duration::from_secs(2) || self.opens_in >= self.deadline {
            bail!("--opens-in must be at least 2 s and before the deadline");
        }
        if self.deadline > Duration::from_secs(900) {
            bail!("--deadline-secs must be at most 900");
        }
        if !(0.0..1.0).contains(&self.arrive_share) || self.arrive_share == 0.0 {
            bail!("the pre-queue must arrive within the time before the opening");
        }
        if self.spreads_ms.is_empty() || self.spreads_ms.iter().any(|&s| s > 600_000) {
            bail!("--spreads-ms: one or more windows of at most 600000 ms");
        }
        Ok(())
    }

    /// The window the first polls after the opening really spread over
    /// (the queue caps it so nobody who obeys is taken for a leaver).
    pub fn effective_spread_ms(&self, spread_ms: u64) -> u64 {
        spread_ms.min((self.abandon_after_ms / 2).saturating_sub(self.poll_min_ms))
    }

    fn queue_settings(&self, spread_ms: u64) -> Vec<(String, String)> {
        [
            ("poll_min_ms", self.poll_min_ms),
            ("poll_max_ms", self.poll_max_ms),
            ("abandon_after_ms", self.abandon_after_ms),
            ("token_ttl_ms", self.token_ttl_ms),
            ("activation_jitter_ms", self.activation_jitter_ms),
            ("max_waiting", self.pre_queue + self.later + 100),
            ("challenge_crowd", self.pre_queue + self.later + 100),
            ("opening_spread_ms", spread_ms),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    /// The pre-queue evenly over the first `arrive_share` of `opens_in`,
    /// then the later visitors over `spike` after the opening (most at its
    /// start, as in the flash-sale run); everyone polls as told.
    fn plans(&self) -> Vec<Plan> {
        let before = self.opens_in.mul_f64(self.arrive_share);
        let early = (0..self.pre_queue).map(|i| before.mul_f64(i as f64 / self.pre_queue as f64));
        let late = (0..self.later).map(|i| {
            let u = (i as f64 + 0.5) / self.later as f64;
            self.opens_in + self.spike.mul_f64(1.0 - (1.0 - u).sqrt())
        });
        early
            .chain(late)
            .enumerate()
            .map(|(i, arrive_after)| Plan {
                arrive_after,
                polling: Polling::Adaptive,
                leave_after_polls: None,
                seed: visitor::splitmix(i as u64 ^ 0xD20B_DA7E),
            })
            .collect()
    }

    fn describe(&self) -> String {
        format!(
            "{} pre-queued over the first {:.0} s, opening at {:.0} s, {} more over {:.0} s after it · admit {}/s · max_active {} · poll {}–{} ms · abandon after {} ms · token TTL {} ms · jitter {} ms · deadline {} s",
            self.pre_queue,
            self.opens_in.mul_f64(self.arrive_share).as_secs_f64(),
            self.opens_in.as_secs_f64(),
            self.later,
            self.spike.as_secs_f64(),
            self.admit_rate,
            self.max_active,
            self.poll_min_ms,
            self.poll_max_ms,
            self.abandon_after_ms,
            self.token_ttl_ms,
            self.activation_jitter_ms,
            self.deadline.as_secs(),
        )
    }
}

/// One run at one spread.
#[derive(Debug, Clone)]
pub struct DropRun {
    /// The configured `opening_spread_ms`.
    pub spread_ms: u64,
    /// The window the queue used.
    pub effective_spread_ms: u64,
    /// Epoch ms of the opening.
    pub opens_at: u64,
    /// Epoch ms when the crowd started.
    pub start_ms: u64,
    /// When the pre-queue was sealed and when its last visitor was placed
    /// (epoch ms, as the tool's watcher saw them every 20 ms).
    pub sealed_ms: Option<u64>,
    /// See `sealed_ms`.
    pub placed_ms: Option<u64>,
    /// Visitors the draw placed (`drawn` in the stats).
    pub drawn: u64,
    /// Every visitor's record, in arrival order.
    pub records: Vec<Record>,
}

impl DropRun {
    fn pre_queued(&self) -> impl Iterator<Item = &Record> {
        self.records.iter().filter(|r| r.pre_queued)
    }

    /// Position requests sent in each `bin` from `from` to `to` after the
    /// opening (seconds, may be negative): (bin start, requests/s).
    pub fn poll_rate(&self, from: f64, to: f64, bin: f64) -> Vec<(f64, f64)> {
        let opening = (self.opens_at as f64 - self.start_ms as f64) / 1e3;
        let bins = ((to - from) / bin).round() as usize;
        let mut counts = vec![0u64; bins];
        for r in &self.records {
            for s in r.sent.iter().filter(|s| s.route == Route::Position) {
                let t = f64::from(s.at_s) - opening - from;
                if t >= 0.0 && t < to - from {
                    counts[((t / bin) as usize).min(bins - 1)] += 1;
                }
            }
        }
        counts
            .iter()
            .enumerate()
            .map(|(i, &c)| (from + i as f64 * bin, c as f64 / bin))
            .collect()
    }

    /// Latency p50 / p99 (ms) of position requests sent within `to`
    /// seconds after the opening.
    pub fn poll_latency(&self, to: f64) -> (f64, f64) {
        let opening = (self.opens_at as f64 - self.start_ms as f64) / 1e3;
        let mut v: Vec<f64> = self
            .records
            .iter()
            .flat_map(|r| &r.sent)
            .filter(|s| s.route == Route::Position && !s.latency_ms.is_nan())
            .filter(|s| (0.0..to).contains(&(f64::from(s.at_s) - opening)))
            .map(|s| f64::from(s.latency_ms))
            .collect();
        v.sort_by(f64::total_cmp);
        (percentile(&v, 50.0), percentile(&v, 99.0))
    }

    /// Seconds from the opening until the last pre-queued visitor's token
    /// was issued (None unless all of them were admitted).
    pub fn all_admitted_s(&self) -> Option<f64> {
        let issued: Option<Vec<u64>> = self.pre_queued().map(|r| r.issued_ms).collect();
        let last = issued?.into_iter().max()?;
        Some((last as f64 - self.opens_at as f64) / 1e3)
    }

    /// Spearman's ρ between the pre-queued visitors' arrival and their
    /// admission (the tick that issued the token; a tick's visitors share
    /// a rank), over those admitted.
    pub fn rank_correlation(&self) -> Option<f64> {
        let pairs: Vec<(f64, f64)> = self
            .pre_queued()
            .filter_map(|r| Some((r.entered_ms? as f64, r.issued_ms? as f64)))
            .collect();
        if pairs.len() < 3 {
            return None;
        }
        let a = ranks(&pairs.iter().map(|p| p.0).collect::<Vec<_>>());
        let b = ranks(&pairs.iter().map(|p| p.1).collect::<Vec<_>>());
        Some(pearson(&a, &b))
    }

    /// How many visitors ended each way.
    pub fn count(&self, outcome: Outcome) -> usize {
        self.records.iter().filter(|r| r.outcome == outcome).count()
    }
}

/// Ranks 1..n, ties sharing their mean rank.
fn ranks(values: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&i, &j| values[i].total_cmp(&values[j]));
    let mut out = vec![0.0; values.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && values[order[j + 1]] == values[order[i]] {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            out[k] = rank;
        }
        i = j + 1;
    }
    out
}

fn pearson(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len() as f64;
    let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let cov: f64 = a.iter().zip(b).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let va: f64 = a.iter().map(|x| (x - ma).powi(2)).sum();
    let vb: f64 = b.iter().map(|y| (y - mb).powi(2)).sum();
    cov / (va * vb).sqrt()
}

/// Every run of a drop, and what they shared.
#[derive(Debug, Clone)]
pub struct DropReport {
    /// `nproc` and the CPU.
    pub machine: String,
    /// The settings in one line.
    pub settings: String,
    /// Seconds after the opening whose poll rate is shown.
    pub after_opening: f64,
    /// One run per spread.
    pub runs: Vec<DropRun>,
}

/// Runs the drop once per spread, each on a fresh stack.
pub async fn run(opts: &DropOptions) -> anyhow::Result<DropReport> {
    opts.validate()?;
    let mut runs = Vec::new();
    for &spread in &opts.spreads_ms {
        eprintln!("drop run: opening_spread_ms = {spread}");
        runs.push(run_one(opts, spread).await?);
    }
    Ok(DropReport {
        machine: super::machine(),
        settings: opts.describe(),
        after_opening: opts.after_opening.as_secs_f64(),
        runs,
    })
}

async fn run_one(opts: &DropOptions, spread_ms: u64) -> anyhow::Result<DropRun> {
    let stack = Stack::start(&StackOptions {
        port: 0,
        admit_rate: opts.admit_rate,
        max_active: opts.max_active,
        settings: opts.queue_settings(spread_ms),
        gateway_request_log: false,
        // The product's guard, as in the flash-sale run.
        ..StackOptions::default()
    })
    .await?;
    let (keys, mut conn) = stack.main_queue().await?;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(1_024)
        .build()?;

    let start = Instant::now();
    let start_ms = now_ms();
    let opens_at = start_ms + opts.opens_in.as_millis() as u64;
    schedule_opening(&mut conn, &keys, opens_at).await?;
    let shared = Arc::new(Shared {
        base: stack.worker.url(),
        status: Some(StatusReader {
            redis: conn.clone(),
            keys: keys.clone(),
        }),
        fixed_interval: Duration::from_secs(2),
        end: start + opts.deadline,
        tally: None,
    });
    let watcher = tokio::spawn(watch_draw(
        conn.clone(),
        keys.clone(),
        start + opts.deadline,
    ));
    let records = visitor::run_all(&http, &shared, start, opts.plans()).await?;
    let (sealed_ms, placed_ms) = watcher.await??;
    let drawn: Option<u64> = redis::cmd("HGET")
        .arg(keys.stats())
        .arg(queuegate_shared::fields::stats::DRAWN)
        .query_async(&mut conn)
        .await?;
    drop(stack);
    Ok(DropRun {
        spread_ms,
        effective_spread_ms: opts.effective_spread_ms(spread_ms),
        opens_at,
        start_ms,
        sealed_ms,
        placed_ms,
        drawn: drawn.unwrap_or(0),
        records,
    })
}

/// Watches the config hash every 20 ms until the draw is over (or `end`):
/// when it was sealed (`draw_end` appears) and when its last visitor was
/// placed (`draw_left` back to 0).
async fn watch_draw(
    mut conn: MultiplexedConnection,
    keys: QueueKeys,
    end: Instant,
) -> anyhow::Result<(Option<u64>, Option<u64>)> {
    let mut sealed = None;
    while Instant::now() < end {
        let (draw_end, left): (Option<u64>, Option<u64>) = redis::cmd("HMGET")
            .arg(keys.config())
            .arg(config::DRAW_END)
            .arg(config::DRAW_LEFT)
            .query_async(&mut conn)
            .await?;
        if draw_end.is_some() {
            sealed.get_or_insert_with(now_ms);
            if left == Some(0) {
                return Ok((sealed, Some(now_ms())));
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok((sealed, None))
}

impl fmt::Display for DropReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "Drop day through the whole room ({})", self.machine)?;
        writeln!(f, "{}", self.settings)?;
        writeln!(f)?;
        writeln!(f, "| opening_spread_ms (used) | pre-queued | sealed after opening | all placed after opening | drawn | last pre-queued admitted after opening | ρ(arrival, admission) | ordered | deadline | errors |")?;
        writeln!(f, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")?;
        for r in &self.runs {
            let since = |ms: Option<u64>| {
                ms.map_or("–".into(), |t| {
                    format!("{:.2} s", (t as f64 - r.opens_at as f64) / 1e3)
                })
            };
            writeln!(
                f,
                "| {} ({}) | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                r.spread_ms,
                r.effective_spread_ms,
                r.pre_queued().count(),
                since(r.sealed_ms),
                since(r.placed_ms),
                r.drawn,
                r.all_admitted_s()
                    .map_or("not all".into(), |s| format!("{s:.1} s")),
                r.rank_correlation()
                    .map_or("–".into(), |c| format!("{c:+.3}")),
                r.count(Outcome::Ordered),
                r.count(Outcome::Deadline),
                r.records.iter().map(|x| x.errors).sum::<u32>(),
            )?;
        }
        writeln!(f)?;
        let to = self.after_opening;
        writeln!(
            f,
            "Position requests sent per second, by second after the opening (bin [t, t+1))"
        )?;
        writeln!(f)?;
        let header: Vec<String> = self
            .runs
            .iter()
            .map(|r| format!("spread {} ms", r.effective_spread_ms))
            .collect();
        writeln!(f, "| s after opening | {} |", header.join(" | "))?;
        writeln!(f, "|---:|{}", "---:|".repeat(self.runs.len()))?;
        let rates: Vec<Vec<(f64, f64)>> = self
            .runs
            .iter()
            .map(|r| r.poll_rate(-3.0, to, 1.0))
            .collect();
        for (i, (t, _)) in rates[0].iter().enumerate() {
            let cells: Vec<String> = rates.iter().map(|v| format!("{:.0}", v[i].1)).collect();
            writeln!(f, "| {t:+.0} | {} |", cells.join(" | "))?;
        }
        writeln!(f)?;
        writeln!(
            f,
            "| within {to:.0} s after the opening | {} |",
            header.join(" | ")
        )?;
        writeln!(f, "|---|{}", "---:|".repeat(self.runs.len()))?;
        let row = |label: &str, cell: &dyn Fn(&DropRun) -> String| -> String {
            let cells: Vec<String> = self.runs.iter().map(cell).collect();
            format!("| {label} | {} |", cells.join(" | "))
        };
        let peak = |r: &DropRun, bin: f64| {
            r.poll_rate(0.0, to, bin)
                .iter()
                .map(|p| p.1)
                .fold(0.0, f64::max)
        };
        writeln!(
            f,
            "{}",
            row("peak requests/s, 1 s bins", &|r| format!(
                "{:.0}",
                peak(r, 1.0)
            ))
        )?;
        writeln!(
            f,
            "{}",
            row("peak requests/s, 100 ms bins", &|r| format!(
                "{:.0}",
                peak(r, 0.1)
            ))
        )?;
        writeln!(
            f,
            "{}",
            row("mean requests/s", &|r| {
                let v = r.poll_rate(0.0, to, 1.0);
                format!(
                    "{:.0}",
                    v.iter().map(|p| p.1).sum::<f64>() / v.len().max(1) as f64
                )
            })
        )?;
        writeln!(
            f,
            "{}",
            row("position latency p50 / p99 ms", &|r| {
                let (p50, p99) = r.poll_latency(to);
                format!("{p50:.0} / {p99:.0}")
            })
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_share_ties_and_correlate() {
        assert_eq!(ranks(&[10.0, 30.0, 20.0, 20.0]), vec![1.0, 4.0, 2.5, 2.5]);
        let a = [1.0, 2.0, 3.0, 4.0];
        assert!((pearson(&a, &a) - 1.0).abs() < 1e-12);
        assert!((pearson(&a, &[4.0, 3.0, 2.0, 1.0]) + 1.0).abs() < 1e-12);
    }

    #[test]
    fn the_spread_window_is_capped_by_the_abandon_timeout() {
        let o = DropOptions::smoke();
        assert_eq!(o.effective_spread_ms(2_000), 2_000);
        assert_eq!(o.effective_spread_ms(60_000), 4_500);
        assert!(o.validate().is_ok());
        assert!(DropOptions {
            opens_in: Duration::from_secs(30),
            ..o
        }
        .validate()
        .is_err());
    }
}
