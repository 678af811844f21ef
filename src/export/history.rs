//! A history of reports (`report::history`) as one self-contained HTML page, or its flagged
//! steps as Markdown.
//!
//! The page is modelled on asv's "Regressions" view: the steps flagged first (entry, between
//! which reports, before → after), then where the environment changed, the reports in order,
//! and one chart per entry: its median in each report with the 95% CI band, a vertical line
//! where the environment changed and one at each flagged step. Entries with a step come
//! first. Inline CSS and SVG only, XHTML-compatible, as the report page (`html.rs`).

use std::fmt::Write;

use super::chart::{esc, plain, Axis, LineChart, Series as Line};
use super::compare::percent;
use super::html::{close, figure, open};
use crate::report::history::{Detector, Flagged, History, Series};
use crate::report::{Better, Figure, Unit};

/// Width of the charts, pixels.
const WIDTH: f64 = 880.0;

/// The history analysed once: every series with its steps, and the environment's changes.
pub struct Analysed<'a> {
    pub history: &'a History,
    pub detector: Detector,
    /// Each series and its steps, flagged series first.
    pub series: Vec<(Series, Vec<Flagged>)>,
    pub environment: Vec<(usize, Vec<String>)>,
}

impl<'a> Analysed<'a> {
    pub fn new(history: &'a History, detector: Detector) -> Analysed<'a> {
        let mut series: Vec<(Series, Vec<Flagged>)> = history
            .series()
            .into_iter()
            .map(|s| {
                let steps = s.steps(&detector);
                (s, steps)
            })
            .collect();
        // Stable: entries keep their order within the flagged and the unflagged.
        series.sort_by_key(|(_, steps)| steps.is_empty());
        Analysed {
            history,
            detector,
            series,
            environment: history.environment_changes(),
        }
    }

    /// Every flagged step with its series.
    pub fn flagged(&self) -> impl Iterator<Item = (&Series, &Flagged)> {
        self.series
            .iter()
            .flat_map(|(s, steps)| steps.iter().map(move |f| (s, f)))
    }

    /// `#4 (2024-05-01T10:00:00Z, abc1234)`: a report as the page and the Markdown name it.
    fn label(&self, i: usize) -> String {
        let d = &self.history.reports[i];
        format!("#{} ({}, {})", i + 1, d.started_at(), d.commit())
    }

    /// How the detector decides, in a sentence.
    fn method(&self) -> String {
        format!(
            "A step is flagged where the medians of the reports before and after it differ by at \
             least {} and the two windows' values do not overlap, with at least {} reports on \
             each side (binary segmentation: the largest such step, then again on each side).",
            percent(self.detector.threshold).trim_start_matches('+'),
            self.detector.min_window
        )
    }
}

fn value(unit: Unit, v: f64) -> String {
    Figure::new(unit, Better::Neither).format(&serde_json::Value::from(v))
}

fn verdict(series: &Series, f: &Flagged) -> &'static str {
    if f.is_regression(series.better) {
        "regression"
    } else {
        "improvement"
    }
}

/// The flagged steps as a Markdown table (or a line saying there are none).
pub fn markdown(a: &Analysed) -> String {
    let n = a.history.reports.len();
    let mut out = format!(
        "### parbench history: {n} reports, {} to {}\n\n",
        a.history.reports[0].started_at(),
        a.history.reports[n - 1].started_at()
    );
    let flagged: Vec<_> = a.flagged().collect();
    if flagged.is_empty() {
        out.push_str("No steps flagged.\n");
    } else {
        out.push_str("| entry | between | before | after | change | verdict |\n");
        out.push_str("|---|---|---|---|---|---|\n");
        for (s, f) in &flagged {
            let _ = writeln!(
                out,
                "| `{}` | {} → {} | {} | {} | {} | {} |",
                s.entry,
                a.label(f.from),
                a.label(f.to),
                value(s.unit, f.step.before),
                value(s.unit, f.step.after),
                percent(f.step.change),
                verdict(s, f)
            );
        }
    }
    for (i, diffs) in &a.environment {
        let _ = writeln!(
            out,
            "\nThe environment changed at {}: {}.",
            a.label(*i),
            diffs.join("; ")
        );
    }
    let _ = writeln!(out, "\n{}", a.method());
    out
}

