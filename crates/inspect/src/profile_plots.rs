//! SVG plots of a [`Profile`] (`persim profile --svg DIR`): bytes over time by kind, fence
//! epochs by size, and a heat map of the bytes written per region of PM.

use crate::profile::Profile;
use plotters::prelude::*;

/// Cells per side of the heat map.
const HEAT_CELLS: u64 = 64;
const SIZE: (u32, u32) = (900, 500);

/// The plots as (file name, SVG text).
pub fn profile_svgs(profile: &Profile) -> Result<Vec<(&'static str, String)>, String> {
    Ok(vec![
        ("bytes-over-time.svg", bytes_over_time(profile)?),
        ("epoch-sizes.svg", epoch_sizes(profile)?),
        ("written-lines.svg", written_lines(profile)?),
    ])
}

fn bytes_over_time(profile: &Profile) -> Result<String, String> {
    let timeline = &profile.series.timeline;
    let last = timeline.last().copied().unwrap_or((1, 0, 0));
    let kib = |b: u64| b as f64 / 1024.0;
    let y_max = kib(last.1.max(last.2)).max(1.0) * 1.05;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let mut chart = ChartBuilder::on(&root)
            .caption("PM bytes stored over the trace", ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0..last.0.max(1), 0.0..y_max)
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .x_desc("trace entry")
            .y_desc("KiB stored (cumulative)")
            .draw()
            .map_err(plot_error)?;
        let series = [("cached", BLUE, 1usize), ("non-temporal", RED, 2)];
        for (name, color, column) in series {
            let points = timeline.iter().map(|p| {
                let bytes = if column == 1 { p.1 } else { p.2 };
                (p.0, kib(bytes))
            });
            chart
                .draw_series(LineSeries::new(points, color.stroke_width(2)))
                .map_err(plot_error)?
                .label(name)
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color));
        }
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE)
            .draw()
            .map_err(plot_error)?;
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

fn epoch_sizes(profile: &Profile) -> Result<String, String> {
    let sizes = &profile.series.epoch_sizes;
    let buckets: Vec<(u32, u64)> = sizes.iter().map(|(k, n)| (*k, *n)).collect();
    let max_bucket = buckets.iter().map(|b| b.0).max().unwrap_or(0);
    let y_max = buckets.iter().map(|b| b.1).max().unwrap_or(1) * 11 / 10 + 1;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let mut chart = ChartBuilder::on(&root)
            .caption("Fence epochs by bytes written", ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((0..max_bucket + 1).into_segmented(), 0..y_max)
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .x_desc("bytes written in the epoch, at most (power of two)")
            .y_desc("epochs")
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(k) | SegmentValue::Exact(k) => format!("{}", 1u64 << k),
                SegmentValue::Last => String::new(),
            })
            .draw()
            .map_err(plot_error)?;
        chart
            .draw_series(
                Histogram::vertical(&chart)
                    .style(BLUE.filled())
                    .margin(2)
                    .data(buckets.iter().copied()),
            )
            .map_err(plot_error)?;
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

fn written_lines(profile: &Profile) -> Result<String, String> {
    let lines = &profile.series.line_bytes;
    let (first, last) = match (lines.keys().next(), lines.keys().next_back()) {
        (Some(&f), Some(&l)) => (f, l),
        _ => (0, 0),
    };
    // row-major cells of equal shares of the written address range
    let cells = HEAT_CELLS * HEAT_CELLS;
    let span = (last - first) / 64 + 1;
    let lines_per_cell = span.div_ceil(cells).max(1);
    let mut heat = vec![0u64; cells as usize];
    for (&line, &bytes) in lines {
        heat[((line - first) / 64 / lines_per_cell) as usize] += bytes;
    }
    let hottest = heat.iter().copied().max().unwrap_or(0).max(1) as f64;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (700, 700)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let caption = format!(
            "Bytes written per PM region: {first:#x}..{:#x}, {} lines per cell",
            last + 64,
            lines_per_cell
        );
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(40)
            .build_cartesian_2d(0..HEAT_CELLS, 0..HEAT_CELLS)
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc("cell in row")
            .y_desc("row")
            .draw()
            .map_err(plot_error)?;
        chart
            .draw_series(
                heat.iter()
                    .enumerate()
                    .filter(|(_, &b)| b > 0)
                    .map(|(i, &b)| {
                        let (row, col) = (i as u64 / HEAT_CELLS, i as u64 % HEAT_CELLS);
                        // log scale: a few hot lines must not hide the rest
                        let level = (b as f64).ln_1p() / hottest.ln_1p();
                        let shade = (255.0 * (1.0 - level)) as u8;
                        Rectangle::new(
                            [(col, row), (col + 1, row + 1)],
                            RGBColor(255, shade, 0).filled(),
                        )
                    }),
            )
            .map_err(plot_error)?;
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

pub fn plot_error(e: impl std::fmt::Display) -> String {
    format!("drawing a plot: {e}")
}
