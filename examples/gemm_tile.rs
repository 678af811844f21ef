//! How close the inner loop of a matrix product can come to the FMA peak on this core: a
//! register tile of C, updated from packed slivers of A and B that stay in L1 (or L2), against
//! the FMA probe that `parbench devices --probe` reports, in interleaved rounds.
//!
//! The FMA probe does nothing but multiply-adds; a product's tile also loads a column of A and
//! broadcasts a row of B for every step of k. What the tile reaches here bounds what any whole
//! product can reach, before packing, the C tile's loads and stores, and cache misses.
//!
//! ```sh
//! cargo run --release --example gemm_tile            # 5 rounds
//! cargo run --release --example gemm_tile -- 9       # 9 rounds
//! ```
//!
//! Tiles: 32×12 with AVX-512 (24 accumulators of the 32 registers, the shape of BLIS's
//! Skylake-X kernel), 16×6 with AVX2+FMA (12 of 16, as `src/device/sgemm.rs`'s 6×16 tile).

// Off x86-64 the example only says it has no tile for the core.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

use std::time::Instant;

use parbench::harness::stats::median;
use parbench::machine::fma::{one_core_gflops, VectorUnit};
use parbench::machine::timed::{best_rate, calibrate};

/// A tile's update from packed slivers: `a` holds `kc` columns of `MR` rows, `b` holds `kc`
/// rows of `NR` columns, each step of k a multiply-add of every pair into `MR × NR` sums.
trait Tile {
    const MR: usize;
    const NR: usize;
    /// Run `passes` passes over the slivers; the accumulators' sum keeps them live.
    fn run(a: &[f32], b: &[f32], kc: usize, passes: usize) -> f32;
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::asm;
    use std::arch::x86_64::*;

    pub struct Avx512;
    pub struct Avx2;

    impl super::Tile for Avx512 {
        const MR: usize = 32;
        const NR: usize = 12;
        fn run(a: &[f32], b: &[f32], kc: usize, passes: usize) -> f32 {
            assert!(kc > 0 && a.len() >= 32 * kc && b.len() >= 12 * kc);
            assert!(is_x86_feature_detected!("avx512f"));
            // SAFETY: AVX-512F is present (checked above) and every load is within `a` and `b`.
            unsafe { avx512(a, b, kc, passes) }
        }
    }

    #[target_feature(enable = "avx512f")]
    unsafe fn avx512(a: &[f32], b: &[f32], kc: usize, passes: usize) -> f32 {
        let mut c = [_mm512_setzero_ps(); 24];
        for _ in 0..passes {
            // SAFETY: the loop reads `kc` columns of 32 floats from `a` and `kc` rows of 12
            // from `b`, both checked long enough by the caller; it writes only the named
            // registers. Written in assembly so that the 24 accumulators stay in registers
            // (the compiler spills some of them when the same loop is written with intrinsics).
            unsafe {
                asm!(
                    "2:",
                    "vmovups zmm24, [{a}]",
                    "vmovups zmm25, [{a} + 64]",
                    "vbroadcastss zmm26, dword ptr [{b} + 0]",
                    "vfmadd231ps zmm0, zmm24, zmm26",
                    "vfmadd231ps zmm1, zmm25, zmm26",
                    "vbroadcastss zmm26, dword ptr [{b} + 4]",
                    "vfmadd231ps zmm2, zmm24, zmm26",
                    "vfmadd231ps zmm3, zmm25, zmm26",
                    "vbroadcastss zmm26, dword ptr [{b} + 8]",
                    "vfmadd231ps zmm4, zmm24, zmm26",
                    "vfmadd231ps zmm5, zmm25, zmm26",
                    "vbroadcastss zmm26, dword ptr [{b} + 12]",
                    "vfmadd231ps zmm6, zmm24, zmm26",
                    "vfmadd231ps zmm7, zmm25, zmm26",
                    "vbroadcastss zmm26, dword ptr [{b} + 16]",
                    "vfmadd231ps zmm8, zmm24, zmm26",
                    "vfmadd231ps zmm9, zmm25, zmm26",
                    "vbroadcastss zmm26, dword ptr [{b} + 20]",
                    "vfmadd231ps zmm10, zmm24, zmm26",
                    "vfmadd231ps zmm11, zmm25, zmm26",
                    "vbroadcastss zmm26, dword ptr [{b} + 24]",
                    "vfmadd231ps zmm12, zmm24, zmm26",
                    "vfmadd231ps zmm13, zmm25, zmm26",
                    "vbroadcastss zmm26, dword ptr [{b} + 28]",
                    "vfmadd231ps zmm14, zmm24, zmm26",
                    "vfmadd231ps zmm15, zmm25, zmm26",
                    "vbroadcastss zmm26, dword ptr [{b} + 32]",
                    "vfmadd231ps zmm16, zmm24, zmm26",
                    "vfmadd231ps zmm17, zmm25, zmm26",
                    "vbroadcastss zmm26, dword ptr [{b} + 36]",
                    "vfmadd231ps zmm18, zmm24, zmm26",
                    "vfmadd231ps zmm19, zmm25, zmm26",
                    "vbroadcastss zmm26, dword ptr [{b} + 40]",
                    "vfmadd231ps zmm20, zmm24, zmm26",
                    "vfmadd231ps zmm21, zmm25, zmm26",
                    "vbroadcastss zmm26, dword ptr [{b} + 44]",
                    "vfmadd231ps zmm22, zmm24, zmm26",
                    "vfmadd231ps zmm23, zmm25, zmm26",
                    "add {a}, 128",
                    "add {b}, 48",
                    "dec {k}",
                    "jnz 2b",
                a = inout(reg) a.as_ptr() => _,
                b = inout(reg) b.as_ptr() => _,
                k = inout(reg) kc => _,
                inout("zmm0") c[0],
                inout("zmm1") c[1],
                inout("zmm2") c[2],
                inout("zmm3") c[3],
                inout("zmm4") c[4],
                inout("zmm5") c[5],
                inout("zmm6") c[6],
                inout("zmm7") c[7],
                inout("zmm8") c[8],
                inout("zmm9") c[9],
                inout("zmm10") c[10],
                inout("zmm11") c[11],
                inout("zmm12") c[12],
                inout("zmm13") c[13],
                inout("zmm14") c[14],
                inout("zmm15") c[15],
                inout("zmm16") c[16],
                inout("zmm17") c[17],
                inout("zmm18") c[18],
                inout("zmm19") c[19],
                inout("zmm20") c[20],
                inout("zmm21") c[21],
                inout("zmm22") c[22],
                inout("zmm23") c[23],
                out("zmm24") _,
                out("zmm25") _,
                out("zmm26") _,
                options(nostack, readonly),
                );
            }
        }
        c.iter().map(|&v| _mm512_reduce_add_ps(v)).sum()
    }

