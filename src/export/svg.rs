//! Pictures of a report (plotters, SVG): time against the swept parameter, one line per
//! variant with its min–max band; for a report without a numeric axis, a bar chart of the
//! variants' medians with min–max whiskers.

use plotters::prelude::*;
use serde_json::Value;

use crate::report::{Report, RunRecord};

/// Why a report cannot be drawn.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    #[error("the report has no runs to plot")]
    Empty,
    #[error("drawing failed: {0}")]
    Draw(String),
}

fn draw_err<E: std::fmt::Display>(e: E) -> PlotError {
    PlotError::Draw(e.to_string())
}

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// The legend every chart draws, top right.
fn legend<'a, X, Y>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
) -> Result<(), PlotError>
where
    X: Ranged,
    Y: Ranged,
{
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.9))
        .draw()
        .map_err(draw_err)
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

/// Draw `report` as SVG text.
pub fn svg(report: &Report) -> Result<String, PlotError> {
    let scenario = main_scenario(report).ok_or(PlotError::Empty)?;
    let runs: Vec<&RunRecord> = report
        .runs
        .iter()
        .filter(|r| r.scenario == scenario)
        .collect();
    let Some(first) = runs.first().copied() else {
        return Err(PlotError::Empty);
    };
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (900, 560)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        let curves = loss_curves(first);
        match numeric_axis(report, &runs) {
            Some(axis) => lines(&root, scenario, &axis, &runs)?,
            None if !curves.is_empty() => curve_chart(&root, scenario, &curves)?,
            None => bars(&root, scenario, first)?,
        }
        root.present().map_err(draw_err)?;
    }
    Ok(out)
}

