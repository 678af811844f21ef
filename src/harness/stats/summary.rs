//! One set of timing samples summarized: median, an order-statistic 95% interval of the median,
//! MAD, Tukey outliers, mean and standard deviation; and the median and quantiles themselves.

use serde::{Deserialize, Serialize};

/// Everything the report says about one set of timing samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The samples, in the order they were measured (kept so drift or warm-up effects stay
    /// visible and other statistics can be recomputed later).
    pub samples_s: Vec<f64>,
    pub median_s: f64,
    pub mean_s: f64,
    pub min_s: f64,
    pub max_s: f64,
    /// Sample standard deviation (divisor `n - 1`); 0 when there is a single sample.
    pub stddev_s: f64,
    /// Median absolute deviation from the median, **raw**: not multiplied by the 1.4826 that
    /// would make it estimate the standard deviation of a normal distribution. Timings are not
    /// normal, so the unscaled value (in seconds, directly comparable to the median) is reported.
    pub mad_s: f64,
    /// Distribution-free confidence interval of the median, `[low, high]`: the order statistics
    /// `x(j)` and `x(n+1-j)` with the largest `j` such that, from the Binomial(n, 1/2)
    /// distribution, the interval covers the true median with probability of at least 95%.
    /// With `n <= 5` no pair of order statistics reaches 95% (even `[min, max]` only covers
    /// `1 - 2/2^n`, 93.75% at `n = 5`), so the interval is `[min, max]` and its real coverage is
    /// lower than 95%.
    pub ci95_s: [f64; 2],
    /// Number of samples outside Tukey's fences: below `Q1 - 1.5 IQR` or above `Q3 + 1.5 IQR`,
    /// with quartiles from [`quantile`].
    pub outliers: usize,
}

impl Summary {
    /// Summarises `samples` (seconds, in measurement order).
    ///
    /// Returns `None` when `samples` is empty or any sample is NaN or infinite: no statistic of
    /// such a set is meaningful, and the caller should report the run as failed instead.
    pub fn from_samples(samples: &[f64]) -> Option<Summary> {
        let sorted = sorted_finite(samples)?;
        let n = sorted.len();
        let min_s = sorted[0];
        let max_s = sorted[n - 1];
        let median_s = quantile(&sorted, 0.5);
        let mean_s = sorted.iter().sum::<f64>() / n as f64;
        let stddev_s = if n < 2 {
            0.0
        } else {
            let ss: f64 = sorted.iter().map(|x| (x - mean_s) * (x - mean_s)).sum();
            (ss / (n - 1) as f64).sqrt()
        };
        let mut deviations: Vec<f64> = sorted.iter().map(|x| (x - median_s).abs()).collect();
        deviations.sort_by(f64::total_cmp);
        let mad_s = quantile(&deviations, 0.5);
        let (lo, hi) = median_ci95_indices(n);
        let q1 = quantile(&sorted, 0.25);
        let q3 = quantile(&sorted, 0.75);
        let iqr = q3 - q1;
        let (fence_lo, fence_hi) = (q1 - 1.5 * iqr, q3 + 1.5 * iqr);
        let outliers = sorted
            .iter()
            .filter(|&&x| x < fence_lo || x > fence_hi)
            .count();
        Some(Summary {
            samples_s: samples.to_vec(),
            median_s,
            mean_s,
            min_s,
            max_s,
            stddev_s,
            mad_s,
            ci95_s: [sorted[lo], sorted[hi]],
            outliers,
        })
    }
}

/// Median of `xs` (any order); the mean of the two middle values when `xs.len()` is even.
///
/// `None` when `xs` is empty or holds a NaN or an infinity.
pub fn median(xs: &[f64]) -> Option<f64> {
    sorted_finite(xs).map(|sorted| quantile(&sorted, 0.5))
}

/// The `q`-quantile of `sorted` (ascending), interpolating linearly between the two nearest
/// order statistics: position `h = (n - 1) q`, value `x[floor h] + (h - floor h)(x[floor h + 1] -
/// x[floor h])` (the "type 7" definition, the default of R and NumPy, so numbers can be
/// cross-checked there).
///
/// `q` is clamped to `[0, 1]`. Returns NaN for an empty slice or a NaN `q`, so callers that
/// cannot guarantee a non-empty input should go through [`median`] or [`Summary`].
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    debug_assert!(
        sorted
            .windows(2)
            .all(|w| w[0].partial_cmp(&w[1]) != Some(std::cmp::Ordering::Greater)),
        "quantile needs ascending input"
    );
    if sorted.is_empty() || q.is_nan() {
        return f64::NAN;
    }
    let h = (sorted.len() - 1) as f64 * q.clamp(0.0, 1.0);
    let i = h.floor() as usize;
    let frac = h - i as f64;
    match sorted.get(i + 1) {
        Some(&next) if frac > 0.0 => sorted[i] + frac * (next - sorted[i]),
        _ => sorted[i],
    }
}

