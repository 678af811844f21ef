//! The same overlap on two plain threads, without the engine: a reference measured beside the
//! run (not a bound: the engine may overlap better or worse than these threads did).

use crate::scenario::ScenarioError;

/// Rounds of the bare-threads measurement (alone, alone, together each), and the products of
/// each workload in it: enough for a median, a few seconds at the defaults.
const BARE_THREADS_ROUNDS: usize = 3;
const BARE_THREADS_OPS: u64 = 3;

/// max(a, b) / together for `ops` (at most [`BARE_THREADS_OPS`]) products `x · x` of each of two
/// n×n inputs, each on a plain thread inside a rayon pool of its device's threads, with no
/// engine: medians of [`BARE_THREADS_ROUNDS`] rounds, the order rotated each round.
pub(super) fn bare_threads_overlap(
    a: &[f32],
    b: &[f32],
    n: usize,
    (threads_a, threads_b): (usize, usize),
    ops: u64,
) -> Result<f64, ScenarioError> {
    let pool = |t: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(t.max(1))
            .build()
            .map_err(|e| ScenarioError::Input(format!("cannot start a thread pool: {e}")))
    };
    let (pool_a, pool_b) = (pool(threads_a)?, pool(threads_b)?);
    let view = |x| ndarray::ArrayView2::from_shape((n, n), x);
    let (va, vb) = (
        view(a).map_err(|e| ScenarioError::Input(e.to_string()))?,
        view(b).map_err(|e| ScenarioError::Input(e.to_string()))?,
    );
    let ops = ops.min(BARE_THREADS_OPS);
    let work = |p: &rayon::ThreadPool, x: ndarray::ArrayView2<'_, f32>| {
        p.install(|| {
            for _ in 0..ops {
                std::hint::black_box(crate::device::cpu::matmul(x, x));
            }
        })
    };
    let time = |f: &dyn Fn()| {
        let t = std::time::Instant::now();
        f();
        t.elapsed().as_secs_f64()
    };
    let (mut alone_a, mut alone_b, mut together) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..BARE_THREADS_ROUNDS {
        for k in 0..3 {
            match (round + k) % 3 {
                0 => alone_a.push(time(&|| work(&pool_a, va))),
                1 => alone_b.push(time(&|| work(&pool_b, vb))),
                _ => together.push(time(&|| {
                    std::thread::scope(|s| {
                        s.spawn(|| work(&pool_a, va));
                        work(&pool_b, vb);
                    })
                })),
            }
        }
    }
    let m = |v: &[f64]| crate::harness::stats::median(v).unwrap_or(f64::NAN);
    Ok(m(&alone_a).max(m(&alone_b)) / m(&together))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bare_threads_overlap_is_a_ratio_of_real_timings() {
        let x: Vec<f32> = (0..64 * 64).map(|i| (i % 7) as f32).collect();
        let c = bare_threads_overlap(&x, &x, 64, (1, 1), 2).unwrap();
        assert!(c.is_finite() && c > 0.0, "{c}");
        // Inputs that do not match the size are an error, not a panic.
        assert!(bare_threads_overlap(&x[1..], &x, 64, (1, 1), 2).is_err());
    }
}
