//! Entries a report holds more than once: two runs of the same scenario and parameters, or two
//! variants of one name in a run. A comparison matches entries by name, so a duplicate would be
//! paired with whichever copy comes first: `compare`, `ab` and exports refuse such a report
//! rather than pair the wrong ones.

use std::collections::BTreeSet;

use super::Report;

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
            let mut variants = BTreeSet::new();
            for v in run.variants.iter().filter(|v| !variants.insert(&v.name)) {
                note(format!("{key} {}", v.name), &mut out);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::report::fixtures::{self, report};
    use crate::report::RunRecord;

    fn run(size: u64, variants: &[&str]) -> RunRecord {
        fixtures::run("matmul", &[("size", size)], variants)
    }

    #[test]
    fn a_repeated_run_and_a_repeated_variant_are_named_once_each() {
        let unique = report(vec![run(100, &["a", "b"]), run(200, &["a", "b"])]);
        assert!(unique.duplicate_entries().is_empty());
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
