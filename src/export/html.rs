//! A report as one self-contained HTML page: the environment, then per scenario its
//! explanation, checks (pass/fail at a glance), the variants with their confidence intervals,
//! the derived figures and the figures (`svg/`): bars with 95% CI whiskers, loss curves, the
//! lane timeline of the traced repeat, and for a sweep its lines against the swept axis (two
//! reports: `html_compare.rs`). Inline CSS and SVG only: no
//! script, font or image is fetched, so the page opens offline and prints as it shows.
//!
//! The page is XHTML-compatible (every element closed, only XML's entities), so an XML parser
//! can check it.

use std::fmt::Write;

use super::chart::esc;
use super::svg;
use crate::report::{Environment, Report, RunRecord, Unit, WARNING};
use crate::units::{human_bytes, human_time};

/// Width of the figures in the page, pixels.
pub(super) const WIDTH: f64 = 880.0;

const STYLE: &str = "
body { font-family: 'DejaVu Sans', Helvetica, Arial, sans-serif; color: #1a1a1a; margin: 0;
  background: #fafafa; line-height: 1.45; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 32px 64px; background: white; }
h1 { font-size: 28px; margin: 0 0 4px; }
h2 { font-size: 22px; margin: 36px 0 6px; padding-top: 12px; border-top: 2px solid #333; }
h3 { font-size: 16px; margin: 18px 0 6px; }
.sub { color: #555; margin: 0 0 18px; }
table { border-collapse: collapse; margin: 6px 0 12px; font-size: 14px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #eee; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
code { font-size: 13px; background: #f2f2f2; padding: 0 3px; overflow-wrap: anywhere; }
.badge { display: inline-block; min-width: 3.2em; text-align: center; font-weight: bold;
  border-radius: 3px; padding: 0 6px; font-size: 13px; border: 2px solid; }
.pass { color: #0b5e20; border-color: #0b5e20; background: #e3f4e6; }
.fail { color: white; border-color: #9c0d0d; background: #b3121b; }
.neutral { color: #333; border-color: #777; background: #f0f0f0; }
.warn { color: #6b4500; border-color: #8a5a00; background: #fff3d6; }
ul.checks { list-style: none; padding: 0; margin: 6px 0; }
ul.checks li { margin: 4px 0; }
.explain { background: #f4f7fb; border-left: 4px solid #1f4e9c; padding: 6px 12px; margin: 8px 0; }
.notes li { color: #444; }
.lesson { border: 1px solid #ccc; border-radius: 4px; padding: 6px 12px; margin: 10px 0; }
.lesson ul { list-style: none; padding: 0; margin: 4px 0; }
.lesson li { margin: 3px 0; overflow-wrap: anywhere; }
.lesson .mark { display: inline-block; width: 1.4em; font-weight: bold; }
.figure { margin: 12px 0; overflow-x: auto; }
.figure svg { max-width: 100%; height: auto; display: block; }
.missing { color: #555; font-style: italic; }
.env td { overflow-wrap: anywhere; }
.env td:first-child { font-weight: bold; white-space: nowrap; }
tr.differs td { background: #fff3d6; }
details summary { cursor: pointer; font-weight: bold; margin: 8px 0; }
@media (max-width: 640px) {
  table.chapter, table.chapter tbody, table.chapter tr, table.chapter td { display: block; }
  table.chapter tr:first-child { display: none; }
  table.chapter tr { border: 1px solid #ccc; margin: 0 0 10px; }
  table.chapter td { border: 0; padding: 2px 8px; }
  table.chapter td::before { content: attr(data-label) \": \"; font-weight: bold; color: #555; }
}
@media print { body { background: white; } main { padding: 0; } h2 { break-before: auto; }
  .figure { break-inside: avoid; } }
";

pub(super) fn open(out: &mut String, title: &str) {
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\
         <meta charset=\"utf-8\"/><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\
         <title>{}</title><style>{STYLE}</style></head>\n<body><main>\n",
        esc(title)
    );
}

pub(super) fn close(out: &mut String) {
    out.push_str("</main></body></html>\n");
}

pub(super) fn badge(passed: bool) -> &'static str {
    if passed {
        "<span class=\"badge pass\">✓ pass</span>"
    } else {
        "<span class=\"badge fail\">✗ FAIL</span>"
    }
}

/// The environment rows: what, value.
fn environment_rows(report: &Report) -> Vec<(&'static str, String)> {
    let e: &Environment = &report.environment;
    let gpu = if e.gpu.available {
        let mut s = e.gpu.name.clone().unwrap_or_else(|| "available".into());
        if let Some(m) = e.gpu.memory_bytes {
            let _ = write!(s, ", {}", human_bytes(m));
        }
        if let Some(d) = &e.gpu.driver {
            let _ = write!(s, ", driver {d}");
        }
        s
    } else {
        format!(
            "unavailable: {}",
            e.gpu.reason.as_deref().unwrap_or("unknown reason")
        )
    };
    vec![
        (
            "parbench",
            format!("{} ({})", report.tool.version, report.tool.git_commit),
        ),
        ("started", e.started_at.clone()),
        ("host", e.host.clone()),
        ("OS", e.os.clone()),
        (
            "CPU",
            format!("{}, {}", e.cpu_model, crate::units::count(e.cores, "core")),
        ),
        ("memory", human_bytes(e.memory_bytes)),
        ("GPU", gpu),
        // The machine's limits, as `parbench devices --probe` words them; a row in every
        // report, so two reports' rows line up side by side (those written before parbench
        // measured them have none).
        (
            "limits",
            e.limits.as_ref().map_or_else(
                || "not recorded".to_string(),
                |limits| limits.lines().join("; "),
            ),
        ),
        ("engine", e.engine.clone()),
        ("rustc", e.rustc.clone()),
        ("command", e.argv.join(" ")),
    ]
}

/// The environment rows of `reports` side by side, after the header row the caller wrote;
/// with several, a row that differs (but for when and how each started) is marked.
pub(super) fn environment_table(out: &mut String, reports: &[&Report]) {
    let columns: Vec<_> = reports.iter().map(|r| environment_rows(r)).collect();
    for (i, (k, first)) in columns[0].iter().enumerate() {
        let values: Vec<&String> = columns.iter().map(|c| &c[i].1).collect();
        let differs = values.iter().any(|v| *v != first) && !matches!(*k, "started" | "command");
        let class = if differs { " class=\"differs\"" } else { "" };
        let _ = write!(out, "<tr{class}><td>{k}</td>");
        for v in values {
            let _ = write!(out, "<td>{}</td>", esc(v));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
}

pub fn page(report: &Report) -> String {
    let mut out = String::new();
    open(&mut out, "parbench report");
    // `3 run(s) of the chapter's experiments`, or how many of them are where others are not.
    let n = report.runs.len();
    let runs = match report.runs.iter().filter(|r| r.lesson.is_some()).count() {
        k if k == n => format!("{n} run(s) of the chapter's experiments"),
        0 => format!("{n} run(s)"),
        k => format!("{n} run(s), {k} of them the chapter's experiments"),
    };
    let checks: usize = report.runs.iter().map(|r| r.checks.len()).sum();
    let failed: usize = report
        .runs
        .iter()
        .map(|r| r.checks.iter().filter(|c| !c.passed).count())
        .sum();
    let _ = write!(
        out,
        "<h1>parbench report</h1><p class=\"sub\">{runs}; {checks} check(s), {} {}</p>",
        badge(failed == 0),
        if failed > 0 {
            format!("{failed} failed")
        } else {
            "all passed".into()
        }
    );
    // Empty for a report without a run of the chapter's experiments.
    out.push_str(&super::summary::html(report));
    out.push_str("<h2 id=\"environment\">Environment</h2><table class=\"env\">");
    environment_table(&mut out, &[report]);
    summary_table(&mut out, report);
    let sweep = report
        .sweep
        .as_ref()
        .and_then(|s| Some((s, svg::sweep_of(report, &s.scenario)?)));
    if let Some((s, (axis, runs))) = &sweep {
        let scenario = &s.scenario;
        let _ = write!(
            out,
            "<h2 id=\"sweep\">Sweep of {} over {}</h2>",
            esc(scenario),
            esc(axis)
        );
        let axes: Vec<String> = s
            .axes
            .iter()
            .map(|(k, v)| format!("<code>{}</code> = {}", esc(k), esc(&v.join(", "))))
            .collect();
        let _ = write!(out, "<p>Axes: {}</p>", axes.join("; "));
        for chart in svg::scaling_chart(runs, WIDTH)
            .into_iter()
            .chain(svg::sweep_charts(scenario, axis, runs, WIDTH))
        {
            figure(&mut out, &chart);
        }
        out.push_str("<details open=\"open\"><summary>Every point of the sweep: tables and figures</summary>");
    }
    for (i, run) in report.runs.iter().enumerate() {
        run_section(&mut out, report, i, run);
    }
    if sweep.is_some() {
        out.push_str("</details>");
    }
    close(&mut out);
    out
}

/// A line per run: scenario, parameters, checks, with a link to its section.
fn summary_table(out: &mut String, report: &Report) {
    if report.runs.is_empty() {
        out.push_str("<p class=\"missing\">The report holds no runs.</p>");
        return;
    }
    out.push_str(
        "<h2 id=\"summary\">Scenarios</h2><table><tr><th>scenario</th><th>parameters</th>\
         <th>checks</th><th>variants</th></tr>",
    );
    for (i, run) in report.runs.iter().enumerate() {
        let failed = run.checks.iter().filter(|c| !c.passed).count();
        let status = if run.checks.is_empty() {
            "<span class=\"badge neutral\">none</span>".to_string()
        } else if failed == 0 {
            format!("{} {}", badge(true), run.checks.len())
        } else {
            format!("{} {failed} of {}", badge(false), run.checks.len())
        };
        let _ = write!(
            out,
            "<tr><td><a href=\"#run-{i}\">{}</a></td><td><code>{}</code></td><td>{status}</td><td class=\"num\">{}</td></tr>",
            esc(&run.scenario),
            esc(&svg::describe_parameters(run)),
            run.variants.len()
        );
    }
    out.push_str("</table>");
}

/// The run's lesson: its claim, the verdict, and each finding behind it.
fn lesson_block(out: &mut String, run: &RunRecord) {
    let Some(view) = super::lesson::view(run) else {
        return;
    };
    let lesson = view.lesson;
    let class = match view.held {
        crate::report::Held::Yes => "pass",
        crate::report::Held::No => "fail",
        crate::report::Held::Inconclusive => "neutral",
    };
    let _ = write!(
        out,
        "<div class=\"lesson\"><h3>Lesson ({}) <span class=\"badge {class}\">{}</span></h3>\
         <p>{}</p><ul>",
        esc(&lesson.section),
        view.held.word(),
        esc(&lesson.claim)
    );
    for (held, line) in &view.why {
        let _ = write!(
            out,
            "<li><span class=\"mark\">{}</span>{}</li>",
            super::lesson::mark(*held),
            esc(line)
        );
    }
    if let Some(busy) = &view.busy {
        let _ = write!(
            out,
            "<li><span class=\"badge warn\">busy</span> {}</li>",
            esc(busy)
        );
    }
    for more in &view.more {
        let _ = write!(out, "<li><span class=\"mark\">+</span>{}</li>", esc(more));
    }
    out.push_str("</ul>");
    if let Some(book) = &lesson.book {
        let _ = write!(
            out,
            "<p class=\"sub\">the book, {}<br/>here: {}</p>",
            esc(book),
            esc(&lesson.here)
        );
    }
    out.push_str("</div>");
}

pub(super) fn figure(out: &mut String, svg: &str) {
    out.push_str("<div class=\"figure\">");
    out.push_str(svg);
    out.push_str("</div>");
}

fn run_section(out: &mut String, report: &Report, index: usize, run: &RunRecord) {
    let _ = write!(
        out,
        "<section id=\"run-{index}\"><h2>{}</h2><p class=\"sub\"><code>{}</code><br/>devices: {}</p>",
        esc(&run.scenario),
        esc(&svg::describe_parameters(run)),
        esc(&run.devices.join(", "))
    );
    for line in &run.explanation {
        let _ = write!(out, "<p class=\"explain\">{}</p>", esc(line));
    }
    if !run.explanation_detail.is_empty() {
        let _ = write!(
            out,
            "<details><summary>{} sentence(s) on detail figures</summary>",
            run.explanation_detail.len()
        );
        for line in &run.explanation_detail {
            let _ = write!(out, "<p class=\"explain\">{}</p>", esc(line));
        }
        out.push_str("</details>");
    }
    lesson_block(out, run);
    checks_list(out, run);
    variants_table(out, run);
    derived_table(out, run);
    if !run.notes.is_empty() {
        out.push_str("<ul class=\"notes\">");
        for n in &run.notes {
            let _ = match n.strip_prefix(WARNING) {
                Some(w) => write!(
                    out,
                    "<li><span class=\"badge warn\">warning</span> {}</li>",
                    esc(w)
                ),
                None => write!(out, "<li>note: {}</li>", esc(n)),
            };
        }
        if let Some(state) = run.state.as_ref().filter(|s| s.is_busy()) {
            let _ = write!(out, "<li>machine: {}</li>", esc(&state.to_string()));
        }
        out.push_str("</ul>");
    }
    let _ = write!(out, "<div id=\"run-{index}-figures\">");
    let charts = (svg::variant_bars(run, WIDTH).into_iter())
        .chain(svg::scaling_chart(&[run], WIDTH))
        .chain(svg::loss_charts(run, WIDTH))
        .chain(svg::busbw_chart(run, WIDTH))
        .chain(svg::memory_chart(run, WIDTH));
    for chart in charts {
        figure(out, &chart);
    }
    let note = svg::timeline_note(report, index);
    match svg::timeline_chart(report, index, WIDTH) {
        Some(chart) => figure(out, &chart),
        None if note.is_some() => {}
        None => out.push_str(
            "<p class=\"missing\">No lane timeline: this report carries no trace of this run. \
             A scenario run with <code>--html FILE</code> (or <code>--trace</code>, \
             <code>--timeline</code>) records one extra traced repeat of every variant, and its \
             <code>-o</code> report keeps it; work timed outside the engine (a command, a \
             program's own scenario) has no lanes to trace.</p>",
        ),
    }
    if let Some(note) = note {
        let _ = write!(out, "<p class=\"missing\">{}</p>", esc(&note));
    }
    out.push_str("</div></section>\n");
}

/// The checks: failing ones always shown, passing ones folded where there are many, as the
/// terminal's reader table folds them.
fn checks_list(out: &mut String, run: &RunRecord) {
    if run.checks.is_empty() {
        return;
    }
    let item = |out: &mut String, c: &crate::report::Check| {
        let _ = write!(
            out,
            "<li>{} <b>{}</b>: {}</li>",
            badge(c.passed),
            esc(&c.name),
            esc(&c.detail)
        );
    };
    let passed = run.checks.iter().filter(|c| c.passed).count();
    let fold = passed > super::table::FOLD_CHECKS;
    out.push_str("<h3>Checks</h3><ul class=\"checks\">");
    for c in run.checks.iter().filter(|c| !(fold && c.passed)) {
        item(out, c);
    }
    out.push_str("</ul>");
    if fold {
        let _ = write!(
            out,
            "<details><summary>{} {passed} checks passed</summary><ul class=\"checks\">",
            badge(true)
        );
        for c in run.checks.iter().filter(|c| c.passed) {
            item(out, c);
        }
        out.push_str("</ul></details>");
    }
}

fn variants_table(out: &mut String, run: &RunRecord) {
    let fold = run.variants.len() > super::table::FOLD_ROWS;
    if fold {
        let _ = write!(
            out,
            "<details><summary>{} variants</summary>",
            run.variants.len()
        );
    } else {
        out.push_str("<h3>Variants</h3>");
    }
    out.push_str(
        "<table><tr><th>variant</th><th>median</th><th>95% CI of the median</th>\
         <th>min</th><th>max</th><th>n</th><th>outliers</th><th></th></tr>",
    );
    for v in &run.variants {
        let s = &v.summary;
        let _ = write!(
            out,
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{} – {}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td>{}</td></tr>",
            esc(&v.name),
            human_time(s.median_s),
            human_time(s.ci95_s[0]),
            human_time(s.ci95_s[1]),
            human_time(s.min_s),
            human_time(s.max_s),
            s.samples_s.len(),
            s.outliers,
            esc(v.label.as_deref().unwrap_or(""))
        );
    }
    out.push_str("</table>");
    if fold {
        out.push_str("</details>");
    }
}

/// The derived figures a reader needs, then the detail ones (engine internals, probes, a
/// figure per size) folded, as the terminal leaves them to `--verbose`.
fn derived_table(out: &mut String, run: &RunRecord) {
    let rows = |detail: bool| -> Vec<(&String, String)> {
        run.derived
            .iter()
            .filter(|(k, _)| run.figure(k).unit != Unit::Series && run.is_detail(k) == detail)
            .map(|(k, v)| (k, run.worded(k, v)))
            .collect()
    };
    let table = |out: &mut String, rows: Vec<(&String, String)>| {
        out.push_str("<table><tr><th>figure</th><th>value</th></tr>");
        for (k, v) in rows {
            let _ = write!(
                out,
                "<tr><td><code>{}</code></td><td class=\"num\">{}</td></tr>",
                esc(k),
                esc(&v)
            );
        }
        out.push_str("</table>");
    };
    let (shown, detail) = (rows(false), rows(true));
    if !shown.is_empty() {
        out.push_str("<h3>Derived figures</h3>");
        table(out, shown);
    }
    if !detail.is_empty() {
        let _ = write!(
            out,
            "<details><summary>{} detail figures</summary>",
            detail.len()
        );
        table(out, detail);
        out.push_str("</details>");
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::engine::TraceRecord;
    use crate::harness::Summary;
    use crate::report::{Timeline, TracedRun};
    use serde_json::Map;

    /// A report of one run, its times scaled by `scale`: checks, a figure, a timeline.
    pub(in crate::export) fn report(scale: f64) -> Report {
        let mut run = RunRecord::new("async", Map::new(), vec!["cpu:0 (1 thread)".into()]);
        let samples: Vec<f64> = (0..8).map(|i| scale * (1.0 + i as f64 * 0.01)).collect();
        run.add_variants(
            vec!["sync".into(), "async <fast>".into()],
            vec![
                Summary::from_samples(&samples).unwrap(),
                Summary::from_samples(&samples.iter().map(|s| s / 3.0).collect::<Vec<_>>())
                    .unwrap(),
            ],
            [None, Some("a label & more".into())],
        );
        run.derive_as(
            "async_speedup",
            3.0,
            crate::report::Figure::new(crate::report::Unit::Ratio, crate::report::Better::Higher),
        );
        run.check("exact", true, "y = x + 1");
        run.check("order", false, "broken on purpose");
        run.explanation.push("pushing is cheap".into());
        let mut r = crate::report::fixtures::report(vec![run]);
        let rec = crate::report::timeline::traced_op;
        trace(&mut r, "sync", vec![rec(0, 0, 500), rec(1, 200, 1000)]);
        r
    }

    /// `report`'s first run traced: `variant`'s extra repeat recorded `records`.
    pub(in crate::export) fn trace(report: &mut Report, variant: &str, records: Vec<TraceRecord>) {
        let traced = TracedRun {
            scenario: report.runs[0].scenario.clone(),
            variant: variant.into(),
            records,
        };
        report.timelines.push(Timeline::of(0, &traced));
    }

    /// Fails the test unless `html` is well-formed XML.
    pub(in crate::export) fn parse(html: &str) {
        roxmltree::Document::parse_with_options(
            html,
            roxmltree::ParsingOptions {
                allow_dtd: true,
                ..Default::default()
            },
        )
        .unwrap_or_else(|e| panic!("not well-formed: {e}"));
    }

    #[test]
    fn a_page_is_well_formed_and_shows_checks_figures_and_the_timeline() {
        let html = page(&report(1e-3));
        parse(&html);
        assert!(html.contains("✗ FAIL") && html.contains("✓ pass"));
        assert!(html.contains("async &lt;fast&gt;"));
        assert!(html.contains("lane timeline of the traced repeat"));
        assert!(html.contains("pushing is cheap"));
        assert_eq!(html.matches("<svg").count(), 2, "bars and the timeline");
        assert!(!html.contains("<script") && !html.contains("src="));
        let mut untraced = report(1e-3);
        untraced.timelines.clear();
        assert!(page(&untraced).contains("No lane timeline"));
    }
}
