//! Change points in a series over time (one point per commit, each with its reruns): a
//! step up or down that stays, as asv's "Regressions" view flags them.
//!
//! The detector is binary segmentation. Over a segment of the series, every split between
//! two points with at least [`Detector::min_window`] reports on each side is a candidate; a
//! candidate is a step when the two windows' geometric means differ by at least
//! [`Detector::threshold`] and the difference is beyond the series' noise
//! ([`crate::report::noise::judge`]): the spread within each commit's reruns and between
//! consecutive commits, at a family-wise 5% shared among the series judged together. The candidate with the strongest evidence is kept, and both halves are searched
//! again, so a series with two lasting steps shows both. Reruns of one commit are one point:
//! no step is ever drawn between them. A step within the last `min_window - 1` reports is not
//! flagged yet: one report alone is not a new level.

use crate::report::noise::{judge, series_spread, Call, Observation, Rule, Spread};

/// A flagged step: the series changes level between point `at - 1` and point `at`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    /// Index of the first point after the step.
    pub at: usize,
    /// Geometric mean of the reports before it (within the segment it was found in).
    pub before: f64,
    /// Geometric mean of the reports after it (within the segment).
    pub after: f64,
    /// (after − before) / before.
    pub change: f64,
    /// Its p against the series' noise.
    pub p: Option<f64>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Detector {
    /// Smallest relative change that counts (0.10 for 10%).
    pub threshold: f64,
    /// Fewest reports on each side of a step.
    pub min_window: usize,
}

impl Default for Detector {
    fn default() -> Detector {
        Detector {
            threshold: 0.10,
            min_window: 2,
        }
    }
}

impl Detector {
    /// The steps of `points` (oldest first, each a commit's reruns), in time order, judged
    /// against what the series teaches about its own noise: the spread within its points'
    /// reruns, pooled with the spread between consecutive points ([`series_spread`]); `family`
    /// series share the 5%, and a step must clear the `drift` its scenario declared
    /// ([`Rule::drift`]).
    pub fn steps(&self, points: &[Vec<Observation>], family: usize, drift: f64) -> Vec<Step> {
        let refs: Vec<&[Observation]> = points.iter().map(Vec::as_slice).collect();
        let within = Spread::within(refs.iter().copied());
        let learned = series_spread(&refs).map_or(within, |s| within.and(s));
        let mut out = Vec::new();
        let rule = Rule {
            drift,
            ..Rule::new(self.threshold, family)
        };
        self.segment(points, 0, points.len(), (learned, rule), &mut out);
        out.sort_by_key(|s| s.at);
        out
    }

