//! SVG plots of a series in the thesis' style: a figure over the number of jobs, one line
//! per target or stack (the approach of `persim profile --svg`). The host series plots
//! bandwidth, CPU cost and energy cost; the guest series its counts.

use crate::results::Point;
use plotters::prelude::*;

const SIZE: (u32, u32) = (800, 500);

/// The plots as (file name, SVG text); energy cost only when some point has it.
pub fn series_svgs(points: &[Point]) -> Result<Vec<(&'static str, String)>, String> {
    let mut svgs = vec![
        (
            "bandwidth.svg",
            plot(
                &lines(points, |p| Some(p.bandwidth_mib_s)),
                "Bandwidth",
                "MiB/s",
            )?,
        ),
        (
            "cpu-cost.svg",
            plot(
                &lines(points, |p| Some(p.cpu_s_per_gib)),
                "CPU cost",
                "CPU s/GiB",
            )?,
        ),
    ];
    if points.iter().any(|p| p.joules_per_gib.is_some()) {
        svgs.push((
            "energy-cost.svg",
            plot(
                &lines(points, |p| p.joules_per_gib),
                "Energy cost above idle",
                "J/GiB",
            )?,
        ));
    }
    Ok(svgs)
}

/// One point of a line: (the line's label, jobs, value).
pub type LinePoint<'a> = (&'a str, u32, f64);

fn lines(points: &[Point], value: impl Fn(&Point) -> Option<f64>) -> Vec<LinePoint<'_>> {
    points
        .iter()
        .filter_map(|p| Some((p.target.label.as_str(), p.jobs, value(p)?)))
        .collect()
}

/// `points` as an SVG plot titled `title` of `unit` over fio jobs, a line per label.
pub fn plot(points: &[LinePoint], title: &str, unit: &str) -> Result<String, String> {
    let mut labels: Vec<&str> = points.iter().map(|p| p.0).collect();
    labels.sort_unstable();
    labels.dedup();
    let max_jobs = points.iter().map(|p| p.1).max().unwrap_or(1).max(2);
    let y_max = points.iter().map(|p| p.2).fold(0.0f64, f64::max).max(1e-9) * 1.1;
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
                .filter(|p| p.0 == *label)
                .map(|p| (p.1, p.2))
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
