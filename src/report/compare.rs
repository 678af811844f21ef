//! Comparing two reports: the regression check a CI job trusts.
//!
//! Entries are matched by scenario, parameters and variant name. A change counts only when it
//! is both larger than the threshold and real: a two-sided Mann-Whitney U test on the raw
//! samples gives p < 0.05 (as Google Benchmark's compare.py), computed exactly for small
//! samples (20 or fewer a side, ties included). A large change that is not real is "noise"; so
//! is any change between samples too few to ever show one (3 against 3 cannot reach p < 0.05).
//! A zero or non-finite median makes an entry "n/a", never faster or slower. Derived figures
//! with a direction (speed-ups, GFLOP/s, efficiencies, bandwidths) are compared by the
//! threshold alone, having no samples, and are reported but do not fail the check.
//!
//! This decides the rows; `export::compare` prints them (table, Markdown, JSON) and
//! `export::html` draws the comparison page.

use serde_json::Value;

use super::{Better, Report, Unit, SCHEMA};
#[cfg(test)]
use super::{Figure, RunRecord};
use crate::harness::stats::mann_whitney_p;

/// Why two reports cannot be compared (a usage error).
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("cannot read {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("{path} is not a parbench report: {reason}")]
    Parse { path: String, reason: String },
    #[error("{path} has schema '{found}', this parbench reads '{SCHEMA}'")]
    Schema { path: String, found: String },
    #[error("nothing to compare: no scenario, parameters and variant appear in both reports")]
    NothingMatched,
    /// One of parbench's results (a `compare` or `ab` JSON) where a report was expected.
    #[error("{path} is {what}")]
    NotAReport { path: String, what: &'static str },
    /// A report holding an entry twice, which a comparison could pair with the wrong copy.
    #[error("{path} holds {} more than once (a report compares only with each entry once; rerun it, or edit the copies out)", .entries.join(", "))]
    Duplicates { path: String, entries: Vec<String> },
}

/// What a journal given where a report was expected is, and the command that turns it into
/// one: a sweep's (its header, or its first run record, names the scenario) or a suite's (its
/// header names the suite; `parbench all`'s is the built-in one). `None` when `text` is no
/// journal (JSON Lines of a header and run records, no schema).
fn journal_hint(text: &str, path: &str) -> Option<String> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let first: Value = serde_json::from_str(lines.next()?).ok()?;
    lines.next()?;
    if first.get("schema").is_some() {
        return None;
    }
    if first.get("kind").and_then(Value::as_str) == Some("suite") {
        let suite = first.get("suite")?.as_str()?;
        let command = match suite.strip_suffix(" (built in)") {
            Some(_) => "parbench all".to_string(),
            None => format!("parbench run {suite}"),
        };
        return Some(format!(
            "it is a suite's journal (one finished run per line), not a report; `{command} \
             --journal {path} --resume -o report.json` writes the report"
        ));
    }
    let scenario = first.get("scenario")?.as_str()?;
    Some(format!(
        "it is a sweep journal (one finished point per line), not a report; `parbench sweep \
         {scenario} --set ... --resume {path} -o report.json` with the sweep's axes writes the \
         report"
    ))
}

/// Load a report, checking its schema version first.
pub fn load(path: &std::path::Path) -> Result<Report, CompareError> {
    let p = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| CompareError::Read {
        path: p.clone(),
        reason: e.to_string(),
    })?;
    let value: Value = serde_json::from_str(&text).map_err(|e| CompareError::Parse {
        path: p.clone(),
        reason: journal_hint(&text, &p).unwrap_or_else(|| e.to_string()),
    })?;
    match value.get("schema").and_then(Value::as_str) {
        Some(SCHEMA) => {}
        Some(other) => {
            return Err(match super::provenance::result_kind(other) {
                Some(what) => CompareError::NotAReport { path: p, what },
                None => CompareError::Schema {
                    path: p,
                    found: other.into(),
                },
            })
        }
        None => {
            // Results written before they carried a schema: `ab` (entries, settings) and
            // `compare --format json` (rows, threshold).
            let has = |a: &str, b: &str| value.get(a).is_some() && value.get(b).is_some();
            let older = if has("entries", "settings") {
                super::provenance::result_kind(super::provenance::AB_SCHEMA)
            } else if has("rows", "threshold") {
                super::provenance::result_kind(super::provenance::COMPARE_SCHEMA)
            } else {
                None
            };
            return Err(match older {
                Some(what) => CompareError::NotAReport { path: p, what },
                None => CompareError::Parse {
                    path: p,
                    reason: "no \"schema\" field".into(),
                },
            });
        }
    }
    serde_json::from_value(value).map_err(|e| CompareError::Parse {
        path: p,
        reason: e.to_string(),
    })
}

