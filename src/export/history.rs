//! A history of reports (`report::history`) as one self-contained HTML page, or its flagged
//! steps as Markdown.
//!
//! The page is modelled on asv's "Regressions" view: the steps flagged first (entry, between
//! which commits, before → after), then where the machine changed, the commits in order, and
//! one chart per entry: a point per commit (the geometric mean of its reruns) with the band
//! of their 95% intervals, against the commit and its date, a vertical line where the machine
//! changed and one at each flagged step. As github-action-benchmark's `max-items-in-chart`,
//! a chart and the commit table hold the newest [`Analysed::max_items`] commits; the older
//! ones are summarized in a line under each chart, so the page stays small (under 1 MB at 400
//! reports). Entries with a step come first. Inline CSS and SVG only, XHTML-compatible, as
//! the report page (`html.rs`).

use std::fmt::Write;

use super::chart::{esc, plain, Axis, LineChart, Series as Line};
use super::compare::percent;
use super::html::{close, figure, open};
use crate::report::history::{Detector, Flagged, History, Series};
use crate::report::{Better, Unit};

/// Width of the charts, pixels.
const WIDTH: f64 = 880.0;

/// The history analysed once: every series with its steps, and the machine's changes.
pub struct Analysed<'a> {
    pub history: &'a History,
    pub detector: Detector,
    /// Each series and its steps, flagged series first.
    pub series: Vec<(Series, Vec<Flagged>)>,
    /// Where the machine changed: the group, and how.
    pub environment: Vec<(usize, Vec<String>)>,
    /// The most commits a chart and the commit table show, the newest.
    pub max_items: usize,
}

