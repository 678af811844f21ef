//! Saved reports read by a command that matches runs across reports (`compare`, `report A B`,
//! `history`): a run written before its scenario gained a parameter is read as having run at
//! that parameter's default, and the command says so on stderr
//! ([`crate::report::Report::fill_missing_parameters`]).

use std::path::Path;

use crate::report::compare::{self, CompareError};
use crate::report::Report;
use crate::scenario;

/// The report at `path`, its runs' missing parameters filled with today's defaults.
pub(super) fn load_comparable(path: &Path) -> Result<Report, CompareError> {
    let mut report = compare::load(path)?;
    fill(&mut report, &path.display().to_string());
    Ok(report)
}

/// Fill `report`'s runs' missing parameters, noting it under `name`.
pub(super) fn fill(report: &mut Report, name: &str) {
    let filled = report.fill_missing_parameters(&scenario::declared_defaults);
    if !filled.is_empty() {
        note!(
            "{name}: runs written before these parameters existed, read at their defaults: {}",
            filled.join("; ")
        );
    }
}
