//! Which entries of two reports a comparison could not match: those on one side only, and the
//! pairs among them that look like one entry renamed.
//!
//! `compare` matches entries by scenario, parameters and variant (or derived figure); an entry
//! the other side lacks has no row. Silently leaving it out would let a report that lost a
//! scenario pass as "0 regressions", so every such entry is listed, and `--require-all` fails
//! the comparison on any.
//!
//! A rename is guessed only where it pairs one to one: a run on one side only whose scenario
//! matches exactly one run on the other side only, their parameters differing in exactly one
//! key (`size=100` became `size=128`), with its entries paired by name; or, within a run both
//! sides have, exactly one variant (or derived figure) on each side only.
//!
//! A derived figure one run could not measure is `null` there, with its reason: it is in both
//! reports, so it is not one-sided, but it has no row either; each such figure is listed with
//! its reasons, and `--require-all` does not fail on it.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Better, Report, RunRecord};

/// Two entries, one on each side only, that look like one entry renamed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Renamed {
    pub base: String,
    pub new: String,
}

/// The entries a comparison of two reports could not match.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Coverage {
    /// Entries of the base that the new report lacks (and that pair with no rename).
    pub only_in_base: Vec<String>,
    /// Entries of the new report that the base lacks (and that pair with no rename).
    pub only_in_new: Vec<String>,
    /// Pairs that look like one entry renamed; compared by neither side.
    pub renamed: Vec<Renamed>,
    /// Derived figures in both reports that one side or both could not measure (`null`), as
    /// `entry: not measured in base (reason)`; no row, and not a failure of `--require-all`.
    pub not_measured: Vec<String>,
}

impl Coverage {
    /// Entries that have no row in the comparison: one a side only, two a rename.
    pub fn uncompared(&self) -> usize {
        self.only_in_base.len() + self.only_in_new.len() + 2 * self.renamed.len()
    }

    pub fn is_complete(&self) -> bool {
        self.uncompared() == 0
    }

    /// One line per entry, as the text format prints them on stderr: `missing in new: …`,
    /// `new in new: …`, `renamed? … → …`.
    pub fn lines(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let (gone, added) = (&self.only_in_base, &self.only_in_new);
        out.extend(gone.iter().map(|e| format!("missing in new: {e}")));
        out.extend(added.iter().map(|e| format!("new in new: {e}")));
        let renamed = self.renamed.iter();
        out.extend(renamed.map(|r| format!("renamed? {} → {}", r.base, r.new)));
        out.extend(self.not_measured.iter().cloned());
        out
    }

    /// `4 only in base, 0 only in new` (and `, 1 renamed?` when any).
    pub fn counts(&self) -> String {
        let mut text = format!(
            "{} only in base, {} only in new",
            self.only_in_base.len(),
            self.only_in_new.len()
        );
        if !self.renamed.is_empty() {
            text.push_str(&format!(", {} renamed?", self.renamed.len()));
        }
        text
    }
}

/// A run as coverage sees it: its key and comparable items.
struct Entries<'a> {
    key: String,
    run: &'a RunRecord,
    /// Variant names, then `derived:key` for each derived figure with a direction.
    items: Vec<String>,
    /// Why each of those derived figures that is `null` was not measured.
    unmeasured: BTreeMap<String, String>,
}

impl<'a> Entries<'a> {
    fn of(run: &'a RunRecord) -> Entries<'a> {
        let mut items: Vec<String> = run.variants.iter().map(|v| v.name.clone()).collect();
        let mut unmeasured = BTreeMap::new();
        for (k, v) in &run.derived {
            if !(v.is_number() || v.is_null()) || run.figure(k).better == Better::Neither {
                continue;
            }
            items.push(format!("derived:{k}"));
            if v.is_null() {
                let why = run
                    .unmeasured
                    .get(k)
                    .map_or("no reason recorded", String::as_str);
                unmeasured.insert(format!("derived:{k}"), why.to_string());
            }
        }
        Entries {
            key: run.key(),
            run,
            items,
            unmeasured,
        }
    }

    fn name(&self, item: &str) -> String {
        format!("{} {item}", self.key)
    }

    /// True when `other` is the same scenario with parameters that differ in exactly one key
    /// (a value changed, or a key added or removed).
    fn one_parameter_apart(&self, other: &Entries) -> bool {
        let (a, b) = (&self.run.parameters, &other.run.parameters);
        if self.run.scenario != other.run.scenario {
            return false;
        }
        let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
        keys.into_iter().filter(|k| a.get(*k) != b.get(*k)).count() == 1
    }
}

/// Every run of a side's reports, one per key, its items the union of the reports' (a
/// comparison matches an entry that any report of each side holds), and a figure unmeasured
/// only where no report measured it.
fn union<'a>(side: &[&'a Report]) -> Vec<Entries<'a>> {
    let mut out: Vec<Entries> = Vec::new();
    for run in side.iter().flat_map(|r| &r.runs) {
        let mut e = Entries::of(run);
        let Some(o) = out.iter_mut().find(|o| o.key == e.key) else {
            out.push(e);
            continue;
        };
        o.unmeasured
            .retain(|item, _| !e.items.contains(item) || e.unmeasured.contains_key(item));
        for item in e.items {
            if !o.items.contains(&item) {
                if let Some(why) = e.unmeasured.remove(&item) {
                    o.unmeasured.insert(item.clone(), why);
                }
                o.items.push(item);
            }
        }
    }
    out
}

