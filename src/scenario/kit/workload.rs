//! The chapter's shared workload and its check: `run(x)`, the book's `ops` products `x · x`,
//! their rate, and each product held to a float64 reference; the sampling for rounds that
//! take seconds, and a traced run of one piece of work.

use std::time::Duration;

use crate::engine::{Engine, EngineError, TraceRecord};
use crate::harness::SamplerConfig;
use crate::tensor::{Tensor, TensorError};

/// Sampling for scenarios whose round takes seconds (`cpu-gpu`, `run-copy`): after one warm-up,
/// the fewest rounds whose median intervals reach 95% (six; with three, the intervals are the
/// samples' range and cover the median three times in four), so their lessons can be decided.
pub const SECONDS_PER_ROUND: SamplerConfig = SamplerConfig {
    warmup: 1,
    min_samples: crate::harness::stats::SAMPLES_FOR_95,
    max_samples: 30,
    min_time: Duration::from_secs(3),
    max_time: Duration::from_secs(60),
};

/// Sampling for scenarios whose lesson is decided from their medians' intervals: after one
/// warm-up, at least the rounds whose intervals reach 95%, up to `max_samples`, measuring for
/// `min_secs` seconds at least and 30 at most.
pub const fn sampling_to_95(max_samples: usize, min_secs: u64) -> SamplerConfig {
    SamplerConfig {
        max_samples,
        min_time: Duration::from_secs(min_secs),
        max_time: Duration::from_secs(30),
        ..SECONDS_PER_ROUND
    }
}

/// Why a figure read from [`traced`]'s records is not measured when they do not come back.
pub const ALREADY_TRACING: &str = "the engine was already tracing the whole run (--trace)";

/// Run `work` (which pushes ops and waits for them) with the engine recording every op, and
/// return the records in push order. Earlier work is drained first, so every record belongs
/// to `work`. When tracing is already on, a `--trace` repeat owns the records: `work` runs
/// untouched and no records come back.
pub fn traced<T, E: From<EngineError>>(
    engine: &Engine,
    work: impl FnOnce() -> Result<T, E>,
) -> Result<(T, Option<Vec<TraceRecord>>), E> {
    if engine.is_tracing() {
        return Ok((work()?, None));
    }
    engine.wait_all()?;
    let _ = engine.take_trace();
    engine.set_tracing(true);
    let outcome = work();
    engine.set_tracing(false);
    let mut records = engine.take_trace();
    records.sort_by_key(|r| r.seq);
    Ok((outcome?, Some(records)))
}

/// Push `ops` independent products `x · x` on `x`'s device (the book's `run(x)`).
pub fn run_matmuls(x: &Tensor, ops: u64) -> Result<Vec<Tensor>, TensorError> {
    (0..ops).map(|_| x.matmul(x)).collect()
}

/// The largest error of `c = a · b` (row-major, m×k times k×n) at up to `samples` positions,
/// relative to the sum of the magnitudes of the products (what float32 rounding scales with),
/// against a float64 reference. Positions spread over the whole matrix, corners included.
pub fn matmul_error(
    a: &[f32],
    b: &[f32],
    c: &[f32],
    (m, k, n): (usize, usize, usize),
    samples: usize,
) -> f64 {
    let mut worst = 0f64;
    let picks = samples.max(2);
    for s in 0..picks {
        let i = (s * (m - 1)) / (picks - 1);
        let j = match s {
            0 => 0,
            s if s == picks - 1 => n - 1,
            s => (s * 7919 + 13) % n,
        };
        let (mut exact, mut scale) = (0f64, 0f64);
        for p in 0..k {
            let prod = f64::from(a[i * k + p]) * f64::from(b[p * n + j]);
            exact += prod;
            scale += prod.abs();
        }
        let err = (f64::from(c[i * n + j]) - exact).abs() / scale.max(f64::MIN_POSITIVE);
        // `f64::max` ignores NaN: a NaN element (an unwritten or poisoned buffer) must count
        // as the worst error there is, not vanish.
        worst = if err.is_nan() {
            f64::INFINITY
        } else {
            worst.max(err)
        };
    }
    worst
}

/// Float32 products accumulate rounding of about k·eps relative to the magnitude sum; allow
/// that with a margin, but far below what a wrong element (or a transposed product) gives.
pub fn matmul_tolerance(k: usize) -> f64 {
    (k as f64).sqrt() * f64::from(f32::EPSILON) * 8.0 + 1e-6
}

/// GFLOP/s of `ops` products of m×k by k×n in `seconds`.
pub fn gflops(ops: u64, (m, k, n): (usize, usize, usize), seconds: f64) -> f64 {
    2.0 * m as f64 * k as f64 * n as f64 * ops as f64 / seconds / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matmul_error_catches_wrong_products() {
        let (m, k, n) = (5, 3, 4);
        let a: Vec<f32> = (0..m * k).map(|v| v as f32 * 0.5 + 1.0).collect();
        let b: Vec<f32> = (0..k * n).map(|v| 2.0 - v as f32 * 0.25).collect();
        let mut c = vec![0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
            }
        }
        assert!(matmul_error(&a, &b, &c, (m, k, n), 8) <= matmul_tolerance(k));
        // A single wrong corner element is found; NaN anywhere it looks (a buffer nothing was
        // written to) is the worst error there is.
        for (at, value) in [
            (m * n - 1, c[m * n - 1] + 1.0),
            (0, c[0] - 1.0),
            (m * n - 1, f32::NAN),
        ] {
            let mut bad = c.clone();
            bad[at] = value;
            let err = matmul_error(&a, &b, &bad, (m, k, n), 8);
            assert!(
                err > matmul_tolerance(k) && (err.is_infinite() == value.is_nan()),
                "{at}: {err}"
            );
        }
    }

    #[test]
    fn gflops_counts_two_flops_per_multiply_add() {
        assert_eq!(gflops(1, (1000, 1000, 1000), 1.0), 2.0);
    }
}
