//! Paired A/B decisions: two builds measured side by side, alternating, so drift of the machine
//! hits both sides of each pair alike and cancels in the pair's ratio (the idea of paired
//! benchmarking, as in tango-bench). `parbench ab` collects the pairs; this module decides.
//!
//! For every entry (a variant's median time, or a derived figure) each pair gives a ratio
//! candidate / base. The verdict needs two independent tests to agree and the change to pass the
//! threshold: the Wilcoxon signed-rank test on the log ratios rejects "no change" (p < 0.05),
//! the bootstrap 95% interval of the median ratio excludes 1, and the median ratio lies beyond
//! the threshold. A change inside the threshold with an interval inside the threshold band is
//! `same`; anything else is `noise` (undecided: more pairs would tell).

use super::compare::Verdict;
use super::figure::Better;
use crate::harness::stats::{bootstrap_median_ci95, median, wilcoxon_signed_rank_p};

/// Bootstrap resamples per decision: enough for a stable 95% interval of a median.
const RESAMPLES: usize = 2000;
/// Fixed, so the same pairs always give the same report.
const SEED: u64 = 0x005e_edab;
/// Significance of the paired test for a verdict.
const ALPHA: f64 = 0.05;
/// Stricter significance for stopping early: a run may end once every entry is this clear.
const ALPHA_EARLY: f64 = 0.01;

/// The decision on one entry's pairs.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Median of the per-pair ratios candidate / base.
    pub median_ratio: f64,
    /// Bootstrap 95% interval of that median.
    pub ci95: [f64; 2],
    /// Two-sided Wilcoxon signed-rank p-value on the log ratios.
    pub p_value: f64,
    pub verdict: Verdict,
    /// True when more pairs would not change the verdict's kind: a change with p < 0.01, or
    /// `same` (an interval inside the threshold band).
    pub settled: bool,
}

/// Decide from `pairs` of (base, candidate) values. `better` says which way the figure
/// improves: `Lower` for times (a ratio above 1 is `slower`), `Higher` for rates and speed-ups
/// (a ratio below 1 is `worse`), `Neither` for descriptions (never a change). `None` when a value
/// is not positive and finite or fewer than 2 pairs are given.
pub fn decide(
    pairs: &[(f64, f64)],
    threshold: f64,
    better: Better,
    is_time: bool,
) -> Option<Decision> {
    if pairs.len() < 2
        || pairs
            .iter()
            .any(|&(b, c)| !(b > 0.0 && c > 0.0 && b.is_finite() && c.is_finite()))
    {
        return None;
    }
    let ratios: Vec<f64> = pairs.iter().map(|&(b, c)| c / b).collect();
    let logs: Vec<f64> = ratios.iter().map(|r| r.ln()).collect();
    let median_ratio = median(&ratios)?;
    let ci95 = bootstrap_median_ci95(&ratios, RESAMPLES, SEED)?;
    let p_value = wilcoxon_signed_rank_p(&logs)?;
    let (up, down) = (1.0 + threshold, 1.0 / (1.0 + threshold));
    let rose = p_value < ALPHA && ci95[0] > 1.0 && median_ratio > up;
    let fell = p_value < ALPHA && ci95[1] < 1.0 && median_ratio < down;
    let inside = ci95[0] >= down && ci95[1] <= up;
    let verdict = match (better, rose, fell) {
        (Better::Neither, _, _) if inside => Verdict::Same,
        (Better::Neither, _, _) => Verdict::Noise,
        (Better::Lower, true, _) if is_time => Verdict::Slower,
        (Better::Lower, _, true) if is_time => Verdict::Faster,
        (Better::Lower, true, _) | (Better::Higher, _, true) => Verdict::Worse,
        (Better::Lower, _, true) | (Better::Higher, true, _) => Verdict::Better,
        _ if inside => Verdict::Same,
        _ => Verdict::Noise,
    };
    let settled = match verdict {
        Verdict::Same => true,
        Verdict::Noise | Verdict::NotComparable => false,
        _ => p_value < ALPHA_EARLY,
    };
    Some(Decision {
        median_ratio,
        ci95,
        p_value,
        verdict,
        settled,
    })
}

/// One entry of an A/B run: a variant's median time, or a derived figure, of one suite entry.
#[derive(Debug, Clone)]
pub struct PairedEntry {
    /// `scenario[params] variant` or `scenario[params] derived:key`, as `compare` names them.
    pub name: String,
    pub is_time: bool,
    pub better: Better,
    /// (base, candidate) values, one per pair, in the order they ran.
    pub pairs: Vec<(f64, f64)>,
}

