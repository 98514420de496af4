//! The drop's clock: one virtual millisecond at a time, orders from a
//! small heap, the admit tick, then the polls due (a wheel of one slot per
//! millisecond: a million visitors' polls cost a few seconds).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use queuegate_scheduler::admission::RateEstimate;
use queuegate_scheduler::queue::RATE_WINDOW;
use queuegate_shared::chance::{chance_percent, StockView};
use queuegate_shared::ops::rate_bucket_cap;
use queuegate_shared::settings::edge_may_answer;

use super::margin::{self, Counts};
use super::{Kind, Outcome, Scenario, KINDS};
use crate::seeded::SplitMix64;

/// "Not yet" for a visitor's times.
const NONE: u32 = u32::MAX;
/// Wheel slots (ms): more than the longest wait between two polls.
const WHEEL: usize = 1 << 16;
/// A run that has not ended after this long stops (ms).
const LIMIT_MS: u64 = 12 * 3_600_000;

// A turn's flags.
const ADMITTED: u8 = 1;
const ORDERS: u8 = 4;
const GOT_UNIT: u8 = 8;
const UNIT_LEFT: u8 = 16;
const TWO_UNITS: u8 = 32;
const SPENT: u8 = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Consume(u32),
    Settle(u32),
    /// A no-show's would-be order: was a unit left?
    Probe(u32),
}

/// One chance shown (percent), and the diagnostics' for the same place.
#[derive(Debug, Clone, Copy)]
struct Sample {
    id: u32,
    pct: u8,
    no_out: u8,
    oracle: u8,
    unmeasured: bool,
}

/// The drop's shared state (what Redis holds).
#[derive(Debug, Default)]
struct Stock {
    left: u64,
    held: u64,
    /// Slots in use: tokens not spent and orders in flight.
    active: u64,
    counts: Counts,
    refused: u64,
    t0: Option<u64>,
}

impl Stock {
    fn out(&self) -> u64 {
        self.active - self.held
    }

    fn sold_out_at(&mut self, now: u64) {
        if self.left == 0 && self.t0.is_none() {
            self.t0 = Some(now);
        }
    }
}

fn uniform(d: &mut SplitMix64, (lo, hi): (u64, u64)) -> u64 {
    lo + (d.unit() * (hi - lo) as f64) as u64
}

fn ms32(ms: u64) -> u32 {
    u32::try_from(ms)
        .ok()
        .filter(|&t| t != NONE)
        .expect("simulated time within 49 days")
}

fn count(v: &mut Vec<[u32; KINDS]>, at: u64, kind: Kind) {
    let s = (at / 1_000) as usize;
    if v.len() <= s {
        v.resize(s + 1, [0; KINDS]);
    }
    v[s][kind as usize] += 1;
}

