//! github-action-benchmark's JSON, for the common CI charting action: `customSmallerIsBetter`
//! entries for the variants' times, and `customBiggerIsBetter` entries for the derived figures
//! that improve upwards (GFLOP/s, samples/s, speed-ups, efficiencies). The action takes one
//! tool per step, so each is its own format and file. Values are rounded to
//! [`significant::DIGITS`](super::significant::DIGITS) significant digits.

use serde_json::Value;

use super::significant::round;
use super::unit_symbol::unit_symbol;
use crate::report::{Better, Report};

/// The report in github-action-benchmark's `customSmallerIsBetter` format: one entry per
/// variant, its median in seconds, the half-width of the median's 95% interval as the range.
pub fn entries(report: &Report) -> Value {
    let mut entries = Vec::new();
    for run in &report.runs {
        for v in &run.variants {
            let s = &v.summary;
            entries.push(serde_json::json!({
                "name": format!("{} {}", run.key(), v.name),
                "unit": "s",
                "value": round(s.median_s),
                "range": format!("± {:.3e}", (s.ci95_s[1] - s.ci95_s[0]) / 2.0),
                "extra": format!("{} samples; min {:.3e} s, max {:.3e} s", s.samples_s.len(), s.min_s, s.max_s),
            }));
        }
    }
    Value::Array(entries)
}

/// The report in github-action-benchmark's `customBiggerIsBetter` format: one entry per
/// derived figure whose direction is [`Better::Higher`] and whose value is a finite number,
/// named `run-key figure`, in the figure's unit (`GFLOP/s`, `samples/s`, `ratio`).
pub fn bigger_entries(report: &Report) -> Value {
    let mut entries = Vec::new();
    for run in &report.runs {
        for (key, value) in &run.derived {
            let figure = run.figure(key);
            let upwards = figure.better == Better::Higher;
            let Some(v) = value.as_f64().filter(|v| v.is_finite() && upwards) else {
                continue;
            };
            entries.push(serde_json::json!({
                "name": format!("{} {key}", run.key()),
                "unit": unit_symbol(figure.unit),
                "value": round(v),
            }));
        }
    }
    Value::Array(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Figure, RunRecord, Unit};

    #[test]
    fn only_finite_figures_that_improve_upwards_are_bigger_is_better() {
        let mut run = RunRecord::new("matmul", serde_json::Map::new(), vec![]);
        run.derive_as(
            "gflops",
            0.1 + 0.2,
            Figure::new(Unit::Gflops, Better::Higher),
        );
        run.derive_as("per_op_s", 1e-6, Figure::new(Unit::Seconds, Better::Lower));
        run.derive_as("flops", 2e9, Figure::new(Unit::Number, Better::Neither));
        run.derive_as(
            "speedup",
            f64::NAN,
            Figure::new(Unit::Ratio, Better::Higher),
        );
        let report = crate::report::fixtures::report(vec![run]);
        let entries = bigger_entries(&report);
        assert_eq!(
            entries,
            serde_json::json!([{"name": "matmul[] gflops", "unit": "GFLOP/s", "value": 0.3}])
        );
    }
}
