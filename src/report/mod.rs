//! Reports: the versioned JSON document and the human table.
//!
//! The JSON contract (`"schema": "parbench/1"`) only grows within a version: fields are added,
//! never renamed or removed, so scripts and baselines keep working. It is described for users in
//! `docs/report-format.md` and as a JSON Schema in `docs/parbench-1.schema.json`, which
//! `tests/report_schema.rs` holds the written reports to: a field added here goes there too.

pub mod atomic;
pub mod book;
pub mod compare;
pub mod comparison;
pub mod coverage;
mod duplicates;
pub mod environment;
pub mod evidence;
pub mod figure;
pub mod finding;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod history;
pub mod identity;
pub mod lesson;
pub mod noise;
pub mod paired;
mod parameters;
pub mod provenance;
mod run;
pub mod timeline;

pub use parameters::Defaults;

use serde::{Deserialize, Serialize};

pub use atomic::write_atomic;
pub use book::{BookFigure, Edition, Plausibility, Source};
pub use environment::{Environment, GpuInfo, LibraryInfo};
pub use figure::{Better, Figure, FigureSpec, Unit};
pub use lesson::{Decided, Held, Lesson};
pub use run::{Check, RunRecord, VariantRecord};
pub use timeline::Timeline;

/// The first element of `v` that `is` picks, `new()` pushed first where none is.
pub(crate) fn find_or_push<T>(
    v: &mut Vec<T>,
    is: impl FnMut(&T) -> bool,
    new: impl FnOnce() -> T,
) -> &mut T {
    let i = v.iter().position(is).unwrap_or_else(|| {
        v.push(new());
        v.len() - 1
    });
    &mut v[i]
}

/// A record's derived fields (`remote = "Self"`) as JSON, the fields computed from it
/// (`extra`) inserted after the field `after` (at the end without one), written by `serializer`.
pub(crate) fn with_fields<S: serde::Serializer>(
    json: Result<serde_json::Value, serde_json::Error>,
    after: Option<&str>,
    extra: impl IntoIterator<Item = (String, serde_json::Value)>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let mut json = json.map_err(serde::ser::Error::custom)?;
    if let serde_json::Value::Object(fields) = &mut json {
        let after = after.and_then(|a| fields.keys().position(|k| k == a));
        let from = after.map_or(fields.len(), |i| i + 1);
        for (at, (k, v)) in (from..).zip(extra) {
            fields.shift_insert(at, k, v);
        }
    }
    json.serialize(serializer)
}

/// The ops of one traced repeat of one variant (what `--trace` and `--timeline` show).
#[derive(Debug, Clone)]
pub struct TracedRun {
    pub scenario: String,
    pub variant: String,
    pub records: Vec<crate::engine::TraceRecord>,
}

/// The axes of a sweep, as the report records them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepInfo {
    pub scenario: String,
    /// Axis name → the values swept, in order (as given on the command line).
    pub axes: Vec<(String, Vec<String>)>,
}

/// How a note that flags a figure outside its physical range starts: within `notes`, so the
/// `parbench/1` schema stays as it is and a script can still find them.
pub const WARNING: &str = "warning: ";

/// The schema tag every document carries.
pub const SCHEMA: &str = "parbench/1";

/// A whole report: what ran, where, and the results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    pub tool: Tool,
    pub environment: Environment,
    pub runs: Vec<RunRecord>,
    /// Present when the report is a sweep: the scenario and the axes swept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepInfo>,
    /// The lane timelines of the traced repeat of each variant, present when the runs were
    /// traced (`--html`, `--trace`, `--timeline`); older reports have none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timelines: Vec<Timeline>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    pub name: String,
    pub version: String,
    pub git_commit: String,
}

impl Tool {
    pub fn this() -> Tool {
        Tool {
            name: env!("CARGO_PKG_NAME").into(),
            version: env!("CARGO_PKG_VERSION").into(),
            git_commit: environment::GIT_COMMIT.into(),
        }
    }
}

impl Report {
    pub fn new(environment: Environment, runs: Vec<RunRecord>) -> Report {
        Report {
            schema: SCHEMA.into(),
            tool: Tool::this(),
            environment,
            runs,
            sweep: None,
            timelines: Vec::new(),
        }
    }

    /// Pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("a report always serializes");
        s.push('\n');
        s
    }
}
