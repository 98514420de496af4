//! A virtual-time simulation of the polling policy at production scale: the
//! line, the scheduler's admissions and every visitor's enters and polls
//! as events on one clock, with no network and no Redis. The adaptive mode
//! asks `queuegate_shared::policy::PollPolicy` for each interval, exactly as
//! the worker's position reply does; the other modes are the yardsticks.
//!
//! What it models, and what it leaves out, is listed on [`Scenario`].

pub mod line;

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use queuegate_shared::policy::PollPolicy;
use queuegate_shared::Settings;

use crate::seeded::SplitMix64;
use line::Line;

/// How visitors choose when to poll again.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Polling {
    /// The server's `retryAfterMs` from shared's policy.
    Adaptive(PollPolicy),
    /// A fixed interval (ms), whatever the position.
    Fixed(u64),
    /// 5 s while the estimated wait is under 1 min, 15 s under 5 min,
    /// 30 s under 15 min, 60 s beyond (a common tiered schedule).
    Tiered,
}

impl Polling {
    /// Milliseconds to the next poll at `position`, before jitter.
    pub fn interval_ms(&self, position: u64, rate: f64) -> u64 {
        match self {
            Polling::Adaptive(p) => p.retry_after_ms(position, Some(rate), true),
            Polling::Fixed(ms) => *ms,
            Polling::Tiered => {
                let eta_s = position as f64 / rate;
                match eta_s {
                    e if e < 60.0 => 5_000,
                    e if e < 300.0 => 15_000,
                    e if e < 900.0 => 30_000,
                    _ => 60_000,
                }
            }
        }
    }

    /// A short name for tables.
    pub fn label(&self) -> String {
        match self {
            Polling::Adaptive(p) => format!(
                "adaptive (retryAfter, {}–{} s)",
                p.poll_min_ms / 1_000,
                p.poll_max_ms / 1_000
            ),
            Polling::Fixed(ms) => format!("fixed {} s", *ms as f64 / 1_000.0),
            Polling::Tiered => "tiered 5/15/30/60 s by ETA".into(),
        }
    }
}

/// One crowd. Modelled: arrivals falling linearly from the opening (the
/// shape `queuegate-load` uses), a tick every `tick_ms` popping the head at
/// `admit_rate` with fractional carry, the `max_waiting` cap (a refused
/// visitor retries enter after 30 s, as the page does on 429), leavers who
/// stop after 0–2 polls and are dropped `abandon_after_ms` after their last
/// request, each wait drawn ×U(0.8, 1.2) as the page spreads it. Left out:
/// slot limits (`max_active` is assumed not to bind), the idle passthrough,
/// network and server time (a reply arrives the instant it is asked).
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Visitors who arrive.
    pub arrivals: u64,
    /// All arrive within this window (ms), most at the start.
    pub window_ms: u64,
    /// Share of visitors who give up after 0–2 polls.
    pub leave_share: f64,
    /// The queue's settings (rate, tick, cap, poll bounds, abandon timeout).
    pub settings: Settings,
    /// The refused visitor's wait before entering again (the 429's Retry-After).
    pub full_retry_ms: u64,
    /// Seed of the draws (arrivals, leavers, jitter).
    pub seed: u64,
}

impl Scenario {
    /// The crowd: 200,000 arrivals over 10 minutes, 10 % leavers,
    /// the production defaults (175/s, poll 1–30 s, 52,500 max waiting).
    pub fn production() -> Scenario {
        Scenario {
            arrivals: 200_000,
            window_ms: 600_000,
            leave_share: 0.10,
            settings: Settings::default(),
            full_retry_ms: 30_000,
            seed: 0x5eed_9011,
        }
    }
}

