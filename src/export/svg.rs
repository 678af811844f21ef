//! Pictures of a report (SVG, drawn with `chart/`): time against the swept parameter, a line
//! per variant with the 95% CI of its median as a band, and the sweep's rates (GFLOP/s, GB/s)
//! against it; loss curves of a training run; the variants' medians as bars with 95% CI
//! whiskers (on a log axis when they span more than 30×); the lane timelines of a traced
//! repeat (on one time axis where the lesson compares lengths); `memory`'s live bytes over an
//! epoch; a training run's throughput against its devices with the ideal line. `plot` draws one of them (a training report: its throughput
//! and loss charts, stacked), the HTML report all that apply.

use serde_json::Value;

use super::chart::{self, Axis, Bar, BarChart, GanttGroup, LineChart, Series};
use crate::report::{Report, RunRecord, Unit};

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
    let numeric = |k: &String| {
        runs.iter()
            .all(|r| r.parameters.get(k).and_then(Value::as_f64).is_some())
    };
    if let Some(sweep) = &report.sweep {
        let axis = sweep
            .axes
            .iter()
            .find(|(name, values)| values.len() > 1 && numeric(name));
        if let Some((name, _)) = axis {
            return Some(name.clone());
        }
    }
    first.parameters.keys().find_map(|k| {
        let values: Vec<Option<f64>> = runs
            .iter()
            .map(|r| r.parameters.get(k).and_then(Value::as_f64))
            .collect();
        let all_numeric = values.iter().all(Option::is_some);
        let varies = values.windows(2).any(|w| w[0] != w[1]);
        (all_numeric && varies).then(|| k.clone())
    })
}

/// The scenarios of `report` that a chart of it leaves out (it draws one scenario).
pub fn left_out(report: &Report) -> Vec<String> {
    let main = main_scenario(report);
    let mut out: Vec<String> = Vec::new();
    for run in &report.runs {
        if Some(run.scenario.as_str()) != main && !out.contains(&run.scenario) {
            out.push(run.scenario.clone());
        }
    }
    out
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
    let runs: Vec<&RunRecord> = report
        .runs
        .iter()
        .filter(|r| r.scenario == scenario)
        .collect();
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

/// Training throughput against devices (ranks): each variant's samples/s at its run's device
/// count, the one-device baseline at 1, and the ideal line, k × one device. `None` for runs
/// that are not training runs (no `one_device_samples_per_second` figure).
pub fn scaling_chart(runs: &[&RunRecord], width: f64) -> Option<String> {
    const BASE: &str = "one_device_samples_per_second";
    let runs: Vec<(f64, f64, &RunRecord)> = runs
        .iter()
        .filter_map(|r| {
            let k = r.parameters.get("devices")?.as_f64()?;
            Some((k, r.derived.get(BASE)?.as_f64()?, *r))
        })
        .collect();
    if runs.is_empty() {
        return None;
    }
    let base = runs.iter().map(|r| r.1).sum::<f64>() / runs.len() as f64;
    let mut ks: Vec<f64> = std::iter::once(1.0)
        .chain(runs.iter().map(|r| r.0))
        .collect();
    ks.sort_by(f64::total_cmp);
    ks.dedup();
    // In the order of the loss charts' lines (one-device first), so a variant keeps its
    // colour and marker across the charts; the ideal line last.
    let mut series = vec![Series {
        label: "one-device".into(),
        points: runs.iter().map(|r| (1.0, r.1)).collect(),
        band: Vec::new(),
    }];
    let mut names: Vec<&str> = Vec::new();
    for (_, _, r) in &runs {
        for key in r.derived.keys() {
            if let Some(name) = key.strip_suffix("_samples_per_second") {
                if key != BASE && !names.contains(&name) {
                    names.push(name);
                }
            }
        }
    }
    for name in names {
        let key = format!("{name}_samples_per_second");
        let mut points: Vec<(f64, f64)> = runs
            .iter()
            .filter_map(|(k, _, r)| Some((*k, r.derived.get(&key)?.as_f64()?)))
            .filter(|p| p.1.is_finite())
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        series.push(Series {
            label: name.replace('_', "-"),
            points,
            band: Vec::new(),
        });
    }
    series.push(Series {
        label: "ideal: k × one device".into(),
        points: ks.iter().map(|&k| (k, k * base)).collect(),
        band: Vec::new(),
    });
    let what = match runs[0].2.parameters.get("backend").and_then(Value::as_str) {
        Some("mpi") => "ranks",
        _ => "devices",
    };
    LineChart {
        title: format!("{}: throughput vs {what}", runs[0].2.scenario),
        x: Axis::new(what, false, whole),
        y: Axis::new("samples/s (higher is better)", false, chart::plain),
        series,
    }
    .svg(width)
}

/// The swept axis of `report`'s runs of `scenario`, and those runs, when the report is a sweep
/// (or its runs differ in a numeric parameter).
pub fn sweep_of<'a>(report: &'a Report, scenario: &str) -> Option<(String, Vec<&'a RunRecord>)> {
    let runs: Vec<&RunRecord> = report
        .runs
        .iter()
        .filter(|r| r.scenario == scenario)
        .collect();
    if runs.len() < 2 {
        return None;
    }
    numeric_axis(report, &runs).map(|axis| (axis, runs))
}