impl PairedEntry {
    pub fn decision(&self, threshold: f64) -> Option<Decision> {
        decide(&self.pairs, threshold, self.better, self.is_time)
    }
}

/// The values of one run of one side, by entry name: every variant's median, and every derived
/// figure with a direction (descriptions such as model predictions are left out).
pub fn values_of(run: &super::RunRecord) -> Vec<(String, bool, Better, f64)> {
    let key = run.key();
    let mut out: Vec<(String, bool, Better, f64)> = run
        .variants
        .iter()
        .map(|v| {
            (
                format!("{key} {}", v.name),
                true,
                Better::Lower,
                v.summary.median_s,
            )
        })
        .collect();
    for (k, v) in &run.derived {
        let figure = run.figure(k);
        if let (Some(x), false) = (v.as_f64(), figure.better == Better::Neither) {
            out.push((format!("{key} derived:{k}"), false, figure.better, x));
        }
    }
    out
}

/// Add one pair's values (from the base's and the candidate's run of the same suite entry) to
/// `entries`; an entry either side lacks is left out of this pair.
pub fn add_pair(
    entries: &mut Vec<PairedEntry>,
    base: &[(String, bool, Better, f64)],
    candidate: &[(String, bool, Better, f64)],
) {
    for (name, is_time, better, b) in base {
        let Some((_, _, _, c)) = candidate.iter().find(|(n, ..)| n == name) else {
            continue;
        };
        match entries.iter_mut().find(|e| &e.name == name) {
            Some(e) => e.pairs.push((*b, *c)),
            None => entries.push(PairedEntry {
                name: name.clone(),
                is_time: *is_time,
                better: *better,
                pairs: vec![(*b, *c)],
            }),
        }
    }
}

/// The entries as a table (or Markdown for a pull-request comment): pairs, median ratio with its
/// bootstrap interval, the paired test's p, the verdict.
pub fn render(entries: &[PairedEntry], threshold: f64, markdown: bool) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let cells = |e: &PairedEntry| -> [String; 5] {
        match e.decision(threshold) {
            Some(d) => [
                e.pairs.len().to_string(),
                format!("{:+.1}%", (d.median_ratio - 1.0) * 100.0),
                format!(
                    "[{:+.1}%, {:+.1}%]",
                    (d.ci95[0] - 1.0) * 100.0,
                    (d.ci95[1] - 1.0) * 100.0
                ),
                format!("{:.3}", d.p_value),
                d.verdict.as_str().to_string(),
            ],
            None => [
                e.pairs.len().to_string(),
                "-".into(),
                "-".into(),
                "-".into(),
                Verdict::NotComparable.as_str().into(),
            ],
        }
    };
    if markdown {
        let _ = writeln!(
            out,
            "| entry | pairs | change (median of pairs) | 95% CI | p | verdict |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---|");
        for e in entries {
            let [n, change, ci, p, verdict] = cells(e);
            let mark = if verdict == Verdict::Slower.as_str() {
                " ❌"
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "| `{}` | {n} | {change} | {ci} | {p} | {verdict}{mark} |",
                e.name
            );
        }
    } else {
        let w = entries
            .iter()
            .map(|e| e.name.chars().count())
            .max()
            .unwrap_or(5)
            .max(5);
        let _ = writeln!(
            out,
            "{:<w$}  {:>5}  {:>8}  {:>18}  {:>6}  verdict",
            "entry", "pairs", "change", "95% CI", "p"
        );
        for e in entries {
            let [n, change, ci, p, verdict] = cells(e);
            let _ = writeln!(
                out,
                "{:<w$}  {n:>5}  {change:>8}  {ci:>18}  {p:>6}  {verdict}",
                e.name
            );
        }
    }
    let slower = regressions(entries, threshold);
    let _ = writeln!(
        out,
        "\n{} entries, paired (candidate / base per pair, ABBA order), threshold {:.1}%: {slower} regression{}",
        entries.len(),
        threshold * 100.0,
        if slower == 1 { "" } else { "s" }
    );
    out
}

/// Entries whose verdict fails the gate (times that got slower).
pub fn regressions(entries: &[PairedEntry], threshold: f64) -> usize {
    entries
        .iter()
        .filter_map(|e| e.decision(threshold))
        .filter(|d| d.verdict.is_regression())
        .count()
}

