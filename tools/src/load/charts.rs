//! SVG charts of one run (plotters, SVG backend only): the spike seen from
//! Redis, and polling adaptive against fixed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use plotters::prelude::*;
use queuegate_testkit::chart::{self, Area, DrawResult, PALETTE};

use super::figures::Report;
use super::sampler;
use super::visitor::{Polling, Route};

const ADAPTIVE: RGBColor = PALETTE[0];
const FIXED: RGBColor = PALETTE[1];
const LIMIT: RGBColor = RGBColor(0x99, 0x99, 0x99);
const ENTER: RGBColor = PALETTE[2];

/// Writes `load-spike.svg` and `load-polls.svg` into `dir`; their paths.
pub fn write(report: &Report, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let spike = dir.join("load-spike.svg");
    let polls = dir.join("load-polls.svg");
    spike_chart(report, &spike).map_err(|e| anyhow::anyhow!("{}: {e}", spike.display()))?;
    polls_chart(report, &polls).map_err(|e| anyhow::anyhow!("{}: {e}", polls.display()))?;
    Ok(vec![spike, polls])
}

/// A named, coloured line of (x, y) points.
pub(crate) type Line<'a> = (&'a str, RGBColor, &'a [(f64, f64)]);

/// Waiting, admitted/s, active slots and edge requests/s over the run,
/// one panel each.
fn spike_chart(report: &Report, path: &Path) -> DrawResult {
    let root = chart::canvas(path, (960, 1080))?;
    let panels = root.split_evenly((4, 1));
    let s = &report.samples;
    let x_max = s.last().map_or(1.0, |l| l.t_s).max(1.0);
    let waiting: Vec<(f64, f64)> = s.iter().map(|x| (x.t_s, x.waiting as f64)).collect();
    let active: Vec<(f64, f64)> = s.iter().map(|x| (x.t_s, x.active as f64)).collect();
    let rate = sampler::admitted_per_second(s, Duration::from_secs(1));
    let configured = report.admit_rate;
    let max_active = report.max_active as f64;
    panel(
        &panels[0],
        "Visitors waiting (queue depth)",
        x_max,
        "waiting",
        &[("waiting", ADAPTIVE, &waiting)],
        None,
    )?;
    panel(
        &panels[1],
        "Admitted per second (1 s windows)",
        x_max,
        "admitted/s",
        &[("admitted/s", ADAPTIVE, &rate)],
        Some(("configured rate", configured)),
    )?;
    panel(
        &panels[2],
        "Order slots in use (active)",
        x_max,
        "active slots",
        &[("active", ADAPTIVE, &active)],
        Some(("max_active", max_active)),
    )?;
    let enters = report.per_second(|_, route| route == Route::Enter);
    let adaptive =
        report.per_second(|r, route| route == Route::Position && r.polling == Polling::Adaptive);
    let fixed =
        report.per_second(|r, route| route == Route::Position && r.polling == Polling::Fixed);
    let mut series: Vec<Line<'_>> = vec![("enter", ENTER, &enters)];
    if adaptive.iter().any(|p| p.1 > 0.0) {
        series.push(("position, adaptive visitors", ADAPTIVE, &adaptive));
    }
    if fixed.iter().any(|p| p.1 > 0.0) {
        series.push(("position, fixed-2 s visitors", FIXED, &fixed));
    }
    panel(
        &panels[3],
        "Edge requests per second (1 s buckets)",
        x_max,
        "requests/s",
        &series,
        None,
    )?;
    root.present()?;
    Ok(())
}