/// The outcome for one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Faster,
    Slower,
    Same,
    Noise,
    /// A derived figure that moved the good way / the bad way.
    Better,
    Worse,
    /// No meaningful change can be computed (a zero or non-finite baseline or value).
    NotComparable,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::Same => "same",
            Verdict::Noise => "noise",
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::NotComparable => "n/a",
        }
    }

    /// True for the verdicts that fail a regression check: times only. Derived figures are
    /// ratios of medians with no samples of their own, so their noise adds up (±3% on two
    /// times is ±6% on a speed-up); they are shown, not gated.
    pub fn is_regression(self) -> bool {
        matches!(self, Verdict::Slower)
    }
}

/// One compared entry.
#[derive(Debug, Clone)]
pub struct Row {
    /// `scenario[params] variant` or `scenario[params] derived:key`.
    pub entry: String,
    pub base: f64,
    pub new: f64,
    /// (new − base) / base.
    pub change: f64,
    pub p_value: Option<f64>,
    pub verdict: Verdict,
    /// True for times (seconds), false for derived figures (their own units).
    pub is_time: bool,
    /// The unit the two values are printed in.
    pub unit: Unit,
    /// Which side's run was measured on a busy machine.
    pub busy: Busy,
}

impl Row {
    /// The verdict as the tables word it: a change measured with a busy side says so
    /// (`slower (busy base)`), since the machine may explain it.
    pub fn verdict_text(&self) -> String {
        verdict_text(self.verdict, self.busy)
    }
}

/// Which side of a comparison was measured on a busy machine (its run's state gave a
/// [`BusyReason`](crate::machine::BusyReason)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Busy {
    pub base: bool,
    pub new: bool,
}

impl Busy {
    /// The sides of these two runs that were busy.
    pub fn of(base: &super::RunRecord, new: &super::RunRecord) -> Busy {
        Busy {
            base: !base.busy_reasons().is_empty(),
            new: !new.busy_reasons().is_empty(),
        }
    }

    pub fn any(self) -> bool {
        self.base || self.new
    }

    /// `busy base`, `busy new`, `busy both`; `None` when neither was.
    pub fn marker(self) -> Option<&'static str> {
        match (self.base, self.new) {
            (true, true) => Some("busy both"),
            (true, false) => Some("busy base"),
            (false, true) => Some("busy new"),
            (false, false) => None,
        }
    }
}

/// `verdict` as the tables word it, marked with the busy side when it claims a change.
pub fn verdict_text(verdict: Verdict, busy: Busy) -> String {
    let claims_a_change = matches!(
        verdict,
        Verdict::Faster | Verdict::Slower | Verdict::Better | Verdict::Worse
    );
    match busy.marker() {
        Some(marker) if claims_a_change => format!("{} ({marker})", verdict.as_str()),
        _ => verdict.as_str().to_string(),
    }
}

/// Each side's machine state, one line a side, for every run matched in both reports where
/// either side was busy: `matmul[size=256] base (busy): other processes 48.0% of CPU time, …`.
/// Empty when no matched run was busy.
pub fn busy_states(base: &Report, new: &Report) -> Vec<String> {
    let mut lines = Vec::new();
    for nr in &new.runs {
        let key = nr.key();
        let Some(br) = base.runs.iter().find(|b| b.key() == key) else {
            continue;
        };
        let busy = Busy::of(br, nr);
        if !busy.any() {
            continue;
        }
        for (side, run, flagged) in [("base", br, busy.base), ("new", nr, busy.new)] {
            let mark = if flagged { " (busy)" } else { "" };
            let state = run
                .state
                .as_ref()
                .map_or_else(|| "no state recorded".to_string(), |s| s.to_string());
            lines.push(format!("{key} {side}{mark}: {state}"));
        }
    }
    lines
}

