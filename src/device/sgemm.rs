//! A single-precision matrix product for x86-64 cores with AVX2 and FMA but no AVX-512.
//!
//! The `gemm` crate's kernels reach OpenBLAS speed on AVX-512 cores but trail it on AVX2 ones
//! (0.92–0.99× on one thread of an AMD EPYC VM, where this kernel measured 1.00–1.03×, with
//! `scripts/matmul-vs-blas.sh`). This is the classic BLIS design at the size of such a core:
//! a 6×16 register tile (twelve 8-wide accumulators, the most that leave room for a row of B
//! and a broadcast of A among the sixteen vector registers), A and B packed in the order the
//! tile reads them, blocks sized so a sliver of B stays in L1 and a block of A in L2, and C's
//! rows prefetched while the tile computes. Several threads split C into disjoint bands, each
//! packing its own blocks.

use std::arch::x86_64::*;

use ndarray::ArrayView2;

/// Register tile: rows of A per sliver, columns of B per sliver.
const MR: usize = 6;
const NR: usize = 16;
/// 8-wide vectors per B row of the tile.
const NV: usize = NR / 8;
/// Rank-one updates per trip of the kernel's loop.
const UNROLL: usize = 4;
/// Cache blocks: KC×NR floats of B (16 KiB) stay in L1, MC×KC of A (96 KiB) in L2, and the
/// KC×NC block of B (2 MiB) in the last-level cache.
const KC: usize = 256;
const MC: usize = 96;
const NC: usize = 2048;

/// True when this core has what the kernel needs and no AVX-512 (where `gemm` is as fast).
pub fn preferred() -> bool {
    available() && !is_x86_feature_detected!("avx512f")
}

/// True when the kernel can run on this core at all.
pub fn available() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
}

/// A matrix as a pointer and (row, column) strides in elements.
#[derive(Clone, Copy)]
struct Mat<T> {
    ptr: T,
    rs: isize,
    cs: isize,
}

impl<T> Mat<T> {
    /// A matrix from its pointer and its (row, column) strides, as ndarray reports them.
    fn new(ptr: T, strides: &[isize]) -> Mat<T> {
        Mat {
            ptr,
            rs: strides[0],
            cs: strides[1],
        }
    }

    /// The offset of element (i, j) from `ptr`, in elements.
    fn off(&self, i: usize, j: usize) -> isize {
        i as isize * self.rs + j as isize * self.cs
    }
}

/// One product, `c = a · b` with `a` m×k and `b` k×n.
#[derive(Clone, Copy)]
struct Product {
    m: usize,
    n: usize,
    k: usize,
    a: Mat<*const f32>,
    b: Mat<*const f32>,
    c: Mat<*mut f32>,
}

// SAFETY: a product is handed to the pool's threads as disjoint bands of C, each written by
// one thread; A and B are only read.
unsafe impl Send for Product {}
// SAFETY: as above.
unsafe impl Sync for Product {}

/// The product `c = a · b`, overwriting `c` (a pointer and its (row, column) strides) without
/// reading it, on the current rayon pool's threads.
///
/// # Safety
/// [`available`] holds; `a.ncols() == b.nrows()`; `c` addresses a writable
/// `a.nrows()`×`b.ncols()` matrix with strides `sc` that aliases neither input.
pub unsafe fn sgemm(
    a: ArrayView2<'_, f32>,
    b: ArrayView2<'_, f32>,
    c: *mut f32,
    sc: (isize, isize),
) {
    let (m, n) = (a.nrows(), b.ncols());
    let p = Product {
        m,
        n,
        k: a.ncols(),
        a: Mat::new(a.as_ptr(), a.strides()),
        b: Mat::new(b.as_ptr(), b.strides()),
        c: Mat::new(c, &[sc.0, sc.1]),
    };
    let threads = rayon::current_num_threads();
    // Bands of at least one block: a thread with less than that waits more than it computes.
    let parts = if m >= n {
        threads.min(m.div_ceil(MC)).max(1)
    } else {
        threads.min(n.div_ceil(NR * 4)).max(1)
    };
    if parts == 1 {
        // SAFETY: the caller's.
        unsafe { sgemm_band(p) };
        return;
    }
    rayon::scope(|s| {
        for part in 0..parts {
            // SAFETY: the bands are disjoint blocks of C, each inside the caller's matrices.
            s.spawn(move |_| unsafe { sgemm_band(p.band(parts, part)) });
        }
    });
}