/// One time-series panel with an optional dashed limit line.
pub(crate) fn panel(
    area: &Area<'_>,
    title: &str,
    x_max: f64,
    y_desc: &str,
    series: &[Line<'_>],
    limit: Option<(&str, f64)>,
) -> DrawResult {
    let data_max = series
        .iter()
        .flat_map(|(_, _, pts)| pts.iter().map(|p| p.1))
        .fold(0.0, f64::max);
    let y_max = (data_max.max(limit.map_or(0.0, |l| l.1)) * 1.15).max(1.0);
    let mut chart = chart::axes(area, title, 18, 64).build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    chart::mesh(&mut chart, "seconds since the spike began", y_desc)
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()?;
    // The limit first, so the data line stays visible where they meet.
    if let Some((label, value)) = limit {
        chart
            .draw_series(DashedLineSeries::new(
                [(0.0, value), (x_max, value)],
                8,
                5,
                LIMIT.stroke_width(2),
            ))?
            .label(label)
            .legend(chart::swatch(LIMIT));
    }
    for (label, color, pts) in series {
        let color = *color;
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))?
            .label(*label)
            .legend(chart::swatch(color));
    }
    chart::legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    Ok(())
}

/// Left: polls until admission by actual wait, adaptive vs fixed. Right:
/// the admission-notice lag's distribution for both.
fn polls_chart(report: &Report, path: &Path) -> DrawResult {
    let root = chart::canvas(path, (1080, 440))?;
    let (left, right) = root.split_horizontally(560);
    let arms = [(Polling::Adaptive, ADAPTIVE), (Polling::Fixed, FIXED)];

    // Left: mean polls per admitted visitor in 5 s bins of actual wait.
    let bin = 5.0;
    let mut lines = Vec::new();
    for (polling, color) in arms {
        let mut bins: Vec<(f64, f64)> = Vec::new();
        for r in report.records.iter().filter(|r| r.polling == polling) {
            let (Some(entered), Some(issued)) = (r.entered_ms, r.issued_ms) else {
                continue;
            };
            let wait = issued.saturating_sub(entered) as f64 / 1e3;
            let i = (wait / bin) as usize;
            if bins.len() <= i {
                bins.resize(i + 1, (0.0, 0.0));
            }
            bins[i].0 += r.polls as f64;
            bins[i].1 += 1.0;
        }
        let pts: Vec<(f64, f64)> = bins
            .iter()
            .enumerate()
            .filter(|(_, (_, n))| *n >= 3.0)
            .map(|(i, (sum, n))| ((i as f64 + 0.5) * bin, sum / n))
            .collect();
        if !pts.is_empty() {
            lines.push((polling, color, pts));
        }
    }
    let x_max = lines
        .iter()
        .flat_map(|(_, _, p)| p.iter().map(|q| q.0))
        .fold(bin, f64::max)
        + bin / 2.0;
    let y_max = lines
        .iter()
        .flat_map(|(_, _, p)| p.iter().map(|q| q.1))
        .fold(1.0, f64::max)
        * 1.15;
    let mut chart = chart::axes(&left, "Polls until admitted, by wait", 18, 56)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    chart::mesh(
        &mut chart,
        "actual wait (s), 5 s bins",
        "mean polls per admitted visitor",
    )
    .x_label_formatter(&|v| format!("{v:.0}"))
    .y_label_formatter(&|v| format!("{v:.0}"))
    .draw()?;
    for (polling, color, pts) in &lines {
        let color = *color;
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))?
            .label(polling.label())
            .legend(chart::swatch(color));
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    }
    chart::legend(&mut chart, SeriesLabelPosition::UpperLeft)?;

    // Right: share of admitted visitors who noticed within x ms.
    let mut cdfs = Vec::new();
    for (polling, color) in arms {
        let mut lag: Vec<f64> = report
            .records
            .iter()
            .filter(|r| r.polling == polling)
            .filter_map(|r| Some(r.seen_admitted_ms?.saturating_sub(r.issued_ms?) as f64))
            .collect();
        lag.sort_by(f64::total_cmp);
        let n = lag.len() as f64;
        let pts: Vec<(f64, f64)> = lag
            .iter()
            .enumerate()
            .map(|(i, &ms)| (ms, (i + 1) as f64 / n))
            .collect();
        if !pts.is_empty() {
            cdfs.push((polling, color, pts));
        }
    }
    let x_max = cdfs
        .iter()
        .flat_map(|(_, _, p)| p.iter().map(|q| q.0))
        .fold(100.0, f64::max)
        * 1.05;
    let mut chart = chart::axes(&right, "Admission-notice lag", 18, 56)
        .build_cartesian_2d(0.0..x_max, 0.0..1.0)?;
    chart::mesh(
        &mut chart,
        "ms from the admitting tick to the visitor seeing it",
        "share of admitted visitors",
    )
    .x_label_formatter(&|v| format!("{v:.0}"))
    .y_label_formatter(&|v| format!("{v:.1}"))
    .draw()?;
    for (polling, color, pts) in &cdfs {
        let color = *color;
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))?
            .label(polling.label())
            .legend(chart::swatch(color));
    }
    chart::legend(&mut chart, SeriesLabelPosition::LowerRight)?;
    root.present()?;
    Ok(())
}