    impl super::Tile for Avx2 {
        const MR: usize = 16;
        const NR: usize = 6;
        fn run(a: &[f32], b: &[f32], kc: usize, passes: usize) -> f32 {
            assert!(kc > 0 && a.len() >= 16 * kc && b.len() >= 6 * kc);
            assert!(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"));
            // SAFETY: AVX2 and FMA are present (checked above) and every load is within the
            // slices.
            unsafe { avx2(a, b, kc, passes) }
        }
    }

    #[target_feature(enable = "avx2,fma")]
    unsafe fn avx2(a: &[f32], b: &[f32], kc: usize, passes: usize) -> f32 {
        let mut c = [_mm256_setzero_ps(); 12];
        for _ in 0..passes {
            // SAFETY: the loop reads `kc` columns of 16 floats from `a` and `kc` rows of 6
            // from `b`, both checked long enough by the caller; it writes only the named
            // registers. Written in assembly so that the 12 accumulators stay in registers
            // (the compiler spills some of them when the same loop is written with intrinsics).
            unsafe {
                asm!(
                    "2:",
                    "vmovups ymm12, [{a}]",
                    "vmovups ymm13, [{a} + 32]",
                    "vbroadcastss ymm14, dword ptr [{b} + 0]",
                    "vfmadd231ps ymm0, ymm12, ymm14",
                    "vfmadd231ps ymm1, ymm13, ymm14",
                    "vbroadcastss ymm14, dword ptr [{b} + 4]",
                    "vfmadd231ps ymm2, ymm12, ymm14",
                    "vfmadd231ps ymm3, ymm13, ymm14",
                    "vbroadcastss ymm14, dword ptr [{b} + 8]",
                    "vfmadd231ps ymm4, ymm12, ymm14",
                    "vfmadd231ps ymm5, ymm13, ymm14",
                    "vbroadcastss ymm14, dword ptr [{b} + 12]",
                    "vfmadd231ps ymm6, ymm12, ymm14",
                    "vfmadd231ps ymm7, ymm13, ymm14",
                    "vbroadcastss ymm14, dword ptr [{b} + 16]",
                    "vfmadd231ps ymm8, ymm12, ymm14",
                    "vfmadd231ps ymm9, ymm13, ymm14",
                    "vbroadcastss ymm14, dword ptr [{b} + 20]",
                    "vfmadd231ps ymm10, ymm12, ymm14",
                    "vfmadd231ps ymm11, ymm13, ymm14",
                    "add {a}, 64",
                    "add {b}, 24",
                    "dec {k}",
                    "jnz 2b",
                a = inout(reg) a.as_ptr() => _,
                b = inout(reg) b.as_ptr() => _,
                k = inout(reg) kc => _,
                inout("ymm0") c[0],
                inout("ymm1") c[1],
                inout("ymm2") c[2],
                inout("ymm3") c[3],
                inout("ymm4") c[4],
                inout("ymm5") c[5],
                inout("ymm6") c[6],
                inout("ymm7") c[7],
                inout("ymm8") c[8],
                inout("ymm9") c[9],
                inout("ymm10") c[10],
                inout("ymm11") c[11],
                out("ymm12") _,
                out("ymm13") _,
                out("ymm14") _,
                options(nostack, readonly),
                );
            }
        }
        let mut out = [0f32; 8];
        let mut sum = 0.0;
        for v in c {
            _mm256_storeu_ps(out.as_mut_ptr(), v);
            sum += out.iter().sum::<f32>();
        }
        sum
    }
}

/// GFLOP/s of the tile over slivers `kc` deep, timed as the FMA probe is (the same
/// calibration to about 50 ms, then the best of 3 repeats).
fn tile_gflops<T: Tile>(kc: usize) -> f64 {
    // Small values, so the accumulators stay finite however many passes run; both slivers
    // start on a cache line, as a product's packed buffers do, so no vector load is split
    // across two lines.
    let (a_buf, b_buf) = (
        vec![1e-4f32; T::MR * kc + 16],
        vec![1e-4f32; T::NR * kc + 16],
    );
    let (a, b) = (on_a_line(&a_buf, T::MR * kc), on_a_line(&b_buf, T::NR * kc));
    let run = |passes: u64| {
        let t = Instant::now();
        std::hint::black_box(T::run(a, b, kc, passes as usize));
        t.elapsed().as_secs_f64()
    };
    let passes = calibrate(0.05, run);
    best_rate(passes, 3, run) * (2 * T::MR * T::NR * kc) as f64 / 1e9
}

/// The first `len` floats of `buf` that start on a 64-byte cache line (`buf` has 16 to spare).
fn on_a_line(buf: &[f32], len: usize) -> &[f32] {
    let offset = buf.as_ptr().align_offset(64);
    &buf[offset..offset + len]
}

fn rounds<T: Tile>(unit: &str, rounds: usize) {
    // L1: both slivers in 48 KiB at kc = 256 (AVX-512: 32 + 12 KiB); L2: at kc = 1024, 176 KiB.
    let depths = [256, 1024];
    println!("{unit} tile {}×{}, one thread", T::MR, T::NR);
    println!(
        "{:<6} {:>12} {:>14} {:>14} {:>9} {:>9}",
        "round", "FMA probe", "tile, kc=256", "tile, kc=1024", "of probe", "of probe"
    );
    let (mut probes, mut l1, mut l2) = (Vec::new(), Vec::new(), Vec::new());
    for r in 1..=rounds {
        let Some(probe) = one_core_gflops(0.05, 3) else {
            eprintln!("error: a debug build does not probe; run with --release");
            std::process::exit(2);
        };
        let tiles = depths.map(tile_gflops::<T>);
        println!(
            "{r:<6} {probe:>12.1} {:>14.1} {:>14.1} {:>9.2} {:>9.2}",
            tiles[0],
            tiles[1],
            tiles[0] / probe,
            tiles[1] / probe
        );
        probes.push(probe);
        l1.push(tiles[0] / probe);
        l2.push(tiles[1] / probe);
    }
    println!(
        "median of the rounds: FMA probe {:.1} GFLOP/s; the tile reaches {:.2} of it from L1, {:.2} from L2",
        median(&probes).unwrap_or(f64::NAN),
        median(&l1).unwrap_or(f64::NAN),
        median(&l2).unwrap_or(f64::NAN)
    );
}

fn main() {
    let n: usize = match std::env::args().nth(1).map(|s| s.parse()) {
        None => 5,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("error: usage: gemm_tile [ROUNDS] (a positive whole number)");
            std::process::exit(2);
        }
    };
    match VectorUnit::detect() {
        #[cfg(target_arch = "x86_64")]
        VectorUnit::Avx512 => rounds::<x86::Avx512>("AVX-512", n),
        #[cfg(target_arch = "x86_64")]
        VectorUnit::Avx2Fma => rounds::<x86::Avx2>("AVX2+FMA", n),
        other => {
            eprintln!(
                "error: no tile for {} here: the example covers AVX-512 and AVX2+FMA",
                other.as_str()
            );
            std::process::exit(2);
        }
    }
}
