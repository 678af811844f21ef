//! Paired A/B decisions: two builds measured side by side, alternating, so drift of the machine
//! hits both sides of each pair alike and cancels in the pair's ratio (the idea of paired
//! benchmarking, as in tango-bench). `parbench ab` collects the pairs; this module decides.
//!
//! For every entry (a variant's median time, or a derived figure) each pair gives a ratio
//! candidate / base. The verdict needs two independent tests to agree and the change to pass the
//! threshold: the Wilcoxon signed-rank test on the log ratios rejects "no change" (p < 0.01),
//! the bootstrap 95% interval of the median ratio excludes 1, and the median ratio lies beyond
//! the threshold. The test's p-value is corrected for the other entries of the run (Holm), so
//! that a suite of dozens of entries does not flag one of them in most runs of unchanged code.
//! A change inside the threshold with an interval inside the threshold band is `same`; anything
//! else is `noise` (undecided: more pairs would tell).

use super::compare::{Entry, Verdict};
use super::figure::Better;
use crate::harness::stats::{bootstrap_median_ci95, median, wilcoxon_signed_rank_p};

/// Bootstrap resamples per decision: enough for a stable 95% interval of a median.
const RESAMPLES: usize = 2000;
/// Fixed, so the same pairs always give the same report.
const SEED: u64 = 0x005e_edab;
/// Significance of the paired test for a verdict, family-wise (after Holm's correction): a
/// gate runs on every pull request, so even a 5% chance per run of flagging unchanged code is
/// a false alarm every twenty runs. A real regression still reaches it: every run of a 10%
/// slower build did (results/ab-gate.md).
const ALPHA: f64 = 0.01;

#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Median of the per-pair ratios candidate / base.
    pub median_ratio: f64,
    /// Bootstrap 95% interval of that median.
    pub ci95: [f64; 2],
    /// Two-sided Wilcoxon signed-rank p-value on the log ratios.
    pub p_value: f64,
    /// `p_value` corrected for the other entries of its family ([`decide_all`]; equal to it
    /// for an entry alone): the evidence the verdict uses.
    pub p_adjusted: f64,
    pub verdict: Verdict,
    /// True when sampling may stop: `same`, an interval inside the threshold band (see
    /// [`decide_all`] for why a change never stops it early).
    pub settled: bool,
}

/// Median ratio, its bootstrap interval and the raw Wilcoxon p of `pairs`.
fn measure(pairs: &[(f64, f64)]) -> Option<(f64, [f64; 2], f64)> {
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
    Some((median_ratio, ci95, p_value))
}

/// Every entry's decision, the test corrected for multiplicity: a suite has dozens of entries,
/// and at p < 0.05 each, one of them would look changed in most runs of unchanged code. Holm's
/// step-down correction keeps the chance of any false verdict at [`ALPHA`] within each family:
/// the times (the ones that fail the gate), and the derived figures.
///
/// An entry's `better` says which way it improves: `Lower` for times (a ratio above 1 is
/// `slower`), `Higher` for rates and speed-ups (a ratio below 1 is `worse`), `Neither` for
/// descriptions (never a change). Its decision is `None` when a value is not positive and
/// finite or it has fewer than 2 pairs.
pub fn decide_all(entries: &[PairedEntry], threshold: f64) -> Vec<Option<Decision>> {
    let measured: Vec<Option<(f64, [f64; 2], f64)>> =
        entries.iter().map(|e| measure(&e.pairs)).collect();
    let mut adjusted = vec![1.0; entries.len()];
    for family in [true, false] {
        let mut members: Vec<(usize, f64)> = measured
            .iter()
            .enumerate()
            .filter(|(i, m)| entries[*i].is_time == family && m.is_some())
            .filter_map(|(i, m)| m.map(|m| (i, m.2)))
            .collect();
        members.sort_by(|a, b| a.1.total_cmp(&b.1));
        let m = members.len();
        let mut running = 0f64;
        for (rank, (i, p)) in members.into_iter().enumerate() {
            running = running.max(((m - rank) as f64 * p).min(1.0));
            adjusted[i] = running;
        }
    }
    entries
        .iter()
        .zip(measured)
        .zip(adjusted)
        .map(|((e, m), p_adjusted)| {
            let (median_ratio, ci95, p_value) = m?;
            // The verdict, with `p_adjusted` as the test's evidence.
            let (up, down) = (1.0 + threshold, 1.0 / (1.0 + threshold));
            let rose = p_adjusted < ALPHA && ci95[0] > 1.0 && median_ratio > up;
            let fell = p_adjusted < ALPHA && ci95[1] < 1.0 && median_ratio < down;
            let inside = ci95[0] >= down && ci95[1] <= up;
            let verdict = match e.better {
                Better::Lower | Better::Higher if rose || fell => {
                    Verdict::moved(rose, e.better, e.is_time)
                }
                _ if inside => Verdict::Same,
                _ => Verdict::Noise,
            };
            // Only `same` ends sampling early. Stopping at the first significant change would
            // test after every pair and keep the luckiest look (optional stopping): its false
            // alarms would far exceed the 5% the test promises. A change is judged on all the
            // pairs the budget buys.
            let settled = verdict == Verdict::Same;
            Some(Decision {
                median_ratio,
                ci95,
                p_value,
                p_adjusted,
                verdict,
                settled,
            })
        })
        .collect()
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
    /// Which side was measured on a busy machine, counted over the pairs.
    pub busy: BusyPairs,
}

