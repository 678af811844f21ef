//! The verdict tables of `compare` and `ab`, for a terminal or a pull request. The Markdown
//! shows the rows whose verdict is not "same" first (regressions, then improvements, then
//! noise and not comparable), then the unchanged rows folded into a `<details>` block, so a
//! reviewer sees what moved without scrolling past dozens of unchanged entries.

use std::fmt::Write as _;

use crate::report::compare::Verdict;
use crate::report::coverage::Coverage;

/// One table row: its verdict (which orders and folds it) and its cells, already worded.
pub struct Line {
    pub verdict: Verdict,
    pub cells: Vec<String>,
}

/// Where a verdict goes: `None` for "same" (folded), else its place, regressions first.
fn rank(verdict: Verdict) -> Option<u8> {
    match verdict {
        Verdict::Slower => Some(0),
        Verdict::Worse => Some(1),
        Verdict::Faster => Some(2),
        Verdict::Better => Some(3),
        Verdict::Inconclusive | Verdict::Marked => Some(4),
        Verdict::Noise => Some(5),
        Verdict::NotComparable => Some(6),
        Verdict::Same => None,
    }
}

/// A Markdown table: `header`'s first and last columns left-aligned, the others right.
fn table(out: &mut String, header: &[&str], lines: &[&Line]) {
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let align: Vec<&str> = (0..header.len())
        .map(|i| {
            if i == 0 || i + 1 == header.len() {
                "---"
            } else {
                "---:"
            }
        })
        .collect();
    let _ = writeln!(out, "|{}|", align.join("|"));
    for line in lines {
        let _ = writeln!(out, "| {} |", line.cells.join(" | "));
    }
}

/// The changed rows in order (stable within a verdict), then the unchanged ones folded.
pub fn tables(header: &[&str], lines: &[Line]) -> String {
    let mut changed: Vec<&Line> = lines.iter().filter(|l| rank(l.verdict).is_some()).collect();
    changed.sort_by_key(|l| rank(l.verdict));
    let same: Vec<&Line> = lines.iter().filter(|l| rank(l.verdict).is_none()).collect();
    let mut out = String::new();
    if changed.is_empty() {
        let _ = writeln!(out, "No entry changed beyond the threshold.");
    } else {
        table(&mut out, header, &changed);
    }
    if !same.is_empty() {
        let _ = writeln!(
            out,
            "\n<details><summary>{} unchanged</summary>\n",
            same.len()
        );
        table(&mut out, header, &same);
        let _ = writeln!(out, "\n</details>");
    }
    out
}

/// The rows as Markdown ([`tables`] under `header`: the entry as code, a regression marked
/// ❌), or as a terminal table of the entry, the cells `text` names (the cell's index, its
/// column's header and width) and the verdict: each line's first and last cells.
pub fn render(
    markdown: bool,
    header: &[&str],
    text: &[(usize, &str, usize)],
    lines: Vec<Line>,
) -> String {
    let last = header.len() - 1;
    if markdown {
        let lines: Vec<Line> = lines
            .into_iter()
            .map(|mut l| {
                l.cells[0] = format!("`{}`", l.cells[0]);
                if l.verdict.is_regression() {
                    l.cells[last].push_str(" ❌");
                }
                l
            })
            .collect();
        return tables(header, &lines);
    }
    let w = lines
        .iter()
        .map(|l| l.cells[0].chars().count())
        .fold(5, usize::max);
    let mut out = String::new();
    let mut row = |first: &str, middle: Vec<&str>, last: &str| {
        let _ = write!(out, "{first:<w$}");
        for (cell, (_, _, width)) in middle.iter().zip(text) {
            let _ = write!(out, "  {cell:>width$}");
        }
        let _ = writeln!(out, "  {last}");
    };
    row("entry", text.iter().map(|t| t.1).collect(), "verdict");
    for l in &lines {
        row(
            &l.cells[0],
            text.iter().map(|t| l.cells[t.0].as_str()).collect(),
            &l.cells[last],
        );
    }
    out
}

/// `\n{head}: 2 regressions`, and how many of them (`busy`) came with `what`, which the machine
/// may explain.
pub fn outcome(head: String, regressions: usize, busy: usize, what: &str) -> String {
    let mut text = format!(
        "\n{head}: {}",
        crate::units::count(regressions, "regression")
    );
    if busy > 0 {
        let _ = write!(text, " ({busy} with {what}, which the machine may explain)");
    }
    text
}

/// The entries a comparison could not match, as a Markdown section; empty when there are none.
pub fn one_sided_section(coverage: &Coverage) -> String {
    if coverage.is_complete() {
        return String::new();
    }
    let mut out = format!("\n**Entries on one side only**: {}\n\n", coverage.counts());
    for e in &coverage.only_in_base {
        let _ = writeln!(out, "- missing in new: `{e}`");
    }
    for e in &coverage.only_in_new {
        let _ = writeln!(out, "- new in new: `{e}`");
    }
    for r in &coverage.renamed {
        let _ = writeln!(out, "- renamed? `{}` → `{}`", r.base, r.new);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(entry: &str, verdict: Verdict) -> Line {
        Line {
            verdict,
            cells: vec![entry.into(), verdict.as_str().into()],
        }
    }

    #[test]
    fn changes_lead_regressions_first_and_the_same_rows_fold() {
        let lines = [
            line("a", Verdict::Same),
            line("b", Verdict::Faster),
            line("c", Verdict::Noise),
            line("d", Verdict::Slower),
            line("e", Verdict::Same),
            line("f", Verdict::Slower),
        ];
        let text = tables(&["entry", "verdict"], &lines);
        let at = |s: &str| text.find(s).unwrap_or_else(|| panic!("{s} in {text}"));
        assert!(text.starts_with("| entry | verdict |\n|---|---|\n| d | slower |"));
        assert!(at("| d |") < at("| f |") && at("| f |") < at("| b |"));
        assert!(at("| b |") < at("| c |") && at("| c |") < at("<details>"));
        assert!(text.contains("<details><summary>2 unchanged</summary>"));
        assert!(at("<details>") < at("| a |") && at("| e |") < at("</details>"));
    }

    #[test]
    fn nothing_changed_says_so_and_nothing_same_folds_nothing() {
        let text = tables(&["entry", "verdict"], &[line("a", Verdict::Same)]);
        assert!(
            text.starts_with("No entry changed beyond the threshold."),
            "{text}"
        );
        let text = tables(&["entry", "verdict"], &[line("a", Verdict::Slower)]);
        assert!(!text.contains("<details>"), "{text}");
    }
}
