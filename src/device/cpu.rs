//! CPU devices and their kernels.
//!
//! Kernels run inside the device's pool (the lane's worker is one of its threads), so their
//! rayon parallelism stays on that device's share of the cores.

use std::sync::Arc;

use ndarray::{Array2, ArrayD, ArrayView2, ArrayViewMut2, IxDyn};
use rayon::prelude::*;

use super::{Device, DeviceError, DeviceKind};
use crate::engine::{EngineBuilder, LaneSpec};

/// Build a CPU device named `name` with `threads` threads and register its lanes: a compute
/// lane inside its pool and a copy lane on a thread of its own.
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
    Ok(Device {
        compute: builder.lane(LaneSpec::in_pool(&name, pool.clone(), 1)),
        copy: builder.lane(LaneSpec::threads(format!("{name} copy"), 1)),
        name,
        threads,
        kind: DeviceKind::Cpu { pool },
        memory: Default::default(),
        host: None,
    })
}

/// SplitMix64: a tiny, well-mixed, stateless generator, so element `i` of a seeded tensor is
/// the same however many threads fill it.
pub(crate) fn splitmix64(mut z: u64) -> u64 {
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
    matmul_with(matmul_kernel_choice().kernel, a, b)
}

/// [`matmul`] on a given kernel (it must run on this core: see [`matmul_kernel_choice`]).
pub fn matmul_with(
    kernel: MatmulKernel,
    a: ArrayView2<'_, f32>,
    b: ArrayView2<'_, f32>,
) -> Array2<f32> {
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
    // SAFETY: `c` is a fresh m×n allocation with strides (sc0, sc1); `product_raw` writes every
    // element of it without reading (see `matmul_into`), after which it is initialized.
    unsafe {
        product_raw(kernel, a, b, c.as_mut_ptr().cast::<f32>(), (sc0, sc1));
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
    unsafe { product_raw(matmul_kernel_choice().kernel, a, b, c.as_mut_ptr(), sc) }
}

/// The smallest product (m·n·k) the AVX2 kernel runs; below it `gemm` is as fast or faster
/// (measured on the AMD EPYC VM: even at 200³, 3% slower at 100³ in `deps`, 10–15% faster at
/// 500³), its masked edge tiles costing less than the AVX2 kernel's scratch tiles.
pub const AVX2_MIN_MULTIPLY_ADDS: usize = 1 << 24;

/// Which kernel computes a CPU matrix product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatmulKernel {
    /// The `gemm` crate's runtime-dispatched kernels (the choice on AVX-512 cores and off
    /// x86-64).
    Gemm,
    /// parbench's own AVX2/FMA kernel ([`super::sgemm`]), the choice of optimized builds on
    /// x86-64 cores with AVX2 and FMA but no AVX-512, where `gemm` trails OpenBLAS.
    Avx2,
}

impl MatmulKernel {
    /// The environment variable that overrides the choice (`gemm` or `avx2`), to compare them.
    pub const ENV: &'static str = "PARBENCH_MATMUL_KERNEL";

    pub fn as_str(self) -> &'static str {
        match self {
            MatmulKernel::Gemm => "gemm",
            MatmulKernel::Avx2 => "avx2",
        }
    }
}

/// The kernel matrix products use in this process, and why (for the report's notes).
pub struct KernelChoice {
    pub kernel: MatmulKernel,
    pub why: String,
}

/// The kernel matrix products use in this process, with the reason for it: the one
/// [`MatmulKernel::ENV`] names if this core can run it, else the faster one for this core and
/// build. Chosen once.
pub fn matmul_kernel_choice() -> &'static KernelChoice {
    static CHOICE: std::sync::OnceLock<KernelChoice> = std::sync::OnceLock::new();
    CHOICE.get_or_init(|| choose_kernel(std::env::var(MatmulKernel::ENV).ok().as_deref()))
}

