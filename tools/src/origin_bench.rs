//! The origin-control figure (`queuegate-origin-bench`): one crowd through
//! the whole room while the demo shop fails every order for a spell in the
//! middle, run once with origin control and once without (same shape); a
//! chart of both and the orders that reached the failing shop.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use plotters::prelude::*;
use queuegate_shared::fields::stats;
use queuegate_testkit::chart::{self, DrawResult, PALETTE};

use crate::crowd;
use crate::load::charts::panel;
use crate::load::tally::Tally;
use crate::stack::{Edge, Stack, StackOptions};

/// The run's shape.
#[derive(Debug, Clone)]
pub struct Options {
    /// Visitors in the crowd.
    pub crowd: u64,
    /// Seconds over which they arrive.
    pub ramp_s: u64,
    /// `admit_rate_per_second` (the maximum).
    pub admit_rate: f64,
    /// `min_admit_rate_per_second`.
    pub min_rate: f64,
    /// Order slots.
    pub max_active: u64,
    /// When the shop starts failing every order, seconds into the run.
    pub fail_at_s: u64,
    /// For how long.
    pub fail_for_s: u64,
    /// Length of the run.
    pub run_s: u64,
}

/// One sample a second.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Seconds into the run.
    pub t_s: f64,
    /// The scheduler's target rate.
    pub target: f64,
    /// The `admitted` counter.
    pub admitted: u64,
    /// Slots in use.
    pub active: u64,
    /// The error share the scheduler saw (0 without answers).
    pub error_share: f64,
}

/// One run's record.
#[derive(Debug, Clone)]
pub struct Run {
    /// With origin control?
    pub control: bool,
    /// The samples.
    pub samples: Vec<Sample>,
    /// Orders the shop answered 503 (they reached the failing origin).
    pub failed_orders: u64,
    /// Orders the shop accepted.
    pub orders: u64,
}

const TARGET: &str = "queuegate_target_admit_rate_per_second{queue=\"main\"}";
const ERRORS: &str = "queuegate_origin_error_share{queue=\"main\"}";

/// Runs the shape once; every process stops when this returns.
pub async fn run(opts: &Options, control: bool) -> anyhow::Result<Run> {
    let stack = Stack::start(&StackOptions {
        // Its figures (and BENCHMARKS.md's) were taken through wrangler dev.
        edge: Edge::Wrangler,
        port: 0,
        admit_rate: opts.admit_rate,
        max_active: opts.max_active,
        settings: vec![
            ("origin_control".into(), control.to_string()),
            (
                "min_admit_rate_per_second".into(),
                opts.min_rate.to_string(),
            ),
            // Visitors see their turn within 4 s, so admitted ones order
            // inside a short run instead of holding slots unseen.
            ("poll_max_ms".into(), "4000".into()),
        ],
        gateway_request_log: false,
        entry_budget: Some(0),
        challenge_difficulty: None,
        entry_challenge: Some("off"),
        origin: Default::default(),
        turnstile_stand_in: false,
        signed_in_token_lifetime_s: None,
        persistence: false,
    })
    .await?;
    let (keys, mut conn) = stack.main_queue().await?;
    let http = reqwest::Client::new();
    let crowd = tokio::spawn(crowd::run(
        stack.worker.url(),
        opts.crowd,
        Duration::from_secs(opts.ramp_s),
        0.0,
        Duration::from_secs(opts.run_s),
        Arc::new(Tally::default()),
    ));
    let start = Instant::now();
    let mut samples = Vec::new();
    let mut failing = false;
    let shop = stack.shop_url.clone();
    for second in 1..=opts.run_s {
        tokio::time::sleep_until((start + Duration::from_secs(second)).into()).await;
        let fail = (opts.fail_at_s..opts.fail_at_s + opts.fail_for_s).contains(&second);
        if fail != failing {
            failing = fail;
            let rate = if fail { 1.0 } else { 0.0 };
            http.post(format!("{shop}/_demo/conditions"))
                .json(&serde_json::json!({ "errorRate": rate }))
                .send()
                .await?
                .error_for_status()?;
        }
        let admitted: Option<u64> = redis::cmd("HGET")
            .arg(keys.stats())
            .arg(stats::ADMITTED)
            .query_async(&mut conn)
            .await?;
        let active: u64 = redis::cmd("ZCARD")
            .arg(keys.active())
            .query_async(&mut conn)
            .await?;
        let scheduler = &stack.scheduler;
        let target = scheduler.metric(TARGET).unwrap_or(opts.admit_rate);
        samples.push(Sample {
            t_s: start.elapsed().as_secs_f64(),
            target,
            admitted: admitted.unwrap_or(0),
            active,
            error_share: scheduler.metric(ERRORS).unwrap_or(0.0),
        });
    }
    crowd.abort();
    let shop_says: serde_json::Value = http
        .get(format!("{shop}/_demo/conditions"))
        .send()
        .await?
        .json()
        .await?;
    Ok(Run {
        control,
        samples,
        failed_orders: shop_says["failed"].as_u64().unwrap_or(0),
        orders: shop_says["orders"].as_u64().unwrap_or(0),
    })
}

