//! Reading a report written before a scenario gained a parameter.
//!
//! `compare`, `history` and the other readers match runs by scenario and parameters
//! ([`RunRecord::key`]), so a parameter added to a scenario (`deps --streams`,
//! `data-parallel --bucket-mb`) would leave every older report of it unmatched. A parameter
//! is only ever added with a default that does what the scenario did before it existed, so
//! a run that lacks one is read as having run at that default, and the reader says so.

use serde_json::{Map, Value};

use super::{Report, RunRecord};

/// A scenario's parameters as a run records them when none is given, in declaration order;
/// `None` for a scenario this build does not have.
pub type Defaults<'a> = &'a dyn Fn(&str) -> Option<Map<String, Value>>;

impl RunRecord {
    /// Add the declared parameters the run lacks, at their defaults, in declaration order
    /// (parameters the run has that are not declared stay, after them); returns the added
    /// names.
    pub fn fill_missing_parameters(&mut self, declared: &Map<String, Value>) -> Vec<String> {
        let missing: Vec<String> = declared
            .keys()
            .filter(|k| !self.parameters.contains_key(*k))
            .cloned()
            .collect();
        if missing.is_empty() {
            return missing;
        }
        let mut old = std::mem::take(&mut self.parameters);
        for (k, default) in declared {
            let value = old.remove(k).unwrap_or_else(|| default.clone());
            self.parameters.insert(k.clone(), value);
        }
        self.parameters.extend(old);
        missing
    }
}

impl Report {
    /// [`RunRecord::fill_missing_parameters`] for every run whose scenario `defaults` knows;
    /// one line per scenario that had any (`deps: device, streams`).
    pub fn fill_missing_parameters(&mut self, defaults: Defaults) -> Vec<String> {
        let mut filled: Vec<(String, Vec<String>)> = Vec::new();
        for run in &mut self.runs {
            let Some(declared) = defaults(&run.scenario) else {
                continue;
            };
            let added = run.fill_missing_parameters(&declared);
            if added.is_empty() {
                continue;
            }
            let new = || (run.scenario.clone(), Vec::new());
            let keys = &mut super::find_or_push(&mut filled, |(s, _)| *s == run.scenario, new).1;
            for k in added {
                if !keys.contains(&k) {
                    keys.push(k);
                }
            }
        }
        filled
            .into_iter()
            .map(|(s, keys)| format!("{s}: {}", keys.join(", ")))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn declared() -> Map<String, Value> {
        serde_json::from_value(json!({"width": 8, "device": "cpu", "streams": 1})).unwrap()
    }

    fn run(params: Value) -> RunRecord {
        RunRecord::new("deps", serde_json::from_value(params).unwrap(), Vec::new())
    }

    #[test]
    fn a_run_from_before_a_parameter_matches_one_at_its_default() {
        let mut old = run(json!({"width": 8}));
        let new = run(json!({"width": 8, "device": "cpu", "streams": 1}));
        assert_ne!(old.key(), new.key());
        assert_eq!(
            old.fill_missing_parameters(&declared()),
            ["device", "streams"]
        );
        assert_eq!(old.key(), new.key());
        // A run at another value stays apart; one with an undeclared key keeps it, last.
        let mut other = run(json!({"width": 16, "gone": true}));
        other.fill_missing_parameters(&declared());
        assert_eq!(
            other.key(),
            "deps[width=16,device=\"cpu\",streams=1,gone=true]"
        );
        // Nothing to add: nothing said.
        let mut same = new.clone();
        assert!(same.fill_missing_parameters(&declared()).is_empty());
    }

    #[test]
    fn a_report_says_which_scenarios_were_filled() {
        let mut report = crate::report::fixtures::report(vec![
            run(json!({"width": 8})),
            run(json!({"width": 16, "streams": 2})),
            RunRecord::new("unknown", Map::new(), Vec::new()),
        ]);
        let defaults = |s: &str| (s == "deps").then(declared);
        let lines = report.fill_missing_parameters(&defaults);
        assert_eq!(lines, ["deps: device, streams"]);
        assert_eq!(report.runs[1].parameters["streams"], 2);
        assert!(report.runs[2].parameters.is_empty());
    }
}
