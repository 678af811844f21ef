//! A comparison of two reports as text: a terminal table, a Markdown table for pull requests,
//! or JSON for a CI job to read. `report::compare` decides the rows and verdicts; the HTML
//! comparison page is `html.rs`.

use std::fmt::Write;

use serde_json::Value;

use super::pr_markdown::{self, Line};
use super::ComparisonFormat;
use crate::report::compare::Row;
use crate::report::comparison::Comparison;
#[cfg(doc)]
use crate::report::coverage::Coverage;
use crate::report::provenance::COMPARE_SCHEMA;

/// A relative change as the tables print it (`+3.1%`).
pub fn percent(change: f64) -> String {
    if change.is_finite() {
        format!("{:+.1}%", change * 100.0)
    } else {
        "n/a".to_string()
    }
}

/// A row's cells as every table shows them: entry, baseline, new, change, p, verdict.
pub fn cells(r: &Row) -> Vec<String> {
    vec![
        r.entry.clone(),
        r.unit.word(r.base),
        r.unit.word(r.new),
        percent(r.change),
        r.p_value.map_or("-".to_string(), |p| format!("{p:.3}")),
        r.verdict_text(),
    ]
}

/// What the comparison says above its table when a side was measured on a busy machine.
pub const BUSY_NOTE: &str = "a side was measured on a busy machine (its runs' state below): the \
     machine may explain a change marked \"busy base\", \"busy new\", \"busy both\" or \"busy in \
     k of n … reports\", so rerun that side on a quiet machine before trusting it";

/// The comparison as a terminal table (`markdown` false) or Markdown for a pull request; the
/// sides' busy states ([`Comparison::busy`]) above it. The Markdown leads with the rows that
/// changed and folds the unchanged ones ([`pr_markdown`]), then lists the entries on one side
/// only; the terminal table leaves those to stderr (the CLI prints [`Coverage::lines`]).
pub fn render(c: &Comparison, format: ComparisonFormat) -> String {
    let markdown = format == ComparisonFormat::Markdown;
    let rows = &c.rows;
    let mut out = String::new();
    for line in c.mixed_sides() {
        let _ = writeln!(out, "warning: {line}\n");
    }
    if !c.busy.is_empty() {
        let _ = writeln!(out, "warning: {BUSY_NOTE}");
        for line in &c.busy {
            let _ = writeln!(out, "{}  {line}", if markdown { "-" } else { " " });
        }
        let _ = writeln!(out);
    }
    let lines = rows.iter().map(|r| Line {
        verdict: r.verdict,
        cells: cells(r),
    });
    out.push_str(&pr_markdown::render(
        markdown,
        &["entry", "baseline", "new", "change", "p", "verdict"],
        &[
            (1, "baseline", 11),
            (2, "new", 11),
            (3, "change", 8),
            (4, "p", 6),
        ],
        lines.collect(),
    ));
    if markdown {
        out.push_str(&pr_markdown::one_sided_section(&c.coverage));
    }
    let busy = rows
        .iter()
        .filter(|r| r.verdict.is_regression() && r.busy.any());
    let head = format!(
        "{} entries compared, {}, threshold {:.1}%",
        rows.len(),
        c.coverage.counts(),
        c.threshold * 100.0
    );
    out.push_str(&pr_markdown::outcome(
        head,
        c.regressions(),
        busy.count(),
        "a busy side",
    ));
    // What the comparison could learn of the noise, in a sentence.
    let (b, n) = c.sides;
    let learned = match c.learned_from {
        0 => String::new(),
        k => format!(", and the reruns among {k} earlier reports"),
    };
    let sides = format!("{} against {n}", crate::units::count(b, "report"));
    let noise = if b + n > 2 || c.learned_from > 0 {
        format!(
            "Each change is judged against its spread over the runs ({sides}{learned}), 5% false \
             alarms over the entries."
        )
    } else {
        format!(
            "{sides} and no history: the spread between runs is unknown, so a change past both \
             runs' intervals is inconclusive unless it exceeds them by {:.0}%, or by the larger \
             drift a scenario records in its runs (and never a regression with a busy side). \
             Compare reruns a side (BASE... -- NEW...), add \
             --history, or gate with `parbench ab`.",
            crate::report::noise::UNLEARNED_DRIFT * 100.0
        )
    };
    let _ = writeln!(out, "\n{noise}");
    out
}

