//! Comparing two reports: the regression check a CI job trusts.
//!
//! Entries are matched by scenario, parameters and variant name. A change counts only when it
//! is both larger than the threshold and real: a Mann-Whitney U test on the raw samples gives
//! p < 0.05 (as Google Benchmark's compare.py), or, for sample counts too small for the test to
//! ever reach that, no sample of one side overlaps the other's range. A large change that is
//! neither is "noise". Derived figures with a direction (speed-ups, GFLOP/s, efficiencies,
//! bandwidths) are compared by the threshold alone, having no samples, and are reported but
//! do not fail the check.

use std::fmt::Write;

use serde_json::Value;

use super::{Report, RunRecord, SCHEMA};
use crate::harness::stats::mann_whitney_u;

/// Why two reports cannot be compared (a usage error).
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("cannot read {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("{path} is not a parbench report: {reason}")]
    Parse { path: String, reason: String },
    #[error("{path} has schema '{found}', this parbench reads '{SCHEMA}'")]
    Schema { path: String, found: String },
    #[error("nothing to compare: no scenario, parameters and variant appear in both reports")]
    NothingMatched,
}

/// Load a report, checking its schema version first.
pub fn load(path: &std::path::Path) -> Result<Report, CompareError> {
    let p = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| CompareError::Read {
        path: p.clone(),
        reason: e.to_string(),
    })?;
    let value: Value = serde_json::from_str(&text).map_err(|e| CompareError::Parse {
        path: p.clone(),
        reason: e.to_string(),
    })?;
    match value.get("schema").and_then(Value::as_str) {
        Some(SCHEMA) => {}
        Some(other) => {
            return Err(CompareError::Schema {
                path: p,
                found: other.into(),
            })
        }
        None => {
            return Err(CompareError::Parse {
                path: p,
                reason: "no \"schema\" field".into(),
            })
        }
    }
    serde_json::from_value(value).map_err(|e| CompareError::Parse {
        path: p,
        reason: e.to_string(),
    })
}

/// The outcome for one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Faster,
    Slower,
    Same,
    Noise,
    /// A derived figure that moved the good way / the bad way.
    Better,
    Worse,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::Same => "same",
            Verdict::Noise => "noise",
            Verdict::Better => "better",
            Verdict::Worse => "worse",
        }
    }

    /// True for the verdicts that fail a regression check: times only. Derived figures are
    /// ratios of medians with no samples of their own, so their noise adds up (±3% on two
    /// times is ±6% on a speed-up); they are shown, not gated.
    pub fn is_regression(self) -> bool {
        matches!(self, Verdict::Slower)
    }
}

/// One compared entry.
#[derive(Debug, Clone)]
pub struct Row {
    /// `scenario[params] variant` or `scenario[params] derived:key`.
    pub entry: String,
    pub base: f64,
    pub new: f64,
    /// (new − base) / base.
    pub change: f64,
    pub p_value: Option<f64>,
    pub verdict: Verdict,
    /// True for times (seconds), false for derived figures (their own units).
    pub is_time: bool,
}

/// A derived figure where higher is better, by the unit its key names.
fn higher_is_better(key: &str) -> bool {
    ["speedup", "gflops", "efficiency", "gbytes_per_s"]
        .iter()
        .any(|k| key.contains(k))
}

fn run_key(run: &RunRecord) -> String {
    let params: Vec<String> = run
        .parameters
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    format!("{}[{}]", run.scenario, params.join(","))
}

/// Decide a time comparison from the raw samples.
fn time_verdict(base: &[f64], new: &[f64], change: f64, threshold: f64) -> (Verdict, Option<f64>) {
    let p = mann_whitney_u(base, new).map(|m| m.p_value);
    if change.abs() < threshold {
        return (Verdict::Same, p);
    }
    let max = |v: &[f64]| v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let min = |v: &[f64]| v.iter().cloned().fold(f64::INFINITY, f64::min);
    // Disjoint ranges are evidence only with a few samples on each side.
    let enough = base.len() >= 3 && new.len() >= 3;
    let separated = enough
        && if change > 0.0 {
            min(new) > max(base)
        } else {
            max(new) < min(base)
        };
    let significant = p.is_some_and(|p| p < 0.05) || separated;
    let verdict = match (significant, change > 0.0) {
        (false, _) => Verdict::Noise,
        (true, true) => Verdict::Slower,
        (true, false) => Verdict::Faster,
    };
    (verdict, p)
}