/// The whole page.
pub fn page(a: &Analysed, title: &str) -> String {
    let h = a.history;
    let n = h.reports.len();
    let mut out = String::new();
    open(&mut out, &format!("parbench history: {title}"));
    let _ = write!(
        out,
        "<h1>parbench history: {}</h1><p class=\"sub\">{n} reports, {} to {}. {}</p>",
        esc(title),
        esc(h.reports[0].started_at()),
        esc(h.reports[n - 1].started_at()),
        esc(&a.method())
    );
    out.push_str("<h2>Steps flagged</h2>");
    let flagged: Vec<_> = a.flagged().collect();
    if flagged.is_empty() {
        out.push_str("<p class=\"missing\">No steps flagged.</p>");
    } else {
        out.push_str(
            "<table class=\"steps\"><tr><th>entry</th><th>between</th><th>before</th>\
             <th>after</th><th>change</th><th>verdict</th></tr>",
        );
        for (s, f) in &flagged {
            let class = if f.is_regression(s.better) {
                "fail"
            } else {
                "pass"
            };
            let _ = write!(
                out,
                "<tr class=\"step\"><td><code>{}</code></td><td>{} → {}</td><td class=\"num\">{}</td>\
                 <td class=\"num\">{}</td><td class=\"num\">{}</td>\
                 <td><span class=\"badge {class}\">{}</span></td></tr>",
                esc(&s.entry),
                esc(&a.label(f.from)),
                esc(&a.label(f.to)),
                esc(&value(s.unit, f.step.before)),
                esc(&value(s.unit, f.step.after)),
                percent(f.step.change),
                verdict(s, f)
            );
        }
        out.push_str("</table>");
    }
    out.push_str("<h2>Environment changes</h2>");
    if a.environment.is_empty() {
        out.push_str("<p class=\"missing\">The same environment throughout.</p>");
    } else {
        out.push_str("<ul class=\"environment\">");
        for (i, diffs) in &a.environment {
            let _ = write!(
                out,
                "<li>{}: {}</li>",
                esc(&a.label(*i)),
                esc(&diffs.join("; "))
            );
        }
        out.push_str("</ul>");
    }
    reports_table(&mut out, h);
    out.push_str("<h2>Entries</h2>");
    for (s, steps) in &a.series {
        let _ = write!(out, "<h3>{}</h3>", esc(&s.entry));
        if let Some(svg) = chart(s, steps, &a.environment) {
            figure(&mut out, &svg);
        }
    }
    close(&mut out);
    out
}

fn reports_table(out: &mut String, h: &History) {
    out.push_str(
        "<h2>Reports</h2><table class=\"reports\"><tr><th>#</th><th>started</th><th>commit</th>\
         <th>file</th></tr>",
    );
    for (i, d) in h.reports.iter().enumerate() {
        let _ = write!(
            out,
            "<tr><td class=\"num\">{}</td><td>{}</td><td><code>{}</code></td><td>{}</td></tr>",
            i + 1,
            esc(d.started_at()),
            esc(d.commit()),
            esc(&d.name)
        );
    }
    out.push_str("</table>");
    if !h.skipped.is_empty() {
        out.push_str("<p>Skipped:</p><ul class=\"notes\">");
        for s in &h.skipped {
            let _ = write!(out, "<li>{}: {}</li>", esc(&s.name), esc(&s.reason));
        }
        out.push_str("</ul>");
    }
}

/// One entry's chart: x is the report's number (1-based), a vertical line per environment
/// change and per step, between the two reports it lies between.
fn chart(s: &Series, steps: &[Flagged], environment: &[(usize, Vec<String>)]) -> Option<String> {
    let x = |report: usize| (report + 1) as f64;
    let low = s.points.iter().map(|p| p.low).fold(f64::INFINITY, f64::min);
    let high = s.points.iter().map(|p| p.high).fold(0.0, f64::max);
    let vertical = |label: String, at: f64| Line {
        label,
        points: vec![(at, low), (at, high)],
        band: Vec::new(),
    };
    let mut lines = vec![Line {
        label: if s.unit == Unit::Seconds {
            "median (band: 95% CI)".into()
        } else {
            "value".into()
        },
        points: s.points.iter().map(|p| (x(p.report), p.value)).collect(),
        band: s
            .points
            .iter()
            .map(|p| (x(p.report), p.low, p.high))
            .collect(),
    }];
    for (i, _) in environment {
        lines.push(vertical(
            format!("environment changed (#{})", i + 1),
            x(*i) - 0.5,
        ));
    }
    for f in steps {
        lines.push(vertical(
            format!(
                "step {} (#{} → #{})",
                percent(f.step.change),
                f.from + 1,
                f.to + 1
            ),
            (x(f.from) + x(f.to)) / 2.0,
        ));
    }
    let (name, format): (&str, fn(f64) -> String) = match s.unit {
        Unit::Seconds => ("median time", crate::units::human_time),
        _ => ("value", plain),
    };
    let direction = match s.better {
        Better::Lower => "lower is better",
        Better::Higher => "higher is better",
        Better::Neither => "no direction",
    };
    LineChart {
        marked: Vec::new(),
        title: s.entry.clone(),
        x: Axis::new("report", false, plain),
        y: Axis::new(format!("{name} ({direction})"), false, format),
        series: lines,
    }
    .svg(WIDTH)
}
