//! Live counters across a crowd's visitors, for a status line while it
//! runs (a visitor's record only exists once it ends): what the visitors
//! did, how many requests failed or timed out and why ([`Failure`]), and
//! the latency of the answered ones, so an overloaded run reads as one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use hdrhistogram::Histogram;

/// Why a request got no usable answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Failure {
    /// No answer within a browser's patience (the visitor's `REQUEST_TIMEOUT`).
    Timeout,
    /// No connection, or it broke.
    Network,
    /// A 5xx that is not the queue's answer (`queue_closed`): the worker,
    /// the gateway or Redis failed.
    Server,
    /// A reply that is not the JSON the route answers.
    Unreadable,
}

impl Failure {
    /// Every kind, in declaration order (the discriminant is the index).
    pub const ALL: [Failure; 4] = [
        Failure::Timeout,
        Failure::Network,
        Failure::Server,
        Failure::Unreadable,
    ];

    /// Label for figures.
    pub fn label(self) -> &'static str {
        match self {
            Failure::Timeout => "timed out",
            Failure::Network => "network",
            Failure::Server => "5xx",
            Failure::Unreadable => "unreadable",
        }
    }
}

/// Crowd counters, bumped by every visitor as it goes.
#[derive(Debug)]
pub struct Tally {
    /// Visitors who entered.
    pub entered: AtomicU64,
    /// Polls sent (and answered).
    pub polls: AtomicU64,
    /// Of those, the ones the edge answered far from the head without
    /// Redis (`approximate`).
    pub approximate_polls: AtomicU64,
    /// Visitors admitted.
    pub admitted: AtomicU64,
    /// Orders the origin accepted.
    pub ordered: AtomicU64,
    /// Visitors who gave up on purpose.
    pub left: AtomicU64,
    /// Visitors whose entry was refused (line full, queue closed, the
    /// address's share spent) until they gave up.
    pub refused: AtomicU64,
    /// Requests sent.
    pub requests: AtomicU64,
    /// Requests that got no usable answer (see [`Failure`]).
    pub failed: AtomicU64,
    /// Of those, by kind, in [`Failure::ALL`]'s order.
    by_kind: [AtomicU64; 4],
    /// Latency of the answered requests, µs.
    latency: Mutex<Histogram<u64>>,
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            entered: AtomicU64::default(),
            polls: AtomicU64::default(),
            approximate_polls: AtomicU64::default(),
            admitted: AtomicU64::default(),
            ordered: AtomicU64::default(),
            left: AtomicU64::default(),
            refused: AtomicU64::default(),
            requests: AtomicU64::default(),
            failed: AtomicU64::default(),
            by_kind: Default::default(),
            // 1 µs to 10 min at 3 significant digits (auto-resizing past
            // that, so no value is ever dropped).
            latency: Mutex::new({
                let mut h =
                    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds");
                h.auto(true);
                h
            }),
        }
    }
}

/// Latency percentiles of the answered requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Latency {
    /// Requests counted.
    pub count: u64,
    /// Median, ms.
    pub p50_ms: f64,
    /// 90th percentile, ms.
    pub p90_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Slowest, ms.
    pub max_ms: f64,
}

impl Tally {
    /// One answered request.
    pub fn answered(&self, latency: Duration) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        let us = u64::try_from(latency.as_micros())
            .unwrap_or(u64::MAX)
            .max(1);
        if let Ok(mut h) = self.latency.lock() {
            // Auto-resizing: recording cannot fail.
            let _ = h.record(us);
        }
    }

    /// One request that got no usable answer.
    pub fn failure(&self, failure: Failure) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.failed.fetch_add(1, Ordering::Relaxed);
        self.by_kind[failure as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Failed requests of one kind so far.
    pub fn failed_with(&self, failure: Failure) -> u64 {
        self.by_kind[failure as usize].load(Ordering::Relaxed)
    }

    /// Percentiles of the answered requests so far.
    pub fn latency(&self) -> Latency {
        let h = self.latency.lock().map(|h| h.clone()).unwrap_or_else(|e| {
            // A visitor panicked while recording: the counts still stand.
            e.into_inner().clone()
        });
        let ms = |q: f64| h.value_at_quantile(q) as f64 / 1e3;
        Latency {
            count: h.len(),
            p50_ms: ms(0.5),
            p90_ms: ms(0.9),
            p99_ms: ms(0.99),
            max_ms: h.max() as f64 / 1e3,
        }
    }

    /// Failed requests as a share of all sent (0 when none were).
    pub fn failed_share(&self) -> f64 {
        let sent = self.requests.load(Ordering::Relaxed);
        if sent == 0 {
            return 0.0;
        }
        self.failed.load(Ordering::Relaxed) as f64 / sent as f64
    }

    /// One line for the terminal.
    pub fn line(&self) -> String {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let l = self.latency();
        let kinds: Vec<String> = Failure::ALL
            .iter()
            .filter(|&&k| self.failed_with(k) > 0)
            .map(|&k| format!("{} {}", k.label(), self.failed_with(k)))
            .collect();
        format!(
            "crowd: entered {} · admitted {} · ordered {} · left {} · refused {} · polls {} ({} far back) · requests {}, failed {} ({:.1} %{}) · latency p50 {} p90 {} p99 {} max {}",
            g(&self.entered),
            g(&self.admitted),
            g(&self.ordered),
            g(&self.left),
            g(&self.refused),
            g(&self.polls),
            g(&self.approximate_polls),
            g(&self.requests),
            g(&self.failed),
            self.failed_share() * 100.0,
            if kinds.is_empty() {
                String::new()
            } else {
                format!(": {}", kinds.join(", "))
            },
            ms(l.p50_ms),
            ms(l.p90_ms),
            ms(l.p99_ms),
            ms(l.max_ms),
        )
    }
}

/// A latency for the status line: ms below 10 s, else s.
fn ms(v: f64) -> String {
    if v < 10_000.0 {
        format!("{v:.0} ms")
    } else {
        format!("{:.1} s", v / 1e3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_every_counter() {
        let t = Tally::default();
        t.entered.fetch_add(3, Ordering::Relaxed);
        t.polls.fetch_add(7, Ordering::Relaxed);
        t.left.fetch_add(1, Ordering::Relaxed);
        for ms in [2, 4, 40] {
            t.answered(Duration::from_millis(ms));
        }
        t.failure(Failure::Timeout);
        assert_eq!(
            t.line(),
            "crowd: entered 3 · admitted 0 · ordered 0 · left 1 · refused 0 · polls 7 (0 far back) · requests 4, failed 1 (25.0 %: timed out 1) · latency p50 4 ms p90 40 ms p99 40 ms max 40 ms"
        );
    }

    #[test]
    fn failures_other_than_timeouts_count_as_failed_only() {
        let t = Tally::default();
        t.failure(Failure::Network);
        t.failure(Failure::Server);
        assert_eq!(t.failed.load(Ordering::Relaxed), 2);
        assert_eq!(t.failed_with(Failure::Timeout), 0);
        assert_eq!(t.failed_with(Failure::Server), 1);
        assert_eq!(t.latency().count, 0);
        assert!((t.failed_share() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_latency_beyond_the_bounds_is_still_counted() {
        let t = Tally::default();
        t.answered(Duration::from_secs(3_600));
        let l = t.latency();
        assert_eq!(l.count, 1);
        assert!(l.max_ms >= 3_599_000.0, "{l:?}");
    }
}
