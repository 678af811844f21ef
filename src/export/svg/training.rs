//! A training run's loss curves.

use crate::export::chart::{self, Axis, LineChart, Series};
use crate::report::RunRecord;

/// A run's loss curves (`<name>_loss_curve` figures of `[x, loss]` or `[x, loss, seconds]`
/// points): loss against updates, and against time when every point has its time.
pub fn loss_charts(run: &RunRecord, width: f64) -> Vec<String> {
    let curves = super::curves(run, "_loss_curve");
    let log = curves.iter().all(|(_, c)| c.iter().all(|p| p.1 > 0.0));
    let timed = curves.iter().all(|(_, c)| c.iter().all(|p| p.2.is_some()));
    let updates = Axis::new("parameter updates", false, chart::plain);
    let time = Axis::new(
        "time since training started",
        false,
        crate::units::human_time,
    );
    // Each chart: what it shows, its x axis, and a point's x on it.
    type Against = (&'static str, Axis, fn(&super::Point) -> f64);
    let charts: [Against; 2] = [
        ("loss during training", updates, |p| p.0),
        ("loss against time", time, |p| p.2.unwrap_or(0.0)),
    ];
    // No curve, no chart: a chart of no line is `None`.
    charts
        .into_iter()
        .take(1 + usize::from(timed))
        .filter_map(|(what, x, pick)| {
            let series = curves
                .iter()
                .map(|(name, c)| Series::line(name, c.iter().map(|p| (pick(p), p.1)).collect()))
                .collect();
            let y = Axis::new("loss (as the run reports it)", log, chart::plain);
            LineChart::new(format!("{}: {what}", run.scenario), x, y, series).svg(width)
        })
        .collect()
}
