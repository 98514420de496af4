//! How often a waiting visitor polls and what ETA they are shown.
//!
//! A visitor at position `p` with admission rate `r` expects to wait
//! `eta = p / r` seconds. They are told to poll again after
//!
//! ```text
//! retryAfter = clamp(eta / 2, poll_min, poll_max)
//! ```
//!
//! so the interval halves as they approach the front and a visitor is never
//! more than one interval late to notice their admission (at most
//! `poll_min` near the front). The load this puts on Redis is bounded
//! independently of the line length's worst case: with `k = 2`, the visitors
//! close enough to poll at `poll_min` number `k·r·poll_min`; those between
//! poll at `k·r/p` each, summing to `k·r·ln(poll_max/poll_min)`; everyone
//! further back polls at `1/poll_max`. Total ≈ `k·r·(1 + ln(max/min)) +
//! (N − k·r·poll_max)/poll_max` requests/s — for the defaults (175/s, 1–30 s,
//! 52,500 waiting) about 2,900/s, against 26,250/s for a fixed 2 s poll.

/// Inputs of the policy for one waiting visitor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PollPolicy {
    /// Configured admissions per second (used until a measurement exists).
    pub admit_rate_per_second: f64,
    /// Shortest poll interval.
    pub poll_min_ms: u64,
    /// Longest poll interval.
    pub poll_max_ms: u64,
}

/// Rates below this (admissions per second) count as "no measurement yet".
const MIN_MEASURED_RATE: f64 = 0.05;

impl PollPolicy {
    /// The rate the ETA uses: the measured one when there is one, else the
    /// configured one.
    pub fn effective_rate(&self, measured: Option<f64>) -> f64 {
        match measured {
            Some(r) if r.is_finite() && r >= MIN_MEASURED_RATE => r,
            _ => self.admit_rate_per_second,
        }
    }

    /// Whole seconds until admission, rounded up; `None` when the queue is
    /// not admitting (paused) and no honest estimate exists.
    pub fn eta_seconds(
        &self,
        position: u64,
        measured: Option<f64>,
        admitting: bool,
    ) -> Option<u64> {
        if !admitting {
            return None;
        }
        let rate = self.effective_rate(measured);
        if rate <= 0.0 || !rate.is_finite() {
            return None;
        }
        Some((position as f64 / rate).ceil() as u64)
    }

    /// Milliseconds until the visitor should poll again (see module docs).
    pub fn retry_after_ms(&self, position: u64, measured: Option<f64>, admitting: bool) -> u64 {
        if !admitting {
            return self.poll_max_ms;
        }
        let rate = self.effective_rate(measured);
        let eta_ms = position as f64 / rate * 1_000.0;
        let half = (eta_ms / 2.0).round();
        let half = if half.is_finite() {
            half as u64
        } else {
            u64::MAX
        };
        half.clamp(self.poll_min_ms, self.poll_max_ms)
    }
}

/// How often a pre-queued visitor polls. Far from the opening they poll
/// every `poll_max` (to stay alive: a pre-queued visitor who stops polling
/// is dropped at the draw, like any leaver), but never closer than
/// `poll_min` before the opening. Once the opening is within one
/// interval, the next poll is set just after it: `poll_min` after the
/// opening (the draw's time) plus a random share of `opening_spread`, so
/// the pre-queue's first polls spread over the window instead of landing
/// on the opening's millisecond. The window is cut to
/// `abandon_after / 2 − poll_min`: the draw marks each visitor seen as it
/// places them, and their first poll must come well within
/// `abandon_after` of that.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreQueuePolicy {
    /// Shortest poll interval.
    pub poll_min_ms: u64,
    /// Longest poll interval.
    pub poll_max_ms: u64,
    /// The window the first polls after the opening spread over.
    pub opening_spread_ms: u64,
    /// A visitor silent this long has left.
    pub abandon_after_ms: u64,
}

impl PreQueuePolicy {
    /// Milliseconds until the next poll at `now` for an opening at
    /// `opens_at` (both epoch ms); `spread` in `[0, 1)` is the caller's
    /// random draw.
    pub fn retry_after_ms(&self, opens_at: u64, now: u64, spread: f64) -> u64 {
        let opens_in = opens_at.saturating_sub(now);
        if opens_in > self.poll_max_ms {
            // The next poll stays clear of the opening by `poll_min`, so
            // network delay cannot carry it onto the opening's millisecond;
            // that poll is then told a point in the spread window.
            return (opens_in - self.poll_min_ms).clamp(self.poll_min_ms, self.poll_max_ms);
        }
        let window = self
            .opening_spread_ms
            .min((self.abandon_after_ms / 2).saturating_sub(self.poll_min_ms));
        let share = (spread.clamp(0.0, 1.0) * window as f64) as u64;
        opens_in + self.poll_min_ms + share.min(window)
    }
}

