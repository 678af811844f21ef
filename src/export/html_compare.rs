//! Two reports as one self-contained HTML page, in the report page's style (`html.rs`): both
//! environments side by side (differences marked), `compare`'s verdicts, and each entry both
//! have as paired bars.

use std::fmt::Write;

use super::chart::esc;
use super::html::{badge, close, environment_table, figure, open, WIDTH};
use super::svg;
use crate::report::compare::{self, Row};
use crate::report::comparison::Learned;
use crate::report::Report;

/// The page comparing two reports: both environments side by side (differences marked),
/// `compare`'s verdicts, and each entry both have as paired bars.
pub fn comparison_page(base: &Report, new: &Report, names: [&str; 2], threshold: f64) -> String {
    let mut out = String::new();
    open(&mut out, "parbench comparison");
    let none = Learned::NONE.spread;
    // An error here is that nothing is in both reports.
    let rows = compare::compare(&[base], &[new], none, threshold).ok();
    let regressions = rows.iter().flatten().filter(|r| r.verdict.is_regression());
    let regressions = regressions.count();
    let _ = write!(
        out,
        "<h1>parbench comparison</h1><p class=\"sub\">baseline <code>{}</code> against new \
         <code>{}</code>; threshold {:.1}%: {} {regressions} regression(s)</p>",
        esc(names[0]),
        esc(names[1]),
        threshold * 100.0,
        badge(regressions == 0)
    );
    out.push_str(
        "<h2 id=\"environment\">Environments</h2><table class=\"env\"><tr><th></th>\
         <th>baseline</th><th>new</th></tr>",
    );
    environment_table(&mut out, &[base, new]);
    let differences = crate::report::identity::environment_differences(&[base], &[new], none);
    if !differences.is_empty() {
        let _ = write!(
            out,
            "<p><span class=\"badge warn\">warning</span> the reports come from different \
             environments ({}): a change may be the machine's, not the code's.</p>",
            esc(&differences.join("; "))
        );
    }
    let busy = compare::busy_states(&[base], &[new]);
    if !busy.is_empty() {
        let _ = write!(
            out,
            "<p><span class=\"badge warn\">warning</span> {}</p><ul class=\"notes\">",
            esc(crate::export::compare::BUSY_NOTE)
        );
        for line in &busy {
            let _ = write!(out, "<li>{}</li>", esc(line));
        }
        out.push_str("</ul>");
    }
    out.push_str("<h2 id=\"verdicts\">Verdicts</h2>");
    match &rows {
        Some(rows) => verdict_table(&mut out, rows),
        None => out.push_str(
            "<p class=\"missing\">Nothing to compare: no scenario, parameters and variant \
             appear in both reports.</p>",
        ),
    }
    for run in &base.runs {
        let Some(other) = new.runs.iter().find(|r| r.key() == run.key()) else {
            continue;
        };
        let _ = write!(
            out,
            "<section><h2>{}</h2><p class=\"sub\"><code>{}</code><br/>checks: baseline {}, new {}</p>",
            esc(&run.scenario),
            esc(&svg::describe_parameters(run)),
            badge(run.checks_passed()),
            badge(other.checks_passed())
        );
        if let Some(chart) = svg::comparison_bars(run, other, ["baseline", "new"], WIDTH) {
            figure(&mut out, &chart);
        }
        out.push_str("</section>\n");
    }
    let only = |a: &Report, b: &Report| -> Vec<String> {
        a.runs
            .iter()
            .filter(|r| !b.runs.iter().any(|o| o.key() == r.key()))
            .map(|r| r.key())
            .collect()
    };
    for (which, keys) in [("baseline", only(base, new)), ("new", only(new, base))] {
        if !keys.is_empty() {
            let _ = write!(out, "<h3>Only in the {which} report</h3><ul>");
            for k in keys {
                let _ = write!(out, "<li><code>{}</code></li>", esc(&k));
            }
            out.push_str("</ul>");
        }
    }
    close(&mut out);
    out
}

fn verdict_table(out: &mut String, rows: &[Row]) {
    out.push_str(
        "<table><tr><th>entry</th><th>baseline</th><th>new</th><th>change</th><th>p</th>\
         <th>verdict</th></tr>",
    );
    for r in rows {
        let class = match r.verdict.as_str() {
            "slower" | "worse" => "fail",
            "faster" | "better" => "pass",
            _ => "neutral",
        };
        let cells = super::compare::cells(r);
        let _ = write!(out, "<tr><td><code>{}</code></td>", esc(&cells[0]));
        for cell in &cells[1..5] {
            let _ = write!(out, "<td class=\"num\">{cell}</td>");
        }
        let _ = write!(
            out,
            "<td><span class=\"badge {class}\">{}</span></td></tr>",
            esc(&cells[5])
        );
    }
    out.push_str("</table>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::html::tests::{parse, report};

    #[test]
    fn a_comparison_page_shows_the_verdicts_side_by_side() {
        let html = comparison_page(&report(1e-3), &report(2e-3), ["a.json", "b.json"], 0.05);
        parse(&html);
        assert!(html.contains("slower"), "twice the time is slower");
        assert!(html.contains("baseline") && html.contains("b.json"));
        assert_eq!(html.matches("<svg").count(), 1);
    }
}