/// What one mode cost and how promptly it noticed.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Visitors admitted while still there (they noticed it).
    pub admitted: u64,
    /// Tokens issued to visitors who had already left.
    pub admitted_absent: u64,
    /// Leavers dropped before their turn.
    pub dropped: u64,
    /// Enter requests, retries after a refusal included.
    pub enters: u64,
    /// Enter requests refused because the line was full.
    pub refused: u64,
    /// Position requests.
    pub polls: u64,
    /// Position requests per admitted visitor (each visitor's count, sorted).
    pub polls_per_admitted: Vec<f64>,
    /// Admission to the poll that saw it (ms, sorted).
    pub lag_ms: Vec<f64>,
    /// First enter to admission (ms, sorted).
    pub wait_ms: Vec<f64>,
    /// Position requests in each second.
    pub polls_per_second: Vec<u32>,
    /// Enter requests in each second.
    pub enters_per_second: Vec<u32>,
    /// People in line at the start of each second.
    pub waiting_per_second: Vec<u32>,
    /// When the last admitted visitor noticed (ms).
    pub end_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Tick,
    Enter(u32),
    Poll(u32),
    Drop(u32),
}

#[derive(Debug, Clone, Default)]
struct Visitor {
    ticket: Option<usize>,
    first_enter_ms: Option<u64>,
    admitted_ms: Option<u64>,
    polls: u32,
    /// Polls a leaver makes before going; None for a stayer.
    leaves_after: Option<u32>,
    gone: bool,
}

/// Runs one crowd with one polling mode. The same seed gives the same
/// arrivals and leavers in every mode, so modes compare on one crowd.
pub fn run(scenario: &Scenario, polling: Polling) -> Outcome {
    let s = &scenario.settings;
    let rate = s.admit_rate_per_second;
    let mut draws = SplitMix64::new(scenario.seed);
    let mut visitors: Vec<Visitor> = Vec::with_capacity(scenario.arrivals as usize);
    let mut events: BinaryHeap<Reverse<(u64, u64, Event)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut push = |events: &mut BinaryHeap<_>, at: u64, e: Event| {
        seq += 1;
        events.push(Reverse((at, seq, e)));
    };
    for id in 0..scenario.arrivals as u32 {
        let u = draws.unit();
        let at = (scenario.window_ms as f64 * (1.0 - (1.0 - u).sqrt())) as u64;
        let leaves_after = (draws.unit() < scenario.leave_share).then(|| draws.up_to(2) as u32);
        visitors.push(Visitor {
            leaves_after,
            ..Visitor::default()
        });
        push(&mut events, at, Event::Enter(id));
    }
    push(&mut events, 0, Event::Tick);
    let mut pending = visitors.len();
    let mut line = Line::new(visitors.len());
    let mut holder: Vec<u32> = vec![0; visitors.len()];
    let mut out = Outcome::default();
    let mut carry = 0.0f64;
    let per_tick = rate * s.tick_ms as f64 / 1_000.0;
    let jitter = |d: &mut SplitMix64, ms: u64| (ms as f64 * (0.8 + 0.4 * d.unit())) as u64;
    let bump = |v: &mut Vec<u32>, at: u64| {
        let sec = (at / 1_000) as usize;
        if v.len() <= sec {
            v.resize(sec + 1, 0);
        }
        v[sec] += 1;
    };

    while let Some(Reverse((now, _, event))) = events.pop() {
        match event {
            Event::Tick => {
                if now % 1_000 == 0 {
                    out.waiting_per_second.push(line.len() as u32);
                }
                carry += per_tick;
                while carry >= 1.0 {
                    let Some(ticket) = line.pop_front() else {
                        break;
                    };
                    carry -= 1.0;
                    let v = &mut visitors[holder[ticket] as usize];
                    v.admitted_ms = Some(now);
                    if v.gone {
                        out.admitted_absent += 1;
                        pending -= 1;
                    }
                }
                if line.is_empty() {
                    carry = carry.min(per_tick);
                }
                if pending > 0 {
                    push(&mut events, now + s.tick_ms, Event::Tick);
                }
            }
            Event::Enter(id) => {
                out.enters += 1;
                bump(&mut out.enters_per_second, now);
                let v = &mut visitors[id as usize];
                v.first_enter_ms.get_or_insert(now);
                if line.len() as u64 >= s.max_waiting {
                    out.refused += 1;
                    if v.leaves_after.is_some() {
                        v.gone = true;
                        pending -= 1;
                    } else {
                        push(&mut events, now + scenario.full_retry_ms, Event::Enter(id));
                    }
                    continue;
                }
                let ticket = line.join();
                holder[ticket] = id;
                v.ticket = Some(ticket);
                let next = polling.interval_ms(line.position(ticket), rate);
                if v.leaves_after == Some(0) {
                    v.gone = true;
                    push(&mut events, now + s.abandon_after_ms, Event::Drop(id));
                } else {
                    push(&mut events, now + jitter(&mut draws, next), Event::Poll(id));
                }
            }
            Event::Poll(id) => {
                out.polls += 1;
                bump(&mut out.polls_per_second, now);
                let v = &mut visitors[id as usize];
                v.polls += 1;
                if let Some(admitted) = v.admitted_ms {
                    out.admitted += 1;
                    out.lag_ms.push((now - admitted) as f64);
                    out.wait_ms
                        .push((admitted - v.first_enter_ms.unwrap_or(admitted)) as f64);
                    out.polls_per_admitted.push(f64::from(v.polls));
                    out.end_ms = out.end_ms.max(now);
                    pending -= 1;
                    continue;
                }
                let ticket = v.ticket.unwrap_or_default();
                if v.leaves_after == Some(v.polls) {
                    v.gone = true;
                    push(&mut events, now + s.abandon_after_ms, Event::Drop(id));
                    continue;
                }
                let next = polling.interval_ms(line.position(ticket), rate);
                push(&mut events, now + jitter(&mut draws, next), Event::Poll(id));
            }
            Event::Drop(id) => {
                let v = &visitors[id as usize];
                if v.admitted_ms.is_none() && line.remove(v.ticket.unwrap_or_default()) {
                    out.dropped += 1;
                    pending -= 1;
                }
            }
        }
    }
    for v in [
        &mut out.polls_per_admitted,
        &mut out.lag_ms,
        &mut out.wait_ms,
    ] {
        v.sort_by(f64::total_cmp);
    }
    out
}

