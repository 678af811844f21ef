//! A whole comparison of two reports: the matched rows and their verdicts
//! ([`compare`](super::compare)), the entries on one side only ([`coverage`](super::coverage)),
//! the busy sides, how the environments differ and where each side came from. `compare` and
//! the exporters of `export::compare` read it.

use super::compare::{busy_states, compare, environment_differences, CompareError, Row};
use super::coverage::{coverage, Coverage};
use super::provenance::Provenance;
use super::Report;

/// Two reports compared.
#[derive(Debug, Clone)]
pub struct Comparison {
    pub rows: Vec<Row>,
    /// The smallest change that counts, as a fraction.
    pub threshold: f64,
    pub coverage: Coverage,
    /// Each side's state where either was busy ([`busy_states`]).
    pub busy: Vec<String>,
    /// Where the environments differ in a way that changes timings.
    pub environment_differences: Vec<String>,
    pub base: Provenance,
    pub new: Provenance,
}

impl Comparison {
    /// Compare `new` (read from `new_path`) against `base` (from `base_path`). A report that
    /// holds an entry twice is refused, naming it: matching by name would pair either copy.
    pub fn of(
        (base, base_path): (&Report, &str),
        (new, new_path): (&Report, &str),
        threshold: f64,
    ) -> Result<Comparison, CompareError> {
        for (report, path) in [(base, base_path), (new, new_path)] {
            let entries = report.duplicate_entries();
            if !entries.is_empty() {
                return Err(CompareError::Duplicates {
                    path: path.to_string(),
                    entries,
                });
            }
        }
        Ok(Comparison {
            rows: compare(base, new, threshold)?,
            threshold,
            coverage: coverage(base, new),
            busy: busy_states(base, new),
            environment_differences: environment_differences(base, new),
            base: Provenance::of(base, base_path),
            new: Provenance::of(new, new_path),
        })
    }

    /// Rows whose verdict fails the check (slower times).
    pub fn regressions(&self) -> usize {
        self.rows
            .iter()
            .filter(|r| r.verdict.is_regression())
            .count()
    }
}