impl Product {
    /// The `part`-th of `parts` bands of C: of rows when C is at least as tall as wide (each
    /// with its rows of A), else of columns (each with its columns of B).
    fn band(self, parts: usize, part: usize) -> Product {
        let mut p = self;
        if self.m >= self.n {
            let (lo, hi) = span(self.m, parts, part, MR);
            p.m = hi - lo;
            p.a.ptr = self.a.ptr.wrapping_offset(lo as isize * self.a.rs);
            p.c.ptr = self.c.ptr.wrapping_offset(lo as isize * self.c.rs);
        } else {
            let (lo, hi) = span(self.n, parts, part, NR);
            p.n = hi - lo;
            p.b.ptr = self.b.ptr.wrapping_offset(lo as isize * self.b.cs);
            p.c.ptr = self.c.ptr.wrapping_offset(lo as isize * self.c.cs);
        }
        p
    }
}

/// The `part`-th of `parts` spans of `len`, in whole multiples of `unit` but the last.
fn span(len: usize, parts: usize, part: usize, unit: usize) -> (usize, usize) {
    let step = len.div_ceil(parts).div_ceil(unit) * unit;
    ((part * step).min(len), ((part + 1) * step).min(len))
}

/// One thread's product, block by block (BLIS's five loops around the tile).
unsafe fn sgemm_band(p: Product) {
    let Product { m, n, k, c, .. } = p;
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        for i in 0..m {
            for j in 0..n {
                // SAFETY: inside C, by the caller's contract.
                unsafe { *c.ptr.offset(c.off(i, j)) = 0.0 };
            }
        }
        return;
    }
    let a_len = MC.min(m.next_multiple_of(MR)) * KC.min(k) + 16;
    let b_len = NC.min(n.next_multiple_of(NR)) * KC.min(k) + 16;
    PACKS.with(|packs| {
        // A thread runs one band at a time (nothing in a band yields to the pool), so the
        // buffers are free; if not, a band gets buffers of its own.
        let mut own = Packs::default();
        let mut shared = packs.try_borrow_mut();
        let packs = shared.as_deref_mut().unwrap_or(&mut own);
        for (buf, len) in [(&mut packs.a, a_len), (&mut packs.b, b_len)] {
            if buf.len() < len {
                buf.resize(len, 0.0);
            }
        }
        let (a_pack, b_pack) = (aligned(&mut packs.a), aligned(&mut packs.b));
        // SAFETY: the caller's.
        unsafe { blocks(p, a_pack, b_pack) };
    });
}

/// Packing buffers, one pair per thread, kept between products (up to 2 MiB of B's and
/// 96 KiB of A's a thread): allocated and zeroed for every product, they made a 100² product
/// about 10% slower than on `gemm` (15.1 against 16.9 GFLOP/s), and even with it without.
#[derive(Default)]
struct Packs {
    a: Vec<f32>,
    b: Vec<f32>,
}

thread_local! {
    static PACKS: std::cell::RefCell<Packs> = std::cell::RefCell::new(Packs::default());
}

/// The blocked loops of [`sgemm_band`], with its packing buffers (each long enough for a
/// whole block, padded to whole tiles).
unsafe fn blocks(p: Product, a_pack: &mut [f32], b_pack: &mut [f32]) {
    let Product { m, n, k, a, b, c } = p;
    for jc in (0..n).step_by(NC) {
        let nc = NC.min(n - jc);
        for pc in (0..k).step_by(KC) {
            let kc = KC.min(k - pc);
            // SAFETY: the block (nc columns of kc from (pc, jc)) is inside B.
            unsafe { pack::<NR>(nc, kc, b.ptr.offset(b.off(pc, jc)), (b.cs, b.rs), b_pack) };
            for ic in (0..m).step_by(MC) {
                let mc = MC.min(m - ic);
                // SAFETY: the block (mc rows of kc from (ic, pc)) is inside A.
                unsafe { pack::<MR>(mc, kc, a.ptr.offset(a.off(ic, pc)), (a.rs, a.cs), a_pack) };
                for jr in (0..nc).step_by(NR) {
                    let nr = NR.min(nc - jr);
                    for ir in (0..mc).step_by(MR) {
                        let mr = MR.min(mc - ir);
                        // SAFETY: the slivers are inside the packed buffers (padded to whole
                        // tiles), the tile inside C.
                        unsafe {
                            let tile = c.ptr.offset(c.off(ic + ir, jc + jr));
                            tile_update(
                                kc,
                                a_pack.as_ptr().add(ir * kc),
                                b_pack.as_ptr().add(jr * kc),
                                Mat { ptr: tile, ..c },
                                mr,
                                nr,
                                pc > 0,
                            )
                        };
                    }
                }
            }
        }
    }
}