/// Milliseconds rounded up to whole seconds, for `Retry-After` headers.
pub fn retry_after_header_seconds(ms: u64) -> u64 {
    ms.div_ceil(1_000).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> PollPolicy {
        PollPolicy {
            admit_rate_per_second: 175.0,
            poll_min_ms: 1_000,
            poll_max_ms: 30_000,
        }
    }

    #[test]
    fn near_the_front_polls_fast_far_back_slow() {
        let p = policy();
        assert_eq!(p.retry_after_ms(1, None, true), 1_000);
        assert_eq!(p.retry_after_ms(175, None, true), 1_000);
        assert_eq!(p.retry_after_ms(1_750, None, true), 5_000);
        assert_eq!(p.retry_after_ms(52_500, None, true), 30_000);
        let mut last = 0;
        for pos in (1..60_000).step_by(97) {
            let r = p.retry_after_ms(pos, None, true);
            assert!(r >= last, "retryAfter must not shrink further back");
            last = r;
        }
    }

    #[test]
    fn eta_uses_the_measured_rate_when_there_is_one() {
        let p = policy();
        assert_eq!(p.eta_seconds(1_750, None, true), Some(10));
        assert_eq!(p.eta_seconds(1_750, Some(35.0), true), Some(50));
        assert_eq!(p.eta_seconds(1_750, Some(0.0), true), Some(10));
        assert_eq!(p.eta_seconds(1, None, true), Some(1));
        assert_eq!(p.eta_seconds(10, None, false), None);
        assert_eq!(p.retry_after_ms(10, None, false), 30_000);
    }

    #[test]
    fn polling_load_is_bounded_far_below_fixed_polling() {
        // Sum of 1/interval over a full line of the default size.
        let p = policy();
        let n = 52_500u64;
        let load: f64 = (1..=n)
            .map(|pos| 1_000.0 / p.retry_after_ms(pos, None, true) as f64)
            .sum();
        let fixed_2s = n as f64 / 2.0;
        assert!(load < 3_200.0, "adaptive load {load}/s");
        assert!(load * 8.0 < fixed_2s, "{load} vs {fixed_2s}");
    }

    #[test]
    fn the_pre_queue_polls_slowly_then_spreads_over_the_window_after_the_opening() {
        let p = PreQueuePolicy {
            poll_min_ms: 1_000,
            poll_max_ms: 30_000,
            opening_spread_ms: 10_000,
            abandon_after_ms: 90_000,
        };
        let opens = 1_000_000;
        assert_eq!(p.retry_after_ms(opens, opens - 120_000, 0.5), 30_000);
        // Just over one interval away: the poll lands a poll_min before.
        assert_eq!(p.retry_after_ms(opens, opens - 30_200, 0.5), 29_200);
        assert_eq!(p.retry_after_ms(opens, opens - 20_000, 0.0), 21_000);
        assert_eq!(p.retry_after_ms(opens, opens - 20_000, 0.999), 30_990);
        // Past the opening (the draw runs): soon, still spread.
        assert_eq!(p.retry_after_ms(opens, opens + 500, 0.25), 3_500);
        // A bad draw cannot leave the window.
        assert_eq!(p.retry_after_ms(opens, opens, 7.0), 11_000);
        // Every poll lands after the opening, spread evenly over the window.
        let landings: Vec<u64> = (0..100)
            .map(|i| opens - 5_000 + p.retry_after_ms(opens, opens - 5_000, f64::from(i) / 100.0))
            .collect();
        assert!(landings.iter().all(|&t| t > opens));
        assert_eq!(landings.iter().min(), Some(&(opens + 1_000)));
        assert_eq!(landings.iter().max(), Some(&(opens + 10_900)));
        // A short abandon_after cuts the window.
        let short = PreQueuePolicy {
            abandon_after_ms: 5_000,
            ..p
        };
        assert_eq!(short.retry_after_ms(opens, opens, 0.999), 1_000 + 1_498);
    }

    #[test]
    fn header_rounds_up_to_whole_seconds() {
        assert_eq!(retry_after_header_seconds(0), 1);
        assert_eq!(retry_after_header_seconds(1_000), 1);
        assert_eq!(retry_after_header_seconds(1_001), 2);
    }
}
