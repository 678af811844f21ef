//! A training run's loss curves.

use crate::export::chart::{self, Axis, LineChart, Series};
use crate::report::RunRecord;

/// A run's loss curves (`<name>_loss_curve` figures of `[x, loss]` or `[x, loss, seconds]`
/// points): loss against updates, and against time when every point has its time.
pub fn loss_charts(run: &RunRecord, width: f64) -> Vec<String> {
    let curves = super::curves(run, "_loss_curve");
    if curves.is_empty() {
        return Vec::new();
    }
    let log = curves.iter().all(|(_, c)| c.iter().all(|p| p.1 > 0.0));
    let y = || {
        Axis::new(
            "loss (as the run reports it)",
            log,
            chart::plain as fn(f64) -> String,
        )
    };
    let mut charts: Vec<String> = LineChart {
        marked: Vec::new(),
        title: format!("{}: loss during training", run.scenario),
        x: Axis::new("parameter updates", false, chart::plain),
        y: y(),
        series: curves
            .iter()
            .map(|(name, c)| Series {
                label: name.clone(),
                points: c.iter().map(|p| (p.0, p.1)).collect(),
                band: Vec::new(),
            })
            .collect(),
    }
    .svg(width)
    .into_iter()
    .collect();
    if curves.iter().all(|(_, c)| c.iter().all(|p| p.2.is_some())) {
        charts.extend(
            LineChart {
                marked: Vec::new(),
                title: format!("{}: loss against time", run.scenario),
                x: Axis::new(
                    "time since training started",
                    false,
                    crate::units::human_time,
                ),
                y: y(),
                series: curves
                    .iter()
                    .map(|(name, c)| Series {
                        label: name.clone(),
                        points: c.iter().map(|p| (p.2.unwrap_or(0.0), p.1)).collect(),
                        band: Vec::new(),
                    })
                    .collect(),
            }
            .svg(width),
        );
    }
    charts
}
