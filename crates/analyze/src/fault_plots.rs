//! The SVG of a fault campaign's summary (`persim faults`): per fault kind and place, one
//! bar split into the shares masked, detected, silent and crash.

use crate::faults::{FaultOutcome, FaultSummary};
use persim_inspect::plot_error;
use plotters::prelude::*;
use strum::IntoEnumIterator;

const WIDTH: u32 = 900;
/// Pixels per bar, and around the chart.
const ROW: u32 = 36;
const MARGINS: u32 = 140;
/// Pixels of the legend's column, right of the chart.
const LEGEND: u32 = 110;

/// The summary as an SVG document.
pub fn fault_summary_svg(summary: &FaultSummary) -> Result<String, String> {
    let rows = summary.rows.len().max(1);
    let mut svg = String::new();
    {
        let height = MARGINS + ROW * rows as u32;
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let labels: Vec<String> = (summary.rows.iter())
            .map(|r| format!("{} {} ({})", r.kind, r.place, r.faults))
            .collect();
        // The legend beside the chart, not over its bars (they always reach 100 %).
        let (plot, legend) = root.split_horizontally(WIDTH - LEGEND);
        let mut chart = ChartBuilder::on(&plot)
            .caption("Faults by outcome", ("sans-serif", 20))
            .margin(10)
            .margin_right(20)
            .x_label_area_size(40)
            .y_label_area_size(200)
            .build_cartesian_2d(0.0..100.0, 0.0..rows as f64)
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(rows * 2 + 1)
            .y_label_formatter(&|y| {
                // A label at each bar's middle.
                let i = y.floor() as usize;
                match (y.fract() - 0.5).abs() < 1e-6 {
                    true => labels.get(rows - 1 - i).cloned().unwrap_or_default(),
                    false => String::new(),
                }
            })
            .x_desc("share of faults (%)")
            .draw()
            .map_err(plot_error)?;
        for outcome in FaultOutcome::iter() {
            let color = colour(outcome);
            let bars = summary.rows.iter().enumerate().map(|(i, row)| {
                let before: f64 = FaultOutcome::iter()
                    .take_while(|&o| o != outcome)
                    .map(|o| row.share(o))
                    .sum();
                let y = (rows - 1 - i) as f64;
                Rectangle::new(
                    [
                        (100.0 * before, y + 0.15),
                        (100.0 * (before + row.share(outcome)), y + 0.85),
                    ],
                    color.filled(),
                )
            });
            chart.draw_series(bars).map_err(plot_error)?;
        }
        for (i, outcome) in FaultOutcome::iter().enumerate() {
            let y = 50 + 22 * i as i32;
            let swatch = Rectangle::new([(0, y - 6), (15, y + 6)], colour(outcome).filled());
            legend.draw(&swatch).map_err(plot_error)?;
            let name = Text::new(outcome.to_string(), (22, y - 7), ("sans-serif", 14));
            legend.draw(&name).map_err(plot_error)?;
        }
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}

fn colour(outcome: FaultOutcome) -> RGBColor {
    match outcome {
        FaultOutcome::Masked => RGBColor(150, 150, 150),
        FaultOutcome::Corrected => RGBColor(40, 110, 200),
        FaultOutcome::Detected => RGBColor(60, 140, 60),
        FaultOutcome::Silent => RGBColor(220, 120, 0),
        FaultOutcome::Crash => RGBColor(200, 30, 30),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::FaultTally;

    #[test]
    fn the_plot_names_every_row_and_outcome() {
        let tally = |kind: &str, outcome| FaultTally {
            kind: kind.into(),
            place: "metadata".into(),
            outcome,
            bytes_lost: 0,
        };
        let summary = FaultSummary::of(&[
            tally("bitflip", FaultOutcome::Detected),
            tally("scribble:64", FaultOutcome::Silent),
        ]);
        let svg = fault_summary_svg(&summary).unwrap();
        assert!(svg.starts_with("<svg"), "{svg}");
        for text in [
            "bitflip metadata (1)",
            "scribble:64 metadata (1)",
            "masked",
            "corrected",
            "crash",
        ] {
            assert!(svg.contains(text), "{text} missing");
        }
    }
}
