//! Rank tests that assume no normality: Mann-Whitney U for two independent sets of samples
//! (`compare`), and Wilcoxon's signed-rank test for paired ones (`ab`).

use serde::{Deserialize, Serialize};

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

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * a.abs().max(b.abs()).max(f64::MIN_POSITIVE)
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

    proptest::proptest! {
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
}
