//! The tail of a set of timing samples: its 50th, 90th and 99th percentiles, which a CI
//! dashboard tracks beside the median when the tail matters (a stall every hundred iterations).

use serde::Serialize;

use super::summary::{quantile, sorted_finite};

/// The 50th, 90th and 99th percentiles of a set of samples, in seconds, by [`quantile`] (linear
/// interpolation between order statistics, as R and NumPy do by default). With few samples the
/// 99th percentile lies between the two largest, so it is only as good as the sample count.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Percentiles {
    pub p50_s: f64,
    pub p90_s: f64,
    pub p99_s: f64,
}

impl Percentiles {
    /// The percentiles of `samples` (any order); `None` when it is empty or holds a NaN or an
    /// infinity, as for [`Summary`](super::Summary).
    pub fn of(samples: &[f64]) -> Option<Percentiles> {
        let sorted = sorted_finite(samples)?;
        Some(Percentiles {
            p50_s: quantile(&sorted, 0.5),
            p90_s: quantile(&sorted, 0.9),
            p99_s: quantile(&sorted, 0.99),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate_between_order_statistics() {
        // Ten samples 1..=10 in shuffled order: h = 9q, so p90 = 9.1 and p99 = 9.91.
        let xs = [7.0, 3.0, 10.0, 1.0, 5.0, 2.0, 9.0, 4.0, 8.0, 6.0];
        let p = Percentiles::of(&xs).expect("finite samples");
        assert_eq!(p.p50_s, 5.5);
        assert!((p.p90_s - 9.1).abs() < 1e-12, "{p:?}");
        assert!((p.p99_s - 9.91).abs() < 1e-12, "{p:?}");
        let one = Percentiles::of(&[0.25]).expect("one sample");
        assert_eq!((one.p50_s, one.p90_s, one.p99_s), (0.25, 0.25, 0.25));
        // None of nothing, or of a non-finite sample.
        assert_eq!(Percentiles::of(&[]), None);
        assert_eq!(Percentiles::of(&[1.0, f64::NAN]), None);
        assert_eq!(Percentiles::of(&[1.0, f64::INFINITY]), None);
    }
}
