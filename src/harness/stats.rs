//! Statistics of benchmark samples (seconds, `f64`).
//!
//! Why this set of numbers: benchmark timings are few, noisy and skewed (a long right tail from
//! preemption, page faults, frequency changes), so the report leads with robust,
//! distribution-free figures — the median, the median absolute deviation, an order-statistic
//! confidence interval of the median and a Tukey outlier count — and keeps mean and standard
//! deviation for readers who expect them. Two runs are compared with the Mann-Whitney U test for
//! the same reason: it assumes no normality.

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

/// Result of a two-sided Mann-Whitney U test.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MannWhitney {
    /// U statistic of the first sample: the number of pairs `(a_i, b_j)` with `a_i > b_j`, ties
    /// counting one half (equals `R_a - n_a (n_a + 1) / 2`). The second sample's is
    /// `n_a n_b - u`. This is the statistic SciPy's `mannwhitneyu` reports.
    pub u: f64,
    /// Two-sided p-value from the normal approximation with tie and continuity corrections.
    pub p_value: f64,
}

/// Two-sided Mann-Whitney U test of whether `a` and `b` come from the same distribution (used
/// by `compare` to tell a real difference between two runs from noise).
///
/// Uses the normal approximation: `z = (max(U_a, U_b) - n_a n_b / 2 - 1/2) / sigma` with the
/// tie-corrected `sigma^2 = n_a n_b / 12 ((n + 1) - sum(t^3 - t) / (n (n - 1)))`, and
/// `p = min(1, 2 P(Z > z))`, which matches SciPy's `mannwhitneyu(a, b, method="asymptotic")`.
/// When every value is tied (`sigma = 0`) there is no evidence of a difference and `p = 1`.
///
/// `None` when either side has fewer than 2 samples or any value is NaN or infinite.
pub fn mann_whitney_u(a: &[f64], b: &[f64]) -> Option<MannWhitney> {
    if a.len() < 2 || b.len() < 2 || a.iter().chain(b).any(|x| !x.is_finite()) {
        return None;
    }
    let (n1, n2) = (a.len() as f64, b.len() as f64);
    let mut pooled: Vec<(f64, bool)> = a
        .iter()
        .map(|&x| (x, true))
        .chain(b.iter().map(|&x| (x, false)))
        .collect();
    pooled.sort_by(|x, y| x.0.total_cmp(&y.0));

    // Average ranks over runs of equal values; accumulate the first sample's rank sum and the
    // tie term sum(t^3 - t) over those runs.
    let mut rank_sum_a = 0.0;
    let mut tie_term = 0.0;
    let mut start = 0;
    while start < pooled.len() {
        let mut end = start + 1;
        while end < pooled.len() && pooled[end].0 == pooled[start].0 {
            end += 1;
        }
        let t = (end - start) as f64;
        let mean_rank = (start + end + 1) as f64 / 2.0; // ranks start..end are 1-based start+1..=end
        let from_a = pooled[start..end].iter().filter(|p| p.1).count() as f64;
        rank_sum_a += from_a * mean_rank;
        tie_term += t * t * t - t;
        start = end;
    }

    let u = rank_sum_a - n1 * (n1 + 1.0) / 2.0;
    let u_max = u.max(n1 * n2 - u);
    let n = n1 + n2;
    let variance = n1 * n2 / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)));
    let p_value = if variance > 0.0 {
        let z = (u_max - n1 * n2 / 2.0 - 0.5) / variance.sqrt();
        (2.0 * normal_sf(z)).min(1.0)
    } else {
        1.0
    };
    Some(MannWhitney { u, p_value })
}

/// Largest sample size for which [`mann_whitney_p`] computes the exact distribution of U.
const EXACT_MAX: usize = 20;