fn choose_kernel(asked: Option<&str>) -> KernelChoice {
    // Only an optimized build makes parbench's own kernel fast; a debug build optimizes its
    // dependencies alone (see Cargo.toml), `gemm` among them, which is then the faster.
    #[cfg(target_arch = "x86_64")]
    let (best, avx2_runs) = if !cfg!(debug_assertions) && super::sgemm::preferred() {
        (MatmulKernel::Avx2, true)
    } else {
        (MatmulKernel::Gemm, super::sgemm::available())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let (best, avx2_runs) = (MatmulKernel::Gemm, false);
    let env = MatmulKernel::ENV;
    let (kernel, why) = match asked.map(str::trim) {
        None | Some("") => (best, "the faster one for this core and build".to_string()),
        Some("gemm") => (MatmulKernel::Gemm, format!("{env}=gemm")),
        Some("avx2") if avx2_runs => (MatmulKernel::Avx2, format!("{env}=avx2")),
        Some("avx2") => (
            best,
            format!("{env}=avx2 ignored: this core lacks AVX2 or FMA"),
        ),
        Some(other) => (
            best,
            format!("{env}={other} ignored: expected gemm or avx2"),
        ),
    };
    KernelChoice { kernel, why }
}

/// The kernel an m×k · k×n product runs on when `chosen` is asked for: the AVX2 kernel only
/// where this core can run it and the product reaches [`AVX2_MIN_MULTIPLY_ADDS`], else `gemm`.
pub fn kernel_for(chosen: MatmulKernel, m: usize, n: usize, k: usize) -> MatmulKernel {
    #[cfg(target_arch = "x86_64")]
    if chosen == MatmulKernel::Avx2
        && super::sgemm::available()
        && m * n * k >= AVX2_MIN_MULTIPLY_ADDS
    {
        return MatmulKernel::Avx2;
    }
    let _ = (chosen, m, n, k);
    MatmulKernel::Gemm
}

/// `dst = a · b` on the kernel [`kernel_for`] gives `kernel`, with `dst` given as a pointer and
/// (row, column) strides.
///
/// # Safety
/// `dst` must address a writable m×n matrix with strides `sc` that aliases neither input; it
/// need not be initialized (gemm overwrites without reading when `read_dst` is false).
unsafe fn product_raw(
    kernel: MatmulKernel,
    a: ArrayView2<'_, f32>,
    b: ArrayView2<'_, f32>,
    dst: *mut f32,
    sc: (isize, isize),
) {
    let ((m, k), n) = (a.dim(), b.ncols());
    #[cfg(not(target_arch = "x86_64"))]
    let _ = kernel;
    #[cfg(target_arch = "x86_64")]
    if kernel_for(kernel, m, n, k) == MatmulKernel::Avx2 {
        // SAFETY: the kernel runs on this core (checked above); the views and `dst` are the
        // caller's m×k, k×n and m×n matrices.
        unsafe { super::sgemm::sgemm(a, b, dst, sc) };
        return;
    }
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
pub(super) mod tests {
    use super::*;

    #[test]
    fn uniform_is_seeded_and_in_range_whatever_the_thread_count() {
        let a = uniform(&[3, 1000], 7);
        let b = uniform(&[3, 1000], 7);
        let c = uniform(&[3, 1000], 8);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.iter().all(|&x| (0.0..1.0).contains(&x)));
        let mean = a.iter().sum::<f32>() / a.len() as f32;
        assert!((mean - 0.5).abs() < 0.05, "mean {mean}");
        let shape = [100_000];
        let (one, two) = (pool(1), pool(2));
        assert_eq!(
            one.install(|| uniform(&shape, 3)),
            two.install(|| uniform(&shape, 3))
        );
    }

    /// Straightforward triple loop in f64: the reference the fast kernels must match.
    pub(in crate::device) fn naive(a: ArrayView2<f32>, b: ArrayView2<f32>) -> Array2<f64> {
        let (m, k, n) = (a.nrows(), a.ncols(), b.ncols());
        Array2::from_shape_fn((m, n), |(i, j)| {
            (0..k)
                .map(|p| f64::from(a[[i, p]]) * f64::from(b[[p, j]]))
                .sum()
        })
    }

    /// Every element of `got` within `tol` of `want`, relative to its size (at least 1).
    pub(in crate::device) fn assert_close(got: Array2<f32>, want: &Array2<f64>, tol: f64) {
        assert_eq!(got.dim(), want.dim());
        for ((i, j), w) in want.indexed_iter() {
            let g = f64::from(got[[i, j]]);
            assert!(
                (g - w).abs() <= tol * w.abs().max(1.0),
                "c[{i}, {j}] = {g}, want {w}"
            );
        }
    }

    /// A rayon pool of `threads` threads.
    pub(in crate::device) fn pool(threads: usize) -> rayon::ThreadPool {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads);
        pool.build().expect("a small rayon pool")
    }

    /// A rows×cols matrix of [`uniform`] values.
    pub(in crate::device) fn random(rows: usize, cols: usize, seed: u64) -> Array2<f32> {
        uniform(&[rows, cols], seed)
            .into_dimensionality()
            .expect("2-D")
    }

    /// The kernels this core can run: each is tested, whichever the process would choose.
    fn kernels() -> Vec<MatmulKernel> {
        let mut all = vec![MatmulKernel::Gemm];
        #[cfg(target_arch = "x86_64")]
        if crate::device::sgemm::available() {
            all.push(MatmulKernel::Avx2);
        }
        all
    }

    /// Every kernel's product of `a` and `b` within `tol` of the naive one.
    fn assert_kernels_match(a: ArrayView2<f32>, b: ArrayView2<f32>, tol: f64) {
        let want = naive(a, b);
        for kernel in kernels() {
            assert_close(matmul_with(kernel, a, b), &want, tol);
        }
    }

    #[test]
    fn matmul_matches_a_naive_reference_on_odd_sizes_and_transposed_views() {
        let pool = pool(2);
        for &(m, k, n) in &[
            (1, 1, 1),
            (3, 5, 7),
            (63, 63, 63),
            (129, 129, 129),
            (17, 300, 9),
        ] {
            let (a, b, tol) = (random(m, k, 11), random(k, n, 12), 1e-5 * k as f64);
            assert_kernels_match(a.view(), b.view(), tol);
            // The same inside a two-thread pool (parallel kernel).
            pool.install(|| assert_kernels_match(a.view(), b.view(), tol));
        }
        let (a, b) = (random(5, 4, 1), random(5, 6, 2));
        // aᵀ · b with aᵀ a non-contiguous view.
        assert_kernels_match(a.t(), b.view(), 5e-5);
    }

    #[test]
    fn a_product_large_enough_for_the_avx2_kernel_matches_the_reference() {
        // Just past the kernel's threshold (2^24 multiply-adds), with edge tiles.
        let (m, k, n) = (257, 256, 256);
        assert!(m * k * n >= 1 << 24);
        let (a, b) = (random(m, k, 13), random(k, n, 14));
        assert_kernels_match(a.view(), b.view(), 1e-5 * k as f64);
    }

    #[test]
    fn the_kernel_is_chosen_by_the_core_unless_asked() {
        let auto = choose_kernel(None);
        assert_eq!(auto.why, "the faster one for this core and build");
        assert_eq!(choose_kernel(Some("")).kernel, auto.kernel);
        let gemm = choose_kernel(Some("gemm"));
        assert_eq!(gemm.kernel, MatmulKernel::Gemm);
        assert_eq!(gemm.why, format!("{}=gemm", MatmulKernel::ENV));
        let bad = choose_kernel(Some("blas"));
        assert_eq!(bad.kernel, auto.kernel);
        assert!(
            bad.why.ends_with("=blas ignored: expected gemm or avx2"),
            "{}",
            bad.why
        );
        let avx2 = choose_kernel(Some(" avx2 "));
        let runs = kernels().contains(&MatmulKernel::Avx2);
        assert_eq!(avx2.kernel == MatmulKernel::Avx2, runs, "{}", avx2.why);
    }
}
