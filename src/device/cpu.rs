//! CPU devices and their kernels.
//!
//! Kernels run inside the device's pool (the lane's worker is one of its threads), so their
//! rayon parallelism stays on that device's share of the cores.

use std::sync::Arc;

use ndarray::{Array2, ArrayD, ArrayView2, ArrayViewMut2, IxDyn};
use rayon::prelude::*;

use super::{add_lanes, Device, DeviceError, DeviceKind};
use crate::engine::EngineBuilder;

/// Build `cpu:{index}` with `threads` threads and register its lanes.
pub fn add_cpu_device(
    builder: &mut EngineBuilder,
    index: usize,
    threads: usize,
) -> Result<Device, DeviceError> {
    add_named_cpu_device(builder, format!("cpu:{index}"), threads)
}

/// Build a CPU device named `name` with `threads` threads and register its lanes.
pub fn add_named_cpu_device(
    builder: &mut EngineBuilder,
    name: String,
    threads: usize,
) -> Result<Device, DeviceError> {
    let threads = threads.max(1);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name({
            let name = name.clone();
            move |i| format!("{name} t{i}")
        })
        .build()
        .map_err(|e| DeviceError::Pool {
            device: name.clone(),
            reason: e.to_string(),
        })?;
    let pool = Arc::new(pool);
    let (compute, copy) = add_lanes(builder, &name, &pool);
    Ok(Device {
        name,
        threads,
        compute,
        copy,
        kind: DeviceKind::Cpu { pool },
        memory: Default::default(),
        host: None,
    })
}

/// SplitMix64: a tiny, well-mixed, stateless generator, so element `i` of a seeded tensor is
/// the same however many threads fill it.
fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Uniform values in [0, 1) from `seed`, element by element.
pub fn uniform(shape: &[usize], seed: u64) -> ArrayD<f32> {
    let n: usize = shape.iter().product();
    let key = splitmix64(seed);
    let mut data = vec![0f32; n];
    data.par_chunks_mut(1 << 14)
        .enumerate()
        .for_each(|(c, chunk)| {
            let base = (c << 14) as u64;
            for (i, x) in chunk.iter_mut().enumerate() {
                // 24 high bits: exactly representable in f32, so the value is in [0, 1).
                *x = (splitmix64(key ^ (base + i as u64)) >> 40) as f32 / (1u64 << 24) as f32;
            }
        });
    ArrayD::from_shape_vec(IxDyn(shape), data).expect("length equals the shape's product")
}

/// `a · b` into a new matrix, with the current rayon pool's threads (the device's, when called
/// from one of its ops).
pub fn matmul(a: ArrayView2<'_, f32>, b: ArrayView2<'_, f32>) -> Array2<f32> {
    let (m, n) = (a.nrows(), b.ncols());
    assert_eq!(
        a.ncols(),
        b.nrows(),
        "matmul shapes {:?} · {:?}",
        a.dim(),
        b.dim()
    );
    if a.ncols() == 0 || m == 0 || n == 0 {
        return Array2::zeros((m, n));
    }
    // No zeroing pass: the kernel overwrites every element (read_dst = false), and a second
    // sweep over a fresh 16 MB output costs memory bandwidth two devices would share.
    let mut c = Array2::<f32>::uninit((m, n));
    let (sc0, sc1) = (c.strides()[0], c.strides()[1]);
    // SAFETY: `c` is a fresh m×n allocation with strides (sc0, sc1); `gemm_raw` writes every
    // element of it without reading (see `matmul_into`), after which it is initialized.
    unsafe {
        gemm_raw(a, b, c.as_mut_ptr().cast::<f32>(), (sc0, sc1));
        c.assume_init()
    }
}

/// `c = a · b` for any strides (transposed views included), through the `gemm` crate's
/// runtime-dispatched kernels, parallel over the current rayon pool when it has several threads.
///
/// # Panics
/// If the shapes do not agree (callers check them before pushing the op).
pub fn matmul_into(a: ArrayView2<'_, f32>, b: ArrayView2<'_, f32>, mut c: ArrayViewMut2<'_, f32>) {
    let ((m, k), (k2, n)) = (a.dim(), b.dim());
    assert!(
        k == k2 && c.dim() == (m, n),
        "matmul shapes {:?} · {:?} -> {:?}",
        a.dim(),
        b.dim(),
        c.dim()
    );
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        c.fill(0.0);
        return;
    }
    let sc = (c.strides()[0], c.strides()[1]);
    // SAFETY: `c` is a live, mutably borrowed m×n view with these strides.
    unsafe { gemm_raw(a, b, c.as_mut_ptr(), sc) }
}