/// The entries some report of `base` holds and no report of `new` does, and the other way
/// round, renames guessed.
pub fn coverage(base: &[&Report], new: &[&Report]) -> Coverage {
    let base = union(base);
    let new = union(new);
    let mut out = Coverage::default();
    for b in &base {
        if let Some(n) = new.iter().find(|n| n.key == b.key) {
            within_run(b, n, &mut out);
        }
    }
    fn only<'a, 'r>(side: &'a [Entries<'r>], other: &[Entries]) -> Vec<&'a Entries<'r>> {
        let apart = |e: &&Entries| !other.iter().any(|o| o.key == e.key);
        side.iter().filter(apart).collect()
    }
    let (base_only, new_only) = (only(&base, &new), only(&new, &base));
    let mut paired_new = vec![false; new_only.len()];
    for b in &base_only {
        let pair = unique_match(b, &new_only).filter(|&i| {
            unique_match(new_only[i], &base_only).is_some_and(|j| base_only[j].key == b.key)
        });
        match pair {
            Some(i) => {
                paired_new[i] = true;
                across_runs(b, new_only[i], &mut out);
            }
            None => out
                .only_in_base
                .extend(b.items.iter().map(|item| b.name(item))),
        }
    }
    for (n, paired) in new_only.iter().zip(paired_new) {
        if !paired {
            out.only_in_new
                .extend(n.items.iter().map(|item| n.name(item)));
        }
    }
    out
}

/// The index of the one run of `others` one parameter apart from `one`; `None` when there is
/// none or more than one.
fn unique_match(one: &Entries, others: &[&Entries]) -> Option<usize> {
    let mut found = others
        .iter()
        .enumerate()
        .filter(|(_, o)| one.one_parameter_apart(o))
        .map(|(i, _)| i);
    let first = found.next()?;
    found.next().is_none().then_some(first)
}

/// Two runs paired as one renamed: their items of the same name are renamed pairs, the rest
/// one-sided.
fn across_runs(b: &Entries, n: &Entries, out: &mut Coverage) {
    for item in &b.items {
        if n.items.contains(item) {
            out.renamed.push(Renamed {
                base: b.name(item),
                new: n.name(item),
            });
        } else {
            out.only_in_base.push(b.name(item));
        }
    }
    for item in n.items.iter().filter(|i| !b.items.contains(i)) {
        out.only_in_new.push(n.name(item));
    }
}

