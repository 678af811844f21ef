//! The chapter on this machine: one row per run, its section, its lesson, the book's figure,
//! the reader's, and whether the lesson held. `parbench all` and every plan of several runs end
//! with it; the HTML page opens with it.

use std::fmt::Write;

use super::chart::esc;
use crate::report::{Held, Report, RunRecord};

/// The widest a cell of the terminal table grows before it is cut, so a row fits a screen.
const CELL: usize = 44;

/// One row of the summary.
struct Row {
    section: String,
    scenario: String,
    lesson: String,
    book: String,
    here: String,
    held: Option<Held>,
}

/// The claim's first clause: what it says, before its criterion.
fn headline(claim: &str) -> &str {
    claim.split([':', '(']).next().unwrap_or(claim).trim()
}

/// The book's figures as printed, or a dash where the section printed none.
fn book_figures(run: &RunRecord) -> String {
    if run.book.is_empty() {
        return "—".into();
    }
    let printed: Vec<String> = run
        .book
        .iter()
        .take(3)
        .map(crate::report::book::describe)
        .collect();
    format!("{} ({})", printed.join(", "), run.book[0].source.cite())
}

fn rows(report: &Report) -> Vec<Row> {
    report
        .runs
        .iter()
        .map(|run| match &run.lesson {
            Some(l) => Row {
                section: l.section.clone(),
                scenario: run.scenario.clone(),
                lesson: headline(&l.claim).to_string(),
                book: book_figures(run),
                here: l.here.clone(),
                held: run.lesson_held(),
            },
            None => Row {
                section: "—".into(),
                scenario: run.scenario.clone(),
                lesson: "(a report from before lessons)".into(),
                book: book_figures(run),
                here: "—".into(),
                held: None,
            },
        })
        .collect()
}

fn held_word(held: Option<Held>) -> &'static str {
    held.map_or("—", Held::word)
}

/// Cut a cell to [`CELL`] characters.
fn cut(text: &str) -> String {
    if text.chars().count() <= CELL {
        text.to_string()
    } else {
        let mut s: String = text.chars().take(CELL - 1).collect();
        s.push('…');
        s
    }
}

/// The summary as a terminal table; empty for a report without runs.
pub fn render(report: &Report) -> String {
    if report.runs.is_empty() {
        return String::new();
    }
    let header = ["section", "scenario", "lesson", "book", "here", "held?"].map(String::from);
    let mut table = vec![header];
    for r in rows(report) {
        table.push([
            r.section,
            r.scenario,
            cut(&r.lesson),
            cut(&r.book),
            cut(&r.here),
            held_word(r.held).to_string(),
        ]);
    }
    let widths: Vec<usize> = (0..6)
        .map(|c| {
            table
                .iter()
                .map(|r| r[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let held: Vec<Option<Held>> = report.runs.iter().map(RunRecord::lesson_held).collect();
    let count = |h: Held| held.iter().filter(|x| **x == Some(h)).count();
    let mut out = format!(
        "\n== the chapter on this machine: {} held, {} did not, {} inconclusive\n",
        count(Held::Yes),
        count(Held::No),
        count(Held::Inconclusive)
    );
    for row in &table {
        out.push_str("  ");
        for (cell, w) in row.iter().zip(&widths) {
            let pad = w - cell.chars().count();
            let _ = write!(out, " {cell}{} ", " ".repeat(pad));
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
    }
    out
}

/// The summary as an HTML table, each row linking to its run's section (`#run-N`); the full
/// texts, not cut.
pub fn html(report: &Report) -> String {
    let mut out = String::from(
        "<h2 id=\"chapter\">The chapter on this machine</h2><table class=\"chapter\"><tr>\
         <th>section</th><th>scenario</th><th>lesson</th><th>book</th><th>here</th>\
         <th>held?</th></tr>",
    );
    for (i, r) in rows(report).into_iter().enumerate() {
        let class = match r.held {
            Some(Held::Yes) => "pass",
            Some(Held::No) => "fail",
            Some(Held::Inconclusive) => "warn",
            None => "neutral",
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td><a href=\"#run-{i}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td>\
             <td><span class=\"badge {class}\">{}</span></td></tr>",
            esc(&r.section),
            esc(&r.scenario),
            esc(&r.lesson),
            esc(&r.book),
            esc(&r.here),
            held_word(r.held)
        );
    }
    out.push_str("</table>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Environment, GpuInfo, Lesson};
    use serde_json::Map;

    fn report() -> Report {
        let mut run = RunRecord::new("async", Map::new(), vec![]);
        run.lesson = Some(Lesson {
            section: "§8.2".into(),
            claim: "async is faster than sync: sync / async wholly above 1".into(),
            held: Held::Inconclusive,
            evidence: "1.01× (95% interval 0.9–1.1×)".into(),
            here: "1.0 ms vs 1.0 ms".into(),
            book: None,
            decided: None,
        });
        let older = RunRecord::new("matmul", Map::new(), vec![]);
        Report::new(
            Environment::capture(crate::engine::Mode::Threaded, GpuInfo::unavailable("test")),
            vec![run, older],
        )
    }

    #[test]
    fn a_row_per_run_with_its_verdict() {
        let text = render(&report());
        assert!(text.contains("1 inconclusive"), "{text}");
        let row = text.lines().find(|l| l.contains("§8.2")).expect("a row");
        assert!(row.contains("async is faster than sync"), "{row}");
        assert!(row.trim_end().ends_with("inconclusive"), "{row}");
        assert!(text.contains("before lessons"), "{text}");
        let html = html(&report());
        assert!(html.contains("href=\"#run-0\""), "{html}");
        assert!(html.contains("href=\"#run-1\""), "{html}");
    }
}
