//! A whole comparison of two sides of reports: the matched rows and their verdicts
//! ([`compare`](super::compare)), the entries on one side only ([`coverage`](super::coverage)),
//! the busy sides, how the machines differ ([`super::identity`]) and where each side came
//! from. `compare` and the exporters of `export::compare` read it.

use super::compare::{busy_states, compare, CompareError, Row};
use super::coverage::{coverage, Coverage};
use super::identity::environment_differences;
use super::noise::Spread;
use super::provenance::Provenance;
use super::Report;

/// Two sides compared.
#[derive(Debug, Clone)]
pub struct Comparison {
    pub rows: Vec<Row>,
    /// The smallest change that counts, as a fraction.
    pub threshold: f64,
    /// The entries of the first report of each side that the other lacks.
    pub coverage: Coverage,
    /// Each side's state where either was busy ([`busy_states`]), first reports.
    pub busy: Vec<String>,
    /// Where the machines differ in a way that changes timings.
    pub environment_differences: Vec<String>,
    /// The first report of each side.
    pub base: Provenance,
    pub new: Provenance,
    /// Reports on each side.
    pub sides: (usize, usize),
    /// Earlier reports whose reruns taught the spread (`--history`), 0 for none.
    pub learned_from: usize,
}

/// A side's reports, each with the path it was read from.
pub type Side<'a> = [(&'a Report, &'a str)];

/// The spreads a history taught, by entry or probe name, and how many reports taught them.
pub struct Learned<'a> {
    pub spread: &'a dyn Fn(&str) -> Spread,
    pub reports: usize,
}

impl Comparison {
    /// Compare one report against another, with no history.
    pub fn of(
        base: (&Report, &str),
        new: (&Report, &str),
        threshold: f64,
    ) -> Result<Comparison, CompareError> {
        let none = |_: &str| Spread::default();
        let learned = Learned {
            spread: &none,
            reports: 0,
        };
        Comparison::of_sides(&[base], &[new], &learned, threshold)
    }

    /// Compare the `new` side against the `base` side (neither empty), with the spreads
    /// `learned` from a history. A report that holds an entry twice is refused, naming it:
    /// matching by name would pair either copy.
    pub fn of_sides(
        base: &Side,
        new: &Side,
        learned: &Learned,
        threshold: f64,
    ) -> Result<Comparison, CompareError> {
        for (report, path) in base.iter().chain(new) {
            let entries = report.duplicate_entries();
            if !entries.is_empty() {
                return Err(CompareError::Duplicates {
                    path: path.to_string(),
                    entries,
                });
            }
        }
        let (Some(&(b0, b0_path)), Some(&(n0, n0_path))) = (base.first(), new.first()) else {
            return Err(CompareError::NothingMatched);
        };
        let b: Vec<&Report> = base.iter().map(|(r, _)| *r).collect();
        let n: Vec<&Report> = new.iter().map(|(r, _)| *r).collect();
        Ok(Comparison {
            rows: compare(&b, &n, learned.spread, threshold)?,
            threshold,
            coverage: coverage(b0, n0),
            busy: busy_states(b0, n0),
            environment_differences: environment_differences(&b, &n, learned.spread),
            base: Provenance::of(b0, b0_path),
            new: Provenance::of(n0, n0_path),
            sides: (base.len(), new.len()),
            learned_from: learned.reports,
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