/// `scenario[…]` without the brackets: the parameters as `k=v, …`.
pub fn describe_parameters(run: &RunRecord) -> String {
    run.parameters
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A sweep's charts: median time against the axis (a line per variant and value of any other
/// axis, the 95% CI of the median as a band), then one chart per rate among the derived
/// figures (GFLOP/s, GB/s, samples/s) against the same axis.
pub fn sweep_charts(scenario: &str, axis: &str, runs: &[&RunRecord], width: f64) -> Vec<String> {
    let mut points: Vec<(f64, &RunRecord)> = runs
        .iter()
        .filter_map(|r| {
            r.parameters
                .get(axis)
                .and_then(Value::as_f64)
                .map(|x| (x, *r))
        })
        .collect();
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let Some((_, first)) = points.first() else {
        return Vec::new();
    };
    // Runs that differ in parameters other than the x axis (the other axes of a sweep) get
    // lines of their own, labelled with those values only. A parameter that follows x
    // (matmul's `m` resolved to the swept `size`) or never changes does not split the lines.
    let keys = series_keys(&points, axis);
    let group_of = |r: &RunRecord| -> String {
        keys.iter()
            .map(|k| match r.parameters.get(*k) {
                Some(Value::String(s)) => format!("{k}={s}"),
                Some(v) => format!("{k}={v}"),
                None => format!("{k}=?"),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut groups: Vec<String> = Vec::new();
    for (_, r) in &points {
        let g = group_of(r);
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    let label = |name: &str, g: &str| {
        if g.is_empty() {
            name.to_string()
        } else {
            format!("{name} ({g})")
        }
    };
    let variants: Vec<&str> = first.variants.iter().map(|v| v.name.as_str()).collect();
    let mut time = Vec::new();
    for g in &groups {
        for name in &variants {
            let stats: Vec<(f64, &crate::harness::Summary)> = points
                .iter()
                .filter(|(_, r)| &group_of(r) == g)
                .filter_map(|(x, r)| {
                    Some((*x, &r.variants.iter().find(|v| v.name == *name)?.summary))
                })
                .collect();
            time.push(Series {
                label: label(name, g),
                points: stats.iter().map(|(x, s)| (*x, s.median_s)).collect(),
                band: stats
                    .iter()
                    .map(|(x, s)| (*x, s.ci95_s[0], s.ci95_s[1]))
                    .collect(),
            });
        }
    }
    let mut charts: Vec<String> = LineChart {
        title: format!("{scenario}: median time vs {axis}"),
        x: Axis::new(axis, false, chart::plain),
        y: Axis::new(
            "time per round (median; band: 95% CI)",
            true,
            crate::units::human_time,
        ),
        series: time,
    }
    .svg(width)
    .into_iter()
    .collect();
    for (unit, name, format) in RATES {
        let keys: Vec<&String> = first
            .derived
            .keys()
            .filter(|k| first.figure(k).unit == unit)
            .collect();
        let mut series = Vec::new();
        for g in &groups {
            for key in &keys {
                let pts: Vec<(f64, f64)> = points
                    .iter()
                    .filter(|(_, r)| &group_of(r) == g)
                    .filter_map(|(x, r)| Some((*x, r.derived.get(key.as_str())?.as_f64()?)))
                    .collect();
                series.push(Series {
                    label: label(key, g),
                    points: pts,
                    band: Vec::new(),
                });
            }
        }
        if let Some(svg) = (LineChart {
            title: format!("{scenario}: {name} vs {axis}"),
            x: Axis::new(axis, false, chart::plain),
            y: Axis::new(format!("{name} (higher is better)"), false, format),
            series,
        })
        .svg(width)
        {
            charts.push(svg);
        }
    }
    charts
}

/// A rate a sweep charts against its axis: unit, axis name, tick format.
type Rate = (Unit, &'static str, fn(f64) -> String);

/// The rates a sweep charts against its axis.
const RATES: [Rate; 3] = [
    (Unit::Gflops, "GFLOP/s", chart::plain),
    (Unit::GbytesPerSecond, "GB/s", chart::plain),
    (Unit::SamplesPerSecond, "samples/s", chart::plain),
];

/// A run's variants as bars: the median time, whiskers at the 95% CI of the median. Medians
/// that span more than [`LOG_SPREAD`]× go on a log axis, so a 100 ms variant does not flatten
/// microsecond ones to nothing; each variant's label (what it times, a pitfall) is written
/// under its bar.
pub fn variant_bars(run: &RunRecord, width: f64) -> Option<String> {
    let medians: Vec<f64> = run.variants.iter().map(|v| v.summary.median_s).collect();
    let labels: Vec<String> = run
        .variants
        .iter()
        .map(|v| v.label.clone().unwrap_or_default())
        .collect();
    BarChart {
        title: format!("{}: median time per variant", run.scenario),
        axis: time_axis(&medians),
        whisker: ci_caption(run),
        groups: Vec::new(),
        rows: run
            .variants
            .iter()
            .map(|v| (v.name.clone(), vec![Some(bar(&v.summary))]))
            .collect(),
        notes: labels,
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

fn bar(s: &crate::harness::Summary) -> Bar {
    Bar {
        value: s.median_s,
        low: s.ci95_s[0],
        high: s.ci95_s[1],
    }
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
    let mut variants: Vec<&str> = base.variants.iter().map(|v| v.name.as_str()).collect();
    for v in &new.variants {
        if !variants.contains(&v.name.as_str()) {
            variants.push(&v.name);
        }
    }
    let find = |run: &RunRecord, name: &str| {
        run.variants
            .iter()
            .find(|v| v.name == name)
            .map(|v| bar(&v.summary))
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

/// A run's loss curves (`<name>_loss_curve` figures of `[x, loss]` or `[x, loss, seconds]`
/// points): loss against updates, and against time when every point has its time.
pub fn loss_charts(run: &RunRecord, width: f64) -> Vec<String> {
    let curves = loss_curves(run);
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

/// Scenarios whose lesson is how long variants take side by side (parallel ≈ max(a, b), copy
/// hidden behind compute, a graph's lanes against one): their timelines share one time axis.
const SHARED_TIME_AXIS: [&str; 3] = ["cpu-gpu", "run-copy", "deps"];

/// The lane timelines recorded for run `index` of `report`, one block per traced variant;
/// `None` when the report carries none for it, or none with an engine op. Each block says it
/// is the extra traced repeat and gives the table's median beside it: tracing slows ops, and
/// the repeat is one sample, so the two differ. For the scenarios of [`SHARED_TIME_AXIS`] the
/// blocks share one time axis. A variant whose repeat recorded no engine op is left out (see
/// [`timeline_note`]).
pub fn timeline_chart(report: &Report, index: usize, width: f64) -> Option<String> {
    let run = report.runs.get(index)?;
    let groups: Vec<GanttGroup> = report
        .timelines
        .iter()
        .filter(|t| t.run == index && t.ops > 0)
        .map(|t| {
            let variant = run.variants.iter().find(|v| v.name == t.variant);
            let timed = variant.map_or(String::new(), |v| {
                format!(", after the {} timed", v.summary.samples_s.len())
            });
            let median = variant.map_or(String::new(), |v| {
                format!(
                    "the table's median: {} · ",
                    crate::units::human_time(v.summary.median_s)
                )
            });
            GanttGroup {
                title: t.variant.clone(),
                detail: format!(
                    "one extra traced repeat{timed} (tracing adds overhead): {}\n{median}{} op{}",
                    crate::units::human_time(t.span_ns as f64 * 1e-9),
                    t.ops,
                    if t.ops == 1 { "" } else { "s" }
                ),
                lanes: t
                    .lanes
                    .iter()
                    .map(|l| {
                        (
                            l.lane.clone(),
                            l.busy_ns
                                .iter()
                                .map(|[a, b]| (*a as f64 * 1e-9, *b as f64 * 1e-9))
                                .collect(),
                        )
                    })
                    .collect(),
            }
        })
        .collect();
    let (axis, scale) = if SHARED_TIME_AXIS.contains(&run.scenario.as_str()) {
        (chart::TimeAxis::Shared, "one time axis for all")
    } else {
        (chart::TimeAxis::PerVariant, "each to its own length")
    };
    chart::gantt(
        &format!(
            "{}: lane timeline of the traced repeat, {scale}",
            run.scenario
        ),
        &groups,
        axis,
        width,
    )
}

/// Why some variants of run `index` have no lane timeline: their traced repeat recorded no
/// engine op. `None` when every traced variant has one.
pub fn timeline_note(report: &Report, index: usize) -> Option<String> {
    let empty: Vec<&str> = report
        .timelines
        .iter()
        .filter(|t| t.run == index && t.ops == 0)
        .map(|t| t.variant.as_str())
        .collect();
    if empty.is_empty() {
        return None;
    }
    let why = match report.runs.get(index).map(|r| r.scenario.as_str()) {
        // The bounded variants run on an engine of their own (the one with the bound), and
        // the traced repeat records the scenario's main engine.
        Some("memory") => {
            "they run on an engine of their own, with the bound on ops in flight, which the \
             traced repeat does not record"
        }
        _ => "their work ran outside the engine's lanes",
    };
    Some(format!(
        "No lane timeline for {}: the traced repeat recorded no engine op, since {why}.",
        empty.join(", ")
    ))
}

/// Live bytes over time (`<variant>_live_bytes` series of `[seconds, bytes]`, as `memory`
/// records them), a line per variant; `None` when the run has none. Bytes are shown in the
/// binary unit that suits the largest value, so ticks fall on round numbers of it.
pub fn memory_chart(run: &RunRecord, width: f64) -> Option<String> {
    let series: Vec<(String, Vec<(f64, f64)>)> = run
        .derived
        .iter()
        .filter_map(|(k, v)| {
            let name = k.strip_suffix("_live_bytes")?;
            let points: Vec<(f64, f64)> = v
                .as_array()?
                .iter()
                .filter_map(|p| Some((p.get(0)?.as_f64()?, p.get(1)?.as_f64()?)))
                .filter(|p| p.0.is_finite() && p.1.is_finite())
                .collect();
            (!points.is_empty()).then(|| (name.replace('_', "-"), points))
        })
        .collect();
    // In the order of the variants, so lines keep the order of the table.
    let order = |name: &str| {
        run.variants
            .iter()
            .position(|v| v.name == name)
            .unwrap_or(usize::MAX)
    };
    let mut series = series;
    series.sort_by_key(|(name, _)| order(name));
    let most = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.1))
        .fold(0.0, f64::max);
    let (unit, per) = [("GiB", 30), ("MiB", 20), ("KiB", 10)]
        .into_iter()
        .map(|(u, shift)| (u, (1u64 << shift) as f64))
        .find(|(_, per)| most >= *per)
        .unwrap_or(("bytes", 1.0));
    LineChart {
        title: format!("{}: live bytes over one epoch, per variant", run.scenario),
        x: Axis::new(
            "time since the epoch started (one more, untimed epoch of each variant)",
            false,
            crate::units::human_time,
        ),
        y: Axis::new(format!("live memory ({unit})"), false, chart::plain),
        series: series
            .into_iter()
            .map(|(label, points)| Series {
                label,
                points: points.into_iter().map(|(t, b)| (t, b / per)).collect(),
                band: Vec::new(),
            })
            .collect(),
    }
    .svg(width)
}

/// The parameters besides `axis` that take different values at the same x: each of their
/// combinations is a line of its own.
fn series_keys<'a>(points: &[(f64, &'a RunRecord)], axis: &str) -> Vec<&'a str> {
    let Some((_, first)) = points.first() else {
        return Vec::new();
    };
    first
        .parameters
        .keys()
        .filter(|k| k.as_str() != axis)
        .filter(|k| {
            points.iter().any(|(x, r)| {
                points
                    .iter()
                    .any(|(x2, r2)| x == x2 && r.parameters.get(*k) != r2.parameters.get(*k))
            })
        })
        .map(String::as_str)
        .collect()
}

/// Loss curves a run recorded in `derived` (`<name>_loss_curve`: [[update, loss], ...] or
/// [[update, loss, seconds], ...]).
type Curve = Vec<(f64, f64, Option<f64>)>;

fn loss_curves(run: &RunRecord) -> Vec<(String, Curve)> {
    run.derived
        .iter()
        .filter_map(|(k, v)| {
            let name = k.strip_suffix("_loss_curve")?;
            let points: Curve = v
                .as_array()?
                .iter()
                .filter_map(|p| {
                    let loss = p.get(1)?.as_f64()?;
                    let time = p.get(2).and_then(Value::as_f64);
                    Some((p.get(0)?.as_f64()?, loss, time))
                })
                .filter(|(_, loss, _)| loss.is_finite())
                .collect();
            // Named as the variant is (`one_device` → `one-device`).
            (!points.is_empty()).then(|| (name.replace('_', "-"), points))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::Summary;
    use crate::report::{Environment, GpuInfo, Timeline, TracedRun};
    use serde_json::Map;

    /// A run of `scenario` whose variants take the given medians (seconds).
    fn run(scenario: &str, medians: &[(&str, f64)]) -> RunRecord {
        let mut run = RunRecord::new(scenario, Map::new(), vec!["cpu:0".into()]);
        let summaries = medians
            .iter()
            .map(|(_, m)| {
                let samples: Vec<f64> = (0..6).map(|i| m * (1.0 + i as f64 * 0.01)).collect();
                Summary::from_samples(&samples).expect("samples")
            })
            .collect();
        run.add_variants(
            medians.iter().map(|(n, _)| n.to_string()).collect(),
            summaries,
            medians.iter().map(|_| None),
        );
        run
    }

    #[test]
    fn an_async_report_draws_its_bars_on_a_marked_log_axis() {
        let spread = run(
            "async",
            &[("sync", 0.118), ("async", 40e-6), ("push-only", 2e-6)],
        );
        let svg = variant_bars(&spread, 880.0).expect("drawn");
        assert!(svg.contains("class=\"log-axis\""), "{svg}");
        assert!(svg.contains("on a log scale"), "{svg}");
        assert!(svg.contains(">1 µs<") && svg.contains(">100 ms<"), "{svg}");
        // Medians within 30× of each other stay on a linear axis.
        let close = run("deps", &[("op-by-op", 8e-3), ("parallel", 6e-3)]);
        let svg = variant_bars(&close, 880.0).expect("drawn");
        assert!(
            !svg.contains("log-axis") && !svg.contains("log scale"),
            "{svg}"
        );
    }

    #[test]
    fn timelines_name_their_repeat_and_share_an_axis_where_the_lesson_needs_it() {
        let rec = crate::report::timeline::traced_op;
        let report = |scenario: &str| {
            let mut r = Report::new(
                Environment::capture("threaded", GpuInfo::unavailable("test")),
                vec![run(scenario, &[("a-alone", 1.36e-3), ("parallel", 2e-3)])],
            );
            for (variant, end) in [("a-alone", 1_000), ("parallel", 7_360_000)] {
                r.timelines.push(Timeline::of(
                    0,
                    &TracedRun {
                        scenario: scenario.into(),
                        variant: variant.into(),
                        records: vec![rec(0, 0, end)],
                    },
                ));
            }
            r
        };
        let shared = timeline_chart(&report("cpu-gpu"), 0, 880.0).expect("drawn");
        assert!(shared.contains("one time axis for all"), "{shared}");
        assert!(
            shared.contains(
                "one extra traced repeat, after the 6 timed (tracing adds overhead): 7.360 ms"
            ),
            "{shared}"
        );
        // Escaped, as SVG text is; the samples are 1.36 ms to 1.43 ms.
        assert!(
            shared.contains("the table&#39;s median: 1.394 ms · 1 op<"),
            "{shared}"
        );
        let own = timeline_chart(&report("async"), 0, 880.0).expect("drawn");
        assert!(own.contains("each to its own length"), "{own}");
    }

    #[test]
    fn variants_without_engine_ops_are_left_out_of_the_timeline_with_the_reason() {
        let mut r = Report::new(
            Environment::capture("threaded", GpuInfo::unavailable("test")),
            vec![run("memory", &[("unbounded", 0.04), ("bounded", 0.04)])],
        );
        let rec = crate::report::timeline::traced_op;
        for (variant, records) in [("unbounded", vec![rec(0, 0, 500)]), ("bounded", vec![])] {
            r.timelines.push(Timeline::of(
                0,
                &TracedRun {
                    scenario: "memory".into(),
                    variant: variant.into(),
                    records,
                },
            ));
        }
        let svg = timeline_chart(&r, 0, 880.0).expect("drawn");
        assert!(
            svg.contains(">unbounded<") && !svg.contains(">bounded<"),
            "{svg}"
        );
        let note = timeline_note(&r, 0).expect("a note");
        assert!(
            note.contains("bounded") && note.contains("engine of their own"),
            "{note}"
        );
    }

    #[test]
    fn the_memory_chart_draws_a_line_per_live_bytes_series_in_binary_units() {
        let mut r = run("memory", &[("unbounded", 0.04), ("bounded", 0.04)]);
        let mib = 1024.0 * 1024.0;
        r.derive_series(
            "unbounded_live_bytes",
            serde_json::json!([[0.0, 0.0], [0.01, 30.0 * mib], [0.02, 0.0]]),
        );
        r.derive_series(
            "bounded_live_bytes",
            serde_json::json!([[0.0, 0.0], [0.01, 1.0 * mib], [0.03, 0.0]]),
        );
        let svg = memory_chart(&r, 880.0).expect("drawn");
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("live memory (MiB)"), "{svg}");
        assert!(memory_chart(&run("async", &[("sync", 1.0)]), 880.0).is_none());
    }
}
