//! A sweep's charts: time and rates against the swept parameter; a training run's throughput
//! against its devices.

use serde_json::Value;

use super::whole;
use crate::export::chart::{self, Axis, LineChart, Series};
use crate::report::{RunRecord, Unit};

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
    let one: Vec<(f64, f64)> = runs.iter().map(|r| (1.0, r.1)).collect();
    let mut series = vec![Series::line("one-device", one)];
    let keys = runs.iter().flat_map(|r| r.2.derived.keys());
    let keys = keys.filter(|k| *k != BASE);
    for name in crate::export::unique(keys.filter_map(|k| k.strip_suffix("_samples_per_second"))) {
        let key = format!("{name}_samples_per_second");
        let mut points: Vec<(f64, f64)> = runs
            .iter()
            .filter_map(|(k, _, r)| Some((*k, r.derived.get(&key)?.as_f64()?)))
            .filter(|p| p.1.is_finite())
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        series.push(Series::line(name.replace('_', "-"), points));
    }
    let ideal = ks.iter().map(|&k| (k, k * base)).collect();
    series.push(Series::line("ideal: k × one device", ideal));
    let what = match runs[0].2.parameters.get("backend").and_then(Value::as_str) {
        Some("mpi") => "ranks",
        _ => "devices",
    };
    LineChart::new(
        format!("{}: throughput vs {what}", runs[0].2.scenario),
        Axis::new(what, false, whole),
        Axis::new("samples/s (higher is better)", false, chart::plain),
        series,
    )
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
    if points.is_empty() {
        return Vec::new();
    }
    // Runs that differ in parameters other than the x axis (the other axes of a sweep) get
    // lines of their own, labelled with those values only. A parameter that follows x
    // (matmul's `m` resolved to the swept `size`) or never changes does not split the lines.
    let keys = series_keys(&points, axis);
    let group_of = |r: &RunRecord| -> String {
        let pairs = keys
            .iter()
            .map(|k| super::parameter(k, r.parameters.get(*k)));
        pairs.collect::<Vec<_>>().join(", ")
    };
    let groups = crate::export::unique(points.iter().map(|(_, r)| group_of(r)));
    let label = |name: &str, g: &str| {
        if g.is_empty() {
            name.to_string()
        } else {
            format!("{name} ({g})")
        }
    };
    // An axis of whole numbers (devices, threads) ticks at whole numbers.
    let x_axis = || Axis {
        counts: points.iter().all(|(v, _)| v.fract() == 0.0),
        ..Axis::new(axis, false, chart::plain)
    };
    // The points of runs measured on a busy machine, ringed on every chart.
    let busy = |r: &RunRecord| r.state.as_ref().is_some_and(|s| s.is_busy());
    // A line per group and item (a variant, a rate's figure) that some point has: `at` reads
    // a run's value of the item and its band.
    type At<'a> = &'a dyn Fn(&RunRecord, &str) -> Option<(f64, Option<[f64; 2]>)>;
    let draw = |title: String, y: Axis, items: &[&str], at: At| {
        let mut chart = LineChart::new(title, x_axis(), y, Vec::new());
        for g in &groups {
            for item in items {
                let values: Vec<(f64, bool, f64, Option<[f64; 2]>)> = points
                    .iter()
                    .filter(|(_, r)| &group_of(r) == g)
                    .filter_map(|(x, r)| at(r, item).map(|(y, band)| (*x, busy(r), y, band)))
                    .collect();
                if values.is_empty() {
                    continue;
                }
                chart
                    .marked
                    .extend(values.iter().filter(|v| v.1).map(|v| (v.0, v.2)));
                chart.series.push(Series {
                    label: label(item, g),
                    points: values.iter().map(|v| (v.0, v.2)).collect(),
                    band: values
                        .iter()
                        .filter_map(|v| Some((v.0, v.3?[0], v.3?[1])))
                        .collect(),
                });
            }
        }
        chart.svg(width)
    };
    // Each variant any point has draws its own line.
    let variants = crate::export::table::variant_names(points.iter().map(|(_, r)| *r));
    let mut charts: Vec<String> = draw(
        format!("{scenario}: median time vs {axis}"),
        Axis::new(
            "time per round (median; band: 95% CI)",
            true,
            crate::units::human_time,
        ),
        &variants,
        &|r, name| {
            let s = &r.variants.iter().find(|v| v.name == name)?.summary;
            Some((s.median_s, Some(s.ci95_s)))
        },
    )
    .into_iter()
    .collect();
    for (unit, name) in RATES {
        let keys = points.iter().flat_map(|(_, r)| {
            let of_unit = r.derived.keys().filter(move |k| r.figure(k).unit == unit);
            of_unit.map(String::as_str)
        });
        let keys = crate::export::unique(keys);
        charts.extend(draw(
            format!("{scenario}: {name} vs {axis}"),
            Axis::new(format!("{name} (higher is better)"), false, chart::plain),
            &keys,
            &|r, key| Some((r.derived.get(key)?.as_f64()?, None)),
        ));
    }
    charts
}

/// The rates a sweep charts against its axis: unit and axis name.
const RATES: [(Unit, &str); 3] = [
    (Unit::Gflops, "GFLOP/s"),
    (Unit::GbytesPerSecond, "GB/s"),
    (Unit::SamplesPerSecond, "samples/s"),
];