/// Runs one drop.
pub fn run(sc: &Scenario) -> Outcome {
    let s = &sc.settings;
    let policy = s.poll_policy();
    let rate = s.admit_rate_per_second;
    let zone = s.near_zone_visitors(rate);
    let head_size = s.exact_head_visitors(rate);
    let refresh_ms = sc.fleet.refresh_s * 1_000;
    let n = usize::try_from(sc.visitors).expect("a line that fits in memory");
    assert!(u32::try_from(n).is_ok_and(|n| n < NONE));
    assert!(
        s.poll_max_ms * 6 / 5 < WHEEL as u64 && s.poll_min_ms + s.opening_spread_ms < WHEEL as u64,
        "every wait fits in the wheel"
    );
    let mut d = SplitMix64::new(sc.seed);
    let mut out = Outcome::default();

    let mut flags = vec![0u8; n];
    let mut last_exact = vec![NONE; n];
    let mut gap = vec![0u32; n];
    let mut told = vec![NONE; n];
    let mut gap_at_t0: Vec<u32> = Vec::new();
    let mut wheel: Vec<Vec<u32>> = vec![Vec::new(); WHEEL];
    for id in 0..n as u32 {
        let first = s.poll_min_ms + uniform(&mut d, (0, s.opening_spread_ms));
        wheel[first as usize % WHEEL].push(id);
    }
    let mut events: BinaryHeap<Reverse<(u64, u64, Event)>> = BinaryHeap::new();
    let mut expiries: BinaryHeap<Reverse<(u64, u32)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut stock = Stock {
        left: sc.stock,
        ..Stock::default()
    };
    let mut head = 0usize; // the next ticket to admit: nobody leaves
    let mut bucket = 0.0f64;
    let bucket_cap = rate_bucket_cap(rate, s.tick_ms);
    let mut measured = RateEstimate::new(RATE_WINDOW);
    let mut samples: Vec<Sample> = Vec::new();
    let mut by_snapshot = vec![false; n];

    let mut now = 0u64;
    loop {
        // 1. Orders: consume holds a unit, settle sells the order's units.
        while let Some(&Reverse((at, _, e))) = events.peek() {
            if at > now {
                break;
            }
            events.pop();
            match e {
                Event::Consume(id) => {
                    count(&mut out.redis, now, Kind::Consume);
                    if stock.left == 0 {
                        stock.refused += 1;
                        continue;
                    }
                    stock.left -= 1;
                    stock.held += 1;
                    flags[id as usize] |= SPENT | GOT_UNIT | UNIT_LEFT;
                    stock.sold_out_at(now);
                    seq += 1;
                    events.push(Reverse((now + sc.settle_ms, seq, Event::Settle(id))));
                }
                Event::Settle(id) => {
                    count(&mut out.redis, now, Kind::Settle);
                    let units = if flags[id as usize] & TWO_UNITS != 0 {
                        2
                    } else {
                        1
                    };
                    // prelude stock.settle: held 1, sold `units`, never below 0.
                    stock.left = (stock.left + 1).saturating_sub(units);
                    stock.held -= 1;
                    stock.active -= 1;
                    stock.counts.sold += units;
                    stock.counts.ordered += 1;
                    stock.sold_out_at(now);
                }
                Event::Probe(id) => {
                    if stock.left > 0 {
                        flags[id as usize] |= UNIT_LEFT;
                    }
                }
            }
        }
        if let (Some(t0), true) = (stock.t0, gap_at_t0.is_empty()) {
            out.t0_ms = Some(t0);
            out.margin_at_t0 = margin::tick(stock.counts, sc.overbook_percent).margin_per_mille;
            out.conversion_at_t0 =
                margin::tick(stock.counts, sc.overbook_percent).conversion_per_mille;
            out.waiting_at_t0 = (n - head) as u64;
            gap_at_t0 = gap.clone();
        }

        // 2. The admit tick (admit.lua's order: expire, stock.tick, admit).
        if now.is_multiple_of(s.tick_ms) {
            count(&mut out.redis, now, Kind::Tick);
            while let Some(&Reverse((at, id))) = expiries.peek() {
                if at > now {
                    break;
                }
                expiries.pop();
                if flags[id as usize] & SPENT == 0 {
                    flags[id as usize] |= SPENT;
                    stock.active -= 1;
                    stock.counts.expired += 1;
                }
            }
            let m = margin::tick(stock.counts, sc.overbook_percent);
            let turns_out = stock.out();
            if stock.t0.is_none() && now % 300_000 == 60_000 {
                let m = (m.conversion_per_mille, m.margin_per_mille);
                out.measured.push((now, m.0, m.1, turns_out, stock.left));
            }
            for (i, share) in [0.5, 0.9, 0.99].into_iter().enumerate() {
                let gone = sc.stock as f64 - stock.left as f64;
                if out.gone_at[i].is_none() && gone >= share * sc.stock as f64 {
                    out.gone_at[i] = Some(now);
                }
            }
            let free = (s.max_active.saturating_sub(stock.active)).min(margin::room(
                stock.left,
                m.margin_per_mille,
                turns_out,
            ));
            bucket = (bucket + rate * s.tick_ms as f64 / 1_000.0).min(bucket_cap);
            let want = free.min(bucket.floor() as u64).min((n - head) as u64);
            for _ in 0..want {
                let id = head;
                head += 1;
                flags[id] |= ADMITTED;
                let jitter = uniform(&mut d, (0, s.activation_jitter_ms));
                expiries.push(Reverse((now + jitter + s.token_ttl_ms, id as u32)));
            }
            stock.active += want;
            out.admitted += want;
            bucket -= want as f64;
            let busy = head < n || want > 0;
            if busy {
                measured.observe(want, Duration::from_millis(s.tick_ms));
            }
            if stock.t0.is_none() && now.is_multiple_of(sc.sample_every_ms) {
                let view = StockView {
                    left: stock.left,
                    out: turns_out,
                    conversion: m.conversion_per_mille.map(|c| c as f64 / 1_000.0),
                    units_per_order: m.per_order_per_mille.map(|u| u as f64 / 1_000.0),
                };
                let c = view.conversion.unwrap_or(1.0).max(0.01);
                let u = view.units_per_order.unwrap_or(1.0).max(1.0);
                let reach = (stock.left as f64 / (c * u)).ceil() as u64;
                let last = (reach.max(1) * sc.sample_reach).min((n - head) as u64);
                let mut p = 1;
                while p <= last {
                    let pct = chance_percent(p, &view);
                    let no_out = StockView { out: 0, ..view };
                    let oracle = StockView {
                        conversion: Some(sc.conversion),
                        units_per_order: Some(1.0 + sc.two_unit_share),
                        ..no_out
                    };
                    let no_out = chance_percent(p, &no_out);
                    let oracle = chance_percent(p, &oracle);
                    let id = head + (p - 1) as usize;
                    samples.push(Sample {
                        id: id as u32,
                        pct,
                        no_out,
                        oracle,
                        unmeasured: view.conversion.is_none(),
                    });
                    p += sc.sample_stride;
                }
            }
        }

        // 3. The polls due now.
        let slot = now as usize % WHEEL;
        let mut due = std::mem::take(&mut wheel[slot]);
        let rate_now = policy.effective_rate(measured.per_second());
        for id in due.drain(..) {
            out.polls += 1;
            let i = id as usize;
            if flags[i] & ADMITTED != 0 {
                // The turn, learnt from Redis; the visitor goes to the shop.
                count(&mut out.redis, now, Kind::ExactPoll);
                let at = now + uniform(&mut d, sc.order_after_ms);
                seq += 1;
                if d.unit() < sc.conversion {
                    flags[i] |= ORDERS;
                    if d.unit() < sc.two_unit_share {
                        flags[i] |= TWO_UNITS;
                    }
                    events.push(Reverse((at, seq, Event::Consume(id))));
                } else {
                    events.push(Reverse((at, seq, Event::Probe(id))));
                }
                continue;
            }
            let rank = (i - head + 1) as u64;
            let mut interval = policy.retry_after_ms(rank, Some(rate_now), true);
            if rank > zone {
                let until_near = ((rank - zone) as f64 * 1_000.0 / rate_now) as u64;
                interval = interval.min(until_near).max(s.poll_min_ms);
            }
            // Redis, or an isolate's snapshot read `age` ago.
            let read_at = now.saturating_sub(uniform(&mut d, (0, refresh_ms)));
            let asks = if rank <= head_size {
                Some(Kind::ExactPoll)
            } else if rank > zone {
                None
            } else if last_exact[i] == NONE
                || !edge_may_answer(s.abandon_after_ms, now - u64::from(last_exact[i]), interval)
            {
                Some(Kind::LivenessPoll)
            } else {
                None
            };
            let knows = match asks {
                Some(kind) => {
                    count(&mut out.redis, now, kind);
                    last_exact[i] = ms32(now);
                    stock.t0.is_some_and(|t0| now >= t0)
                }
                None => {
                    let sec = (now / 1_000) as usize;
                    if out.edge_polls.len() <= sec {
                        out.edge_polls.resize(sec + 1, 0);
                    }
                    out.edge_polls[sec] += 1;
                    stock.t0.is_some_and(|t0| read_at >= t0)
                }
            };
            if knows && told[i] == NONE {
                told[i] = ms32(now);
                by_snapshot[i] = asks.is_none();
            }
            // Told by Redis, a sold-out visitor polls as in a paused line
            // (shared/src/ops/observed.rs); from a snapshot, at the interval
            // its answer had.
            if knows && asks.is_some() {
                interval = s.poll_max_ms;
            }
            let wait = (interval as f64 * (0.8 + 0.4 * d.unit())) as u64;
            gap[i] = ms32(wait);
            wheel[(now + wait) as usize % WHEEL].push(id);
        }
        wheel[slot] = due;

        let done = match stock.t0 {
            Some(t0) => now >= t0 + sc.after_ms,
            None => head == n && events.is_empty() && expiries.is_empty(),
        };
        if done || now >= LIMIT_MS {
            break;
        }
        now += 1;
    }
    out.end_ms = now;
    out.expired = stock.counts.expired;
    out.ordered = stock.counts.ordered;
    out.sold = stock.counts.sold;
    out.refused = stock.refused;

    if let Some(t0) = out.t0_ms {
        count_told(&mut out, t0, &told, &by_snapshot, &gap_at_t0);
    }
    calibrate(&mut out, &samples, &flags);
    out
}