/// Every entry with every pair, its decision, and the run's settings, as JSON.
pub fn render_json(entries: &[PairedEntry], threshold: f64, settings: serde_json::Value) -> String {
    let rows: Vec<serde_json::Value> = entries
        .iter()
        .map(|e| {
            let d = e.decision(threshold);
            serde_json::json!({
                "entry": e.name,
                "is_time": e.is_time,
                "pairs": e.pairs.iter().map(|(b, c)| serde_json::json!({"base": b, "candidate": c})).collect::<Vec<_>>(),
                "median_ratio": d.as_ref().map(|d| d.median_ratio),
                "ci95": d.as_ref().map(|d| d.ci95),
                "p_value": d.as_ref().map(|d| d.p_value),
                "verdict": d.as_ref().map_or(Verdict::NotComparable, |d| d.verdict).as_str(),
            })
        })
        .collect();
    let doc = serde_json::json!({
        "threshold": threshold,
        "regressions": regressions(entries, threshold),
        "settings": settings,
        "entries": rows,
    });
    let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` pairs whose candidate is `ratio` times the base, on a base that drifts by up to 2×
    /// between pairs (as this machine does) and with ±`jitter` noise inside each pair.
    fn drifting(n: usize, ratio: f64, jitter: f64) -> Vec<(f64, f64)> {
        (0..n)
            .map(|i| {
                let drift = 1.0 + (i % 5) as f64 * 0.25;
                let wobble = 1.0 + jitter * (((i * 7) % 5) as f64 - 2.0) / 2.0;
                (drift, drift * ratio * wobble)
            })
            .collect()
    }

    #[test]
    fn drift_between_pairs_cancels_and_a_real_slowdown_is_seen() {
        let d = decide(&drifting(12, 1.10, 0.02), 0.05, Better::Lower, true).unwrap();
        assert_eq!(d.verdict, Verdict::Slower, "{d:?}");
        assert!((d.median_ratio - 1.10).abs() < 0.03, "{d:?}");
        assert!(d.settled, "{d:?}");
        let d = decide(&drifting(12, 1.0, 0.02), 0.05, Better::Lower, true).unwrap();
        assert_eq!(d.verdict, Verdict::Same, "{d:?}");
        let d = decide(&drifting(12, 0.8, 0.02), 0.05, Better::Lower, true).unwrap();
        assert_eq!(d.verdict, Verdict::Faster, "{d:?}");
    }

    #[test]
    fn a_change_inside_the_threshold_is_never_slower() {
        // A steady 3% slowdown: real (p small) but within 5%.
        let d = decide(&drifting(20, 1.03, 0.005), 0.05, Better::Lower, true).unwrap();
        assert!(d.p_value < 0.05, "{d:?}");
        assert_ne!(d.verdict, Verdict::Slower, "{d:?}");
    }

    #[test]
    fn too_few_or_mixed_pairs_are_noise_not_a_verdict() {
        // Three pairs can never reach p < 0.05 (2 / 2^3 = 0.25).
        let d = decide(&drifting(3, 1.5, 0.0), 0.05, Better::Lower, true).unwrap();
        assert_eq!(d.verdict, Verdict::Noise, "{d:?}");
        // Half the pairs 30% slower, half 30% faster.
        let mixed: Vec<(f64, f64)> = (0..10)
            .map(|i| (1.0, if i % 2 == 0 { 1.3 } else { 0.77 }))
            .collect();
        let d = decide(&mixed, 0.05, Better::Lower, true).unwrap();
        assert_eq!(d.verdict, Verdict::Noise, "{d:?}");
        assert!(!d.settled);
    }

    #[test]
    fn derived_figures_follow_their_direction() {
        let higher = decide(&drifting(12, 0.8, 0.01), 0.05, Better::Higher, false).unwrap();
        assert_eq!(higher.verdict, Verdict::Worse, "a speed-up that fell");
        let lower = decide(&drifting(12, 0.8, 0.01), 0.05, Better::Lower, false).unwrap();
        assert_eq!(
            lower.verdict,
            Verdict::Better,
            "a ratio to a bound that fell"
        );
        let neither = decide(&drifting(12, 0.8, 0.01), 0.05, Better::Neither, false).unwrap();
        assert_eq!(
            neither.verdict,
            Verdict::Noise,
            "a description has no better or worse"
        );
    }

    #[test]
    fn values_that_cannot_be_compared_give_none() {
        assert!(decide(&[(1.0, 1.0)], 0.05, Better::Lower, true).is_none());
        assert!(decide(&[(1.0, 1.0), (0.0, 1.0)], 0.05, Better::Lower, true).is_none());
        assert!(decide(&[(1.0, f64::NAN), (1.0, 1.0)], 0.05, Better::Lower, true).is_none());
    }
}