/// Admitted per second between samples.
fn admitted_rate(s: &[Sample]) -> Vec<(f64, f64)> {
    s.windows(2)
        .map(|w| {
            let dt = (w[1].t_s - w[0].t_s).max(1e-3);
            (w[1].t_s, (w[1].admitted - w[0].admitted) as f64 / dt)
        })
        .collect()
}

const WITH: RGBColor = PALETTE[0];
const WITHOUT: RGBColor = PALETTE[1];
const TARGET_COLOUR: RGBColor = PALETTE[2];

/// Target rate, admitted/s, error share and active slots of both runs,
/// one panel each, as SVG.
pub fn chart(opts: &Options, with: &Run, without: &Run, path: &Path) -> DrawResult {
    let root = chart::canvas(path, (960, 1080))?;
    let panels = root.split_evenly((4, 1));
    let x_max = opts.run_s as f64;
    let line = |r: &Run, f: fn(&Sample) -> f64| -> Vec<(f64, f64)> {
        r.samples.iter().map(|s| (s.t_s, f(s))).collect()
    };
    let target = line(with, |s| s.target);
    let (rate_with, rate_without) = (
        admitted_rate(&with.samples),
        admitted_rate(&without.samples),
    );
    let share = line(with, |s| s.error_share * 100.0);
    let (active_with, active_without) = (
        line(with, |s| s.active as f64),
        line(without, |s| s.active as f64),
    );
    let failing = format!(
        "shop fails every order from {} s to {} s",
        opts.fail_at_s,
        opts.fail_at_s + opts.fail_for_s
    );
    panel(
        &panels[0],
        &format!("Target admission rate, with origin control ({failing})"),
        x_max,
        "admissions/s",
        &[("target rate", TARGET_COLOUR, &target)],
        Some(("admit_rate_per_second", opts.admit_rate)),
    )?;
    panel(
        &panels[1],
        "Admitted per second",
        x_max,
        "admitted/s",
        &[
            ("with origin control", WITH, &rate_with),
            ("without", WITHOUT, &rate_without),
        ],
        None,
    )?;
    panel(
        &panels[2],
        "Origin error share seen by the scheduler (with origin control)",
        x_max,
        "% 5xx or no answer",
        &[("error share", WITH, &share)],
        None,
    )?;
    panel(
        &panels[3],
        "Order slots in use",
        x_max,
        "active slots",
        &[
            ("with origin control", WITH, &active_with),
            ("without", WITHOUT, &active_without),
        ],
        Some(("max_active", opts.max_active as f64)),
    )?;
    root.present()?;
    Ok(())
}

/// The figures as a Markdown table.
pub fn table(opts: &Options, runs: &[&Run]) -> String {
    let mut out = String::from(
        "| run | admitted | orders accepted | orders that hit the failing shop | lowest target/s | admitted during the failure | back at the maximum |\n|---|---|---|---|---|---|---|\n",
    );
    let (from, to) = (
        opts.fail_at_s as f64,
        (opts.fail_at_s + opts.fail_for_s) as f64,
    );
    for r in runs {
        let admitted = r.samples.last().map_or(0, |s| s.admitted);
        let at = |t: f64| {
            r.samples
                .iter()
                .find(|s| s.t_s >= t)
                .map_or(admitted, |s| s.admitted)
        };
        let lowest = r.samples.iter().map(|s| s.target).fold(f64::MAX, f64::min);
        let back = r
            .samples
            .iter()
            .find(|s| s.t_s > to && s.target >= opts.admit_rate)
            .map_or("not within the run".to_string(), |s| {
                format!("{:.0} s after recovery", s.t_s - to)
            });
        out.push_str(&format!(
            "| {} | {admitted} | {} | {} | {lowest:.1} | {} | {back} |\n",
            if r.control {
                "origin control on"
            } else {
                "origin control off (fixed rate)"
            },
            r.orders,
            r.failed_orders,
            at(to) - at(from),
        ));
    }
    out
}