/// `dst = a · b` through gemm, with `dst` given as a pointer and (row, column) strides.
///
/// # Safety
/// `dst` must address a writable m×n matrix with strides `sc` that aliases neither input; it
/// need not be initialized (gemm overwrites without reading when `read_dst` is false).
unsafe fn gemm_raw(
    a: ArrayView2<'_, f32>,
    b: ArrayView2<'_, f32>,
    dst: *mut f32,
    sc: (isize, isize),
) {
    let ((m, k), n) = (a.dim(), b.ncols());
    let parallelism = if rayon::current_num_threads() > 1 {
        // 0: as many threads as the current pool has.
        gemm::Parallelism::Rayon(0)
    } else {
        gemm::Parallelism::None
    };
    let (sa, sb) = (a.strides(), b.strides());
    // SAFETY (the caller's, plus): pointers and strides (in elements) come from live ndarray
    // views of the checked shapes, so gemm reads only inside `a` (m×k) and `b` (k×n). gemm's
    // convention is dst = alpha·dst + beta·lhs·rhs; with read_dst = false dst is overwritten.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            dst,
            sc.1,
            sc.0,
            false,
            a.as_ptr(),
            sa[1],
            sa[0],
            b.as_ptr(),
            sb[1],
            sb[0],
            0.0f32,
            1.0f32,
            false,
            false,
            false,
            parallelism,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_is_seeded_and_in_range() {
        let a = uniform(&[3, 1000], 7);
        let b = uniform(&[3, 1000], 7);
        let c = uniform(&[3, 1000], 8);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.iter().all(|&x| (0.0..1.0).contains(&x)));
        let mean = a.iter().sum::<f32>() / a.len() as f32;
        assert!((mean - 0.5).abs() < 0.05, "mean {mean}");
    }

    /// Straightforward triple loop in f64: the reference the fast kernel must match.
    fn naive(a: &Array2<f32>, b: &Array2<f32>) -> Array2<f64> {
        let (m, k, n) = (a.nrows(), a.ncols(), b.ncols());
        Array2::from_shape_fn((m, n), |(i, j)| {
            (0..k)
                .map(|p| f64::from(a[[i, p]]) * f64::from(b[[p, j]]))
                .sum()
        })
    }

    fn assert_close(got: &Array2<f32>, want: &Array2<f64>, k: usize) {
        assert_eq!(got.dim(), want.dim());
        let tol = 1e-5 * (k as f64).max(1.0);
        for (g, w) in got.iter().zip(want.iter()) {
            assert!(
                (f64::from(*g) - w).abs() <= tol * w.abs().max(1.0),
                "{g} vs {w}"
            );
        }
    }

    #[test]
    fn matmul_matches_a_naive_reference_on_odd_sizes() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        for &(m, k, n) in &[
            (1, 1, 1),
            (3, 5, 7),
            (63, 63, 63),
            (129, 129, 129),
            (17, 300, 9),
        ] {
            let a = uniform(&[m, k], 11).into_dimensionality().unwrap();
            let b = uniform(&[k, n], 12).into_dimensionality().unwrap();
            let want = naive(&a, &b);
            assert_close(&matmul(a.view(), b.view()), &want, k);
            // The same inside a two-thread pool (parallel kernel).
            assert_close(&pool.install(|| matmul(a.view(), b.view())), &want, k);
        }
    }

    #[test]
    fn matmul_handles_transposed_views() {
        let a: Array2<f32> = uniform(&[5, 4], 1).into_dimensionality().unwrap();
        let b: Array2<f32> = uniform(&[5, 6], 2).into_dimensionality().unwrap();
        // aᵀ · b with aᵀ a non-contiguous view.
        let at = a.t();
        let want = naive(&at.to_owned(), &b);
        assert_close(&matmul(at, b.view()), &want, 5);
    }

    #[test]
    fn uniform_does_not_depend_on_thread_count() {
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let two = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let shape = [100_000];
        assert_eq!(
            one.install(|| uniform(&shape, 3)),
            two.install(|| uniform(&shape, 3))
        );
    }
}
