//! Pictures of a report (SVG, drawn with `chart/`): time against the swept parameter, a line
//! per variant with the 95% CI of its median as a band, and the sweep's rates (GFLOP/s, GB/s)
//! against it; loss curves of a training run; the variants' medians as bars with 95% CI
//! whiskers (on a log axis when they span more than 30×); the lane timelines of a traced
//! repeat (on one time axis where the lesson compares lengths); `memory`'s live bytes over an
//! epoch; a training run's throughput against its devices with the ideal line; an
//! all-reduce's bus bandwidth against message size. `plot` draws one of
//! them (a training report: its throughput
//! and loss charts, stacked), the HTML report all that apply.

use serde_json::Value;

use super::chart::{self};
use crate::report::{Report, RunRecord};

/// Why a report cannot be drawn.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("the report has no runs to plot")]
    Empty,
}

/// The x axis: the sweep's first numeric axis, or else the first parameter that varies
/// between the runs and is a number.
fn numeric_axis(report: &Report, runs: &[&RunRecord]) -> Option<String> {
    let first = runs.first()?;
    let values = |k: &String| -> Vec<Option<f64>> {
        let value = |r: &&RunRecord| r.parameters.get(k).and_then(Value::as_f64);
        runs.iter().map(value).collect()
    };
    let numeric = |k: &String| values(k).iter().all(Option::is_some);
    if let Some(sweep) = &report.sweep {
        let axis = sweep
            .axes
            .iter()
            .find(|(name, values)| values.len() > 1 && numeric(name));
        if let Some((name, _)) = axis {
            return Some(name.clone());
        }
    }
    let varies = |k: &String| values(k).windows(2).any(|w| w[0] != w[1]);
    first
        .parameters
        .keys()
        .find(|k| numeric(k) && varies(k))
        .cloned()
}

/// The scenarios of `report` that a chart of it leaves out (it draws one scenario).
pub fn left_out(report: &Report) -> Vec<String> {
    let main = main_scenario(report);
    let others = report.runs.iter().map(|r| &r.scenario);
    super::unique(others.filter(|s| Some(s.as_str()) != main).cloned())
}

/// The scenario a chart of `report` draws: the swept one, or the first run's.
pub fn main_scenario(report: &Report) -> Option<&str> {
    match &report.sweep {
        Some(sweep) => Some(&sweep.scenario),
        None => report.runs.first().map(|r| r.scenario.as_str()),
    }
}

/// Width of a chart drawn by `plot`.
const PLOT_WIDTH: f64 = 900.0;

/// Draw `report` as SVG text: the sweep's time chart, a run's loss curves, or its variants as
/// bars.
pub fn svg(report: &Report) -> Result<String, PlotError> {
    let scenario = main_scenario(report).ok_or(PlotError::Empty)?;
    let runs = runs_of(report, scenario);
    let first = runs.first().copied().ok_or(PlotError::Empty)?;
    if let Some(scaling) = scaling_chart(&runs, PLOT_WIDTH) {
        let mut charts = vec![scaling];
        if runs.len() == 1 {
            charts.extend(loss_charts(first, PLOT_WIDTH));
        }
        return Ok(stack(&charts));
    }
    let chart = match numeric_axis(report, &runs) {
        Some(axis) => sweep_charts(scenario, &axis, &runs, PLOT_WIDTH)
            .into_iter()
            .next(),
        None => loss_charts(first, PLOT_WIDTH)
            .into_iter()
            .next()
            .or_else(|| busbw_chart(first, PLOT_WIDTH))
            .or_else(|| variant_bars(first, PLOT_WIDTH)),
    };
    chart.ok_or(PlotError::Empty)
}

/// A count's tick label: whole numbers only (no tick reads "1.25 devices").
fn whole(v: f64) -> String {
    if v.fract() == 0.0 {
        chart::plain(v)
    } else {
        String::new()
    }
}

/// Charts one above the other, as one SVG.
fn stack(charts: &[String]) -> String {
    let size = |svg: &str, attr: &str| -> f64 {
        svg.split_once(&format!("{attr}=\""))
            .and_then(|(_, rest)| rest.split('"').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    };
    let width = charts.iter().map(|c| size(c, "width")).fold(0.0, f64::max);
    let mut out = String::new();
    let mut y = 0.0;
    for c in charts {
        out.push_str(&c.replacen("<svg ", &format!("<svg y=\"{y:.0}\" "), 1));
        y += size(c, "height");
    }
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{y:.0}\" \
         viewBox=\"0 0 {width:.0} {y:.0}\">{out}</svg>"
    )
}

/// The swept axis of `report`'s runs of `scenario`, and those runs, when the report is a sweep
/// (or its runs differ in a numeric parameter).
pub fn sweep_of<'a>(report: &'a Report, scenario: &str) -> Option<(String, Vec<&'a RunRecord>)> {
    let runs = runs_of(report, scenario);
    if runs.len() < 2 {
        return None;
    }
    numeric_axis(report, &runs).map(|axis| (axis, runs))
}

fn runs_of<'a>(report: &'a Report, scenario: &str) -> Vec<&'a RunRecord> {
    report
        .runs
        .iter()
        .filter(|r| r.scenario == scenario)
        .collect()
}

/// `scenario[…]` without the brackets: the parameters as `k=v, …`.
pub fn describe_parameters(run: &RunRecord) -> String {
    let pairs = run.parameters.iter().map(|(k, v)| parameter(k, Some(v)));
    pairs.collect::<Vec<_>>().join(", ")
}

/// A parameter as `k=v`, a string without its quotes; `k=?` where the run has none.
fn parameter(k: &str, v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => format!("{k}={s}"),
        Some(v) => format!("{k}={v}"),
        None => format!("{k}=?"),
    }
}

/// A point of a series a run recorded in `derived`: `[x, y]` or `[x, y, seconds]`.
type Point = (f64, f64, Option<f64>);

/// A series a run recorded in `derived`.
type Curve = Vec<Point>;

/// The run's series `<name><suffix>` (a loss curve, bus bandwidth, live bytes), each named as
/// its variant is (`one_device` → `one-device`); those without a point are left out.
fn curves(run: &RunRecord, suffix: &str) -> Vec<(String, Curve)> {
    run.derived
        .iter()
        .filter_map(|(k, v)| {
            let name = k.strip_suffix(suffix)?;
            let points: Curve = v
                .as_array()?
                .iter()
                .filter_map(|p| {
                    let third = p.get(2).and_then(Value::as_f64);
                    Some((p.get(0)?.as_f64()?, p.get(1)?.as_f64()?, third))
                })
                .collect();
            (!points.is_empty()).then(|| (name.replace('_', "-"), points))
        })
        .collect()
}

mod bandwidth;
mod bars;
mod memory;
mod sweep;
mod timeline;
mod training;

pub use bandwidth::busbw_chart;
pub use bars::{comparison_bars, variant_bars};
pub use memory::memory_chart;
pub use sweep::{scaling_chart, sweep_charts};
pub use timeline::{timeline_chart, timeline_note};
pub use training::loss_charts;

#[cfg(test)]
mod tests;
