//! A comparison of two reports as text: a terminal table, a Markdown table for pull requests,
//! or JSON for a CI job to read. `report::compare` decides the rows and verdicts; the HTML
//! comparison page is `html.rs`.

use std::fmt::Write;

use serde_json::Value;

use crate::report::compare::Row;
use crate::report::{Better, Figure};

/// A compared value as the tables print it.
pub fn value(row: &Row, v: f64) -> String {
    Figure::new(row.unit, Better::Neither).format(&Value::from(v))
}

/// A relative change as the tables print it (`+3.1%`).
pub fn percent(change: f64) -> String {
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

/// The rows as JSON: one object per entry, with the threshold and the number of regressions.
pub fn render_json(rows: &[Row], threshold: f64, environment: &[String]) -> String {
    let entries: Vec<Value> = rows
        .iter()
        .map(|r| {
            serde_json::json!({
                "entry": r.entry,
                "base": r.base,
                "new": r.new,
                "change": if r.change.is_finite() { Some(r.change) } else { None },
                "p_value": r.p_value,
                "verdict": r.verdict.as_str(),
                "is_time": r.is_time,
            })
        })
        .collect();
    let doc = serde_json::json!({
        "threshold": threshold,
        "regressions": rows.iter().filter(|r| r.verdict.is_regression()).count(),
        "environment_differences": environment,
        "rows": entries,
    });
    let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::compare::compare;
    use crate::report::{Report, RunRecord, Unit};

    /// A report of one run with one variant and the derived figures `derive` adds.
    fn report_deriving(derive: impl FnOnce(&mut RunRecord)) -> Report {
        let mut run = RunRecord::new("s", serde_json::Map::new(), vec![]);
        run.add_variants(
            vec!["v".into()],
            vec![crate::harness::Summary::from_samples(&[1.0; 5]).expect("samples")],
            [None],
        );
        derive(&mut run);
        Report::new(
            crate::report::Environment::capture(
                "threaded",
                crate::report::GpuInfo::unavailable("x"),
            ),
            vec![run],
        )
    }

    #[test]
    fn a_derived_figure_prints_in_its_own_unit() {
        let doc = |v: f64| {
            report_deriving(|run| {
                run.derive_as("per_op_s", v, Figure::new(Unit::Seconds, Better::Lower));
                run.derive_as("x_ratio", v * 1e6, Figure::RATIO_LOWER_IS_BETTER);
            })
        };
        // Nanoseconds, which three decimals of a second would print as 0.000.
        let rows = compare(&doc(300e-9), &doc(600e-9), 0.1).expect("rows");
        let row = |name: &str| rows.iter().find(|r| r.entry.ends_with(name)).expect(name);
        let r = row("derived:per_op_s");
        assert_eq!(
            (value(r, r.base), value(r, r.new)),
            ("300.0 ns".into(), "600.0 ns".into())
        );
        let r = row("derived:x_ratio");
        assert_eq!(value(r, r.base), "0.30×");
        let text = render(&rows, 0.1, false);
        assert!(
            text.contains("300.0 ns") && text.contains("600.0 ns"),
            "{text}"
        );
    }
}