/// Sorted copy of `xs`, or `None` if it is empty or has a non-finite value.
pub(super) fn sorted_finite(xs: &[f64]) -> Option<Vec<f64>> {
    if xs.is_empty() || xs.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    Some(sorted)
}

/// The fewest samples whose median interval reaches 95%: `[min, max]` of 6 covers the median
/// with probability 1 − 2/2⁶ = 96.9%, of 5 only 93.75%, of 3 only 75% ([`Summary::ci95_s`]).
pub const SAMPLES_FOR_95: usize = 6;

/// The probability that `[min, max]` of `n` samples covers their distribution's median:
/// 1 − 2/2ⁿ (every sample on one side of it is the only way to miss).
pub fn range_coverage(n: usize) -> f64 {
    1.0 - 2.0 * 0.5f64.powi(n.min(1024) as i32)
}

/// 0-based indices `(j - 1, n - j)` of the order statistics bounding the 95% confidence interval
/// of the median of `n >= 1` samples (see [`Summary::ci95_s`]).
///
/// The number of samples below the true median is Binomial(n, 1/2), so `[x(j), x(n+1-j)]` covers
/// it with probability `1 - 2 P(B <= j - 1)`; take the largest `j` keeping that `>= 0.95`, or
/// `j = 1` when none does. The pmf is built in log space so large `n` does not underflow.
fn median_ci95_indices(n: usize) -> (usize, usize) {
    let nf = n as f64;
    let mut log_pmf = nf * 0.5f64.ln(); // ln P(B = 0)
    let mut cdf = 0.0;
    let mut j = 1;
    for i in 0..n / 2 {
        cdf += log_pmf.exp(); // P(B <= i)
        if 2.0 * cdf > 0.05 {
            break;
        }
        j = i + 1; // 1 - 2 P(B <= j - 1) >= 0.95 holds for j - 1 = i
        log_pmf += ((nf - i as f64) / (i as f64 + 1.0)).ln(); // ln P(B = i + 1)
    }
    (j - 1, n - j)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * a.abs().max(b.abs()).max(f64::MIN_POSITIVE)
    }

    #[test]
    fn median_odd_even_and_unsorted() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[7.0]), Some(7.0));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, f64::NAN]), None);
        assert_eq!(median(&[1.0, f64::INFINITY]), None);
    }

    #[test]
    fn quantile_interpolates_linearly() {
        let xs = [1.0, 2.0, 3.0, 4.0, 5.0];
        // q = 0.1 is h = 0.4.
        let qs = [0.0, 1.0, 0.25, 0.1].map(|q| quantile(&xs, q));
        assert_eq!(qs, [1.0, 5.0, 2.0, 1.4]);
        let ys = [10.0, 20.0];
        // q outside [0, 1] is clamped.
        let qs = [0.75, -1.0, 2.0].map(|q| quantile(&ys, q));
        assert_eq!(qs, [17.5, 10.0, 20.0]);
        assert!(quantile(&[], 0.5).is_nan());
        assert!(quantile(&ys, f64::NAN).is_nan());
    }

    #[test]
    fn summary_known_values() {
        // Sorted: 1 2 3 4 5 6 7 8 9 100. Median 5.5; |x - 5.5| sorted:
        // 0.5 0.5 1.5 1.5 2.5 2.5 3.5 3.5 4.5 94.5 -> MAD 2.5.
        let samples = [5.0, 1.0, 9.0, 2.0, 100.0, 3.0, 8.0, 4.0, 7.0, 6.0];
        let s = Summary::from_samples(&samples).expect("finite samples");
        assert_eq!(s.samples_s, samples.to_vec(), "measurement order kept");
        assert_eq!(s.median_s, 5.5);
        assert_eq!(s.mad_s, 2.5);
        assert_eq!(s.min_s, 1.0);
        assert_eq!(s.max_s, 100.0);
        assert!(close(s.mean_s, 14.5, 1e-15));
        // sum((x - 14.5)^2) = 8182.5; numpy.std(x, ddof=1) = 30.152390728873666.
        assert!(
            close(s.stddev_s, (8182.5f64 / 9.0).sqrt(), 1e-14),
            "{}",
            s.stddev_s
        );
        assert!(close(s.stddev_s, 30.152390728873666, 1e-14));
        // n = 10: order statistics 2 and 9.
        assert_eq!(s.ci95_s, [2.0, 9.0]);
        // Q1 = 3.25, Q3 = 7.75, IQR 4.5, fences [-3.5, 14.5]: only 100 is out.
        assert_eq!(s.outliers, 1);
    }

    #[test]
    fn stddev_textbook_example() {
        // Classic example: population sd 2, sample sd sqrt(32/7).
        let s = Summary::from_samples(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).expect("ok");
        assert!(close(s.stddev_s, (32.0f64 / 7.0).sqrt(), 1e-15));
        assert_eq!(s.mean_s, 5.0);
        assert_eq!(s.median_s, 4.5);
        // |x - 4.5|: 2.5 .5 .5 .5 .5 .5 2.5 4.5 -> sorted .5 .5 .5 .5 .5 2.5 2.5 4.5 -> MAD 0.5
        assert_eq!(s.mad_s, 0.5);
        // Q1 = 4, Q3 = 5.5, IQR 1.5, upper fence 7.75: 9 is out.
        assert_eq!(s.outliers, 1);
    }

    #[test]
    fn outliers_on_both_sides() {
        // A tight body of 15 samples, two low and three high outliers.
        let mut xs: Vec<f64> = (0..15).map(|i| 10.0 + i as f64 * 0.1).collect();
        xs.extend([-50.0, -40.0, 60.0, 70.0, 80.0]);
        let s = Summary::from_samples(&xs).expect("ok");
        assert_eq!(s.outliers, 5);
        // 1..=7 plus one more: Q1 = 2.75, Q3 = 6.25 (h = 5.25, between 6 and 7), IQR = 3.5, upper
        // fence 11.5. A value on the fence is not an outlier, one just beyond it is.
        let s = Summary::from_samples(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 11.5]).expect("ok");
        assert_eq!(s.outliers, 0);
        let s = Summary::from_samples(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 11.6]).expect("ok");
        assert_eq!(s.outliers, 1);
    }

    #[test]
    fn empty_or_non_finite_is_none_and_a_single_sample_is_fine() {
        assert_eq!(Summary::from_samples(&[]), None);
        assert_eq!(Summary::from_samples(&[1.0, f64::NAN]), None);
        assert_eq!(Summary::from_samples(&[f64::NEG_INFINITY, 1.0]), None);
        let s = Summary::from_samples(&[0.25]).expect("one sample is fine");
        assert_eq!(s.median_s, 0.25);
        assert_eq!(s.mean_s, 0.25);
        assert_eq!(s.stddev_s, 0.0);
        assert_eq!(s.mad_s, 0.0);
        assert_eq!(s.ci95_s, [0.25, 0.25]);
        assert_eq!(s.outliers, 0);
    }

    #[test]
    fn six_samples_are_the_fewest_whose_interval_reaches_95_percent() {
        assert!(range_coverage(SAMPLES_FOR_95) >= 0.95);
        assert!(range_coverage(SAMPLES_FOR_95 - 1) < 0.95);
        assert_eq!(range_coverage(3), 0.75);
    }

    #[test]
    fn ci_ranks_match_binomial_tables() {
        // 1-based (j, n + 1 - j), from the exact Binomial(n, 1/2) cdf (checked with
        // scipy.stats.binom.cdf); n <= 5 falls back to [min, max].
        let cases = [
            (1, (1, 1)),
            (2, (1, 2)),
            (5, (1, 5)),
            (6, (1, 6)),
            (8, (1, 8)),
            (9, (2, 8)),
            (10, (2, 9)),
            (20, (6, 15)),
            (30, (10, 21)),
            (50, (18, 33)),
            (100, (40, 61)),
            (1000, (469, 532)),
            (5000, (2431, 2570)),
        ];
        for (n, (j, k)) in cases {
            assert_eq!(median_ci95_indices(n), (j - 1, k - 1), "n = {n}");
        }
    }

    #[test]
    fn ci_is_ordered_and_contains_median() {
        for n in 1..200usize {
            // Deterministic, unsorted, with ties.
            let xs: Vec<f64> = (0..n).map(|i| ((i * 7919) % 13) as f64 * 0.5).collect();
            let s = Summary::from_samples(&xs).expect("ok");
            let [lo, hi] = s.ci95_s;
            assert!(lo <= s.median_s && s.median_s <= hi, "n = {n}: {lo} {hi}");
            assert!(s.min_s <= lo && hi <= s.max_s, "n = {n}");
        }
    }

    #[test]
    fn summary_round_trips_through_json() {
        let s = Summary::from_samples(&[0.5, 0.25, 0.75]).expect("ok");
        let json = serde_json::to_string(&s).expect("serialize");
        let back: Summary = serde_json::from_str(&json).expect("deserialize");
        assert_eq!(back, s);
    }

    proptest::proptest! {
        #[test]
        fn summary_invariants(xs in proptest::collection::vec(1e-6f64..10.0, 1..300)) {
            let s = Summary::from_samples(&xs).expect("finite");
            let [lo, hi] = s.ci95_s;
            proptest::prop_assert!(s.min_s <= lo && lo <= s.median_s && s.median_s <= hi);
            proptest::prop_assert!(hi <= s.max_s);
            proptest::prop_assert!(s.min_s <= s.mean_s * (1.0 + 1e-12));
            proptest::prop_assert!(s.mean_s <= s.max_s * (1.0 + 1e-12));
            proptest::prop_assert!(s.mad_s >= 0.0 && s.stddev_s >= 0.0);
            proptest::prop_assert!(s.outliers < xs.len());
            proptest::prop_assert_eq!(median(&xs), Some(s.median_s));
        }
    }
}
