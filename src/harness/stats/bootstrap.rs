//! A seeded percentile bootstrap of the median (`ab`'s interval of the median ratio).

use super::summary::{median, quantile};

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
