//! The look the benchmarks' and load tools' SVG charts share (white canvas,
//! caption, margins, label areas, mesh, legend, palette), set once so the
//! figures in `docs/` read alike. Behind the `charts` feature: only `bench`
//! and `tools` draw, the system tests need not build plotters.

use std::path::Path;

use plotters::chart::MeshStyle;
use plotters::coord::ranged1d::{Ranged, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;

/// The font of every caption, axis label and legend.
pub const FONT: &str = "sans-serif";

/// Series colours in order of use: blue, orange, green. A chart names them
/// by role (`const ADAPTIVE: RGBColor = PALETTE[0]`).
pub const PALETTE: [RGBColor; 3] = [
    RGBColor(0x3b, 0x5b, 0xdb),
    RGBColor(0xe0, 0x6c, 0x00),
    RGBColor(0x2b, 0x8a, 0x3e),
];

/// A drawing area of an SVG chart.
pub type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// What drawing a chart returns (plotters' errors, boxed).
pub type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// A white SVG canvas of `size` pixels, written to `path` on `present()`.
pub fn canvas(path: &Path, size: (u32, u32)) -> Result<Area<'_>, Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE)?;
    Ok(root)
}

/// A chart on `area` with `caption` in `caption_px` type, 12 px margins,
/// 36 px under the x axis for its labels and `y_label_px` beside the y axis
/// (wide enough for the widest y label); `build_cartesian_2d` it.
pub fn axes<'a, 'b>(
    area: &'a Area<'b>,
    caption: &str,
    caption_px: u32,
    y_label_px: u32,
) -> ChartBuilder<'a, 'static, SVGBackend<'b>> {
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(caption, (FONT, caption_px))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(y_label_px);
    builder
}

/// The mesh of `chart` with its axis descriptions and labels in 13 px
/// type; add label formatters if the defaults do not suit, then `draw()`.
pub fn mesh<'a, 'b, DB, X, Y>(
    chart: &'b mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    x_desc: &str,
    y_desc: &str,
) -> MeshStyle<'a, 'b, X, Y, DB>
where
    DB: DrawingBackend,
    X: Ranged + ValueFormatter<X::ValueType>,
    Y: Ranged + ValueFormatter<Y::ValueType>,
{
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(x_desc).y_desc(y_desc).label_style((FONT, 13));
    mesh
}

/// Draws the legend of the series labelled so far at `position`: 13 px
/// type on a white box that lets the lines show through.
pub fn legend<'a, DB, CT>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>>
where
    DB: DrawingBackend + 'a,
    CT: CoordTranslate,
{
    chart
        .configure_series_labels()
        .position(position)
        .label_font((FONT, 13))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .draw()
}

/// A series' mark in the legend: a 20 px line, 2 px wide, in `colour`
/// drawn from the legend's pixel position (for `.legend(swatch(colour))`).
pub fn swatch(colour: impl Color) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    let style = colour.stroke_width(2);
    move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One panel with a line, a limit and a legend, drawn with the helpers.
    fn with_helpers(path: &Path) -> DrawResult {
        let root = canvas(path, (400, 300))?;
        let mut chart = axes(&root, "Waiting", 18, 64).build_cartesian_2d(0.0..10.0, 0.0..5.0)?;
        mesh(&mut chart, "seconds", "visitors")
            .y_label_formatter(&|v| format!("{v:.1}"))
            .draw()?;
        chart
            .draw_series(LineSeries::new(
                [(0.0, 1.0), (10.0, 4.0)],
                PALETTE[0].stroke_width(2),
            ))?
            .label("waiting")
            .legend(swatch(PALETTE[0]));
        chart
            .draw_series(LineSeries::new([(0.0, 3.0), (10.0, 3.0)], BLACK.mix(0.6)))?
            .label("limit")
            .legend(swatch(BLACK.mix(0.6)));
        legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
        root.present()?;
        Ok(())
    }

    /// The same panel in plain plotters calls: the look the charts had
    /// before the helpers, spelled out.
    fn by_hand(path: &Path) -> DrawResult {
        let root = SVGBackend::new(path, (400, 300)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption("Waiting", ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(64)
            .build_cartesian_2d(0.0..10.0, 0.0..5.0)?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc("visitors")
            .y_label_formatter(&|v| format!("{v:.1}"))
            .label_style(("sans-serif", 13))
            .draw()?;
        let blue = RGBColor(0x3b, 0x5b, 0xdb);
        chart
            .draw_series(LineSeries::new(
                [(0.0, 1.0), (10.0, 4.0)],
                blue.stroke_width(2),
            ))?
            .label("waiting")
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], blue.stroke_width(2))
            });
        chart
            .draw_series(LineSeries::new([(0.0, 3.0), (10.0, 3.0)], BLACK.mix(0.6)))?
            .label("limit")
            .legend(|(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], BLACK.mix(0.6).stroke_width(2))
            });
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font(("sans-serif", 13))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()?;
        root.present()?;
        Ok(())
    }

    #[test]
    fn the_helpers_draw_exactly_the_look_spelled_out() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (a, b) = (dir.path().join("helpers.svg"), dir.path().join("hand.svg"));
        with_helpers(&a).expect("drawn with the helpers");
        by_hand(&b).expect("drawn by hand");
        let (a, b) = (
            std::fs::read_to_string(a).expect("svg"),
            std::fs::read_to_string(b).expect("svg"),
        );
        assert!(a.contains(">\nWaiting\n</text>"), "{a}");
        assert!(a.contains("fill=\"#FFFFFF\""), "white canvas: {a}");
        assert_eq!(a, b);
    }
}
