//! Where each side of a comparison came from: the file, the build that wrote it (its commit),
//! when it ran and the environment it ran in, limits included. `compare --format json` and
//! `ab`'s JSON carry one for each side, so a stored result says what it compared.

use serde::{Deserialize, Serialize};

use super::{Environment, Report, Tool};

/// The schema tag of `compare --format json`.
pub const COMPARE_SCHEMA: &str = "parbench-compare/1";
/// The schema tag of `ab`'s JSON (`ab -o`, `ab --format json`).
pub const AB_SCHEMA: &str = "parbench-ab/1";

/// One side of a comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// The report file, or the executable for a side of `ab`.
    pub path: String,
    /// The git commit of the build that measured it (`-dirty` with uncommitted changes,
    /// "unknown" outside a checkout).
    pub commit: String,
    pub tool: Tool,
    /// When the measurement started: RFC 3339 UTC.
    pub started_at: String,
    /// The machine, engine and limits it ran on, as the report records them.
    pub environment: Environment,
}

impl Provenance {
    pub fn of(report: &Report, path: &str) -> Provenance {
        Provenance {
            path: path.to_string(),
            commit: report.tool.git_commit.clone(),
            tool: report.tool.clone(),
            started_at: report.environment.started_at.clone(),
            environment: report.environment.clone(),
        }
    }
}

/// What a JSON document with schema `found` is, and which command reads it, when it is one of
/// parbench's results rather than a report: `None` for any other schema.
pub fn result_kind(found: &str) -> Option<&'static str> {
    match found {
        COMPARE_SCHEMA => Some(
            "a `compare` result (parbench-compare/1), not a report: compare, export, plot and \
             report read reports; run `compare` on the two reports it names",
        ),
        AB_SCHEMA => Some(
            "an `ab` result (parbench-ab/1), not a report: `parbench ab --from FILE` reads it; \
             compare, export, plot and report read reports",
        ),
        _ => None,
    }
}

/// Both sides of an `ab` run: `None` for a side whose provenance is unknown (an `ab` result
/// written before it was recorded, read back with `--from`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AbSides {
    pub base: Option<Provenance>,
    pub candidate: Option<Provenance>,
}
