//! Comparing two reports: the regression check a CI job trusts.
//!
//! Entries are matched by scenario, parameters and variant name. A change counts only when it
//! is both larger than the threshold and real: a two-sided Mann-Whitney U test on the raw
//! samples gives p < 0.05 (as Google Benchmark's compare.py), computed exactly for small
//! samples without ties. A large change that is not real is "noise"; so is any change between
//! samples too few to ever show one (3 against 3 cannot reach p < 0.05). A zero or non-finite
//! median makes an entry "n/a", never faster or slower. Derived figures with a direction (speed-ups, GFLOP/s, efficiencies,
//! bandwidths) are compared by the threshold alone, having no samples, and are reported but
//! do not fail the check.

use std::fmt::Write;

use serde_json::Value;

use super::{Report, RunRecord, SCHEMA};
use crate::harness::stats::mann_whitney_p;

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
    /// No meaningful change can be computed (a zero or non-finite baseline or value).
    NotComparable,
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
            Verdict::NotComparable => "n/a",
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

/// Decide a time comparison from the raw samples: a change counts when it is larger than the
/// threshold and the two-sided Mann-Whitney p-value (exact for small samples without ties) is
/// below 0.05. Very few samples can never reach that (3 against 3: p >= 0.1), whatever the
/// ranges: a large change is then `noise`, since 1 in 20 runs of unchanged code would put one
/// side of a 3-against-3 comparison entirely above the other.
fn time_verdict(base: &[f64], new: &[f64], change: f64, threshold: f64) -> (Verdict, Option<f64>) {
    let p = mann_whitney_p(base, new);
    if !change.is_finite() {
        return (Verdict::NotComparable, p);
    }
    if change.abs() < threshold {
        return (Verdict::Same, p);
    }
    let verdict = match (p.is_some_and(|p| p < 0.05), change > 0.0) {
        (false, _) => Verdict::Noise,
        (true, true) => Verdict::Slower,
        (true, false) => Verdict::Faster,
    };
    (verdict, p)
}

/// (new − base) / base, or NaN when it means nothing (a zero or non-finite baseline).
fn relative_change(base: f64, new: f64) -> f64 {
    if base > 0.0 && base.is_finite() && new.is_finite() {
        (new - base) / base
    } else {
        f64::NAN
    }
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
            let change = relative_change(b, n);
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
            if !higher_is_better(k) {
                continue;
            }
            let change = relative_change(b, n);
            let verdict = if !change.is_finite() {
                Verdict::NotComparable
            } else if change.abs() < threshold {
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

fn percent(change: f64) -> String {
    if change.is_finite() {
        format!("{:+.1}%", change * 100.0)
    } else {
        "n/a".to_string()
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
                "| `{}` | {} | {} | {} | {} | {}{mark} |",
                r.entry,
                value(r, r.base),
                value(r, r.new),
                percent(r.change),
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
                "{:<w$}  {:>11}  {:>11}  {:>8}  {:>6}  {}",
                r.entry,
                value(r, r.base),
                value(r, r.new),
                percent(r.change),
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
        // Three samples each cannot reach p < 0.05 even fully separated (exact p = 0.1):
        // 1 run in 20 of unchanged code would look like that.
        assert_eq!(
            time_verdict(&[1.0, 1.01, 0.99], &[1.3, 1.31, 1.29], 0.3, 0.05).0,
            Verdict::Noise
        );
        // Four each, fully separated, can (exact p = 2/70).
        assert_eq!(
            time_verdict(
                &[1.0, 1.01, 0.99, 1.02],
                &[1.3, 1.31, 1.29, 1.32],
                0.3,
                0.05
            )
            .0,
            Verdict::Slower
        );
        // One sample each is no evidence at all.
        assert_eq!(time_verdict(&[1.0], &[1.3], 0.3, 0.05).0, Verdict::Noise);
    }

    #[test]
    fn a_zero_or_broken_baseline_is_not_comparable_never_faster() {
        let zero = [0.0, 0.0, 0.0, 0.0];
        let new = [1.0, 1.1, 0.9, 1.0];
        let change = relative_change(0.0, 1.0);
        let (verdict, _) = time_verdict(&zero, &new, change, 0.05);
        assert_eq!(verdict, Verdict::NotComparable);
        assert!(!verdict.is_regression());
        assert_eq!(percent(change), "n/a");
        assert!(relative_change(f64::NAN, 1.0).is_nan());
        assert!(relative_change(1.0, f64::INFINITY).is_nan());
        assert_eq!(relative_change(2.0, 3.0), 0.5);
    }

    #[test]
    fn false_slowdowns_of_unchanged_code_are_rare_at_three_samples() {
        // Unchanged code, 3 against 3, every one of the 20 equally likely orderings: none may
        // be called slower (the old disjoint-ranges rule called 1 in 20 slower).
        let values = [1.0, 1.01, 1.02, 1.03, 1.04, 1.05];
        let mut slower = 0;
        for mask in 0u32..64 {
            if mask.count_ones() != 3 {
                continue;
            }
            let (mut base, mut new) = (Vec::new(), Vec::new());
            for (i, v) in values.iter().enumerate() {
                if mask & (1 << i) != 0 {
                    new.push(*v * 1.3);
                } else {
                    base.push(*v * 1.3);
                }
            }
            let (b, n) = (
                crate::harness::stats::median(&base).unwrap(),
                crate::harness::stats::median(&new).unwrap(),
            );
            // A generous threshold-free view: any change counts if the evidence says so.
            if time_verdict(&base, &new, relative_change(b, n), 0.0).0 == Verdict::Slower {
                slower += 1;
            }
        }
        assert_eq!(slower, 0);
    }

    #[test]
    fn derived_direction_comes_from_the_key() {
        assert!(higher_is_better("parallel_speedup"));
        assert!(higher_is_better("a_gflops"));
        assert!(higher_is_better("overlap_efficiency"));
        assert!(!higher_is_better("t1_s"));
    }
}