fn lines(
    root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    scenario: &str,
    axis: &str,
    runs: &[&RunRecord],
) -> Result<(), PlotError> {
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
    let variants: Vec<String> = points[0]
        .1
        .variants
        .iter()
        .map(|v| v.name.clone())
        .collect();
    let (x_min, x_max) = (points[0].0, points[points.len() - 1].0);
    let all: Vec<f64> = points
        .iter()
        .flat_map(|(_, r)| {
            r.variants
                .iter()
                .flat_map(|v| [v.summary.min_s, v.summary.max_s])
        })
        .filter(|y| *y > 0.0)
        .collect();
    let y_min = all.iter().cloned().fold(f64::INFINITY, f64::min);
    let y_max = all.iter().cloned().fold(0.0, f64::max);
    let mut chart = ChartBuilder::on(root)
        .caption(
            format!("{scenario}: median time vs {axis}"),
            ("sans-serif", 22),
        )
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(80)
        .build_cartesian_2d(
            x_min..x_max.max(x_min + 1.0),
            (y_min * 0.8..y_max * 1.25).log_scale(),
        )
        .map_err(draw_err)?;
    chart
        .configure_mesh()
        .x_desc(axis.to_string())
        .y_desc("time (s), median with min–max band")
        .y_label_formatter(&|y| crate::units::human_time(*y))
        .draw()
        .map_err(draw_err)?;
    // Runs that differ in parameters other than the x axis (the other axes of a sweep) get
    // lines of their own, labelled with those values. A parameter that follows x (matmul's
    // `m` resolved to the swept `size`) or never changes does not split the lines.
    let keys = series_keys(&points, axis);
    let other = |r: &RunRecord| -> String {
        keys.iter()
            .map(|k| format!("{k}={}", r.parameters.get(*k).unwrap_or(&Value::Null)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut groups: Vec<String> = Vec::new();
    for (_, r) in &points {
        let g = other(r);
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    let series: Vec<(String, &String, String)> = groups
        .iter()
        .flat_map(|g| variants.iter().map(move |v| (g.clone(), v)))
        .map(|(g, v)| {
            let label = if groups.len() > 1 {
                format!("{v} ({g})")
            } else {
                v.clone()
            };
            (g, v, label)
        })
        .collect();
    for (i, (group, name, label)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let stats: Vec<(f64, f64, f64, f64)> = points
            .iter()
            .filter(|(_, r)| &other(r) == group)
            .filter_map(|(x, r)| {
                let v = r.variants.iter().find(|v| &v.name == *name)?;
                Some((*x, v.summary.median_s, v.summary.min_s, v.summary.max_s))
            })
            .collect();
        let band: Vec<(f64, f64)> = stats
            .iter()
            .map(|s| (s.0, s.2))
            .chain(stats.iter().rev().map(|s| (s.0, s.3)))
            .collect();
        chart
            .draw_series(std::iter::once(Polygon::new(band, color.mix(0.15))))
            .map_err(draw_err)?;
        chart
            .draw_series(LineSeries::new(
                stats.iter().map(|s| (s.0, s.1)),
                color.stroke_width(2),
            ))
            .map_err(draw_err)?
            .label(label.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 4), (x + 16, y + 4)], color.filled()));
    }
    legend(&mut chart)
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

/// Loss curves a run recorded in `derived` (`<name>_loss_curve`: [[update, loss], ...]).
fn loss_curves(run: &RunRecord) -> Vec<(String, Vec<(f64, f64)>)> {
    run.derived
        .iter()
        .filter_map(|(k, v)| {
            let name = k.strip_suffix("_loss_curve")?;
            let points: Vec<(f64, f64)> = v
                .as_array()?
                .iter()
                .filter_map(|p| Some((p.get(0)?.as_f64()?, p.get(1)?.as_f64()?)))
                .filter(|(_, loss)| *loss > 0.0)
                .collect();
            (!points.is_empty()).then(|| (name.to_string(), points))
        })
        .collect()
}

fn curve_chart(
    root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    scenario: &str,
    curves: &[(String, Vec<(f64, f64)>)],
) -> Result<(), PlotError> {
    let all = curves.iter().flat_map(|(_, c)| c.iter());
    let (mut x_max, mut y_min, mut y_max) = (1f64, f64::INFINITY, 0f64);
    for &(x, y) in all {
        x_max = x_max.max(x);
        y_min = y_min.min(y);
        y_max = y_max.max(y);
    }
    let mut chart = ChartBuilder::on(root)
        .caption(
            format!("{scenario}: loss during training"),
            ("sans-serif", 22),
        )
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..x_max, (y_min * 0.8..y_max * 1.25).log_scale())
        .map_err(draw_err)?;
    chart
        .configure_mesh()
        .x_desc("parameter updates")
        .y_desc("loss (mean squared error, full data)")
        .draw()
        .map_err(draw_err)?;
    for (i, (name, points)) in curves.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(draw_err)?
            .label(name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 4), (x + 16, y + 4)], color.filled()));
    }
    legend(&mut chart)
}

fn bars(
    root: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    scenario: &str,
    run: &RunRecord,
) -> Result<(), PlotError> {
    let n = run.variants.len().max(1);
    let y_max = run
        .variants
        .iter()
        .map(|v| v.summary.max_s)
        .fold(0.0, f64::max)
        .max(1e-12);
    let mut chart = ChartBuilder::on(root)
        .caption(
            format!("{scenario}: median time per variant"),
            ("sans-serif", 22),
        )
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(80)
        .build_cartesian_2d(0f64..n as f64, 0f64..y_max * 1.15)
        .map_err(draw_err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_label_formatter(&|_| String::new())
        .x_desc("variants (see the legend)")
        .y_desc("time (s), median with min–max whisker")
        .y_label_formatter(&|y| crate::units::human_time(*y))
        .draw()
        .map_err(draw_err)?;
    for (i, v) in run.variants.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let x = i as f64;
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(x + 0.2, 0.0), (x + 0.8, v.summary.median_s)],
                color.filled(),
            )))
            .map_err(draw_err)?
            .label(v.name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 4), (x + 16, y + 4)], color.filled()));
        chart
            .draw_series(LineSeries::new(
                [(x + 0.5, v.summary.min_s), (x + 0.5, v.summary.max_s)],
                BLACK.stroke_width(2),
            ))
            .map_err(draw_err)?;
    }
    legend(&mut chart)
}