/// The closed-form polling load of `policy.rs` for `waiting` people (per
/// second): `k·r·(1 + ln(max/min)) + (N − k·r·max)/max` with `k = 2`,
/// intervals in seconds; below `k·r·max` people, the sum over the line.
pub fn closed_form_bound(policy: &PollPolicy, waiting: u64) -> f64 {
    let k = 2.0;
    let r = policy.admit_rate_per_second;
    let (min, max) = (
        policy.poll_min_ms as f64 / 1_000.0,
        policy.poll_max_ms as f64 / 1_000.0,
    );
    let n = waiting as f64;
    if n <= k * r * min {
        return n / min;
    }
    if n <= k * r * max {
        return k * r * (1.0 + (n / (k * r * min)).ln());
    }
    k * r * (1.0 + (max / min).ln()) + (n - k * r * max) / max
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Scenario {
        let mut s = Scenario::production();
        s.arrivals = 3_000;
        s.window_ms = 20_000;
        s.settings.admit_rate_per_second = 50.0;
        s.settings.max_waiting = 1_000;
        s
    }

    #[test]
    fn everyone_is_admitted_dropped_or_absent_once() {
        let s = small();
        let out = run(&s, Polling::Adaptive(s.settings.poll_policy()));
        assert!(out.refused > 0, "the cap binds in this crowd");
        let leavers_refused = s.arrivals - out.admitted - out.admitted_absent - out.dropped;
        assert!(leavers_refused <= out.refused, "{out:?}");
        assert_eq!(out.polls_per_admitted.len() as u64, out.admitted);
        assert!(out.admitted > s.arrivals * 8 / 10);
    }

    #[test]
    fn adaptive_notices_within_poll_min_plus_jitter() {
        let s = small();
        let out = run(&s, Polling::Adaptive(s.settings.poll_policy()));
        let max_lag = out.lag_ms.last().copied().unwrap_or_default();
        assert!(max_lag <= 1.2 * s.settings.poll_min_ms as f64, "{max_lag}");
        let fixed = run(&s, Polling::Fixed(2_000));
        assert!(out.polls < fixed.polls);
    }

    #[test]
    fn bound_is_continuous_at_its_joints() {
        let p = Settings::default().poll_policy();
        for n in [350u64, 10_500] {
            let (a, b) = (closed_form_bound(&p, n), closed_form_bound(&p, n + 1));
            assert!((a - b).abs() < 1.0, "{n}: {a} vs {b}");
        }
        assert!((closed_form_bound(&p, 52_500) - 2_940.0).abs() < 10.0);
    }
}