/// Two-sided p-value of the Mann-Whitney U test, exact where it matters: for small samples
/// without ties (both at most 20 values) from the exact null distribution of U, otherwise
/// [`mann_whitney_u`]'s normal approximation. The approximation is poor for a handful of
/// samples; the exact value says what the data can support: with 3 against 3, even complete
/// separation has p = 2 / C(6, 3) = 0.1, with 4 against 4, p = 2 / C(8, 4) = 0.029.
///
/// `None` when either side has fewer than 2 samples or any value is not finite.
pub fn mann_whitney_p(a: &[f64], b: &[f64]) -> Option<f64> {
    let approx = mann_whitney_u(a, b)?;
    let mut pooled: Vec<f64> = a.iter().chain(b).copied().collect();
    pooled.sort_by(f64::total_cmp);
    let ties = pooled.windows(2).any(|w| w[0] == w[1]);
    if ties || a.len() > EXACT_MAX || b.len() > EXACT_MAX {
        return Some(approx.p_value);
    }
    let (m, n) = (a.len(), b.len());
    // Without ties U is a whole number.
    let u = approx.u.round() as usize;
    let u_max = u.max(m * n - u);
    // counts[k]: orderings of m a's and n b's with U = k (U counts pairs a > b), built up
    // one sample at a time: f(i, j, k) = f(i - 1, j, k - j) + f(i, j - 1, k).
    let mut table = vec![vec![vec![0f64; m * n + 1]; n + 1]; m + 1];
    for row in table.iter_mut() {
        row[0][0] = 1.0;
    }
    for cell in table[0].iter_mut() {
        cell[0] = 1.0;
    }
    for i in 1..=m {
        for j in 1..=n {
            for k in 0..=i * j {
                let with_a_last = if k >= j { table[i - 1][j][k - j] } else { 0.0 };
                table[i][j][k] = with_a_last + table[i][j - 1][k];
            }
        }
    }
    let counts = &table[m][n];
    let total: f64 = counts.iter().sum();
    let upper: f64 = counts[u_max..].iter().sum();
    Some((2.0 * upper / total).min(1.0))
}