    fn segment(
        &self,
        points: &[Vec<Observation>],
        lo: usize,
        hi: usize,
        noise: (Spread, Rule),
        out: &mut Vec<Step>,
    ) {
        let w = self.min_window.max(1);
        let count = |a: usize, b: usize| points[a..b].iter().map(Vec::len).sum::<usize>();
        let candidates: Vec<usize> = (lo + 1..hi)
            .filter(|&at| count(lo, at) >= w && count(at, hi) >= w)
            .collect();
        if candidates.is_empty() {
            return;
        }
        // The family is the series judged together; the candidates of one segment are not
        // counted into it, since neighbouring splits share almost all their reports.
        let (learned, rule) = noise;
        let mut best: Option<Step> = None;
        for at in candidates {
            let (before, after) = (points[lo..at].concat(), points[at..hi].concat());
            let j = judge(&before, &after, learned, rule);
            if !matches!(j.call, Call::Up | Call::Down) {
                continue;
            }
            let step = Step {
                at,
                before: j.base,
                after: j.new,
                change: j.change,
                p: j.p,
            };
            let stronger = |b: &Step| {
                let (p, q) = (step.p.unwrap_or(1.0), b.p.unwrap_or(1.0));
                p < q || (p == q && step.change.abs() > b.change.abs())
            };
            if best.as_ref().is_none_or(stronger) {
                best = Some(step);
            }
        }
        if let Some(step) = best {
            out.push(step);
            self.segment(points, lo, step.at, noise, out);
            self.segment(points, step.at, hi, noise, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::noise::UNLEARNED_DRIFT;

    /// A fixed ±5% wobble (no randomness: the tests never flake).
    const NOISE: [f64; 12] = [
        0.00, 0.04, -0.03, 0.05, -0.05, 0.02, -0.04, 0.03, -0.01, 0.05, -0.05, 0.01,
    ];

    /// One report per point, each with a ±1% interval of its own.
    fn single(values: &[f64]) -> Vec<Vec<Observation>> {
        let one = |v: &f64| vec![crate::report::fixtures::observed(*v, 0.01)];
        values.iter().map(one).collect()
    }

    /// A level change within the drift its scenario declared is no step, however tight the
    /// reruns on each side read; past it, a step.
    #[test]
    fn a_step_within_the_declared_drift_is_not_flagged() {
        let commit = |v: f64| vec![crate::report::fixtures::observed(v, 0.01); 2];
        let d = Detector::default();
        let within = [commit(1.0), commit(1.0), commit(1.7), commit(1.7)];
        assert_eq!(d.steps(&within, 1, UNLEARNED_DRIFT).len(), 1);
        assert_eq!(d.steps(&within, 1, 1.0), []);
        let past = [commit(1.0), commit(1.0), commit(2.5), commit(2.5)];
        assert_eq!(d.steps(&past, 1, 1.0).len(), 1);
    }

    /// The detector as a history runs it: with the series' own spread.
    fn steps(points: &[Vec<Observation>]) -> Vec<Step> {
        Detector::default().steps(points, 1, UNLEARNED_DRIFT)
    }

    #[test]
    fn a_flat_or_noisy_but_flat_series_flags_nothing() {
        let noisy: Vec<f64> = NOISE.iter().map(|n| 1e-3 * (1.0 + n)).collect();
        // A lone outlier is not a level.
        let mut spike = noisy.clone();
        spike[6] *= 1.5;
        for (case, values) in [
            ("flat", vec![1.0; 10]),
            ("empty", vec![]),
            ("three points", vec![1.0, 2.0, 4.0]),
            ("noisy", noisy),
            ("one spike", spike),
        ] {
            assert_eq!(steps(&single(&values)), [], "{case}");
        }
    }

    #[test]
    fn a_20_percent_step_after_report_6_of_12_is_the_one_step() {
        let values: Vec<f64> = (0..12)
            .map(|i| {
                let level = if i >= 6 { 1.2 } else { 1.0 };
                level * (1.0 + NOISE[i] / 2.5)
            })
            .collect();
        let found = steps(&single(&values));
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].at, 6);
        assert!((found[0].change - 0.2).abs() < 0.04, "{found:?}");
        // Downwards too.
        let down: Vec<f64> = values.iter().map(|v| 1.0 / v).collect();
        let found = steps(&single(&down));
        assert_eq!(found.iter().map(|s| s.at).collect::<Vec<_>>(), [6]);
        assert!(found[0].change < -0.1);
    }

    #[test]
    fn reruns_of_one_commit_are_one_point_and_teach_the_noise() {
        // Eight reruns of one commit that wander ±9%: one point, nothing to flag.
        let reruns: Vec<Observation> = [1.0, 1.09, 0.93, 1.05, 0.91, 1.08, 0.97, 1.02]
            .iter()
            .map(|&v| Observation::exact(v))
            .collect();
        assert!(steps(std::slice::from_ref(&reruns)).is_empty());
        // Five reruns, then three of a commit 30% slower: the step, between the commits.
        let slow: Vec<Observation> = reruns[..3]
            .iter()
            .map(|o| Observation::exact(o.value * 1.3))
            .collect();
        let found = steps(&[reruns[3..].to_vec(), slow]);
        assert_eq!(
            found.iter().map(|s| s.at).collect::<Vec<_>>(),
            [1],
            "{found:?}"
        );
    }

    #[test]
    fn two_lasting_steps_are_both_found_and_small_ones_are_not() {
        let values: Vec<f64> = (0..15)
            .map(|i| [1.0, 1.3, 1.7][i / 5] * (1.0 + NOISE[i % 12] / 5.0))
            .collect();
        let at: Vec<usize> = steps(&single(&values)).iter().map(|s| s.at).collect();
        assert_eq!(at, [5, 10]);
        // Below the threshold: a clear level, but 5% is not a step.
        let small: Vec<f64> = (0..12).map(|i| if i < 6 { 1.0 } else { 1.05 }).collect();
        assert!(steps(&single(&small)).is_empty());
        // A step on the last report alone waits for a second one.
        let last = [1.0, 1.0, 1.0, 1.0, 1.5];
        assert!(steps(&single(&last)).is_empty());
    }
}