/// How the two reports' environments differ where it changes timings (machine, engine, GPU),
/// as `what: 'base' vs 'new'` phrases, and the machine's limits measured on both sides that
/// differ beyond their noise ([`crate::machine::drift`]); empty when they match.
pub fn environment_differences(base: &Report, new: &Report) -> Vec<String> {
    let (b, n) = (&base.environment, &new.environment);
    let mut out = Vec::new();
    let mut differ = |what: &str, x: String, y: String| {
        if x != y {
            out.push(format!("{what}: '{x}' vs '{y}'"));
        }
    };
    differ("CPU", b.cpu_model.clone(), n.cpu_model.clone());
    differ("cores", b.cores.to_string(), n.cores.to_string());
    differ("engine", b.engine.clone(), n.engine.clone());
    let gpu = |g: &super::GpuInfo| g.name.clone().unwrap_or_else(|| "none".into());
    differ("GPU", gpu(&b.gpu), gpu(&n.gpu));
    if let (Some(bl), Some(nl)) = (&b.limits, &n.limits) {
        out.extend(crate::machine::drift::limits_differences(bl, nl));
    }
    out
}

/// Decide a time comparison from the raw samples: a change counts when it is larger than the
/// threshold and the two-sided p-value of the rank test ([`p_value`]) is below 0.05. Very few
/// samples can never reach that (3 against 3: p >= 0.1), whatever the ranges: a large change
/// is then `noise`, since 1 in 20 runs of unchanged code would put one side of a 3-against-3
/// comparison entirely above the other.
fn time_verdict(base: &[f64], new: &[f64], change: f64, threshold: f64) -> (Verdict, Option<f64>) {
    let p = p_value(base, new);
    if !change.is_finite() {
        return (Verdict::NotComparable, p);
    }
    if change.abs() < threshold {
        return (Verdict::Same, p);
    }
    let verdict = match (p.is_some_and(|p| p < 0.05), change > 0.0) {
        (false, _) => Verdict::Noise,
        (true, true) => Verdict::Slower,
        (true, false) => Verdict::Faster,
    };
    (verdict, p)
}

/// Largest sample size, per side, for which [`permutation_p`] is used.
const EXACT_MAX: usize = 20;

/// The two-sided p-value of the Mann-Whitney test: exact ([`permutation_p`]) for up to 20
/// samples a side, ties or not, and the normal approximation above that.
///
/// Why not the approximation with ties: for a handful of samples it undershoots. 3 tied values
/// against 3 tied values get p = 0.047 from it, a "real" move that no permutation of 6 values
/// can support (their most extreme split has p = 2 / C(6, 3) = 0.1).
fn p_value(base: &[f64], new: &[f64]) -> Option<f64> {
    if base.len() <= EXACT_MAX && new.len() <= EXACT_MAX {
        permutation_p(base, new)
    } else {
        mann_whitney_p(base, new)
    }
}

/// Exact two-sided p-value of the rank-sum (Mann-Whitney) test by permutation: over every way
/// to split the pooled values into groups of these sizes, equally likely when nothing changed,
/// the chance of a rank sum of `new` at least as far into either tail as the one observed
/// (twice the smaller tail, at most 1). Tied values share their mean rank, so ties are handled
/// exactly; without ties this equals the exact Mann-Whitney p.
///
/// `None` when either side has fewer than 2 samples or any value is not finite.
fn permutation_p(base: &[f64], new: &[f64]) -> Option<f64> {
    if base.len() < 2 || new.len() < 2 || base.iter().chain(new).any(|x| !x.is_finite()) {
        return None;
    }
    let mut pooled: Vec<(f64, bool)> = base
        .iter()
        .map(|&x| (x, false))
        .chain(new.iter().map(|&x| (x, true)))
        .collect();
    pooled.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Doubled mean ranks are whole numbers: a run of ties over 1-based ranks s+1..=e has mean
    // rank (s + 1 + e) / 2.
    let mut ranks2 = Vec::with_capacity(pooled.len());
    let mut observed = 0usize;
    let mut start = 0;
    while start < pooled.len() {
        let mut end = start + 1;
        while end < pooled.len() && pooled[end].0 == pooled[start].0 {
            end += 1;
        }
        let rank2 = start + 1 + end;
        for item in &pooled[start..end] {
            ranks2.push(rank2);
            if item.1 {
                observed += rank2;
            }
        }
        start = end;
    }
    // ways[k][s]: subsets of k pooled values whose doubled ranks sum to s (a knapsack count;
    // at most C(40, 20) < 2^53, exact in f64).
    let k_max = new.len();
    let s_max: usize = ranks2.iter().sum();
    let mut ways = vec![vec![0f64; s_max + 1]; k_max + 1];
    ways[0][0] = 1.0;
    for &r in &ranks2 {
        for k in (1..=k_max).rev() {
            let (lower, upper) = ways.split_at_mut(k);
            for s in (r..=s_max).rev() {
                upper[0][s] += lower[k - 1][s - r];
            }
        }
    }
    let counts = &ways[k_max];
    let total: f64 = counts.iter().sum();
    let at_most: f64 = counts[..=observed].iter().sum();
    let at_least: f64 = counts[observed..].iter().sum();
    Some((2.0 * at_most.min(at_least) / total).min(1.0))
}

