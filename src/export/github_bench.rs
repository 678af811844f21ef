//! github-action-benchmark's `customSmallerIsBetter` JSON, for the common CI charting action.

use serde_json::Value;

use crate::report::Report;

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
                "value": s.median_s,
                "range": format!("± {:.3e}", (s.ci95_s[1] - s.ci95_s[0]) / 2.0),
                "extra": format!("{} samples; min {:.3e} s, max {:.3e} s", s.samples_s.len(), s.min_s, s.max_s),
            }));
        }
    }
    Value::Array(entries)
}