/// The chaos run's timeline (`load-chaos.svg`): the line and the
/// pre-queue, the slots held against `max_active`, the admissions so far,
/// and each fault as a mark on its kind's row, all on one time axis.
pub(crate) fn chaos_chart(
    report: &super::chaos::ChaosReport,
    max_active: u64,
    path: &Path,
) -> DrawResult {
    let root = chart::canvas(path, (960, 1160))?;
    let (top, bottom) = root.split_vertically(840);
    let panels = top.split_evenly((3, 1));
    let s = &report.samples;
    let x_max = s.last().map_or(1.0, |l| l.t_s).max(1.0);
    let waiting: Vec<(f64, f64)> = s.iter().map(|x| (x.t_s, x.waiting as f64)).collect();
    let pre: Vec<(f64, f64)> = s.iter().map(|x| (x.t_s, x.pre as f64)).collect();
    let active: Vec<(f64, f64)> = s.iter().map(|x| (x.t_s, x.active as f64)).collect();
    let admitted: Vec<(f64, f64)> = s.iter().map(|x| (x.t_s, x.admitted as f64)).collect();
    panel(
        &panels[0],
        "Visitors in line and pre-queued (read from Redis every 100 ms)",
        x_max,
        "visitors",
        &[("waiting", ADAPTIVE, &waiting), ("pre-queued", FIXED, &pre)],
        None,
    )?;
    panel(
        &panels[1],
        "Order slots in use",
        x_max,
        "active slots",
        &[("active", ADAPTIVE, &active)],
        Some(("max_active", max_active as f64)),
    )?;
    panel(
        &panels[2],
        "Admitted so far",
        x_max,
        "admitted",
        &[("admitted", ENTER, &admitted)],
        None,
    )?;
    let rows = super::chaos::chart_rows();
    let mut faults = chart::axes(&bottom, "Faults injected", 18, 250)
        .build_cartesian_2d(0.0..x_max, -0.5..(rows.len() as f64 - 0.5))?;
    chart::mesh(&mut faults, "seconds since the start", "")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_labels(rows.len())
        .y_label_formatter(&|v| {
            let i = v.round();
            if (v - i).abs() > 0.01 || i < 0.0 {
                return String::new();
            }
            rows.get(i as usize)
                .map_or(String::new(), |k| k.label().to_string())
        })
        .draw()?;
    for (row, kind) in rows.iter().enumerate() {
        faults.draw_series(report.injected.iter().filter(|f| f.kind == *kind).map(|f| {
            Rectangle::new(
                [
                    (f.at_s, row as f64 - 0.3),
                    // At least a 300th of the axis: a kill is instant.
                    (f.at_s + f.lasted_s.max(x_max / 300.0), row as f64 + 0.3),
                ],
                PALETTE[1].filled(),
            )
        }))?;
    }
    root.present()?;
    Ok(())
}