/// The part of `buf` from its first 64-byte boundary (callers allocate 16 floats more): a
/// packed B row is one cache line, and a load that straddles two costs twice as much.
fn aligned(buf: &mut [f32]) -> &mut [f32] {
    let skip = buf.as_ptr().align_offset(64).min(buf.len());
    &mut buf[skip..]
}

/// Pack a block of `len` lines of `kc` into slivers of `U` lines, k-major, zero-padded: element
/// `p` of line `i` is at `at + i·si + p·sk`. A's mc×kc block goes in slivers of MR rows, B's
/// kc×nc block in slivers of NR columns.
unsafe fn pack<const U: usize>(
    len: usize,
    kc: usize,
    at: *const f32,
    (si, sk): (isize, isize),
    out: &mut [f32],
) {
    for (s, i0) in (0..len).step_by(U).enumerate() {
        let lines = U.min(len - i0);
        let sliver = &mut out[s * U * kc..(s + 1) * U * kc];
        for p in 0..kc {
            // SAFETY: inside the block.
            let first = unsafe { at.offset(i0 as isize * si + p as isize * sk) };
            let dst = &mut sliver[p * U..(p + 1) * U];
            if si == 1 && lines == U {
                // SAFETY: U contiguous elements of the block.
                dst.copy_from_slice(unsafe { std::slice::from_raw_parts(first, U) });
            } else {
                for (i, d) in dst.iter_mut().enumerate() {
                    // SAFETY: inside the block.
                    *d = if i < lines {
                        unsafe { *first.offset(i as isize * si) }
                    } else {
                        0.0
                    };
                }
            }
        }
    }
}

/// C's mr×nr tile = (C +) the product of one A sliver and one B sliver. Full tiles of a
/// row-contiguous C are written in place; the rest go through a scratch tile.
unsafe fn tile_update(
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: Mat<*mut f32>,
    mr: usize,
    nr: usize,
    accumulate: bool,
) {
    if mr == MR && nr == NR && c.cs == 1 {
        // SAFETY: the caller's; the tile is MR full rows of NR contiguous elements.
        unsafe { kernel(kc, a, b, c.ptr, c.rs, accumulate) };
        return;
    }
    let mut scratch = [0.0f32; MR * NR];
    // SAFETY: the scratch tile is MR rows of NR.
    unsafe { kernel(kc, a, b, scratch.as_mut_ptr(), NR as isize, false) };
    for i in 0..mr {
        for j in 0..nr {
            // SAFETY: (i, j) is inside the tile, inside C.
            let dst = unsafe { c.ptr.offset(c.off(i, j)) };
            let v = scratch[i * NR + j];
            // SAFETY: as above.
            unsafe { *dst = if accumulate { *dst + v } else { v } };
        }
    }
}

