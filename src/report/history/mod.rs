//! A history: the reports of one suite over time (a folder of `parbench/1` reports, or a file
//! of them one per line), ordered by when each run started, turned into one series per entry
//! (scenario × parameters × variant, and each derived figure with a direction) with the steps
//! [`steps::Detector`] finds in it and the points where the environment changed.

pub mod steps;

use std::path::Path;

use serde_json::Value;

use super::compare::{self, environment_differences};
use super::{Better, Report, Unit};
pub use steps::{Detector, Step};

/// Why a history cannot be read at all (a usage error).
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("cannot read {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("{path} holds no parbench/1 report")]
    Empty { path: String },
}

/// One report of the history and where it came from.
#[derive(Debug, Clone)]
pub struct Dated {
    /// The file name (or `file:line` in a file of reports).
    pub name: String,
    pub report: Report,
}

impl Dated {
    /// When its run started (RFC 3339), as the report says.
    pub fn started_at(&self) -> &str {
        &self.report.environment.started_at
    }

    /// The commit of the build that wrote it.
    pub fn commit(&self) -> &str {
        &self.report.tool.git_commit
    }
}

/// A file of the folder that is not part of the history, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub name: String,
    pub reason: String,
}

/// The reports, oldest first, and what was skipped.
#[derive(Debug, Clone)]
pub struct History {
    pub reports: Vec<Dated>,
    pub skipped: Vec<Skipped>,
}

impl History {
    /// Every `*.json` report of the folder `path`, or the file `path`'s report or reports (one
    /// report, or one JSON document per line), ordered by `environment.started_at` (then by
    /// name). Files that are not reports are skipped, each with its reason.
    pub fn load(path: &Path) -> Result<History, HistoryError> {
        let fail = |e: std::io::Error| HistoryError::Read {
            path: path.display().to_string(),
            reason: e.to_string(),
        };
        let mut history = History {
            reports: Vec::new(),
            skipped: Vec::new(),
        };
        if path.is_dir() {
            let mut files: Vec<_> = std::fs::read_dir(path)
                .map_err(fail)?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect();
            files.sort();
            for file in files {
                let name = file
                    .file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
                if file.extension().and_then(|e| e.to_str()) != Some("json") {
                    history.skip(name, "not a .json file".into());
                    continue;
                }
                match compare::load(&file) {
                    Ok(report) => history.reports.push(Dated { name, report }),
                    Err(e) => history.skip(name, e.to_string()),
                }
            }
        } else {
            let text = std::fs::read_to_string(path).map_err(fail)?;
            let file = path
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
            // One report, as `-o` writes it (pretty-printed over many lines), is a history
            // of one.
            let whole = parse_line(&text).ok();
            let many = whole.is_none();
            if let Some(report) = whole {
                history.reports.push(Dated {
                    name: file.clone(),
                    report,
                });
            }
            for (i, line) in text.lines().enumerate().filter(|_| many) {
                if line.trim().is_empty() {
                    continue;
                }
                let name = format!("{file}:{}", i + 1);
                match parse_line(line) {
                    Ok(report) => history.reports.push(Dated { name, report }),
                    Err(reason) => history.skip(name, reason),
                }
            }
        }
        if history.reports.is_empty() {
            return Err(HistoryError::Empty {
                path: path.display().to_string(),
            });
        }
        history
            .reports
            .sort_by(|a, b| (a.started_at(), &a.name).cmp(&(b.started_at(), &b.name)));
        Ok(history)
    }

    fn skip(&mut self, name: String, reason: String) {
        self.skipped.push(Skipped { name, reason });
    }

    /// Where the environment changed: the index of the first report on the new one, and how
    /// it differs from the report before ([`compare::environment_differences`]).
    pub fn environment_changes(&self) -> Vec<(usize, Vec<String>)> {
        self.reports
            .windows(2)
            .enumerate()
            .filter_map(|(i, w)| {
                let d = environment_differences(&w[0].report, &w[1].report);
                (!d.is_empty()).then_some((i + 1, d))
            })
            .collect()
    }

    /// One series per entry, in the order entries first appear.
    pub fn series(&self) -> Vec<Series> {
        let mut out: Vec<Series> = Vec::new();
        let add = |out: &mut Vec<Series>, proto: Series, point: Point| match out
            .iter_mut()
            .find(|s| s.entry == proto.entry)
        {
            Some(s) => s.points.push(point),
            None => out.push(Series {
                points: vec![point],
                ..proto
            }),
        };
        for (i, dated) in self.reports.iter().enumerate() {
            for run in &dated.report.runs {
                let key = run.key();
                for v in &run.variants {
                    let s = &v.summary;
                    let proto = Series {
                        entry: format!("{key} {}", v.name),
                        unit: Unit::Seconds,
                        better: Better::Lower,
                        points: Vec::new(),
                    };
                    let point = Point {
                        report: i,
                        value: s.median_s,
                        low: s.ci95_s[0],
                        high: s.ci95_s[1],
                    };
                    add(&mut out, proto, point);
                }
                for (k, value) in &run.derived {
                    let figure = run.figure(k);
                    let Some(x) = value.as_f64().filter(|_| figure.better != Better::Neither)
                    else {
                        continue;
                    };
                    let proto = Series {
                        entry: format!("{key} derived:{k}"),
                        unit: figure.unit,
                        better: figure.better,
                        points: Vec::new(),
                    };
                    let point = Point {
                        report: i,
                        value: x,
                        low: x,
                        high: x,
                    };
                    add(&mut out, proto, point);
                }
            }
        }
        out
    }
}

/// One line of a file of reports.
fn parse_line(line: &str) -> Result<Report, String> {
    let value: Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
    match value.get("schema").and_then(Value::as_str) {
        Some(super::SCHEMA) => serde_json::from_value(value).map_err(|e| e.to_string()),
        Some(other) => Err(format!("schema '{other}', not '{}'", super::SCHEMA)),
        None => Err("not a report (no \"schema\" field)".into()),
    }
}

/// One entry's value in one report.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// Index of the report in [`History::reports`].
    pub report: usize,
    /// The median time, or the derived figure.
    pub value: f64,
    /// The 95% CI of the median (the value itself for a derived figure).
    pub low: f64,
    pub high: f64,
}

/// One entry over time.
#[derive(Debug, Clone)]
pub struct Series {
    /// `scenario[parameters] variant`, or `scenario[parameters] derived:key`, as `compare`
    /// names it.
    pub entry: String,
    pub unit: Unit,
    pub better: Better,
    pub points: Vec<Point>,
}

/// A step of a series, placed in the history.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Flagged {
    /// The last report before the step and the first after it (indices of
    /// [`History::reports`]).
    pub from: usize,
    pub to: usize,
    pub step: Step,
}

impl Flagged {
    /// Whether the step made the entry worse (slower, or a figure moved against its
    /// direction).
    pub fn is_regression(&self, better: Better) -> bool {
        match better {
            Better::Lower => self.step.change > 0.0,
            Better::Higher => self.step.change < 0.0,
            Better::Neither => false,
        }
    }
}

impl Series {
    /// The steps `detector` finds in this series, placed between reports.
    pub fn steps(&self, detector: &Detector) -> Vec<Flagged> {
        let values: Vec<f64> = self.points.iter().map(|p| p.value).collect();
        detector
            .steps(&values)
            .into_iter()
            .map(|step| Flagged {
                from: self.points[step.at - 1].report,
                to: self.points[step.at].report,
                step,
            })
            .collect()
    }
}
