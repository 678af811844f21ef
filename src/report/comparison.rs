//! A whole comparison of two sides of reports: the matched rows and their verdicts
//! ([`compare`](super::compare)), the entries on one side only ([`coverage`](super::coverage)),
//! the busy sides, how the machines differ ([`super::identity`]) and where each side came
//! from. `compare` and the renderers of `export::compare` read it.

use std::collections::BTreeSet;

use super::compare::{busy_states, compare, CompareError, Row};
use super::coverage::{coverage, Coverage};
use super::identity::{environment_differences, Identity};
use super::noise::Spread;
use super::provenance::Provenance;
use super::Report;

#[derive(Debug, Clone)]
pub struct Comparison {
    pub rows: Vec<Row>,
    /// The smallest change that counts, as a fraction.
    pub threshold: f64,
    /// The entries some report of a side holds that no report of the other side does.
    pub coverage: Coverage,
    /// Each report's state for the runs where any was busy ([`busy_states`]).
    pub busy: Vec<String>,
    /// Where the machines differ in a way that changes timings.
    pub environment_differences: Vec<String>,
    /// Each report of each side, in the order given.
    pub base: Vec<Provenance>,
    pub new: Vec<Provenance>,
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

impl Learned<'static> {
    pub const NONE: Learned<'static> = Learned {
        spread: &|_| Spread::default(),
        reports: 0,
    };
}

impl Comparison {
    /// Compare one report against another, with no history.
    pub fn of(
        base: (&Report, &str),
        new: (&Report, &str),
        threshold: f64,
    ) -> Result<Comparison, CompareError> {
        Comparison::of_sides(&[base], &[new], &Learned::NONE, threshold)
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
        if base.is_empty() || new.is_empty() {
            return Err(CompareError::NothingMatched);
        }
        let provenance = |side: &Side| -> Vec<Provenance> {
            side.iter().map(|(r, p)| Provenance::of(r, p)).collect()
        };
        let b: Vec<&Report> = base.iter().map(|(r, _)| *r).collect();
        let n: Vec<&Report> = new.iter().map(|(r, _)| *r).collect();
        Ok(Comparison {
            rows: compare(&b, &n, learned.spread, threshold)?,
            threshold,
            coverage: coverage(&b, &n),
            busy: busy_states(&b, &n),
            environment_differences: environment_differences(&b, &n, learned.spread),
            base: provenance(base),
            new: provenance(new),
            sides: (base.len(), new.len()),
            learned_from: learned.reports,
        })
    }

    /// A line for each side whose reports are not reruns of one build on one machine: the
    /// commits it holds, and how its machines differ from its first report's.
    pub fn mixed_sides(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (side, reports) in [("base", &self.base), ("new", &self.new)] {
            let commits: BTreeSet<&str> = reports.iter().map(|p| p.commit.as_str()).collect();
            if commits.len() > 1 {
                out.push(format!(
                    "the {side} side's {} reports come from {} commits ({})",
                    reports.len(),
                    commits.len(),
                    Vec::from_iter(commits).join(", ")
                ));
            }
            let Some((first, rest)) = reports.split_first() else {
                continue;
            };
            let first = Identity::of(&first.environment);
            let machines: BTreeSet<String> = rest
                .iter()
                .flat_map(|p| first.differences(&Identity::of(&p.environment)))
                .collect();
            if !machines.is_empty() {
                out.push(format!(
                    "the {side} side's reports come from more than one machine ({})",
                    Vec::from_iter(machines).join("; ")
                ));
            }
        }
        out
    }

    /// Rows whose verdict fails the check (slower times).
    pub fn regressions(&self) -> usize {
        self.rows
            .iter()
            .filter(|r| r.verdict.is_regression())
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures::timed;

    #[test]
    fn every_report_of_a_side_gives_its_provenance() {
        let same = || timed(1.0, 0.5, 0.5, None);
        let (a1, mut a2, b) = (same(), same(), same());
        a2.tool.git_commit = "other".into();
        a2.environment.cores += 1;
        let c = Comparison::of_sides(
            &[(&a1, "a1.json"), (&a2, "a2.json")],
            &[(&b, "b.json")],
            &Learned::NONE,
            0.05,
        )
        .expect("comparison");
        let paths: Vec<&str> = c.base.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(paths, ["a1.json", "a2.json"]);
        let mixed = c.mixed_sides();
        assert_eq!(mixed.len(), 2, "{mixed:?}");
        assert!(mixed[0].starts_with("the base side's 2 reports come from 2 commits ("));
        assert!(mixed[0].contains("other"), "{mixed:?}");
        assert!(
            mixed[1].contains("more than one machine (cores: "),
            "{mixed:?}"
        );
        let c = Comparison::of((&a1, "a1.json"), (&b, "b.json"), 0.05).expect("comparison");
        assert!(c.mixed_sides().is_empty());
    }
}