/// The told figures of everyone waiting at `t0` (the line's last
/// `waiting_at_t0` tickets).
fn count_told(out: &mut Outcome, t0: u64, told: &[u32], by_snapshot: &[bool], gap_at_t0: &[u32]) {
    let first_waiting = told.len() - out.waiting_at_t0 as usize;
    for ((&at, &snapshot), &gap) in told
        .iter()
        .zip(by_snapshot)
        .zip(gap_at_t0)
        .skip(first_waiting)
    {
        if at == NONE {
            out.never_told += 1;
            continue;
        }
        let after = u64::from(at) - t0;
        out.told_by_snapshot += u64::from(snapshot);
        out.told_after_ms.push(after);
        if after <= u64::from(gap) {
            out.told_within_interval += 1;
        }
    }
    out.told_after_ms.sort_unstable();
}

/// Each sampled chance against what came of its visitor.
fn calibrate(out: &mut Outcome, samples: &[Sample], flags: &[u8]) {
    for s in samples {
        let (pct, f) = (s.pct, flags[s.id as usize]);
        let turn = f & ADMITTED != 0;
        let served = turn && (f & ORDERS == 0 || f & GOT_UNIT != 0);
        out.calibration.add(pct, served);
        out.calibration_unit_left
            .add(pct, turn && f & UNIT_LEFT != 0);
        out.calibration_without_out.add(s.no_out, served);
        out.calibration_oracle.add(s.oracle, served);
        if s.unmeasured {
            out.calibration_unmeasured.add(pct, served);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Scenario {
        let mut sc = Scenario::production();
        sc.visitors = 3_000;
        sc.stock = 100;
        sc.settings.max_active = 50;
        sc.after_ms = 40_000;
        sc
    }

    #[test]
    fn the_stock_sells_out_and_the_whole_line_is_told() {
        let sc = small();
        let out = run(&sc);
        assert!(out.t0_ms.is_some(), "{out:?}");
        // A 2-unit order taking the last unit sells one more (the shop's word).
        assert!((100..=101).contains(&out.sold), "{}", out.sold);
        assert!(out.ordered + out.expired <= out.admitted);
        assert_eq!(out.never_told, 0);
        assert_eq!(out.told_after_ms.len() as u64, out.waiting_at_t0);
        let s = &sc.settings;
        let worst = s.poll_max_ms * 6 / 5 + sc.fleet.refresh_s * 1_000;
        assert!(out.told_after_ms.last().is_some_and(|&t| t <= worst));
        assert!(out.calibration.count() > 0);
    }

    #[test]
    fn a_run_repeats_with_its_seed() {
        let sc = small();
        let (a, b) = (run(&sc), run(&sc));
        assert_eq!(a.t0_ms, b.t0_ms);
        assert_eq!(a.told_after_ms, b.told_after_ms);
        assert_eq!(a.redis, b.redis);
    }
}
