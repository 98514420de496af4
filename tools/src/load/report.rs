//! The report as text: one section per figure, each with the counts it
//! rests on, so a pasted report can be checked.

use std::fmt;

use queuegate_testkit::measure::mean;

use super::figures::{Arm, Report};
use super::visitor::{Outcome, Polling, Route};

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entered = self
            .records
            .iter()
            .filter(|r| r.entered_ms.is_some())
            .count();
        let admitted = self
            .records
            .iter()
            .filter(|r| r.seen_admitted_ms.is_some())
            .count();
        let errors: u32 = self.records.iter().map(|r| r.errors).sum();
        writeln!(f, "# queuegate-load report")?;
        writeln!(f, "machine: {}", self.machine)?;
        writeln!(f, "settings: {}", self.settings)?;
        writeln!(
            f,
            "crowd: {} visitors in {:.1} s · entered {entered} · admitted {admitted} · ordered {} · left {} · refused {} · other {} · still running at the deadline {} · request errors {errors}",
            self.records.len(),
            self.crowd_seconds,
            self.count(Outcome::Ordered),
            self.count(Outcome::Left),
            self.count(Outcome::Refused),
            self.count(Outcome::Other),
            self.count(Outcome::Deadline),
        )?;
        let (peak_waiting, peak_active) = self.peaks();
        let (abandoned, issued) = self
            .samples
            .last()
            .map_or((0, 0), |s| (s.abandoned, s.admitted));
        writeln!(
            f,
            "queue: peak waiting {peak_waiting} · peak active slots {peak_active} of {} · leavers dropped before admission {abandoned} · tokens issued {issued}, of them to visitors who had left {}",
            self.max_active,
            issued.saturating_sub(admitted as u64)
        )?;

        let rt = &self.round_trips;
        writeln!(f, "\n## Redis round trips (counted at the gateway)")?;
        writeln!(
            f,
            "per enter {:.3} ({} requests) · per position {:.3} ({}) · per order {:.3} ({} requests, {} ordered: consume + settle)",
            rt.per_enter(),
            rt.enters,
            rt.per_position(),
            rt.positions,
            rt.per_order(),
            rt.orders,
            rt.ordered
        )?;
        writeln!(
            f,
            "all: {} round trips for {} edge requests = {:.3} per request · by script {:?} · non-script commands {}",
            rt.counters.round_trips,
            rt.enters + rt.positions + rt.orders,
            rt.per_request(),
            rt.counters.by_script(),
            rt.counters.non_script_commands()
        )?;

        writeln!(
            f,
            "script calls that fell back to EVAL (NOSCRIPT, once per script per cold cache): {}",
            rt.counters
                .commands
                .get("EVAL")
                .copied()
                .unwrap_or_default()
        )?;

        writeln!(
            f,
            "\n## Edge latency during the crowd (client side, through wrangler dev)"
        )?;
        let (sent, failed) = self.failures();
        let n_failed: usize = failed.iter().map(|(_, n)| n).sum();
        let kinds: Vec<String> = failed
            .iter()
            .map(|(k, n)| format!("{} {n}", k.label()))
            .collect();
        let [p50, p90, p99, max] = self.latency_all();
        writeln!(
            f,
            "requests: {sent} sent · {n_failed} failed ({:.2} %){} · answered: p50 {p50:.1} ms, p90 {p90:.1} ms, p99 {p99:.1} ms, max {max:.1} ms",
            if sent == 0 { 0.0 } else { n_failed as f64 * 100.0 / sent as f64 },
            if kinds.is_empty() { String::new() } else { format!(": {}", kinds.join(", ")) },
        )?;
        for (name, route) in [
            ("enter", Route::Enter),
            ("position", Route::Position),
            ("order", Route::Order),
        ] {
            let (p50, p99, n) = self.latency(route);
            writeln!(f, "{name}: p50 {p50:.1} ms, p99 {p99:.1} ms ({n} requests)")?;
        }
        let all = self.per_second(|_, _| true);
        let peak = all.iter().map(|p| p.1).fold(0.0, f64::max);
        let busy: Vec<f64> = all.iter().map(|p| p.1).filter(|n| *n > 0.0).collect();
        writeln!(
            f,
            "edge requests/s (1 s buckets): peak {peak:.0}, mean {:.0} over {} busy seconds",
            mean(&busy),
            busy.len()
        )?;

        if let Some(t) = &self.throughput {
            writeln!(
                f,
                "\n## Position requests/s ({} concurrent, {} waiting, queue paused)",
                t.concurrency, t.depth
            )?;
            writeln!(
                f,
                "through the workerd binary → gateway → Redis: {:.0}/s (p50 {:.2} ms, p99 {:.2} ms, {} ok, {} failed)",
                t.worker.rps, t.worker.p50_ms, t.worker.p99_ms, t.worker.ok, t.worker.failed
            )?;
            writeln!(
                f,
                "redis-benchmark EVALSHA position → Redis: {:.0}/s (p50 {:.3} ms, p99 {:.3} ms)",
                t.redis.rps, t.redis.p50_ms, t.redis.p99_ms
            )?;
            writeln!(f, "ratio worker ÷ Redis: {:.4}", t.worker.rps / t.redis.rps)?;
        }

        writeln!(f, "\n## Polling")?;
        let arms: Vec<Arm> = [Polling::Adaptive, Polling::Fixed]
            .into_iter()
            .filter_map(|p| self.arm(p))
            .collect();
        for a in &arms {
            writeln!(
                f,
                "{}: {} visitors, {} admitted ({} with the admitting tick read) · polls per admitted visitor mean {:.2} (p50 {:.0}, p95 {:.0}) · {:.3} polls per second of waiting · admission-notice lag p50 {:.0} ms, p95 {:.0} ms, max {:.0} ms",
                a.polling.label(),
                a.visitors,
                a.admitted,
                a.timed,
                a.polls[0],
                a.polls[1],
                a.polls[2],
                a.polls_per_waiting_second,
                a.lag_ms[0],
                a.lag_ms[1],
                a.lag_ms[2]
            )?;
        }
        if let [adaptive, fixed] = arms.as_slice() {
            writeln!(
                f,
                "ratio polls per admitted visitor fixed ÷ adaptive: {:.2} · per second of waiting: {:.2} · lag p50 adaptive ÷ fixed: {:.2}, p95: {:.2}",
                fixed.polls[0] / adaptive.polls[0],
                fixed.polls_per_waiting_second / adaptive.polls_per_waiting_second,
                adaptive.lag_ms[0] / fixed.lag_ms[0],
                adaptive.lag_ms[1] / fixed.lag_ms[1]
            )?;
        }

        writeln!(f, "\n## ETA at entry vs actual wait")?;
        match self.eta_error() {
            Some(e) => writeln!(
                f,
                "{} visitors: |error| p50 {:.1} s, p95 {:.1} s · median signed error {:+.1} s (positive = ETA too long) · median relative error {:.0} % (waits ≥ 5 s)",
                e.samples,
                e.abs_s[0],
                e.abs_s[1],
                e.bias_s,
                e.rel_p50 * 100.0
            )?,
            None => writeln!(f, "no admitted visitor had an ETA at entry")?,
        }

        writeln!(f, "\n## Admission rate")?;
        match self.realized_rate() {
            Some((rate, span)) => writeln!(
                f,
                "realized {rate:.2}/s vs configured {:.2}/s = {:.4}× (over {span:.1} s with ≥ {} waiting)",
                self.admit_rate,
                rate / self.admit_rate,
                self.admit_rate.ceil()
            )?,
            None => writeln!(f, "the line never held a second's worth of visitors")?,
        }
        Ok(())
    }
}