/// An entry's pairs counted by their sides' busy facts (a side is busy when its run's state
/// gave a reason, see [`crate::machine::BusyReason`]).
///
/// The two sides' load *differs* in a pair when exactly one of its two runs was busy. A load
/// both sides share (both busy, or neither) is what pairing answers: it hits both runs of the
/// pair and cancels in their ratio. Only pairs where the load differed can move the ratio, so
/// only they earn a verdict a hedge.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BusyPairs {
    /// Pairs whose base run was busy, whatever the candidate's.
    pub base: usize,
    /// Pairs whose candidate run was busy, whatever the base's.
    pub candidate: usize,
    pub base_alone: usize,
    pub candidate_alone: usize,
}

impl BusyPairs {
    /// Count one pair whose base, and candidate, run was busy as `busy` says.
    pub fn add(&mut self, busy: [bool; 2]) {
        self.base += usize::from(busy[0]);
        self.candidate += usize::from(busy[1]);
        self.base_alone += usize::from(busy[0] && !busy[1]);
        self.candidate_alone += usize::from(busy[1] && !busy[0]);
    }

    /// Pairs where both runs were busy: a load the two sides shared.
    pub fn both(&self) -> usize {
        self.base - self.base_alone
    }
}

impl PairedEntry {
    /// `busy base alone in 3 of 20 pairs`, `busy candidate alone in …`, `busy base alone in 3,
    /// candidate alone in 2 of 20 pairs`; `None` when the two sides' load never differed in a
    /// pair (see [`BusyPairs`]), however busy the machine was for both.
    pub fn busy_marker(&self) -> Option<String> {
        let n = self.pairs.len();
        match (self.busy.base_alone, self.busy.candidate_alone) {
            (0, 0) => None,
            (b, 0) => Some(format!("busy base alone in {b} of {n} pairs")),
            (0, c) => Some(format!("busy candidate alone in {c} of {n} pairs")),
            (b, c) => Some(format!(
                "busy base alone in {b}, candidate alone in {c} of {n} pairs"
            )),
        }
    }

    /// The verdict as the tables word it: a change some of whose pairs had the two sides under
    /// different load says so (`slower (busy base alone in 3 of 20 pairs)`), since the machine
    /// may explain it.
    pub fn verdict_text(&self, verdict: Verdict) -> String {
        verdict.hedged(verdict.as_str().to_string(), self.busy_marker())
    }
}

/// The figures with a direction that `run` could not measure, as `key (reason)`.
pub fn not_measured(run: &super::RunRecord) -> impl Iterator<Item = String> + '_ {
    run.unmeasured
        .iter()
        .filter(|(k, _)| run.figure(k).better != Better::Neither)
        .map(|(k, why)| format!("{k} ({why})"))
}

/// Add one pair's values (the [`run_entries`] of the base's and the candidate's runs of the
/// same suite entry) to `entries`; an entry either side lacks is left out of this pair, and one
/// either side could not measure (`NaN`) is kept with no pair added, so the entries stay the
/// same from run to run. `busy` says which side's run was measured on a busy machine.
///
/// [`run_entries`]: super::compare::run_entries
pub fn add_pair(
    entries: &mut Vec<PairedEntry>,
    base: &[Entry],
    candidate: &[Entry],
    busy: [bool; 2],
) {
    for b in base {
        let Some(c) = candidate.iter().find(|c| c.name == b.name) else {
            continue;
        };
        let e = super::find_or_push(
            entries,
            |e| e.name == b.name,
            || PairedEntry {
                name: b.name.clone(),
                is_time: b.is_time,
                better: b.better,
                pairs: Vec::new(),
                busy: BusyPairs::default(),
            },
        );
        let (b, c) = (b.observed.value, c.observed.value);
        if b.is_finite() && c.is_finite() {
            e.pairs.push((b, c));
            e.busy.add(busy);
        }
    }
}