/// Sorted copy of `xs`, or `None` if it is empty or has a non-finite value.
fn sorted_finite(xs: &[f64]) -> Option<Vec<f64>> {
    if xs.is_empty() || xs.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    Some(sorted)
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

/// `P(Z > z)` for a standard normal `Z`.
fn normal_sf(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// Complementary error function, to about 1e-13 relative (the standard library has none).
///
/// Below 2 it is `1 - erf(x)` from the all-positive series
/// `erf(x) = 2/sqrt(pi) e^(-x^2) sum (2x^2)^k x / (1 * 3 * ... * (2k + 1))`, which has no
/// cancellation; from 2 up, Laplace's continued fraction
/// `erfc(x) = e^(-x^2)/sqrt(pi) / (x + (1/2) / (x + 1 / (x + (3/2) / (x + ...))))`, evaluated
/// backwards, keeps the relative accuracy of tiny tail probabilities.
fn erfc(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    if x < 0.0 {
        return 2.0 - erfc(-x);
    }
    let inv_sqrt_pi = std::f64::consts::FRAC_2_SQRT_PI / 2.0;
    if x < 2.0 {
        let two_x2 = 2.0 * x * x;
        let mut term = x;
        let mut sum = x;
        let mut k = 0.0;
        while term > sum * 1e-17 {
            k += 1.0;
            term *= two_x2 / (2.0 * k + 1.0);
            sum += term;
        }
        1.0 - 2.0 * inv_sqrt_pi * (-x * x).exp() * sum
    } else {
        let mut t = x;
        for k in (1..=120).rev() {
            t = x + (k as f64 / 2.0) / t;
        }
        inv_sqrt_pi * (-x * x).exp() / t
    }
}

/// Two-sided p-value of the Wilcoxon signed-rank test that the differences `d` are centred on
/// zero (used by `ab` on the log ratios of paired runs). Zeros are dropped (Wilcoxon's rule);
/// tied magnitudes get their average rank. The p-value is exact: the null distribution of the
/// positive-rank sum, every sign equally likely, is counted over the (doubled, so integer)
/// ranks actually present, ties included.
///
/// `None` when a difference is not finite; `Some(1.0)` when nothing is left after the zeros.
pub fn wilcoxon_signed_rank_p(d: &[f64]) -> Option<f64> {
    if d.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let mut nonzero: Vec<f64> = d.iter().copied().filter(|x| *x != 0.0).collect();
    if nonzero.is_empty() {
        return Some(1.0);
    }
    nonzero.sort_by(|a, b| a.abs().total_cmp(&b.abs()));
    // Doubled average ranks: a run of ties over 1-based ranks s+1..=e has average (s+1+e)/2.
    let mut ranks2 = vec![0usize; nonzero.len()];
    let mut start = 0;
    while start < nonzero.len() {
        let mut end = start + 1;
        while end < nonzero.len() && nonzero[end].abs() == nonzero[start].abs() {
            end += 1;
        }
        for r in &mut ranks2[start..end] {
            *r = start + 1 + end;
        }
        start = end;
    }
    let total: usize = ranks2.iter().sum();
    let positive: usize = nonzero
        .iter()
        .zip(&ranks2)
        .filter(|(x, _)| **x > 0.0)
        .map(|(_, r)| r)
        .sum();
    // counts[s]: sign patterns whose positive doubled-rank sum is s (as f64: 2^n overflows u64
    // beyond 64 pairs).
    let mut counts = vec![0f64; total + 1];
    counts[0] = 1.0;
    for &r in &ranks2 {
        for s in (r..=total).rev() {
            counts[s] += counts[s - r];
        }
    }
    let all: f64 = counts.iter().sum();
    // Two-sided: as extreme as observed on either side of the mean total / 2.
    let extreme = positive.min(total - positive);
    let tail: f64 = counts[..=extreme].iter().sum();
    Some((2.0 * tail / all).min(1.0))
}

/// A percentile bootstrap 95% confidence interval of the median of `xs` (`resamples` draws,
/// seeded, so a report can be reproduced). `None` for fewer than 2 finite values.
pub fn bootstrap_median_ci95(xs: &[f64], resamples: usize, seed: u64) -> Option<[f64; 2]> {
    if xs.len() < 2 || xs.iter().any(|x| !x.is_finite()) {
        return None;
    }
    // xorshift64*: enough for resampling indices, and no dependency.
    let mut state = seed.max(1);
    let mut next = || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let mut medians = Vec::with_capacity(resamples);
    let mut draw = vec![0f64; xs.len()];
    for _ in 0..resamples.max(1) {
        for d in &mut draw {
            *d = xs[(next() % xs.len() as u64) as usize];
        }
        medians.push(median(&draw)?);
    }
    medians.sort_by(f64::total_cmp);
    Some([quantile(&medians, 0.025), quantile(&medians, 0.975)])
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
        assert_eq!(quantile(&xs, 0.0), 1.0);
        assert_eq!(quantile(&xs, 1.0), 5.0);
        assert_eq!(quantile(&xs, 0.25), 2.0);
        assert_eq!(quantile(&xs, 0.1), 1.4); // h = 0.4
        let ys = [10.0, 20.0];
        assert_eq!(quantile(&ys, 0.75), 17.5);
        assert_eq!(quantile(&ys, -1.0), 10.0); // clamped
        assert_eq!(quantile(&ys, 2.0), 20.0);
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
    fn empty_or_non_finite_is_none() {
        assert_eq!(Summary::from_samples(&[]), None);
        assert_eq!(Summary::from_samples(&[1.0, f64::NAN]), None);
        assert_eq!(Summary::from_samples(&[f64::NEG_INFINITY, 1.0]), None);
    }

    #[test]
    fn single_sample() {
        let s = Summary::from_samples(&[0.25]).expect("one sample is fine");
        assert_eq!(s.median_s, 0.25);
        assert_eq!(s.mean_s, 0.25);
        assert_eq!(s.stddev_s, 0.0);
        assert_eq!(s.mad_s, 0.0);
        assert_eq!(s.ci95_s, [0.25, 0.25]);
        assert_eq!(s.outliers, 0);
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
    fn erfc_matches_reference() {
        // scipy.special.erfc
        let cases = [
            (0.0, 1.0),
            (0.1, 0.8875370839817152),
            (0.5, 0.4795001221869535),
            (1.0, 0.15729920705028516),
            (1.9, 0.007209570764742531),
            (2.0, 0.004677734981047266),
            (2.5, 0.00040695201744495886),
            (3.0, 2.2090496998585445e-05),
            (5.0, 1.5374597944280347e-12),
            (10.0, 2.0884875837625446e-45),
            (26.0, 5.663192408856145e-296),
            (-1.0, 1.8427007929497148),
        ];
        for (x, want) in cases {
            let got = erfc(x);
            assert!(close(got, want, 1e-13), "erfc({x}) = {got}, want {want}");
        }
        assert_eq!(erfc(40.0), 0.0);
        assert_eq!(erfc(-40.0), 2.0);
    }

    #[test]
    fn mann_whitney_scipy_doc_example() {
        // scipy.stats.mannwhitneyu docs: males vs females, method="asymptotic".
        let males = [19.0, 22.0, 16.0, 29.0, 24.0];
        let females = [20.0, 11.0, 17.0, 12.0];
        let r = mann_whitney_u(&males, &females).expect("enough samples");
        assert_eq!(r.u, 17.0);
        assert!(
            close(r.p_value, 0.11134688653314041, 1e-12),
            "{}",
            r.p_value
        );
        // Swapping the samples gives the complementary U and the same two-sided p.
        let s = mann_whitney_u(&females, &males).expect("enough samples");
        assert_eq!(s.u, 3.0);
        assert!(close(s.p_value, r.p_value, 1e-15));
    }

    #[test]
    fn mann_whitney_with_ties() {
        // scipy.stats.mannwhitneyu(a, b, method="asymptotic") -> U = 3.5, p = 0.012999854364387305
        let a = [1.0, 2.0, 2.0, 3.0, 3.0, 3.0, 4.0];
        let b = [3.0, 4.0, 4.0, 5.0, 5.0, 6.0];
        let r = mann_whitney_u(&a, &b).expect("enough samples");
        assert_eq!(r.u, 3.5);
        assert!(
            close(r.p_value, 0.012999854364387305, 1e-12),
            "{}",
            r.p_value
        );
        // Ties across the samples: U = 11.5, p = 0.11928631145929773.
        let a = [1.2, 3.4, 0.5, 7.7, 2.2, 2.2, 9.1, 4.4];
        let b = [5.5, 6.6, 2.2, 8.8, 10.1, 7.7];
        let r = mann_whitney_u(&a, &b).expect("enough samples");
        assert_eq!(r.u, 11.5);
        assert!(
            close(r.p_value, 0.11928631145929773, 1e-12),
            "{}",
            r.p_value
        );
    }

    #[test]
    fn mann_whitney_separated_samples_tiny_p() {
        // a = 0..30, b = 100..130: scipy asymptotic U = 0, p = 3.019859359162157e-11
        let a: Vec<f64> = (0..30).map(f64::from).collect();
        let b: Vec<f64> = (100..130).map(f64::from).collect();
        let r = mann_whitney_u(&a, &b).expect("enough samples");
        assert_eq!(r.u, 0.0);
        assert!(
            close(r.p_value, 3.019859359162157e-11, 1e-12),
            "{}",
            r.p_value
        );
    }

    #[test]
    fn mann_whitney_timing_like_samples() {
        // Two runs of ~1 s timings rounded to the millisecond (so with ties), generated by
        // numpy; scipy asymptotic: U = 534.5, p = 0.07971264883121791.
        let a = [
            1.035, 1.082, 1.033, 0.87, 1.091, 1.045, 0.946, 1.058, 1.036, 1.029, 1.003, 1.055,
            0.926, 0.984, 0.952, 1.06, 1.004, 0.971, 0.922, 0.974, 1.001, 0.972, 1.129, 1.101,
            0.729, 0.811, 0.983, 0.958, 1.021, 1.022, 1.212, 0.889, 0.962, 1.204, 1.065, 1.066,
            0.949, 0.835, 1.017, 1.011,
        ];
        let b = [
            0.927, 0.982, 1.043, 0.956, 1.04, 1.06, 1.054, 0.999, 1.109, 1.139, 1.082, 0.968,
            1.123, 1.0, 1.138, 0.943, 1.141, 1.048, 0.925, 1.019, 1.055, 1.077, 0.952, 0.939, 1.07,
            1.003, 1.074, 1.126, 0.885, 1.075, 1.172, 1.02, 0.969, 1.125, 1.075,
        ];
        let r = mann_whitney_u(&a, &b).expect("enough samples");
        assert_eq!(r.u, 534.5);
        assert!(
            close(r.p_value, 0.07971264883121791, 1e-12),
            "{}",
            r.p_value
        );
    }

    #[test]
    fn exact_mann_whitney_p_for_small_samples() {
        // Complete separation: p = 2 / C(n + m, n).
        let p = mann_whitney_p(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap();
        assert!((p - 0.1).abs() < 1e-12, "{p}");
        let p = mann_whitney_p(&[1.0, 2.0, 3.0, 4.0], &[5.0, 6.0, 7.0, 8.0]).unwrap();
        assert!((p - 2.0 / 70.0).abs() < 1e-12, "{p}");
        // U = 4 here; by counting, 12 of the C(9, 4) = 126 orderings have U <= 4: p = 24 / 126.
        let p = mann_whitney_p(&[1.0, 4.0, 2.0, 7.0], &[3.0, 5.0, 6.0, 8.0, 9.0]).unwrap();
        assert!((p - 0.190_476_190_476_190_5).abs() < 1e-9, "{p}");
        // Symmetric, and identical in distribution gives 1.
        let q = mann_whitney_p(&[3.0, 5.0, 6.0, 8.0, 9.0], &[1.0, 4.0, 2.0, 7.0]).unwrap();
        assert!((p - q).abs() < 1e-12);
        // Ties or large samples fall back to the approximation.
        let (a, b) = ([1.0, 1.0, 2.0], [2.0, 3.0, 3.0]);
        assert_eq!(
            mann_whitney_p(&a, &b),
            mann_whitney_u(&a, &b).map(|m| m.p_value)
        );
        assert_eq!(mann_whitney_p(&[1.0], &[2.0, 3.0]), None);
    }

    #[test]
    fn mann_whitney_edge_cases() {
        assert_eq!(mann_whitney_u(&[1.0], &[1.0, 2.0]), None);
        assert_eq!(mann_whitney_u(&[1.0, 2.0], &[]), None);
        assert_eq!(mann_whitney_u(&[1.0, f64::NAN], &[1.0, 2.0]), None);
        // All tied: no evidence of a difference.
        let r = mann_whitney_u(&[1.0, 1.0, 1.0], &[1.0, 1.0]).expect("ok");
        assert_eq!(
            r,
            MannWhitney {
                u: 3.0,
                p_value: 1.0
            }
        );
        // Identical samples: U = n1 n2 / 2 and p clipped to 1.
        let r = mann_whitney_u(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0]).expect("ok");
        assert_eq!(
            r,
            MannWhitney {
                u: 4.5,
                p_value: 1.0
            }
        );
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

        #[test]
        fn mann_whitney_is_symmetric(
            a in proptest::collection::vec(0u8..20, 2..40),
            b in proptest::collection::vec(0u8..20, 2..40),
        ) {
            let a: Vec<f64> = a.into_iter().map(f64::from).collect();
            let b: Vec<f64> = b.into_iter().map(f64::from).collect();
            let ab = mann_whitney_u(&a, &b).expect("enough samples");
            let ba = mann_whitney_u(&b, &a).expect("enough samples");
            let n1n2 = (a.len() * b.len()) as f64;
            proptest::prop_assert_eq!(ab.u + ba.u, n1n2);
            proptest::prop_assert!((0.0..=n1n2).contains(&ab.u));
            proptest::prop_assert!((ab.p_value - ba.p_value).abs() <= 1e-12);
            proptest::prop_assert!(ab.p_value > 0.0 && ab.p_value <= 1.0);
        }
    }

    #[test]
    fn wilcoxon_matches_the_exact_tables() {
        // All 6 positive: 2 / 2^6 = 0.03125 (SciPy wilcoxon(..., method="exact")).
        let p = wilcoxon_signed_rank_p(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        assert!((p - 0.03125).abs() < 1e-12, "{p}");
        // Ranks 1..8, negatives at ranks 1 and 3 (W+ = 32): SciPy's exact two-sided p = 0.0546875.
        let d = [-0.1, 0.2, -0.3, 0.4, 0.5, 0.6, 0.7, 0.8];
        let p = wilcoxon_signed_rank_p(&d).unwrap();
        assert!((p - 0.0546875).abs() < 1e-12, "{p}");
        // Symmetric: no evidence.
        let p = wilcoxon_signed_rank_p(&[-1.0, 1.0, -2.0, 2.0]).unwrap();
        assert_eq!(p, 1.0);
        // Zeros dropped, ties averaged, signs mirrored give the same p.
        let a = wilcoxon_signed_rank_p(&[0.0, 1.0, 1.0, 2.0, 3.0, -0.5]).unwrap();
        let b = wilcoxon_signed_rank_p(&[-1.0, -1.0, -2.0, -3.0, 0.5, 0.0]).unwrap();
        assert!((a - b).abs() < 1e-12 && a < 1.0, "{a} {b}");
        assert_eq!(wilcoxon_signed_rank_p(&[0.0, 0.0]), Some(1.0));
        assert_eq!(wilcoxon_signed_rank_p(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn the_bootstrap_interval_holds_the_median_and_narrows_with_data() {
        let xs: Vec<f64> = (0..40)
            .map(|i| 1.0 + 0.01 * ((i * 7 % 11) as f64 - 5.0))
            .collect();
        let [lo, hi] = bootstrap_median_ci95(&xs, 2000, 1).unwrap();
        let m = median(&xs).unwrap();
        assert!(lo <= m && m <= hi, "{lo} {m} {hi}");
        assert!(hi - lo < 0.05, "{lo} {hi}");
        // Seeded: the same interval again.
        assert_eq!(bootstrap_median_ci95(&xs, 2000, 1), Some([lo, hi]));
        let few = bootstrap_median_ci95(&xs[..4], 2000, 1).unwrap();
        assert!(few[1] - few[0] >= hi - lo);
        assert_eq!(bootstrap_median_ci95(&[1.0], 100, 1), None);
    }
}
