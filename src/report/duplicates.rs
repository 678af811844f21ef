//! Entries a report holds more than once: two runs of the same scenario and parameters, or two
//! variants of one name in a run. A comparison matches entries by name, so a duplicate would be
//! paired with whichever copy comes first: `compare`, `ab` and exports refuse such a report
//! rather than pair the wrong ones.

use std::collections::BTreeSet;

use super::{Report, RunRecord};

impl Report {
    /// The entries that appear more than once, each named once as `compare` names it
    /// (`scenario[params]` for a repeated run, `scenario[params] variant` for a repeated
    /// variant), in the order they first repeat; empty when every entry is unique.
    pub fn duplicate_entries(&self) -> Vec<String> {
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        let note = |name: String, out: &mut Vec<String>| {
            if !out.contains(&name) {
                out.push(name);
            }
        };
        for run in &self.runs {
            let key = run.key();
            if !seen.insert(key.clone()) {
                note(key.clone(), &mut out);
            }
            for name in repeated_variants(run) {
                note(format!("{key} {name}"), &mut out);
            }
        }
        out
    }
}

/// Variant names that appear more than once in `run`.
fn repeated_variants(run: &RunRecord) -> Vec<&str> {
    let mut seen = BTreeSet::new();
    run.variants
        .iter()
        .map(|v| v.name.as_str())
        .filter(|name| !seen.insert(*name))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures::{self, report};

    fn run(size: u64, variants: &[&str]) -> RunRecord {
        fixtures::run("matmul", &[("size", size)], variants)
    }

    #[test]
    fn unique_entries_have_no_duplicates() {
        let r = report(vec![run(100, &["a", "b"]), run(200, &["a", "b"])]);
        assert!(r.duplicate_entries().is_empty());
    }

    #[test]
    fn a_repeated_run_and_a_repeated_variant_are_named_once_each() {
        let r = report(vec![
            run(100, &["a"]),
            run(100, &["a"]),
            run(100, &["a"]),
            run(200, &["a", "a"]),
        ]);
        assert_eq!(
            r.duplicate_entries(),
            vec!["matmul[size=100]", "matmul[size=200] a"]
        );
    }
}