/// The 6×16 register tile: `kc` rank-one updates from packed slivers, then C (+)= the tile.
#[target_feature(enable = "avx2,fma")]
unsafe fn kernel(
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: *mut f32,
    rs_c: isize,
    accumulate: bool,
) {
    // SAFETY (whole body): the slivers hold kc×MR and kc×NR floats, C has MR rows of NR
    // floats at `rs_c` apart.
    unsafe {
        // C's rows are far apart (a row of a large C each), usually out of cache: fetch them
        // now, so the loads at the end do not stall the tile.
        for r in 0..MR {
            let row = c.offset(r as isize * rs_c);
            _mm_prefetch::<_MM_HINT_T0>(row.cast());
            _mm_prefetch::<_MM_HINT_T0>(row.add(NR - 1).cast());
        }
        let mut acc = [[_mm256_setzero_ps(); NV]; MR];
        let step = |p: usize, acc: &mut [[__m256; NV]; MR]| {
            let bp = b.add(p * NR);
            let mut bv = [_mm256_setzero_ps(); NV];
            for (v, x) in bv.iter_mut().enumerate() {
                *x = _mm256_loadu_ps(bp.add(8 * v));
            }
            let ap = a.add(p * MR);
            for (r, row) in acc.iter_mut().enumerate() {
                let ar = _mm256_broadcast_ss(&*ap.add(r));
                for (x, y) in row.iter_mut().zip(&bv) {
                    *x = _mm256_fmadd_ps(ar, *y, *x);
                }
            }
        };
        let mut p = 0;
        while p + UNROLL <= kc {
            _mm_prefetch::<_MM_HINT_T0>(b.add((p + 8) * NR).cast());
            for u in 0..UNROLL {
                step(p + u, &mut acc);
            }
            p += UNROLL;
        }
        while p < kc {
            step(p, &mut acc);
            p += 1;
        }
        for (r, row) in acc.iter().enumerate() {
            let dst = c.offset(r as isize * rs_c);
            for (v, x) in row.iter().enumerate() {
                let mut x = *x;
                if accumulate {
                    x = _mm256_add_ps(x, _mm256_loadu_ps(dst.add(8 * v)));
                }
                _mm256_storeu_ps(dst.add(8 * v), x);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::cpu::tests::{assert_close, naive, pool, random};
    use ndarray::{Array2, ArrayViewMut2, ShapeBuilder};

    /// `c = a · b` through the kernel, into any view.
    fn product(a: ArrayView2<f32>, b: ArrayView2<f32>, mut c: ArrayViewMut2<f32>) {
        let sc = (c.strides()[0], c.strides()[1]);
        // SAFETY: checked available by the callers; the views are m×k, k×n and m×n.
        unsafe { sgemm(a, b, c.as_mut_ptr(), sc) };
    }

    /// The kernel's product written over `c`, a NaN-filled m×n array of any layout (the product
    /// must overwrite, never read, what was there), within 1e-4 of the naive one.
    fn assert_product(a: ArrayView2<f32>, b: ArrayView2<f32>, mut c: Array2<f32>) {
        product(a, b, c.view_mut());
        assert_close(c, &naive(a, b), 1e-4);
    }

    /// Sizes that end mid-tile, mid-block and past one block of each loop (KC, MC, NC).
    const SIZES: &[(usize, usize, usize)] = &[
        (1, 1, 1),
        (5, 3, 7),
        (6, 256, 16),
        (7, 257, 17),
        (97, 300, 33),
        (130, 513, 40),
        (7, 20, 2049),
    ];

    /// These tests exercise the AVX2 kernel itself: on a core without AVX2 and FMA they fail
    /// and say so, rather than pass without running (every x86-64 host CI runs on has both).
    fn needs_avx2_and_fma() {
        assert!(
            available(),
            "this test needs a core with AVX2 and FMA, and this one has not both"
        );
    }

    #[test]
    fn products_match_the_reference_on_awkward_sizes() {
        needs_avx2_and_fma();
        for &(m, k, n) in SIZES {
            let (a, b) = (random(m, k, 1), random(k, n, 2));
            assert_product(a.view(), b.view(), Array2::from_elem((m, n), f32::NAN));
        }
    }

    #[test]
    fn strided_and_transposed_operands_and_outputs() {
        needs_avx2_and_fma();
        let (m, k, n) = (13, 40, 21);
        // Aᵀ and Bᵀ stored transposed, C column-major (every tile through the scratch path).
        let at = random(k, m, 3);
        let bt = random(n, k, 4);
        assert_product(at.t(), bt.t(), Array2::from_elem((m, n).f(), f32::NAN));
        // Every other row and column of larger matrices, reversed rows of B.
        let big_a = random(2 * m, 2 * k, 5);
        let big_b = random(k, 3 * n, 6);
        let a = big_a.slice(ndarray::s![..;2, ..;2]);
        let b = big_b.slice(ndarray::s![..;-1, ..;3]);
        assert_product(a, b, Array2::from_elem((m, n), f32::NAN));
    }

    #[test]
    fn an_empty_inner_dimension_gives_zeros() {
        needs_avx2_and_fma();
        let (a, b) = (Array2::<f32>::zeros((4, 0)), Array2::<f32>::zeros((0, 5)));
        let mut c = Array2::from_elem((4, 5), f32::NAN);
        product(a.view(), b.view(), c.view_mut());
        assert!(c.iter().all(|&x| x == 0.0));
    }

    #[test]
    fn threads_split_rows_or_columns_and_agree() {
        needs_avx2_and_fma();
        let pool = pool(3);
        // Tall (split by rows) and wide (split by columns), neither a whole number of bands.
        for &(m, k, n) in &[(301, 70, 50), (20, 70, 401)] {
            let (a, b) = (random(m, k, 7), random(k, n, 8));
            let c = Array2::from_elem((m, n), f32::NAN);
            pool.install(|| assert_product(a.view(), b.view(), c));
        }
    }

    #[test]
    fn spans_cover_the_range_once_in_whole_units() {
        for &(len, parts, unit) in &[(7, 2, 6), (100, 3, 16), (5, 4, 6), (96, 2, 6)] {
            let bands: Vec<_> = (0..parts).map(|p| span(len, parts, p, unit)).collect();
            assert_eq!(bands[0].0, 0);
            assert_eq!(bands[parts - 1].1, len);
            for w in bands.windows(2) {
                assert_eq!(w[0].1, w[1].0, "{bands:?}");
            }
            // Only the band that reaches the end may stop mid-unit.
            for &(lo, hi) in &bands {
                assert!(hi == len || (hi - lo) % unit == 0, "{bands:?}");
            }
        }
    }
}