/// The comparison as JSON (`"schema": "parbench-compare/1"`): both sides' provenance (file,
/// commit, tool, start time, environment with its limits), the threshold, one object per row,
/// the entries on one side only and the number of regressions. `require_all` records whether
/// entries on one side only fail the comparison.
///
/// `verdict` stays one of the plain words, for scripts; a row measured with a busy side adds
/// `"busy": "base" | "new" | "both"` and `busy_reports` (how many of each side's), a marked row
/// `mark` (why it is not scored), and `busy_states` holds each report's state line. `base` and
/// `new` are each side's first report, `base_reports` and `new_reports` every report.
pub fn render_json(c: &Comparison, require_all: bool) -> String {
    let entries: Vec<Value> = c
        .rows
        .iter()
        .map(|r| {
            let mut row = serde_json::json!({
                "entry": r.entry,
                "base": r.base,
                "new": r.new,
                "change": if r.change.is_finite() { Some(r.change) } else { None },
                "p_value": r.p_value,
                "verdict": r.verdict.as_str(),
                "is_time": r.is_time,
            });
            if r.busy.any() {
                let side = match (r.busy.base > 0, r.busy.new > 0) {
                    (true, true) => "both",
                    (true, false) => "base",
                    _ => "new",
                };
                row["busy"] = Value::from(side);
                row["busy_reports"] = serde_json::json!({"base": r.busy.base, "new": r.busy.new});
            }
            if let Some(mark) = &r.mark {
                row["mark"] = Value::from(mark.to_string());
            }
            row
        })
        .collect();
    let mut doc = serde_json::json!({
        "schema": COMPARE_SCHEMA,
        "base": c.base.first(),
        "new": c.new.first(),
        "base_reports": c.base,
        "new_reports": c.new,
        "threshold": c.threshold,
        "require_all": require_all,
        "compared": c.rows.len(),
        "reports": {"base": c.sides.0, "new": c.sides.1},
        "learned_from": c.learned_from,
        "regressions": c.regressions(),
        "only_in_base": c.coverage.only_in_base,
        "only_in_new": c.coverage.only_in_new,
        "renamed": c.coverage.renamed,
        "not_measured": c.coverage.not_measured,
        "environment_differences": c.environment_differences,
        "rows": entries,
    });
    if !c.busy.is_empty() {
        doc["busy_states"] = Value::from(c.busy.clone());
    }
    let mixed = c.mixed_sides();
    if !mixed.is_empty() {
        doc["mixed_sides"] = Value::from(mixed);
    }
    super::pretty(&doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Better, Figure, Report, Unit};

    /// A report of one run whose variant took `seconds` in each of 5 samples, its machine
    /// `busy` (other processes at 48%) or quiet.
    fn report_taking(seconds: f64, busy: bool) -> Report {
        let mut report = crate::report::fixtures::deriving(|_| {});
        let run = &mut report.runs[0];
        run.variants[0].summary =
            crate::harness::Summary::from_samples(&[seconds; 5]).expect("samples");
        run.record_state(crate::machine::RunState {
            other_cpu_fraction: Some(if busy { 0.48 } else { 0.01 }),
            ..crate::machine::RunState::unknown(1.0, 2)
        });
        report
    }

    /// `new` against `base`, with a spread of 2% learned from a history.
    fn with_history(base: &Report, new: &Report) -> Comparison {
        let spread = |_: &str| crate::report::noise::Spread::of_sigma(0.02, 10.0);
        let learned = crate::report::comparison::Learned {
            spread: &spread,
            reports: 10,
        };
        Comparison::of_sides(&[(base, "a.json")], &[(new, "b.json")], &learned, 0.05)
            .expect("comparison")
    }

    #[test]
    fn a_change_with_a_busy_side_says_the_machine_may_explain_it() {
        let (quiet, busy) = (report_taking(1.0, false), report_taking(2.7, true));
        // One report a side and no history: a busy machine's drift has no bound.
        let c = Comparison::of((&quiet, "a.json"), (&busy, "b.json"), 0.05).expect("comparison");
        assert_eq!(c.rows[0].verdict_text(), "inconclusive");
        assert_eq!(c.regressions(), 0);
        let c = with_history(&quiet, &busy);
        let rows = &c.rows;
        assert_eq!(rows[0].verdict, crate::report::compare::Verdict::Slower);
        assert_eq!(rows[0].verdict_text(), "slower (busy new)");
        let states = crate::report::compare::busy_states(&[&quiet], &[&busy]);
        assert_eq!(states.len(), 2, "{states:?}");
        assert!(
            states[0].contains(" base: other processes 1.0%"),
            "{states:?}"
        );
        assert!(
            states[1].contains(" new (busy): other processes 48.0%"),
            "{states:?}"
        );
        for format in [ComparisonFormat::Table, ComparisonFormat::Markdown] {
            let text = render(&c, format);
            assert!(
                text.starts_with("warning: a side was measured on a busy machine"),
                "{text}"
            );
            assert!(text.contains("slower (busy new)"), "{text}");
            assert!(
                text.contains("1 regression (1 with a busy side, which the machine may explain)"),
                "{text}"
            );
        }
        let json: Value = serde_json::from_str(&render_json(&c, false)).expect("json");
        assert_eq!(json["rows"][0]["verdict"], "slower");
        assert_eq!(json["rows"][0]["busy"], "new");
        assert_eq!(json["busy_states"].as_array().map(Vec::len), Some(2));

        // Both quiet: no note, no marker.
        let (a, b) = (report_taking(1.0, false), report_taking(2.7, false));
        let c = Comparison::of((&a, "a.json"), (&b, "b.json"), 0.05).expect("comparison");
        assert!(c.busy.is_empty());
        assert_eq!(c.rows[0].verdict_text(), "slower", "2.7× clears the drift");
        let json: Value = serde_json::from_str(&render_json(&c, false)).expect("json");
        assert!(json["rows"][0].get("busy").is_none() && json.get("busy_states").is_none());
    }

    #[test]
    fn a_marked_row_says_why_in_every_format() {
        use crate::report::fixtures::timed;
        let (base, new) = (timed(1.0, 0.5, 0.5, None), timed(2.7, 0.5, 0.5, None));
        let c = with_history(&base, &new);
        for format in [ComparisonFormat::Table, ComparisonFormat::Markdown] {
            let text = render(&c, format);
            assert!(text.contains("marked: follows seq (slower)"), "{text}");
        }
        let json: Value = serde_json::from_str(&render_json(&c, false)).expect("json");
        let rows = json["rows"].as_array().expect("rows");
        let speedup = rows
            .iter()
            .find(|r| r["entry"] == "s[] derived:speedup")
            .expect("speedup");
        assert_eq!(speedup["verdict"], "marked");
        assert_eq!(speedup["mark"], "follows seq (slower)");
        assert_eq!(json["base_reports"][0]["path"], "a.json");
        assert_eq!(json["base"]["path"], "a.json");
    }

    #[test]
    fn a_derived_figure_prints_in_its_own_unit() {
        let doc = |v: f64| {
            crate::report::fixtures::deriving(|run| {
                run.derive_as("per_op_s", v, Figure::new(Unit::Seconds, Better::Lower));
                run.derive_as("x_ratio", v * 1e6, Figure::RATIO_LOWER_IS_BETTER);
            })
        };
        // Nanoseconds, which three decimals of a second would print as 0.000.
        let (base, new) = (doc(300e-9), doc(600e-9));
        let c = Comparison::of((&base, "a.json"), (&new, "b.json"), 0.1).expect("comparison");
        let rows = &c.rows;
        let row = |name: &str| rows.iter().find(|r| r.entry.ends_with(name)).expect(name);
        let r = row("derived:per_op_s");
        assert_eq!(
            (r.unit.word(r.base), r.unit.word(r.new)),
            ("300.0 ns".into(), "600.0 ns".into())
        );
        let r = row("derived:x_ratio");
        assert_eq!(r.unit.word(r.base), "0.30×");
        let text = render(&c, ComparisonFormat::Table);
        assert!(
            text.contains("300.0 ns") && text.contains("600.0 ns"),
            "{text}"
        );
    }
}
