//! Wilcoxon's signed-rank test, for paired runs (`ab`): it assumes no normality.

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
}