/// Entries whose verdict fails the gate (times that got slower).
pub fn regressions(entries: &[PairedEntry], threshold: f64) -> usize {
    decide_all(entries, threshold)
        .iter()
        .flatten()
        .filter(|d| d.verdict.is_regression())
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures::drifting;

    /// An entry of `pairs`, which improve as `better` says.
    fn entry(name: &str, pairs: Vec<(f64, f64)>, better: Better, is_time: bool) -> PairedEntry {
        let (name, busy) = (name.into(), BusyPairs::default());
        PairedEntry {
            name,
            is_time,
            better,
            pairs,
            busy,
        }
    }

    /// The decision on `pairs` alone (no other entry to correct for), at 5%.
    fn decide(pairs: &[(f64, f64)], better: Better, is_time: bool) -> Option<Decision> {
        let entry = entry("", pairs.to_vec(), better, is_time);
        decide_all(&[entry], 0.05).pop().flatten()
    }

    /// The decision on a time's `pairs` alone.
    fn time(pairs: &[(f64, f64)]) -> Decision {
        decide(pairs, Better::Lower, true).expect("a decision")
    }

    #[test]
    fn drift_between_pairs_cancels_and_a_real_slowdown_is_seen() {
        let d = time(&drifting(12, 1.10, 0.02));
        assert_eq!(d.verdict, Verdict::Slower, "{d:?}");
        assert!((d.median_ratio - 1.10).abs() < 0.03, "{d:?}");
        assert!(!d.settled, "a change never ends sampling early: {d:?}");
        let d = time(&drifting(12, 1.0, 0.02));
        assert_eq!(d.verdict, Verdict::Same, "{d:?}");
        let d = time(&drifting(12, 0.8, 0.02));
        assert_eq!(d.verdict, Verdict::Faster, "{d:?}");
    }

    #[test]
    fn a_change_inside_the_threshold_is_never_slower() {
        // A steady 3% slowdown: real (p small) but within 5%.
        let d = time(&drifting(20, 1.03, 0.005));
        assert!(d.p_value < 0.05, "{d:?}");
        assert_ne!(d.verdict, Verdict::Slower, "{d:?}");
    }

    #[test]
    fn too_few_or_mixed_pairs_are_noise_not_a_verdict() {
        // Three pairs can never reach p < 0.05 (2 / 2^3 = 0.25).
        let d = time(&drifting(3, 1.5, 0.0));
        assert_eq!(d.verdict, Verdict::Noise, "{d:?}");
        // Half the pairs 30% slower, half 30% faster.
        let mixed: Vec<(f64, f64)> = (0..10)
            .map(|i| (1.0, if i % 2 == 0 { 1.3 } else { 0.77 }))
            .collect();
        let d = time(&mixed);
        assert_eq!(d.verdict, Verdict::Noise, "{d:?}");
        assert!(!d.settled);
    }

    #[test]
    fn derived_figures_follow_their_direction() {
        // A speed-up that fell is worse, a ratio to a bound that fell is better, and a
        // description has no better or worse.
        for (better, want) in [
            (Better::Higher, Verdict::Worse),
            (Better::Lower, Verdict::Better),
            (Better::Neither, Verdict::Noise),
        ] {
            let d = decide(&drifting(12, 0.8, 0.01), better, false).unwrap();
            assert_eq!(d.verdict, want, "{better:?}");
        }
    }

    #[test]
    fn many_entries_at_once_need_stronger_evidence_each() {
        let time = |name: &str, pairs| entry(name, pairs, Better::Lower, true);
        let slower = |name: &str, n| time(name, drifting(n, 1.3, 0.0));
        // 8 pairs all 30% slower: p = 2/2^8 = 0.0078, enough alone.
        let alone = decide_all(&[slower("weak", 8)], 0.05);
        assert_eq!(alone[0].as_ref().unwrap().verdict, Verdict::Slower);
        // Among 16 entries it is the second smallest p, so Holm multiplies it by 15 (0.117): no
        // longer a verdict. Twelve pairs (p = 2/2^12, the smallest) still are: 16 × 0.00049.
        let mut suite = vec![slower("weak", 8), slower("strong", 12)];
        suite.extend((0..14).map(|i| time(&format!("same {i}"), drifting(12, 1.0, 0.01))));
        let d = decide_all(&suite, 0.05);
        let weak = d[0].as_ref().unwrap();
        assert_eq!(weak.verdict, Verdict::Noise, "{weak:?}");
        assert!(
            (weak.p_adjusted - 15.0 * weak.p_value).abs() < 1e-12,
            "{weak:?}"
        );
        assert_eq!(d[1].as_ref().unwrap().verdict, Verdict::Slower);
        assert_eq!(regressions(&suite, 0.05), 1);
    }

    /// An entry 30% slower in every pair, its pairs' sides busy as `busy` says.
    fn slower_with(busy: &[[bool; 2]]) -> (PairedEntry, Decision) {
        let value = crate::report::fixtures::entries_taking;
        let mut entries = Vec::new();
        for ((b, c), flags) in drifting(busy.len(), 1.3, 0.0).into_iter().zip(busy) {
            add_pair(&mut entries, &value(b), &value(c), *flags);
        }
        let e = entries.remove(0);
        let d = decide(&e.pairs, e.better, e.is_time).unwrap();
        (e, d)
    }

    #[test]
    fn a_load_both_sides_share_earns_no_hedge() {
        // Every pair busy on both sides (a shared runner): pairing answers it.
        let (e, d) = slower_with(&[[true, true]; 12]);
        assert_eq!(e.busy.both(), 12);
        assert_eq!((e.busy.base_alone, e.busy.candidate_alone), (0, 0));
        assert_eq!(e.busy_marker(), None);
        assert_eq!(e.verdict_text(d.verdict), "slower");
        // Busy on both sides in some pairs, quiet on both in the others: still shared.
        let mixed: Vec<[bool; 2]> = (0..12).map(|i| [i % 2 == 0; 2]).collect();
        let (e, d) = slower_with(&mixed);
        assert_eq!(e.verdict_text(d.verdict), "slower");
    }

    #[test]
    fn a_load_that_differs_within_pairs_is_named() {
        let mut busy = [[true, true]; 12];
        busy[0] = [true, false];
        busy[1] = [true, false];
        busy[2] = [false, true];
        let (e, d) = slower_with(&busy);
        assert_eq!(
            e.busy,
            BusyPairs {
                base: 11,
                candidate: 10,
                base_alone: 2,
                candidate_alone: 1
            }
        );
        assert_eq!(e.busy.both(), 9);
        assert_eq!(
            e.verdict_text(d.verdict),
            "slower (busy base alone in 2, candidate alone in 1 of 12 pairs)"
        );
        let (e, d) = slower_with(&[[false, false], [false, true]].repeat(6));
        assert_eq!(
            e.verdict_text(d.verdict),
            "slower (busy candidate alone in 6 of 12 pairs)"
        );
        // A verdict that claims no change needs no hedge.
        assert_eq!(e.verdict_text(Verdict::Same), "same");
    }

    #[test]
    fn a_figure_not_measured_in_a_pair_keeps_its_entry_without_the_pair() {
        use crate::report::{FigureSpec, Unit};
        let rate = FigureSpec::new("rate", Unit::Ratio, Better::Higher);
        let side = |measured: bool| {
            let mut run = crate::report::fixtures::run("s", &[], &["v"]);
            match measured {
                true => run.record(rate, 2.0),
                false => run.unmeasured(rate, "no trace"),
            }
            crate::report::compare::run_entries(&run)
        };
        let mut entries = Vec::new();
        add_pair(&mut entries, &side(false), &side(true), [false; 2]);
        let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["s[] v", "s[] derived:rate"]);
        assert!(entries[1].pairs.is_empty());
        add_pair(&mut entries, &side(true), &side(true), [false; 2]);
        assert_eq!((entries.len(), entries[1].pairs.len()), (2, 1));
        let mut run = crate::report::fixtures::run("s", &[], &["v"]);
        run.unmeasured(rate, "no trace");
        assert_eq!(not_measured(&run).collect::<Vec<_>>(), ["rate (no trace)"]);
    }

    #[test]
    fn values_that_cannot_be_compared_give_none() {
        assert!(decide(&[(1.0, 1.0)], Better::Lower, true).is_none());
        assert!(decide(&[(1.0, 1.0), (0.0, 1.0)], Better::Lower, true).is_none());
        assert!(decide(&[(1.0, f64::NAN), (1.0, 1.0)], Better::Lower, true).is_none());
    }
}