/// (new − base) / base, or NaN when it means nothing (a zero or non-finite baseline).
fn relative_change(base: f64, new: f64) -> f64 {
    if base > 0.0 && base.is_finite() && new.is_finite() {
        (new - base) / base
    } else {
        f64::NAN
    }
}

/// [`relative_change`] of two median times, NaN also when the new time is not positive: a
/// time of zero means nothing was measured, and must not read as a 100% speed-up.
fn time_change(base: f64, new: f64) -> f64 {
    if new > 0.0 {
        relative_change(base, new)
    } else {
        f64::NAN
    }
}

/// Compare `new` against `base`; `threshold` is a fraction (0.05 for 5%).
pub fn compare(base: &Report, new: &Report, threshold: f64) -> Result<Vec<Row>, CompareError> {
    let mut rows = Vec::new();
    for nr in &new.runs {
        let key = nr.key();
        let Some(br) = base.runs.iter().find(|b| b.key() == key) else {
            continue;
        };
        for nv in &nr.variants {
            let Some(bv) = br.variants.iter().find(|b| b.name == nv.name) else {
                continue;
            };
            let busy = Busy::of(br, nr);
            let (b, n) = (bv.summary.median_s, nv.summary.median_s);
            let change = time_change(b, n);
            let (verdict, p_value) = time_verdict(
                &bv.summary.samples_s,
                &nv.summary.samples_s,
                change,
                threshold,
            );
            rows.push(Row {
                entry: format!("{key} {}", nv.name),
                base: b,
                new: n,
                change,
                p_value,
                verdict,
                is_time: true,
                unit: Unit::Seconds,
                busy,
            });
        }
        for (k, nval) in &nr.derived {
            let (Some(n), Some(b)) = (nval.as_f64(), br.derived.get(k).and_then(Value::as_f64))
            else {
                continue;
            };
            let figure = nr.figure(k);
            let up_is_better = match figure.better {
                Better::Higher => true,
                Better::Lower => false,
                Better::Neither => continue,
            };
            let change = relative_change(b, n);
            let verdict = if !change.is_finite() {
                Verdict::NotComparable
            } else if change.abs() < threshold {
                Verdict::Same
            } else if (change > 0.0) == up_is_better {
                Verdict::Better
            } else {
                Verdict::Worse
            };
            rows.push(Row {
                entry: format!("{key} derived:{k}"),
                base: b,
                new: n,
                change,
                p_value: None,
                verdict,
                is_time: false,
                unit: figure.unit,
                busy: Busy::of(br, nr),
            });
        }
    }
    if rows.is_empty() {
        return Err(CompareError::NothingMatched);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_need_both_size_and_evidence() {
        let base = [1.00, 1.01, 0.99, 1.02, 0.98, 1.00, 1.01, 0.99];
        let slow: Vec<f64> = base.iter().map(|x| x * 1.3).collect();
        assert_eq!(time_verdict(&base, &slow, 0.3, 0.05).0, Verdict::Slower);
        let fast: Vec<f64> = base.iter().map(|x| x * 0.7).collect();
        assert_eq!(time_verdict(&base, &fast, -0.3, 0.05).0, Verdict::Faster);
        // Within the threshold: the same, however significant.
        let shifted: Vec<f64> = base.iter().map(|x| x * 1.02).collect();
        assert_eq!(time_verdict(&base, &shifted, 0.02, 0.05).0, Verdict::Same);
        // A big median change that the samples do not support: noise.
        let wild = [0.5, 2.0, 0.6, 1.9, 0.7, 1.8, 1.2, 1.3];
        assert_eq!(time_verdict(&base, &wild, 0.2, 0.05).0, Verdict::Noise);
        // Three samples each cannot reach p < 0.05 even fully separated (exact p = 0.1):
        // 1 run in 20 of unchanged code would look like that.
        assert_eq!(
            time_verdict(&[1.0, 1.01, 0.99], &[1.3, 1.31, 1.29], 0.3, 0.05).0,
            Verdict::Noise
        );
        // Four each, fully separated, can (exact p = 2/70).
        assert_eq!(
            time_verdict(
                &[1.0, 1.01, 0.99, 1.02],
                &[1.3, 1.31, 1.29, 1.32],
                0.3,
                0.05
            )
            .0,
            Verdict::Slower
        );
        // One sample each is no evidence at all.
        assert_eq!(time_verdict(&[1.0], &[1.3], 0.3, 0.05).0, Verdict::Noise);
    }

    #[test]
    fn a_zero_or_broken_baseline_is_not_comparable_never_faster() {
        let zero = [0.0, 0.0, 0.0, 0.0];
        let new = [1.0, 1.1, 0.9, 1.0];
        let change = relative_change(0.0, 1.0);
        let (verdict, _) = time_verdict(&zero, &new, change, 0.05);
        assert_eq!(verdict, Verdict::NotComparable);
        assert!(!verdict.is_regression());
        assert_eq!(crate::export::compare::percent(change), "n/a");
        assert!(relative_change(f64::NAN, 1.0).is_nan());
        assert!(relative_change(1.0, f64::INFINITY).is_nan());
        assert_eq!(relative_change(2.0, 3.0), 0.5);
    }

    #[test]
    fn false_slowdowns_of_unchanged_code_are_rare_at_three_samples() {
        // Unchanged code, 3 against 3, every one of the 20 equally likely orderings: none may
        // be called slower (the old disjoint-ranges rule called 1 in 20 slower).
        let values = [1.0, 1.01, 1.02, 1.03, 1.04, 1.05];
        let mut slower = 0;
        for mask in 0u32..64 {
            if mask.count_ones() != 3 {
                continue;
            }
            let (mut base, mut new) = (Vec::new(), Vec::new());
            for (i, v) in values.iter().enumerate() {
                if mask & (1 << i) != 0 {
                    new.push(*v * 1.3);
                } else {
                    base.push(*v * 1.3);
                }
            }
            let (b, n) = (
                crate::harness::stats::median(&base).unwrap(),
                crate::harness::stats::median(&new).unwrap(),
            );
            // A generous threshold-free view: any change counts if the evidence says so.
            if time_verdict(&base, &new, relative_change(b, n), 0.0).0 == Verdict::Slower {
                slower += 1;
            }
        }
        assert_eq!(slower, 0);
    }

    #[test]
    fn ties_never_make_three_samples_a_side_significant() {
        // Quantized timings (a coarse clock): 3 identical values against 3 identical values.
        // The normal approximation with its tie correction gives p = 0.047; the exact
        // permutation p of this, the most extreme split, is 2 / C(6, 3) = 0.1.
        let (base, new) = ([1.0, 1.0, 1.0], [1.3, 1.3, 1.3]);
        let p = permutation_p(&base, &new).expect("enough samples");
        assert!((p - 0.1).abs() < 1e-12, "{p}");
        let change = time_change(1.0, 1.3);
        assert_eq!(time_verdict(&base, &new, change, 0.05).0, Verdict::Noise);
        // Four a side with ties, fully separated: 2 / C(8, 4) = 0.029, a real move.
        let (base, new) = ([1.0, 1.0, 1.0, 1.01], [1.3, 1.3, 1.3, 1.31]);
        let p = permutation_p(&base, &new).expect("enough samples");
        assert!((p - 2.0 / 70.0).abs() < 1e-12, "{p}");
        assert_eq!(time_verdict(&base, &new, 0.3, 0.05).0, Verdict::Slower);
    }

    #[test]
    fn the_exact_p_without_ties_is_the_exact_mann_whitney_p() {
        let cases: [(&[f64], &[f64]); 4] = [
            (&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]),
            (&[1.0, 4.0, 2.5, 7.0], &[3.0, 5.0, 6.0, 8.0, 9.0]),
            (&[0.9, 1.1, 1.3, 0.7, 1.0, 1.2], &[1.05, 1.15, 0.95]),
            (&[19.0, 22.0, 16.0, 29.0, 24.0], &[20.0, 11.0, 17.0, 12.0]),
        ];
        for (a, b) in cases {
            let exact = permutation_p(a, b).expect("enough samples");
            let mw = mann_whitney_p(a, b).expect("enough samples");
            assert!((exact - mw).abs() < 1e-12, "{a:?} {b:?}: {exact} vs {mw}");
        }
        // scipy.stats.mannwhitneyu(males, females, method="exact").pvalue
        let p = permutation_p(&[19.0, 22.0, 16.0, 29.0, 24.0], &[20.0, 11.0, 17.0, 12.0]);
        assert!((p.expect("p") - 0.1111111111111111).abs() < 1e-12);
    }

    #[test]
    fn large_samples_are_decided_by_the_u_test_alone() {
        // 30 against 30, overlapping ranges but a clear shift: the U test decides (the ranges
        // are not disjoint, so no separation rule could have).
        let base: Vec<f64> = (0..30).map(|i| 1.0 + 0.01 * f64::from(i)).collect();
        let new: Vec<f64> = base.iter().map(|x| x + 0.2).collect();
        assert!(new[0] < base[29]);
        let (b, n) = (
            crate::harness::stats::median(&base).unwrap(),
            crate::harness::stats::median(&new).unwrap(),
        );
        let (verdict, p) = time_verdict(&base, &new, time_change(b, n), 0.05);
        assert_eq!(verdict, Verdict::Slower, "p = {p:?}");
        assert_eq!(p, mann_whitney_p(&base, &new));
        // Same size, interleaved: no evidence, however the medians moved.
        let mixed: Vec<f64> = base.iter().rev().copied().collect();
        assert_eq!(time_verdict(&base, &mixed, 0.3, 0.05).0, Verdict::Noise);
    }

    #[test]
    fn a_zero_or_negative_new_time_is_not_comparable_never_faster() {
        let base = [1.0, 1.01, 0.99, 1.02];
        for new in [[0.0; 4], [-1.0; 4]] {
            let change = time_change(1.0, new[0]);
            let (verdict, _) = time_verdict(&base, &new, change, 0.05);
            assert_eq!(verdict, Verdict::NotComparable, "{new:?}");
        }
    }

    /// A report of one run with one variant and the derived figures `derive` adds.
    fn report_deriving(derive: impl FnOnce(&mut RunRecord)) -> Report {
        let mut run = RunRecord::new("s", serde_json::Map::new(), vec![]);
        run.add_variants(
            vec!["v".into()],
            vec![crate::harness::Summary::from_samples(&[1.0; 5]).expect("samples")],
            [None],
        );
        derive(&mut run);
        Report::new(
            crate::report::Environment::capture(
                crate::engine::Mode::Threaded,
                crate::report::GpuInfo::unavailable("x"),
            ),
            vec![run],
        )
    }

    #[test]
    fn a_figure_better_lower_is_worse_when_it_rises() {
        let doc = |v: f64| {
            report_deriving(|run| {
                run.derive_as("chain_ratio", v, Figure::new(Unit::Ratio, Better::Lower));
                run.derive_as("t1_s", v, Figure::new(Unit::Seconds, Better::Neither));
            })
        };
        let rows = compare(&doc(1.0), &doc(2.0), 0.1).expect("rows");
        let row = |name: &str| rows.iter().find(|r| r.entry.ends_with(name));
        assert_eq!(
            row("derived:chain_ratio").map(|r| r.verdict),
            Some(Verdict::Worse)
        );
        assert!(row("derived:t1_s").is_none(), "no direction, no verdict");
        let rows = compare(&doc(2.0), &doc(1.0), 0.1).expect("rows");
        let row = |name: &str| rows.iter().find(|r| r.entry.ends_with(name));
        assert_eq!(
            row("derived:chain_ratio").map(|r| r.verdict),
            Some(Verdict::Better)
        );
    }
}
