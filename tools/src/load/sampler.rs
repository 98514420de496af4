//! The queue seen from Redis while the crowd runs: line length, occupied
//! slots and the admitted counter, sampled straight over TCP (not through
//! the gateway, whose counters measure the edge alone).

use std::time::{Duration, Instant};

use anyhow::Context;
use queuegate_shared::fields::stats;
use queuegate_shared::QueueKeys;
use redis::aio::MultiplexedConnection;
use tokio::sync::oneshot;

/// One sample.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Seconds since the spike started.
    pub t_s: f64,
    /// |waiting|.
    pub waiting: u64,
    /// |active| (order slots in use).
    pub active: u64,
    /// The `admitted` counter.
    pub admitted: u64,
    /// The `abandoned` counter (leavers dropped).
    pub abandoned: u64,
}

/// Samples every `every` until `stop` fires (with a progress line on
/// stderr every 5 s when `progress`); returns the samples.
pub async fn run(
    mut conn: MultiplexedConnection,
    keys: QueueKeys,
    start: Instant,
    every: Duration,
    progress: bool,
    mut stop: oneshot::Receiver<()>,
) -> anyhow::Result<Vec<Sample>> {
    let mut samples = Vec::new();
    let mut tick = tokio::time::interval(every);
    let mut printed = Instant::now();
    loop {
        tokio::select! {
            _ = &mut stop => return Ok(samples),
            _ = tick.tick() => {
                let s = sample(&mut conn, &keys, start).await?;
                if progress && printed.elapsed() >= Duration::from_secs(5) {
                    printed = Instant::now();
                    eprintln!(
                        "t={:>5.1} s  waiting {:>6}  active {:>5}  admitted {:>6}  dropped leavers {:>5}",
                        s.t_s, s.waiting, s.active, s.admitted, s.abandoned
                    );
                }
                samples.push(s);
            }
        }
    }
}

/// One sample now.
pub async fn sample(
    conn: &mut MultiplexedConnection,
    keys: &QueueKeys,
    start: Instant,
) -> anyhow::Result<Sample> {
    let (waiting, active, admitted, abandoned): (u64, u64, Option<u64>, Option<u64>) =
        redis::pipe()
            .zcard(keys.waiting())
            .zcard(keys.active())
            .hget(keys.stats(), stats::ADMITTED)
            .hget(keys.stats(), stats::ABANDONED)
            .query_async(conn)
            .await
            .context("sample the queue")?;
    Ok(Sample {
        t_s: start.elapsed().as_secs_f64(),
        waiting,
        active,
        admitted: admitted.unwrap_or_default(),
        abandoned: abandoned.unwrap_or_default(),
    })
}

/// Admissions per second between consecutive samples about `window` apart.
pub fn admitted_per_second(samples: &[Sample], window: Duration) -> Vec<(f64, f64)> {
    let step = (window.as_secs_f64()
        / samples
            .windows(2)
            .map(|w| w[1].t_s - w[0].t_s)
            .next()
            .unwrap_or(1.0)
            .max(1e-3))
    .round()
    .max(1.0) as usize;
    samples
        .windows(step + 1)
        .map(|w| {
            let (a, b) = (w[0], w[step]);
            let dt = (b.t_s - a.t_s).max(1e-3);
            (b.t_s, b.admitted.saturating_sub(a.admitted) as f64 / dt)
        })
        .collect()
}

/// The admission rate realized while the line held at least `backlog`
/// visitors (so every tick had someone to admit): admissions over the
/// window, and its length in seconds. None when no such window exists.
pub fn realized_rate(samples: &[Sample], backlog: u64) -> Option<(f64, f64)> {
    let first = samples.iter().position(|s| s.waiting >= backlog)?;
    let last = samples.iter().rposition(|s| s.waiting >= backlog)?;
    let (a, b) = (samples[first], samples[last]);
    let span = b.t_s - a.t_s;
    (span >= 1.0).then(|| (b.admitted.saturating_sub(a.admitted) as f64 / span, span))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t_s: f64, waiting: u64, admitted: u64) -> Sample {
        Sample {
            t_s,
            waiting,
            active: 0,
            admitted,
            abandoned: 0,
        }
    }

    #[test]
    fn rates_come_from_counter_differences() {
        let samples: Vec<Sample> = (0..=20)
            .map(|i| s(i as f64 * 0.25, if i < 16 { 100 } else { 0 }, i * 5))
            .collect();
        let per_s = admitted_per_second(&samples, Duration::from_secs(1));
        assert_eq!(per_s.len(), 17);
        assert!(per_s.iter().all(|&(_, r)| (r - 20.0).abs() < 1e-9));
        let (rate, span) = realized_rate(&samples, 50).unwrap();
        assert!((rate - 20.0).abs() < 1e-9 && (span - 3.75).abs() < 1e-9);
        assert!(realized_rate(&samples, 1_000).is_none());
    }
}
