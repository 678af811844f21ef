//! The chapter on this machine: one row per run, its section, its lesson, the book's figure,
//! the reader's, and whether the lesson held. `parbench all` and every plan of several runs end
//! with it; the HTML page opens with it.

use std::fmt::Write;

use super::chart::esc;
use crate::report::{Held, Report, RunRecord};

/// The terminal's width when it does not say (`COLUMNS` unset): the table wraps its long
/// cells to fit it, and cuts none.
const DEFAULT_WIDTH: usize = 120;

/// The narrowest a wrapped column gets, however narrow the terminal.
const MIN_COLUMN: usize = 16;

const HEADER: [&str; 6] = ["section", "scenario", "lesson", "book", "here", "held?"];

/// The book's figures as printed, each group cited by its own edition and section, or a dash
/// where the section printed none.
fn book_figures(run: &RunRecord) -> String {
    if run.book.is_empty() {
        return "—".into();
    }
    crate::report::book::cited(&run.book)
}

/// A row per run that tests a lesson of the book, its cells under [`HEADER`], with its place
/// in the report (its section is `#run-N`) and its verdict: a program's own scenario, a
/// command, and a run from a report written before lessons have none, and no row.
fn rows(report: &Report) -> Vec<(usize, [String; 6], Option<Held>)> {
    report
        .runs
        .iter()
        .enumerate()
        .filter_map(|(index, run)| {
            let l = run.lesson.as_ref()?;
            let held = run.lesson_held();
            // The reader's figure, with the device that stood in for the GPU named.
            let here = match run.device_records.iter().any(|d| d.standing_in) {
                true => format!("{} (a CPU device standing in for the GPU)", l.here),
                false => l.here.clone(),
            };
            let cells = [
                l.section.clone(),
                run.scenario.clone(),
                // The claim's first clause: what it says, before its criterion.
                l.claim
                    .split([':', '('])
                    .next()
                    .unwrap_or(&l.claim)
                    .trim()
                    .to_string(),
                book_figures(run),
                here,
                held.map_or("—", Held::word).to_string(),
            ];
            Some((index, cells, held))
        })
        .collect()
}

/// `text` in lines of at most `width` characters, broken at spaces (a word longer than the
/// width is broken inside).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        let mut word = word.to_string();
        loop {
            let used = line.chars().count();
            let need = word.chars().count() + usize::from(used > 0);
            if used + need <= width {
                if used > 0 {
                    line.push(' ');
                }
                line.push_str(&word);
                break;
            }
            if used > 0 {
                lines.push(std::mem::take(&mut line));
                continue;
            }
            // A word wider than the column alone on its line: break it.
            let head: String = word.chars().take(width).collect();
            word = word.chars().skip(width).collect();
            lines.push(head);
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// The summary as a terminal table, as wide as `COLUMNS` where the shell exports it, else
/// [`DEFAULT_WIDTH`]; empty for a report without runs.
pub fn render(report: &Report) -> String {
    let columns = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse().ok());
    render_at(
        report,
        columns
            .filter(|&c: &usize| c >= 40)
            .unwrap_or(DEFAULT_WIDTH),
    )
}

/// The summary as a terminal table `width` characters wide: the lesson, book and here columns
/// wrap onto as many lines as their text needs, so every figure and its source is shown.
fn render_at(report: &Report, width: usize) -> String {
    let rows = rows(report);
    if rows.is_empty() {
        return String::new();
    }
    let mut table = vec![HEADER.map(String::from)];
    table.extend(rows.into_iter().map(|r| r.1));
    let natural: Vec<usize> = (0..6)
        .map(|c| {
            table
                .iter()
                .map(|r| r[c].chars().count())
                .fold(0, usize::max)
        })
        .collect();
    // Scenario and verdict keep their width; section, lesson, book and here share what is
    // left (2 spaces a column and 2 of indent), the widest narrowed first, none below
    // MIN_COLUMN.
    let wrapped = [0, 2, 3, 4];
    let fixed = natural[1] + natural[5] + 6 * 2 + 2;
    let left = width.saturating_sub(fixed);
    let mut widths = natural.clone();
    while wrapped.iter().map(|&c| widths[c]).sum::<usize>() > left {
        let widest = wrapped.into_iter().max_by_key(|&c| widths[c]).unwrap_or(3);
        if widths[widest] <= MIN_COLUMN {
            break;
        }
        widths[widest] -= 1;
    }
    let held: Vec<Option<Held>> = report.runs.iter().map(RunRecord::lesson_held).collect();
    let count = |h: Held| held.iter().filter(|x| **x == Some(h)).count();
    let mut out = format!(
        "\n== the chapter on this machine: {} held, {} did not, {} inconclusive\n",
        count(Held::Yes),
        count(Held::No),
        count(Held::Inconclusive)
    );
    for row in &table {
        let cells: Vec<Vec<String>> = row.iter().zip(&widths).map(|(c, w)| wrap(c, *w)).collect();
        let height = cells.iter().map(Vec::len).max().unwrap_or(1);
        for i in 0..height {
            out.push_str("  ");
            for (cell, w) in cells.iter().zip(&widths) {
                let text = cell.get(i).map_or("", String::as_str);
                let pad = w.saturating_sub(text.chars().count());
                let _ = write!(out, " {text}{} ", " ".repeat(pad));
            }
            out.truncate(out.trim_end().len());
            out.push('\n');
        }
    }
    out
}