/// A run both sides have: its items on one side only, a lone variant (or derived figure) on
/// each side paired as renamed.
fn within_run(b: &Entries, n: &Entries, out: &mut Coverage) {
    for item in b.items.iter().filter(|i| n.items.contains(i)) {
        let sides = match (b.unmeasured.get(item), n.unmeasured.get(item)) {
            (None, None) => continue,
            (Some(x), None) => format!("base ({x})"),
            (None, Some(y)) => format!("new ({y})"),
            (Some(x), Some(y)) if x == y => format!("both ({x})"),
            (Some(x), Some(y)) => format!("both (base: {x}; new: {y})"),
        };
        out.not_measured
            .push(format!("{}: not measured in {sides}", b.name(item)));
    }
    // The items of `x` of one kind (variants, or derived figures) that `y` lacks.
    fn only<'a>(x: &'a [String], y: &[String], derived: bool) -> Vec<&'a String> {
        let kind = |i: &&String| i.starts_with("derived:") == derived;
        x.iter().filter(kind).filter(|i| !y.contains(i)).collect()
    }
    for derived in [false, true] {
        let lost = only(&b.items, &n.items, derived);
        let added = only(&n.items, &b.items, derived);
        if let ([lost], [added]) = (lost.as_slice(), added.as_slice()) {
            out.renamed.push(Renamed {
                base: b.name(lost),
                new: n.name(added),
            });
            continue;
        }
        out.only_in_base.extend(lost.iter().map(|i| b.name(i)));
        out.only_in_new.extend(added.iter().map(|i| n.name(i)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures::{report, run};
    use crate::report::{Figure, Unit};

    #[test]
    fn every_report_of_a_side_counts() {
        let r = report(vec![run("async", &[("n", 1)], &["sync", "async"])]);
        assert!(coverage(&[&r], &[&r]).is_complete(), "identical reports");
        let x = || run("x", &[], &["v"]);
        let (a1, a2) = (report(vec![x()]), report(vec![x(), run("y", &[], &["v"])]));
        let n1 = report(vec![x(), run("y", &[], &["v"])]);
        // The base's second report holds y, as the new one does: compared, not one-sided.
        assert!(coverage(&[&a1, &a2], &[&n1]).is_complete());
        let c = coverage(&[&a1, &a2], &[&report(vec![x()]), &a1]);
        assert_eq!(c.only_in_base, vec!["y[] v"]);
    }

    #[test]
    fn a_removed_scenario_and_a_removed_variant_are_listed() {
        let mut deps = run("deps", &[("width", 8)], &["serial", "parallel"]);
        deps.derive_as("speedup", 2.0, Figure::new(Unit::Ratio, Better::Higher));
        deps.derive_as("t1_s", 2.0, Figure::new(Unit::Seconds, Better::Neither));
        let base = report(vec![
            run("async", &[("n", 1)], &["sync", "async", "bounded"]),
            deps,
        ]);
        let new = report(vec![run("async", &[("n", 1)], &["async", "bounded"])]);
        let c = coverage(&[&base], &[&new]);
        assert_eq!(
            c.only_in_base,
            vec![
                "async[n=1] sync",
                "deps[width=8] serial",
                "deps[width=8] parallel",
                "deps[width=8] derived:speedup",
            ]
        );
        assert!(c.only_in_new.is_empty() && c.renamed.is_empty());
        assert_eq!(c.counts(), "4 only in base, 0 only in new");
        assert_eq!(c.lines()[0], "missing in new: async[n=1] sync");
        // The other way round, they are new.
        let c = coverage(&[&new], &[&base]);
        assert_eq!(c.only_in_new.len(), 4);
        assert_eq!(c.lines()[0], "new in new: async[n=1] sync");
    }

    #[test]
    fn a_renamed_variant_and_a_changed_parameter_are_paired() {
        let base = report(vec![
            run("async", &[("n", 1)], &["sync", "async"]),
            run("matmul", &[("size", 100), ("threads", 1)], &["gemm"]),
        ]);
        let new = report(vec![
            run("async", &[("n", 1)], &["blocking", "async"]),
            run("matmul", &[("size", 128), ("threads", 1)], &["gemm"]),
        ]);
        let c = coverage(&[&base], &[&new]);
        assert!(c.only_in_base.is_empty() && c.only_in_new.is_empty());
        assert_eq!(
            c.lines(),
            [
                "renamed? async[n=1] sync → async[n=1] blocking",
                "renamed? matmul[size=100,threads=1] gemm → matmul[size=128,threads=1] gemm",
            ]
        );
        assert_eq!(c.uncompared(), 4);
    }

    #[test]
    fn a_figure_not_measured_is_listed_with_its_reasons_not_missing() {
        use crate::report::FigureSpec;
        let specs = [
            FigureSpec::new("speedup", Unit::Ratio, Better::Higher),
            FigureSpec::new("gflops", Unit::Gflops, Better::Higher),
        ];
        let doc = |measured: [bool; 2]| {
            let mut r = run("deps", &[("width", 8)], &["serial"]);
            for (m, spec) in measured.into_iter().zip(specs) {
                match m {
                    true => r.record(spec, 2.0),
                    false => r.unmeasured(spec, format!("no {}", spec.key)),
                }
            }
            report(vec![r])
        };
        let (both, neither) = (doc([true, true]), doc([false, false]));
        let c = coverage(&[&both], &[&neither]);
        assert!(c.is_complete(), "{c:?}");
        assert_eq!(
            c.lines(),
            [
                "deps[width=8] derived:speedup: not measured in new (no speedup)",
                "deps[width=8] derived:gflops: not measured in new (no gflops)",
            ]
        );
        let c = coverage(&[&doc([false, true])], &[&doc([false, false])]);
        assert_eq!(
            c.not_measured[0],
            "deps[width=8] derived:speedup: not measured in both (no speedup)"
        );
        // No row, so neither a regression nor "n/a"; the times still compare.
        let none = |_: &str| crate::report::noise::Spread::default();
        let rows =
            crate::report::compare::compare(&[&both], &[&neither], &none, 0.05).expect("rows");
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert!(rows[0].is_time);
        // A figure present in one report only is still missing.
        let mut fewer = doc([true, true]);
        fewer.runs[0].derived.remove("gflops");
        assert_eq!(coverage(&[&both], &[&fewer]).uncompared(), 1);
        // Measured by another report of its side: measured.
        let c = coverage(&[&neither, &both], &[&both]);
        assert!(c.not_measured.is_empty(), "{c:?}");
    }

    #[test]
    fn an_ambiguous_rename_is_not_guessed() {
        // Two variants gone, two new: no one-to-one pairing.
        let base = report(vec![run("async", &[("n", 1)], &["a", "b", "c"])]);
        let new = report(vec![run("async", &[("n", 1)], &["x", "y", "c"])]);
        let c = coverage(&[&base], &[&new]);
        assert!(c.renamed.is_empty());
        assert_eq!((c.only_in_base.len(), c.only_in_new.len()), (2, 2));
        // One run gone, two new runs each one parameter from it: no guess either.
        let base = report(vec![run("matmul", &[("size", 100)], &["gemm"])]);
        let new = report(vec![
            run("matmul", &[("size", 200)], &["gemm"]),
            run("matmul", &[("size", 300)], &["gemm"]),
        ]);
        let c = coverage(&[&base], &[&new]);
        assert!(c.renamed.is_empty());
        assert_eq!((c.only_in_base.len(), c.only_in_new.len()), (1, 2));
    }
}
