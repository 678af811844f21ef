//! An `ab` run's paired entries as a table, Markdown (for a pull-request comment) or JSON; the
//! decisions themselves are `report::paired`'s.

use super::pr_markdown::{self, Line};
use super::ComparisonFormat;
use crate::harness::stats::median;
use crate::report::compare::Verdict;
use crate::report::paired::{decide_all, regressions, PairedEntry};
use crate::report::provenance::{AbSides, AB_SCHEMA};
use crate::report::Unit;

/// The median of one side's values over `e`'s pairs (`pick` chooses the side).
fn side_median(e: &PairedEntry, pick: fn(&(f64, f64)) -> f64) -> Option<f64> {
    let values: Vec<f64> = e.pairs.iter().map(pick).collect();
    median(&values)
}

/// The entries as a table (or Markdown for a pull-request comment): pairs, median ratio with its
/// bootstrap interval, the paired test's p, the verdict.
pub fn render(entries: &[PairedEntry], threshold: f64, format: ComparisonFormat) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let decisions = decide_all(entries, threshold);
    let lines = entries.iter().zip(&decisions).map(|(e, d)| {
        // The median of each side's values over the pairs, in the entry's units (times in
        // seconds, ns, ms; derived figures as plain numbers): what a reviewer reads beside
        // the change.
        let unit = if e.is_time {
            Unit::Seconds
        } else {
            Unit::Number
        };
        let side = |pick| side_median(e, pick).map_or("-".to_string(), |m| unit.word(m));
        let percent = |r: f64| format!("{:+.1}%", (r - 1.0) * 100.0);
        let [change, ci, p, verdict] = match d {
            Some(d) => [
                percent(d.median_ratio),
                format!("[{}, {}]", percent(d.ci95[0]), percent(d.ci95[1])),
                format!("{:.3}", d.p_adjusted),
                e.verdict_text(d.verdict),
            ],
            None => {
                let verdict = match e.pairs.is_empty() {
                    true => "not measured",
                    false => Verdict::NotComparable.as_str(),
                };
                ["-", "-", "-", verdict].map(String::from)
            }
        };
        Line {
            verdict: d.as_ref().map_or(Verdict::NotComparable, |d| d.verdict),
            cells: vec![
                e.name.clone(),
                side(|p| p.0),
                side(|p| p.1),
                e.pairs.len().to_string(),
                change,
                ci,
                p,
                verdict,
            ],
        }
    });
    out.push_str(&pr_markdown::render(
        format == ComparisonFormat::Markdown,
        &[
            "entry",
            "base",
            "candidate",
            "pairs",
            "change (median of pairs)",
            "95% CI",
            "p (Holm)",
            "verdict",
        ],
        &[
            (3, "pairs", 5),
            (4, "change", 8),
            (5, "95% CI", 18),
            (6, "p Holm", 6),
        ],
        lines.collect(),
    ));
    let busy = entries.iter().zip(&decisions).filter(|(e, d)| {
        e.busy_marker().is_some() && d.as_ref().is_some_and(|d| d.verdict.is_regression())
    });
    let head = format!(
        "{} entries, paired (candidate / base per pair, ABBA order), threshold {:.1}%",
        entries.len(),
        threshold * 100.0
    );
    let why = "the two sides under different load in some pairs";
    out.push_str(&pr_markdown::outcome(
        head,
        regressions(entries, threshold),
        busy.count(),
        why,
    ));
    let _ = writeln!(out);
    out
}

/// Every entry with every pair, its decision, the run's settings and both sides' provenance
/// (executable, commit, start time, environment), as JSON with `"schema": "parbench-ab/1"`.
pub fn render_json(
    entries: &[PairedEntry],
    threshold: f64,
    settings: serde_json::Value,
    sides: &AbSides,
) -> String {
    let decisions = decide_all(entries, threshold);
    let rows: Vec<serde_json::Value> = entries
        .iter()
        .zip(decisions)
        .map(|(e, d)| {
            let mut row = serde_json::json!({
                "entry": e.name,
                "is_time": e.is_time,
                "pairs": e.pairs.iter().map(|(b, c)| serde_json::json!({"base": b, "candidate": c})).collect::<Vec<_>>(),
                "median_ratio": d.as_ref().map(|d| d.median_ratio),
                "ci95": d.as_ref().map(|d| d.ci95),
                "better": e.better,
                "p_value": d.as_ref().map(|d| d.p_value),
                "p_holm": d.as_ref().map(|d| d.p_adjusted),
                "verdict": d.as_ref().map_or(Verdict::NotComparable, |d| d.verdict).as_str(),
                "median_base": side_median(e, |p| p.0),
                "median_candidate": side_median(e, |p| p.1),
            });
            let b = e.busy;
            if b.base + b.candidate > 0 {
                row["busy_pairs"] = serde_json::json!({
                    "base": b.base,
                    "candidate": b.candidate,
                    "base_alone": b.base_alone,
                    "candidate_alone": b.candidate_alone,
                });
            }
            row
        })
        .collect();
    let doc = serde_json::json!({
        "schema": AB_SCHEMA,
        "base": sides.base,
        "candidate": sides.candidate,
        "threshold": threshold,
        "regressions": regressions(entries, threshold),
        "settings": settings,
        "entries": rows,
    });
    super::pretty(&doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::paired::add_pair;

    #[test]
    fn a_change_with_busy_pairs_says_the_machine_may_explain_it() {
        let values = crate::report::fixtures::entries_taking;
        let mut entries = Vec::new();
        for (i, (b, c)) in crate::report::fixtures::drifting(12, 1.3, 0.0)
            .into_iter()
            .enumerate()
        {
            add_pair(&mut entries, &values(b), &values(c), [i < 3, false]);
        }
        assert_eq!(entries[0].busy.base_alone, 3);
        let text = render(&entries, 0.05, ComparisonFormat::Table);
        assert!(
            text.contains("slower (busy base alone in 3 of 12 pairs)"),
            "{text}"
        );
        assert!(
            text.contains("1 regression (1 with the two sides under different load"),
            "{text}"
        );
        let json: serde_json::Value = serde_json::from_str(&render_json(
            &entries,
            0.05,
            serde_json::json!({}),
            &AbSides::default(),
        ))
        .expect("json");
        assert_eq!(json["entries"][0]["verdict"], "slower");
        assert_eq!(json["entries"][0]["busy_pairs"]["base"], 3);
        assert_eq!(json["entries"][0]["busy_pairs"]["base_alone"], 3);
        // Quiet pairs: the plain verdict.
        entries[0].busy = Default::default();
        assert!(!render(&entries, 0.05, ComparisonFormat::Table).contains("busy"));
    }
}
