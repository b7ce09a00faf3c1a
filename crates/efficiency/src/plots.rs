//! SVG plots of a series in the thesis' style: bandwidth, CPU cost and energy cost over
//! the number of jobs, one line per target (the approach of `persim profile --svg`).

use crate::results::Point;
use plotters::prelude::*;

const SIZE: (u32, u32) = (800, 500);

/// The plots as (file name, SVG text); energy cost only when some point has it.
pub fn series_svgs(points: &[Point]) -> Result<Vec<(&'static str, String)>, String> {
    let mut svgs = vec![
        (
            "bandwidth.svg",
            plot(points, "Bandwidth", "MiB/s", |p| Some(p.bandwidth_mib_s))?,
        ),
        (
            "cpu-cost.svg",
            plot(points, "CPU cost", "CPU s/GiB", |p| Some(p.cpu_s_per_gib))?,
        ),
    ];
    if points.iter().any(|p| p.joules_per_gib.is_some()) {
        svgs.push((
            "energy-cost.svg",
            plot(points, "Energy cost above idle", "J/GiB", |p| {
                p.joules_per_gib
            })?,
        ));
    }
    Ok(svgs)
}

fn plot(
    points: &[Point],
    title: &str,
    unit: &str,
    value: impl Fn(&Point) -> Option<f64>,
) -> Result<String, String> {
    let mut labels: Vec<&str> = points.iter().map(|p| p.target.label.as_str()).collect();
    labels.dedup();
    labels.sort_unstable();
    labels.dedup();
    let max_jobs = points.iter().map(|p| p.jobs).max().unwrap_or(1).max(2);
    let y_max = points
        .iter()
        .filter_map(&value)
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.1;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(1..max_jobs, 0.0..y_max)
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .x_desc("fio jobs")
            .y_desc(unit)
            .draw()
            .map_err(plot_error)?;
        for (i, label) in labels.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let mut line: Vec<(u32, f64)> = points
                .iter()
                .filter(|p| p.target.label == *label)
                .filter_map(|p| Some((p.jobs, value(p)?)))
                .collect();
            line.sort_by_key(|&(j, _)| j);
            chart
                .draw_series(LineSeries::new(line.iter().copied(), color.stroke_width(2)))
                .map_err(plot_error)?
                .label(*label)
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color));
            chart
                .draw_series(line.iter().map(|&p| Circle::new(p, 3, color.filled())))
                .map_err(plot_error)?;
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

fn plot_error(e: impl std::fmt::Display) -> String {
    format!("cannot draw the plot: {e}")
}