impl<'a> Analysed<'a> {
    pub fn new(history: &'a History, detector: Detector, max_items: usize) -> Analysed<'a> {
        let all = history.series();
        let family = all.len();
        let mut series: Vec<(Series, Vec<Flagged>)> = all
            .into_iter()
            .map(|s| {
                let steps = s.steps(&detector, family);
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
            max_items: max_items.max(1),
        }
    }

    fn shown_from(&self) -> usize {
        self.history.groups.len().saturating_sub(self.max_items)
    }

    pub fn flagged(&self) -> impl Iterator<Item = (&Series, &Flagged)> {
        self.series
            .iter()
            .flat_map(|(s, steps)| steps.iter().map(move |f| (s, f)))
    }

    /// `#4 (2024-05-01T10:00:00Z, abc1234)`, `#5 (…, 3 runs)`: a commit's group as the
    /// page and the Markdown name it.
    fn label(&self, g: usize) -> String {
        let d = self.history.first(g);
        let runs = self.history.groups[g].reports.len();
        let runs = if runs > 1 {
            format!(", {runs} runs")
        } else {
            String::new()
        };
        format!("#{} ({}, {}{runs})", g + 1, d.started_at(), d.commit())
    }

    /// How the detector decides, in a sentence.
    fn method(&self) -> String {
        format!(
            "Reruns of one commit on one machine are one point. A step is flagged where the \
             reports before and after it differ by at least {} and beyond the noise the series \
             shows (within each commit's reruns and between consecutive commits; 5% false \
             alarms over the page), with at least {} reports on each side (binary \
             segmentation: the strongest such step, then again on each side).",
            percent(self.detector.threshold).trim_start_matches('+'),
            self.detector.min_window
        )
    }
}

/// A flagged step as both tables show it: entry, between, before, after, change, verdict.
fn step_cells(a: &Analysed, s: &Series, f: &Flagged) -> [String; 6] {
    let verdict = match f.is_regression(s.better) {
        true => "regression",
        false => "improvement",
    };
    [
        s.entry.clone(),
        format!("{} → {}", a.label(f.from), a.label(f.to)),
        s.unit.word(f.step.before),
        s.unit.word(f.step.after),
        percent(f.step.change),
        verdict.to_string(),
    ]
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
            let [entry, rest @ ..] = step_cells(a, s, f);
            let _ = writeln!(out, "| `{entry}` | {} |", rest.join(" | "));
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

pub fn page(a: &Analysed, title: &str) -> String {
    let h = a.history;
    let n = h.reports.len();
    let mut out = String::new();
    open(&mut out, &format!("parbench history: {title}"));
    let _ = write!(
        out,
        "<h1>parbench history: {}</h1><p class=\"sub\">{n} reports of {} commits, {} to {}. {}</p>",
        esc(title),
        h.groups.len(),
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
            let [entry, between, before, after, change, verdict] =
                step_cells(a, s, f).map(|c| esc(&c));
            let class = if f.is_regression(s.better) {
                "fail"
            } else {
                "pass"
            };
            let _ = write!(
                out,
                "<tr class=\"step\"><td><code>{entry}</code></td><td>{between}</td><td class=\"num\">{before}</td>\
                 <td class=\"num\">{after}</td><td class=\"num\">{change}</td>\
                 <td><span class=\"badge {class}\">{verdict}</span></td></tr>"
            );
        }
        out.push_str("</table>");
    }
    out.push_str("<h2>Machine changes</h2>");
    if a.environment.is_empty() {
        out.push_str("<p class=\"missing\">The same machine throughout.</p>");
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
    reports_table(&mut out, a);
    out.push_str("<h2>Entries</h2>");
    for (s, steps) in &a.series {
        let _ = write!(out, "<h3>{}</h3>", esc(&s.entry));
        if let Some(svg) = chart(a, s, steps) {
            figure(&mut out, &svg);
        }
        if let Some(line) = older(a, s) {
            let _ = write!(out, "<p class=\"sub\">{}</p>", esc(&line));
        }
    }
    close(&mut out);
    out
}

/// The commits the charts show, newest last, and a line for the older ones.
fn reports_table(out: &mut String, a: &Analysed) {
    let h = a.history;
    out.push_str(
        "<h2>Commits</h2><table class=\"reports\"><tr><th>#</th><th>started</th><th>commit</th>\
         <th>runs</th><th>files</th></tr>",
    );
    let from = a.shown_from();
    if from > 0 {
        let _ = write!(
            out,
            "<tr><td colspan=\"5\">{from} older commits, {} to {}: summarized under each chart</td></tr>",
            esc(h.first(0).started_at()),
            esc(h.first(from - 1).started_at())
        );
    }
    for g in from..h.groups.len() {
        let d = h.first(g);
        let files: Vec<&str> = h.groups[g]
            .reports
            .iter()
            .map(|i| h.reports[*i].name.as_str())
            .collect();
        let _ = write!(
            out,
            "<tr><td class=\"num\">{}</td><td>{}</td><td><code>{}</code></td><td class=\"num\">{}</td><td>{}</td></tr>",
            g + 1,
            esc(d.started_at()),
            esc(d.commit()),
            files.len(),
            esc(&files.join(", "))
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

/// The points of `s` older than the chart shows, in a sentence: how many, and their median
/// and range.
fn older(a: &Analysed, s: &Series) -> Option<String> {
    let from = a.shown_from();
    let values: Vec<f64> = s
        .points
        .iter()
        .filter(|p| p.group < from)
        .map(|p| p.value())
        .collect();
    let mid = crate::harness::stats::median(&values)?;
    let low = values.iter().copied().fold(f64::INFINITY, f64::min);
    let high = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some(format!(
        "Older: {} commits before #{}, median {} (from {} to {}).",
        values.len(),
        from + 1,
        s.unit.word(mid),
        s.unit.word(low),
        s.unit.word(high)
    ))
}

/// One entry's chart over the newest commits: x is the commit's number, named by its commit
/// and date; a vertical line per machine change and per step among them.
fn chart(a: &Analysed, s: &Series, steps: &[Flagged]) -> Option<String> {
    let from = a.shown_from();
    let x = |g: usize| (g + 1) as f64;
    let points: Vec<_> = s.points.iter().filter(|p| p.group >= from).collect();
    let band: Vec<(f64, f64, f64)> = points
        .iter()
        .map(|p| {
            let (lo, hi) = p.band();
            (x(p.group), lo, hi)
        })
        .collect();
    let low = band.iter().map(|b| b.1).fold(f64::INFINITY, f64::min);
    let high = band.iter().map(|b| b.2).fold(0.0, f64::max);
    let vertical = |label: String, at: f64| Line::line(label, vec![(at, low), (at, high)]);
    let mut lines = vec![Line {
        label: if s.unit == Unit::Seconds {
            "median (band: the runs' 95% CIs)".into()
        } else {
            "value (band: the runs' range)".into()
        },
        points: points.iter().map(|p| (x(p.group), p.value())).collect(),
        band,
    }];
    let h = a.history;
    for (g, _) in a.environment.iter().filter(|(g, _)| *g > from) {
        lines.push(vertical(
            format!("machine changed at {}", h.first(*g).commit()),
            x(*g) - 0.5,
        ));
    }
    for f in steps.iter().filter(|f| f.from >= from) {
        lines.push(vertical(
            format!(
                "step {} at {}",
                percent(f.step.change),
                h.first(f.to).commit()
            ),
            (x(f.from) + x(f.to)) / 2.0,
        ));
    }
    let names = points
        .iter()
        .map(|p| {
            let d = h.first(p.group);
            let date = d.started_at().get(5..10).unwrap_or_default();
            let commit: String = d.commit().chars().take(7).collect();
            (x(p.group), format!("{commit} {date}"))
        })
        .collect();
    let (name, format): (&str, fn(f64) -> String) = match s.unit {
        Unit::Seconds => ("median time", crate::units::human_time),
        _ => ("value", plain),
    };
    let direction = match s.better {
        Better::Lower => "lower is better",
        Better::Higher => "higher is better",
        Better::Neither => "no direction",
    };
    LineChart::new(
        s.entry.clone(),
        Axis {
            names,
            ..Axis::new("commit and date (MM-DD), oldest to newest", false, plain)
        },
        Axis::new(format!("{name} ({direction})"), false, format),
        lines,
    )
    .svg(WIDTH)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures;

    /// 400 reports (200 commits, two reruns each) of 30 entries: the page stays under 1 MB,
    /// each chart holds the newest 100 commits and says how the older ones read, and neither
    /// the reruns' wander nor the probes' draws a step or a change of machine.
    #[test]
    fn a_page_of_400_reports_is_under_a_megabyte() {
        let history = fixtures::history(400, 0.04);
        assert_eq!(history.groups.len(), 200);
        let a = Analysed::new(&history, Detector::default(), 100);
        assert_eq!(a.series.len(), 30);
        assert_eq!(a.flagged().count(), 0, "no step in noise");
        assert!(a.environment.is_empty(), "{:?}", a.environment);
        let html = page(&a, "history/");
        assert!(html.len() < 1 << 20, "{} bytes", html.len());
        assert_eq!(html.matches("<svg").count(), 30);
        assert_eq!(html.matches("Older: 100 commits before #101").count(), 30);
        // A chart's line holds a point per commit shown: 100, named by commit and date.
        let line = html.split("<polyline points=\"").nth(1).expect("a line");
        let points = line.split('"').next().unwrap_or("").split(' ').count();
        assert_eq!(points, 100);
        assert!(
            html.contains(">abc0064 02-22<"),
            "the oldest commit shown names a tick"
        );
        // Unbounded, the page grows with every commit: the bound is what keeps it small.
        let all = page(
            &Analysed::new(&history, Detector::default(), 1000),
            "history/",
        );
        assert!(
            all.len() * 2 > html.len() * 3,
            "{} vs {}",
            all.len(),
            html.len()
        );
    }
}
