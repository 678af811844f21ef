//! Change points in a series of values over time (one median per report): a step up or down
//! that stays, as asv's "Regressions" view flags them.
//!
//! The detector is binary segmentation with a deliberately simple test. Over a segment of the
//! series, every split point with at least [`Detector::min_window`] values on each side is a
//! candidate; a candidate is a step when
//!
//! 1. the medians of the two windows differ by at least [`Detector::threshold`] (relative to
//!    the window before), and
//! 2. the two windows' ranges do not overlap: every value after the split is above every
//!    value before it, or every one below.
//!
//! The candidate with the largest change is kept, and both halves are searched again, so a
//! series with two lasting steps shows both. The second condition is what keeps noise quiet:
//! a single outlier, or a series that wanders within its own spread, never separates two
//! windows completely; the first keeps a real but negligible shift (1% on a very quiet series)
//! from being flagged. A step within the last `min_window - 1` values is not flagged yet: one
//! report alone is not a new level.

use crate::harness::stats::median;

/// A flagged step: the series changes level between value `at - 1` and value `at`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    /// Index of the first value after the step.
    pub at: usize,
    /// Median of the values before it (within the segment it was found in).
    pub before: f64,
    /// Median of the values after it (within the segment).
    pub after: f64,
    /// (after − before) / before.
    pub change: f64,
}

/// The step detector's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Detector {
    /// Smallest relative change of the median that counts (0.10 for 10%).
    pub threshold: f64,
    /// Fewest values on each side of a step.
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
    /// The steps of `values` (oldest first), in time order. Values that are not finite and
    /// positive make their split points ineligible as a "before" median; a series shorter
    /// than two windows has none.
    pub fn steps(&self, values: &[f64]) -> Vec<Step> {
        let mut out = Vec::new();
        self.segment(values, 0, values.len(), &mut out);
        out.sort_by_key(|s| s.at);
        out
    }

    fn segment(&self, values: &[f64], lo: usize, hi: usize, out: &mut Vec<Step>) {
        let w = self.min_window.max(1);
        if hi < lo + 2 * w {
            return;
        }
        let mut best: Option<Step> = None;
        for at in lo + w..=hi - w {
            let Some(step) = self.split(&values[lo..at], &values[at..hi], at) else {
                continue;
            };
            if best.is_none_or(|b| step.change.abs() > b.change.abs()) {
                best = Some(step);
            }
        }
        if let Some(step) = best {
            out.push(step);
            self.segment(values, lo, step.at, out);
            self.segment(values, step.at, hi, out);
        }
    }

    /// The step between `before` and `after`, if it is one.
    fn split(&self, before: &[f64], after: &[f64], at: usize) -> Option<Step> {
        let (b, a) = (median(before)?, median(after)?);
        if b <= 0.0 {
            return None;
        }
        let change = (a - b) / b;
        if change.abs() < self.threshold {
            return None;
        }
        let max = |xs: &[f64]| xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let min = |xs: &[f64]| xs.iter().copied().fold(f64::INFINITY, f64::min);
        let separated = max(before) < min(after) || min(before) > max(after);
        separated.then_some(Step {
            at,
            before: b,
            after: a,
            change,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixed ±5% wobble (no randomness: the tests never flake).
    const NOISE: [f64; 12] = [
        0.00, 0.04, -0.03, 0.05, -0.05, 0.02, -0.04, 0.03, -0.01, 0.05, -0.05, 0.01,
    ];

    #[test]
    fn a_flat_series_flags_nothing() {
        assert!(Detector::default().steps(&[1.0; 10]).is_empty());
        assert!(Detector::default().steps(&[]).is_empty());
        assert!(Detector::default().steps(&[1.0, 2.0, 4.0]).is_empty());
    }

    #[test]
    fn a_noisy_but_flat_series_flags_nothing() {
        let values: Vec<f64> = NOISE.iter().map(|n| 1e-3 * (1.0 + n)).collect();
        assert_eq!(Detector::default().steps(&values), Vec::new());
        // A lone outlier is not a level.
        let mut spike = values.clone();
        spike[6] *= 1.5;
        assert_eq!(Detector::default().steps(&spike), Vec::new());
    }

    #[test]
    fn a_20_percent_step_after_report_3_of_6_is_the_one_step() {
        let values: Vec<f64> = (0..6)
            .map(|i| {
                let level = if i >= 3 { 1.2 } else { 1.0 };
                level * (1.0 + NOISE[i] / 2.5)
            })
            .collect();
        let steps = Detector::default().steps(&values);
        assert_eq!(steps.len(), 1, "{steps:?}");
        assert_eq!(steps[0].at, 3);
        assert!((steps[0].change - 0.2).abs() < 0.04, "{steps:?}");
        // Downwards too.
        let down: Vec<f64> = values.iter().map(|v| 1.0 / v).collect();
        let steps = Detector::default().steps(&down);
        assert_eq!(steps.iter().map(|s| s.at).collect::<Vec<_>>(), [3]);
        assert!(steps[0].change < -0.1);
    }

    #[test]
    fn two_lasting_steps_are_both_found_and_small_ones_are_not() {
        let values = [1.0, 1.0, 1.0, 1.3, 1.3, 1.3, 1.7, 1.7];
        let at: Vec<usize> = Detector::default()
            .steps(&values)
            .iter()
            .map(|s| s.at)
            .collect();
        assert_eq!(at, [3, 6]);
        // Below the threshold: separated windows, but 5% is not a step.
        let small = [1.0, 1.0, 1.0, 1.05, 1.05, 1.05];
        assert!(Detector::default().steps(&small).is_empty());
        // A step on the last report alone waits for a second one.
        let last = [1.0, 1.0, 1.0, 1.0, 1.5];
        assert!(Detector::default().steps(&last).is_empty());
    }
}
