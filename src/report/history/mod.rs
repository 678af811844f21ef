//! A history: the reports of one suite over time (a folder of `parbench/1` reports, or a file
//! of them one per line), ordered by when each run started. Reruns of one commit on one
//! machine are one [`Group`], one point of every series with its spread; a series per entry
//! (scenario × parameters × variant, and each derived figure with a direction) carries the
//! steps [`steps::Detector`] finds beyond its noise, and the points where the machine changed
//! (its [`Identity`], or a probe beyond its own spread).

pub mod steps;

use std::path::Path;

use serde_json::Value;

use super::compare::{self, entries};
use super::identity::{probe_series, Identity};
use super::noise::{larger_drift, Observation, Spread, UNLEARNED_DRIFT};
use super::{find_or_push, Better, Report, Unit};
use crate::machine::drift::LIMIT_TOLERANCE;
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

/// Reruns of one commit on one machine: their reports (indices of [`History::reports`],
/// oldest first), one point of each series.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    pub reports: Vec<usize>,
    pub identity: Identity,
}

/// The reports, oldest first, their groups in the order each first ran, and what was skipped.
#[derive(Debug, Clone)]
pub struct History {
    pub reports: Vec<Dated>,
    pub groups: Vec<Group>,
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
        let name_of = |p: &Path| {
            p.file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
        };
        let (mut reports, mut skipped) = (Vec::new(), Vec::new());
        let mut add = |name: String, read: Result<Report, String>| match read {
            Ok(report) => reports.push(Dated { name, report }),
            Err(reason) => skipped.push(Skipped { name, reason }),
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
                let read = match file.extension().and_then(|e| e.to_str()) {
                    Some("json") => compare::load(&file).map_err(|e| e.to_string()),
                    _ => Err("not a .json file".into()),
                };
                add(name_of(&file), read);
            }
        } else {
            let text = std::fs::read_to_string(path).map_err(fail)?;
            let file = name_of(path);
            // One report, as `-o` writes it (pretty-printed over many lines), is a history
            // of one.
            match parse_line(&text) {
                Ok(report) => add(file, Ok(report)),
                Err(_) => {
                    for (i, line) in text.lines().enumerate() {
                        if !line.trim().is_empty() {
                            add(format!("{file}:{}", i + 1), parse_line(line));
                        }
                    }
                }
            }
        }
        if reports.is_empty() {
            return Err(HistoryError::Empty {
                path: path.display().to_string(),
            });
        }
        Ok(History::new(reports, skipped))
    }

    /// A history of `reports`, ordered by `environment.started_at` (then by name) and
    /// grouped.
    pub fn new(mut reports: Vec<Dated>, skipped: Vec<Skipped>) -> History {
        reports.sort_by(|a, b| (a.started_at(), &a.name).cmp(&(b.started_at(), &b.name)));
        // Reruns of one commit on one machine are one group.
        let mut groups: Vec<Group> = Vec::new();
        for (i, d) in reports.iter().enumerate() {
            let identity = Identity::of(&d.report.environment);
            let same =
                |g: &Group| g.identity == identity && reports[g.reports[0]].commit() == d.commit();
            let new = || Group {
                reports: Vec::new(),
                identity: identity.clone(),
            };
            find_or_push(&mut groups, same, new).reports.push(i);
        }
        History {
            reports,
            groups,
            skipped,
        }
    }

    pub fn first(&self, g: usize) -> &Dated {
        &self.reports[self.groups[g].reports[0]]
    }

    /// Each entry's and each probe's spread over the reruns of the groups measured on
    /// `identity`: what `compare --history` learns.
    pub fn spreads(&self, identity: &Identity) -> std::collections::HashMap<String, Spread> {
        let mine: Vec<usize> = (0..self.groups.len())
            .filter(|g| &self.groups[*g].identity == identity)
            .collect();
        let mut out = std::collections::HashMap::new();
        for s in self.series() {
            let groups = s.points.iter().filter(|p| mine.contains(&p.group));
            out.insert(s.entry, Spread::within(groups.map(|p| &p.observed[..])));
        }
        for g in &mine {
            let reports: Vec<&Report> = self.groups[*g]
                .reports
                .iter()
                .map(|i| &self.reports[*i].report)
                .collect();
            for (what, values) in probe_series(&reports) {
                let observed: Vec<Observation> = values
                    .into_iter()
                    .flatten()
                    .map(Observation::exact)
                    .collect();
                let s = out.entry(what.to_string()).or_default();
                *s = s.and(Spread::within([&observed[..]]));
            }
        }
        out
    }

    /// Where the machine changed: the group on the new one, and how it differs from the
    /// group before: its [`Identity`], or a probe that stepped beyond its own spread over the
    /// reruns and the series ([`Detector`] at [`LIMIT_TOLERANCE`]), as a figure would.
    pub fn environment_changes(&self) -> Vec<(usize, Vec<String>)> {
        let pairs = self.groups.windows(2).enumerate();
        let mut changes: Vec<(usize, Vec<String>)> = pairs
            .map(|(i, w)| (i + 1, w[0].identity.differences(&w[1].identity)))
            .filter(|(_, d)| !d.is_empty())
            .collect();
        let all: Vec<&Report> = self.reports.iter().map(|d| &d.report).collect();
        let probes = probe_series(&all);
        let detector = Detector {
            threshold: LIMIT_TOLERANCE,
            min_window: 2,
        };
        for (what, values) in &probes {
            let points: Vec<Vec<Observation>> = self
                .groups
                .iter()
                .map(|g| {
                    g.reports
                        .iter()
                        .filter_map(|i| values[*i].map(Observation::exact))
                        .collect()
                })
                .collect();
            for step in detector.steps(&points, probes.len(), UNLEARNED_DRIFT) {
                let line = format!(
                    "{what} stepped {:.2}× beyond its spread",
                    step.after / step.before
                );
                let at = find_or_push(&mut changes, |c| c.0 == step.at, || (step.at, vec![]));
                at.1.push(line);
            }
        }
        changes.sort_by_key(|c| c.0);
        changes
    }

    /// One series per entry, in the order entries first appear: a point per group that
    /// holds the entry.
    pub fn series(&self) -> Vec<Series> {
        let mut out: Vec<Series> = Vec::new();
        for (g, group) in self.groups.iter().enumerate() {
            for &i in &group.reports {
                for e in entries(&self.reports[i].report) {
                    let series = || Series {
                        entry: e.name.clone(),
                        unit: e.unit,
                        better: e.better,
                        drift: None,
                        points: Vec::new(),
                    };
                    let series = find_or_push(&mut out, |s| s.entry == e.name, series);
                    series.drift = larger_drift(series.drift, e.drift);
                    match series.points.last_mut() {
                        Some(p) if p.group == g => p.observed.push(e.observed),
                        _ => series.points.push(Point {
                            group: g,
                            observed: vec![e.observed],
                        }),
                    }
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

/// One entry in one group: each rerun's value with its own interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Index of the group in [`History::groups`].
    pub group: usize,
    pub observed: Vec<Observation>,
}

impl Point {
    /// The geometric mean of the reruns' values.
    pub fn value(&self) -> f64 {
        let logs: Vec<f64> = self.observed.iter().map(|o| o.value.ln()).collect();
        (logs.iter().sum::<f64>() / logs.len().max(1) as f64).exp()
    }

    /// The lowest and highest of the reruns' intervals: the band a chart draws.
    pub fn band(&self) -> (f64, f64) {
        let ends = self.observed.iter().map(|o| (o.lo, o.hi));
        ends.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), (l, h)| {
            (lo.min(l), hi.max(h))
        })
    }
}

/// One entry over time.
#[derive(Debug, Clone)]
pub struct Series {
    /// `scenario[parameters] variant`, or `scenario[parameters] derived:key`, as `compare`
    /// names it.
    pub entry: String,
    pub unit: Unit,
    pub better: Better,
    /// The larger drift between runs its runs' scenario declared
    /// ([`RunRecord::drift_between_runs`](crate::report::RunRecord)).
    pub drift: Option<f64>,
    pub points: Vec<Point>,
}

/// A step of a series, placed in the history.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Flagged {
    /// The last group before the step and the first after it (indices of
    /// [`History::groups`]).
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
    /// The steps `detector` finds in this series beyond its noise, placed between groups;
    /// `family` is the number of series judged together (their false alarms share 5%).
    pub fn steps(&self, detector: &Detector, family: usize) -> Vec<Flagged> {
        let points: Vec<Vec<Observation>> =
            self.points.iter().map(|p| p.observed.clone()).collect();
        detector
            .steps(&points, family, self.drift.unwrap_or(UNLEARNED_DRIFT))
            .into_iter()
            .map(|step| Flagged {
                from: self.points[step.at - 1].group,
                to: self.points[step.at].group,
                step,
            })
            .collect()
    }
}
