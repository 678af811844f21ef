//! The variants' medians as bars with 95% CI whiskers, on a log axis when they span more than 30×;
//! two reports' side by side.

use crate::export::chart::{Axis, Bar, BarChart};
use crate::report::RunRecord;

/// A run's variants as bars: the median time, whiskers at the 95% CI of the median. Medians
/// that span more than [`LOG_SPREAD`]× go on a log axis, so a 100 ms variant does not flatten
/// microsecond ones to nothing; each variant's label (what it times, a pitfall) is written
/// under its bar.
pub fn variant_bars(run: &RunRecord, width: f64) -> Option<String> {
    let medians: Vec<f64> = run.variants.iter().map(|v| v.summary.median_s).collect();
    BarChart {
        title: format!("{}: median time per variant", run.scenario),
        axis: time_axis(&medians),
        whisker: ci_caption(run),
        groups: Vec::new(),
        rows: run
            .variants
            .iter()
            .map(|v| (v.name.clone(), vec![Some(Bar::median_of(&v.summary))]))
            .collect(),
        notes: run
            .variants
            .iter()
            .map(|v| v.label.clone().unwrap_or_default())
            .collect(),
    }
    .svg(width)
}

/// Largest over smallest median beyond which bars of times go on a log axis.
pub const LOG_SPREAD: f64 = 30.0;

/// The axis of bars of median times: logarithmic when they span more than [`LOG_SPREAD`]×.
fn time_axis(medians: &[f64]) -> Axis {
    let positive = || {
        medians
            .iter()
            .copied()
            .filter(|m| m.is_finite() && *m > 0.0)
    };
    let (lo, hi) = (
        positive().fold(f64::INFINITY, f64::min),
        positive().fold(0.0, f64::max),
    );
    let log = lo.is_finite() && hi / lo > LOG_SPREAD;
    Axis::new("time per round (median)", log, crate::units::human_time)
}

/// What the whiskers show; with 5 samples or fewer the interval is min–max (see `Summary`).
fn ci_caption(run: &RunRecord) -> String {
    let few = run.variants.iter().any(|v| v.summary.samples_s.len() <= 5);
    if few {
        "95% CI of the median (min–max with 5 samples or fewer)".into()
    } else {
        "95% CI of the median".into()
    }
}

/// Two runs of the same entry side by side: a row per variant, baseline and new bars.
pub fn comparison_bars(
    base: &RunRecord,
    new: &RunRecord,
    names: [&str; 2],
    width: f64,
) -> Option<String> {
    let variants = crate::export::table::variant_names([base, new]);
    let find = |run: &RunRecord, name: &str| {
        run.variants
            .iter()
            .find(|v| v.name == name)
            .map(|v| Bar::median_of(&v.summary))
    };
    let rows: Vec<(String, Vec<Option<Bar>>)> = variants
        .into_iter()
        .map(|v| (v.to_string(), vec![find(base, v), find(new, v)]))
        .collect();
    let medians: Vec<f64> = rows
        .iter()
        .flat_map(|r| r.1.iter().flatten().map(|b| b.value))
        .collect();
    BarChart {
        title: format!("{}: baseline vs new", base.scenario),
        axis: time_axis(&medians),
        whisker: ci_caption(base),
        groups: names.iter().map(|n| n.to_string()).collect(),
        rows,
        notes: Vec::new(),
    }
    .svg(width)
}