/// The summary as an HTML table, each row linking to its run's section (`#run-N`); the full
/// texts, not cut.
pub fn html(report: &Report) -> String {
    let rows = rows(report);
    if rows.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<h2 id=\"chapter\">The chapter on this machine</h2><table class=\"chapter\"><tr>",
    );
    for h in HEADER {
        let _ = write!(out, "<th>{h}</th>");
    }
    out.push_str("</tr>");
    for (i, cells, held) in rows {
        let class = match held {
            Some(Held::Yes) => "pass",
            Some(Held::No) => "fail",
            Some(Held::Inconclusive) => "warn",
            None => "neutral",
        };
        out.push_str("<tr>");
        for (label, cell) in HEADER.iter().zip(&cells) {
            let cell = match *label {
                "scenario" => format!("<a href=\"#run-{i}\">{}</a>", esc(cell)),
                "held?" => format!("<span class=\"badge {class}\">{cell}</span>"),
                _ => esc(cell),
            };
            let _ = write!(out, "<td data-label=\"{label}\">{cell}</td>");
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Lesson;
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
        crate::report::fixtures::report(vec![run, older])
    }

    /// A run quoting two editions cites each figure by its own: the TF 2 loop and the
    /// PyTorch edition's products, all five figures, none credited to the other edition.
    #[test]
    fn each_book_figure_is_cited_by_its_own_edition_and_shown_whole() {
        use crate::report::BookFigure;
        use crate::scenario::book::{A_CPU, A_GPU, PYTORCH_ASYNC, TF2_ASYNC};
        let mut r = report();
        r.runs[0].book = vec![
            BookFigure::seconds("sync", 3.5589, TF2_ASYNC, None).per(1000),
            BookFigure::seconds("async", 1.0457, TF2_ASYNC, None).per(1000),
            BookFigure::seconds("NumPy", 0.2660, PYTORCH_ASYNC, A_CPU).products(10, 1000),
            BookFigure::seconds("torch", 0.0010, PYTORCH_ASYNC, A_GPU).products(10, 1000),
            BookFigure::seconds("torch synced", 0.0020, PYTORCH_ASYNC, A_GPU).products(10, 1000),
        ];
        let cited = book_figures(&r.runs[0]);
        assert_eq!(cited, "3.5589 s, 1.0457 s (TF 2 edition, §8.2); 0.2660 s (75.2 GFLOP/s), 0.0010 s (20 TFLOP/s), 0.0020 s (10 TFLOP/s) (PyTorch edition, asynchronous computation)");
        // On a narrow terminal and a wide one, every word of it is in the table.
        for width in [80, 220] {
            let text = render_at(&r, width);
            let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
            for word in cited.split(' ') {
                assert!(flat.contains(word), "{word} missing at {width}:\n{text}");
            }
            assert!(!text.contains('…'), "{text}");
            assert!(
                text.lines().all(|l| l.chars().count() <= width.max(100)),
                "{text}"
            );
        }
    }

    #[test]
    fn wrapping_breaks_at_spaces_and_inside_a_long_word() {
        assert_eq!(wrap("a bb ccc", 4), vec!["a bb", "ccc"]);
        assert_eq!(wrap("abcdefgh", 3), vec!["abc", "def", "gh"]);
        assert_eq!(wrap("", 5), vec![""]);
    }

    #[test]
    fn a_row_per_run_with_its_verdict() {
        let text = render(&report());
        assert!(text.contains("1 inconclusive"), "{text}");
        let row = text.lines().find(|l| l.contains("§8.2")).expect("a row");
        assert!(row.contains("async is faster than sync"), "{row}");
        assert!(row.trim_end().ends_with("inconclusive"), "{row}");
        // The run without a lesson has no row, and its neighbours keep their own links.
        assert_eq!(
            text.lines().filter(|l| l.contains("§")).count(),
            1,
            "{text}"
        );
        let mut report = report();
        report.runs.swap(0, 1);
        let page = html(&report);
        assert!(page.contains("href=\"#run-1\""), "{page}");
        assert!(!page.contains("href=\"#run-0\""), "{page}");
        // No run with a lesson: no chapter at all.
        report.runs.remove(1);
        assert_eq!(
            (render(&report), html(&report)),
            (String::new(), String::new())
        );
    }
}