/// Compare `new` against `base`; `threshold` is a fraction (0.05 for 5%).
pub fn compare(base: &Report, new: &Report, threshold: f64) -> Result<Vec<Row>, CompareError> {
    let mut rows = Vec::new();
    for nr in &new.runs {
        let key = run_key(nr);
        let Some(br) = base.runs.iter().find(|b| run_key(b) == key) else {
            continue;
        };
        for nv in &nr.variants {
            let Some(bv) = br.variants.iter().find(|b| b.name == nv.name) else {
                continue;
            };
            let (b, n) = (bv.summary.median_s, nv.summary.median_s);
            let change = (n - b) / b;
            let (verdict, p_value) = time_verdict(
                &bv.summary.samples_s,
                &nv.summary.samples_s,
                change,
                threshold,
            );
            rows.push(Row {
                entry: format!("{key} {}", nv.name),
                base: b,
                new: n,
                change,
                p_value,
                verdict,
                is_time: true,
            });
        }
        for (k, nval) in &nr.derived {
            let (Some(n), Some(b)) = (nval.as_f64(), br.derived.get(k).and_then(Value::as_f64))
            else {
                continue;
            };
            if !higher_is_better(k) || b == 0.0 {
                continue;
            }
            let change = (n - b) / b;
            let verdict = if change.abs() < threshold {
                Verdict::Same
            } else if change > 0.0 {
                Verdict::Better
            } else {
                Verdict::Worse
            };
            rows.push(Row {
                entry: format!("{key} derived:{k}"),
                base: b,
                new: n,
                change,
                p_value: None,
                verdict,
                is_time: false,
            });
        }
    }
    if rows.is_empty() {
        return Err(CompareError::NothingMatched);
    }
    Ok(rows)
}

fn value(row: &Row, v: f64) -> String {
    if row.is_time {
        super::table::human_time(v)
    } else {
        format!("{v:.3}")
    }
}

/// The comparison as a terminal table (`markdown` false) or a Markdown table for pull requests.
pub fn render(rows: &[Row], threshold: f64, markdown: bool) -> String {
    let mut out = String::new();
    let p = |r: &Row| r.p_value.map_or("-".to_string(), |p| format!("{p:.3}"));
    if markdown {
        let _ = writeln!(out, "| entry | baseline | new | change | p | verdict |");
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---|");
        for r in rows {
            let mark = if r.verdict.is_regression() {
                " ❌"
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {:+.1}% | {} | {}{mark} |",
                r.entry,
                value(r, r.base),
                value(r, r.new),
                r.change * 100.0,
                p(r),
                r.verdict.as_str()
            );
        }
    } else {
        let w = rows
            .iter()
            .map(|r| r.entry.chars().count())
            .max()
            .unwrap_or(5)
            .max(5);
        let _ = writeln!(
            out,
            "{:<w$}  {:>11}  {:>11}  {:>8}  {:>6}  verdict",
            "entry", "baseline", "new", "change", "p"
        );
        for r in rows {
            let _ = writeln!(
                out,
                "{:<w$}  {:>11}  {:>11}  {:>+7.1}%  {:>6}  {}",
                r.entry,
                value(r, r.base),
                value(r, r.new),
                r.change * 100.0,
                p(r),
                r.verdict.as_str()
            );
        }
    }
    let regressions = rows.iter().filter(|r| r.verdict.is_regression()).count();
    let _ = writeln!(
        out,
        "\n{} entries compared, threshold {:.1}%: {regressions} regression{}",
        rows.len(),
        threshold * 100.0,
        if regressions == 1 { "" } else { "s" }
    );
    out
}

/// The report in github-action-benchmark's `customSmallerIsBetter` format: one entry per
/// variant, its median in seconds, the half-width of the median's 95% interval as the range.
pub fn github_action_benchmark(report: &Report) -> Value {
    let mut entries = Vec::new();
    for run in &report.runs {
        for v in &run.variants {
            let s = &v.summary;
            entries.push(serde_json::json!({
                "name": format!("{} {}", run_key(run), v.name),
                "unit": "s",
                "value": s.median_s,
                "range": format!("± {:.3e}", (s.ci95_s[1] - s.ci95_s[0]) / 2.0),
                "extra": format!("{} samples; min {:.3e} s, max {:.3e} s", s.samples_s.len(), s.min_s, s.max_s),
            }));
        }
    }
    Value::Array(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_need_both_size_and_evidence() {
        let base = [1.00, 1.01, 0.99, 1.02, 0.98, 1.00, 1.01, 0.99];
        let slow: Vec<f64> = base.iter().map(|x| x * 1.3).collect();
        assert_eq!(time_verdict(&base, &slow, 0.3, 0.05).0, Verdict::Slower);
        let fast: Vec<f64> = base.iter().map(|x| x * 0.7).collect();
        assert_eq!(time_verdict(&base, &fast, -0.3, 0.05).0, Verdict::Faster);
        // Within the threshold: the same, however significant.
        let shifted: Vec<f64> = base.iter().map(|x| x * 1.02).collect();
        assert_eq!(time_verdict(&base, &shifted, 0.02, 0.05).0, Verdict::Same);
        // A big median change that the samples do not support: noise.
        let wild = [0.5, 2.0, 0.6, 1.9, 0.7, 1.8, 1.2, 1.3];
        assert_eq!(time_verdict(&base, &wild, 0.2, 0.05).0, Verdict::Noise);
        // Three samples each cannot reach p < 0.05, but disjoint ranges still count.
        assert_eq!(
            time_verdict(&[1.0, 1.01, 0.99], &[1.3, 1.31, 1.29], 0.3, 0.05).0,
            Verdict::Slower
        );
        // One sample each is no evidence at all.
        assert_eq!(time_verdict(&[1.0], &[1.3], 0.3, 0.05).0, Verdict::Noise);
    }

    #[test]
    fn derived_direction_comes_from_the_key() {
        assert!(higher_is_better("parallel_speedup"));
        assert!(higher_is_better("a_gflops"));
        assert!(higher_is_better("overlap_efficiency"));
        assert!(!higher_is_better("t1_s"));
    }
}
