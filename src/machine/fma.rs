//! The f32 multiply-add peak: independent chains of fused multiply-adds on the widest vector
//! unit the core has, one thread and then one thread per CPU at once.
//!
//! Enough chains cover the FMA latency times the FMA ports (4 cycles × 2 ports needs 8 in
//! flight on recent Intel and AMD cores), so the loop is bound by throughput alone: 16 chains
//! where 32 vector registers leave room (AVX-512, NEON), 12 with 16 registers (AVX2, which also
//! needs two for the operands). The widest unit matters: Intel cores with two 512-bit FMA
//! units run twice the FLOPs of their AVX2 path; AMD Zen 4 runs 512-bit FMAs as two halves,
//! so there AVX-512 and AVX2 read the same.

use std::hint::black_box;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::probe::Probe;
use super::team::run_team;
use super::timed::{best_rate, calibrate};

/// The vector unit a probe (and a kernel) ran on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VectorUnit {
    /// x86-64 AVX-512F: 16 f32 lanes (`_mm512_fmadd_ps`).
    Avx512,
    /// x86-64 AVX2 with FMA3: 8 f32 lanes (`_mm256_fmadd_ps`).
    Avx2Fma,
    /// aarch64 Advanced SIMD: 4 f32 lanes (`vfmaq_f32`).
    Neon,
    /// One f32 at a time (`f32::mul_add`).
    Scalar,
}

/// The multiplier and addend of every chain: the chains converge to 1.0 (ADD / (1 − MUL)),
/// so no value overflows or turns subnormal, however long the loop.
const MUL: f32 = 0.999_999;
const ADD: f32 = 1e-6;

impl VectorUnit {
    /// The widest unit this core runs FMAs on.
    pub fn detect() -> VectorUnit {
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx512f") {
                return VectorUnit::Avx512;
            }
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                return VectorUnit::Avx2Fma;
            }
        }
        #[cfg(target_arch = "aarch64")]
        {
            return VectorUnit::Neon;
        }
        #[allow(unreachable_code)]
        VectorUnit::Scalar
    }

    /// As a reader knows it, the f32 lanes of one register, the instruction (the intrinsic) the
    /// probe chains, and the independent chains of the probe's loop.
    fn facts(self) -> (&'static str, u64, &'static str, u64) {
        match self {
            VectorUnit::Avx512 => ("AVX-512", 16, "_mm512_fmadd_ps", 16),
            VectorUnit::Avx2Fma => ("AVX2+FMA", 8, "_mm256_fmadd_ps", 12),
            VectorUnit::Neon => ("NEON", 4, "vfmaq_f32", 16),
            VectorUnit::Scalar => ("scalar", 1, "f32::mul_add", 8),
        }
    }

    /// As a reader knows it: "AVX-512", "AVX2+FMA", "NEON", "scalar".
    pub fn as_str(self) -> &'static str {
        self.facts().0
    }

    /// FLOPs of one trip of the probe's loop: one FMA (2 FLOPs) per f32 lane per chain.
    fn flops_per_iteration(self) -> u64 {
        2 * self.facts().1 * self.facts().3
    }

    /// Runs `iterations` trips of the chains on this unit; returns seconds. A unit this core
    /// lacks runs the scalar chains instead (only [`VectorUnit::detect`]'s answer is asked for).
    fn run(self, iterations: u64) -> f64 {
        let t = Instant::now();
        let out = match self {
            #[cfg(target_arch = "x86_64")]
            VectorUnit::Avx512 if is_x86_feature_detected!("avx512f") => {
                // SAFETY: the core has AVX-512F, checked on this line.
                unsafe { x86::chains_avx512(iterations) }
            }
            #[cfg(target_arch = "x86_64")]
            VectorUnit::Avx2Fma
                if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") =>
            {
                // SAFETY: the core has AVX2 and FMA, checked on this line.
                unsafe { x86::chains_avx2(iterations) }
            }
            #[cfg(target_arch = "aarch64")]
            VectorUnit::Neon => arm::chains_neon(iterations),
            _ => chains_scalar(iterations),
        };
        black_box(out);
        t.elapsed().as_secs_f64()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FmaPeak {
    /// The vector unit the chains ran on (the widest the core has).
    pub unit: VectorUnit,
    /// GFLOP/s (10^9 f32 operations per second, an FMA being two) of one thread.
    pub per_core_gflops: f64,
    /// GFLOP/s of `cores` threads at once, one per CPU.
    pub all_cores_gflops: f64,
    /// Threads of the all-core figure: the CPUs this process may use.
    pub cores: usize,
    /// True when each of the all-core threads ran pinned to a CPU of its own.
    pub pinned: bool,
    pub method: String,
}

impl FmaPeak {
    /// The peak for `threads` threads: the one-thread figure times `threads` up to the CPUs
    /// this process has, the all-core figure from there (more threads than CPUs add no FMA
    /// units). Below all cores the one-thread figure scales: one core busy runs at the clock
    /// one busy core gets.
    pub fn for_threads(&self, threads: usize) -> f64 {
        if threads >= self.cores {
            self.all_cores_gflops
        } else {
            self.per_core_gflops * threads.max(1) as f64
        }
    }
}

#[cfg(test)]
impl FmaPeak {
    /// The tests' peak: two cores, pinned, on AVX-512, at these GFLOP/s.
    pub(crate) fn of_two_cores(per_core_gflops: f64, all_cores_gflops: f64) -> FmaPeak {
        FmaPeak {
            unit: VectorUnit::Avx512,
            per_core_gflops,
            all_cores_gflops,
            cores: 2,
            pinned: true,
            method: String::new(),
        }
    }
}

/// The peak from loops of about `target_s` seconds, best of `repeats`, on `cores` threads
/// for the all-core figure. Fails only if the OS refuses a thread.
pub fn measure(target_s: f64, repeats: usize, cores: usize) -> Probe<FmaPeak> {
    Probe::from_result(
        "the FMA probe",
        measure_on(VectorUnit::detect(), target_s, repeats, cores),
    )
}

/// One thread's GFLOP/s on the widest vector unit, from loops of about `target_s` seconds,
/// best of `repeats`: the short probe repeated before and after each run, whose fall says a
/// core was shared or its clock dropped. `None` in a debug build, whose unoptimized loops
/// would read far below the hardware (see [`super::limits::DEBUG_BUILD`]).
pub fn one_core_gflops(target_s: f64, repeats: usize) -> Option<f64> {
    if cfg!(debug_assertions) {
        return None;
    }
    Some(one_thread(VectorUnit::detect(), target_s, repeats).1)
}

/// The loop's size for about `target_s` seconds on `unit`, and one thread's GFLOP/s at it, best
/// of `repeats`.
fn one_thread(unit: VectorUnit, target_s: f64, repeats: usize) -> (u64, f64) {
    let n = calibrate(target_s, |n| unit.run(n));
    let flops = unit.flops_per_iteration() as f64;
    (n, best_rate(n, repeats, |n| unit.run(n)) * flops / 1e9)
}

fn measure_on(
    unit: VectorUnit,
    target_s: f64,
    repeats: usize,
    cores: usize,
) -> std::io::Result<FmaPeak> {
    let cores = cores.max(1);
    let (_, lanes, instruction, chains) = unit.facts();
    let flops = unit.flops_per_iteration() as f64;
    // One thread: the calling one, unpinned, so the scheduler gives it an idle CPU (a pin
    // cannot know which one another process leaves free).
    let (n, per_core) = one_thread(unit, target_s, repeats);
    let (all_cores, pinned) = if cores == 1 {
        (per_core, false)
    } else {
        let mut best = 0.0f64;
        let mut pinned = true;
        for _ in 0..repeats.max(1) {
            let team = run_team(cores, |_| {
                unit.run(n);
            })?;
            pinned &= team.pinned;
            best = best.max((n * cores as u64) as f64 / team.wall_s.max(1e-12));
        }
        (best * flops / 1e9, pinned)
    };
    Ok(FmaPeak {
        unit,
        per_core_gflops: per_core,
        all_cores_gflops: all_cores,
        cores,
        pinned,
        method: format!(
            "{chains} independent chains of {instruction} ({lanes} f32 lanes, {} FLOPs a trip), \
             best of {repeats} loops of about {:.0} ms; all cores: one thread per CPU{}, started \
             together",
            unit.flops_per_iteration(),
            target_s * 1e3,
            if pinned { ", each pinned" } else { "" },
        ),
    })
}

/// The chains one f32 at a time, on any core.
fn chains_scalar(iterations: u64) -> f32 {
    let mut acc: [f32; 8] = std::array::from_fn(|i| i as f32 * 0.01);
    let (x, y) = (black_box(MUL), black_box(ADD));
    for _ in 0..iterations {
        for a in &mut acc {
            *a = a.mul_add(x, y);
        }
    }
    acc.iter().sum()
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;
    use std::hint::black_box;

    use super::{ADD, MUL};

    /// 16 chains of 16-lane FMAs. Each chain starts from its own value, so the compiler cannot
    /// merge chains that would otherwise be equal.
    #[target_feature(enable = "avx512f")]
    pub(super) fn chains_avx512(iterations: u64) -> f32 {
        let (x, y) = (
            _mm512_set1_ps(black_box(MUL)),
            _mm512_set1_ps(black_box(ADD)),
        );
        let mut acc: [__m512; 16] = std::array::from_fn(|i| _mm512_set1_ps(i as f32 * 0.01));
        for _ in 0..iterations {
            for a in &mut acc {
                *a = _mm512_fmadd_ps(*a, x, y);
            }
        }
        let sum = acc
            .iter()
            .fold(_mm512_setzero_ps(), |s, &a| _mm512_add_ps(s, a));
        _mm512_reduce_add_ps(sum)
    }

    /// 12 chains of 8-lane FMAs: with the two operands, 14 of the 16 registers.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn chains_avx2(iterations: u64) -> f32 {
        let (x, y) = (
            _mm256_set1_ps(black_box(MUL)),
            _mm256_set1_ps(black_box(ADD)),
        );
        let mut acc: [__m256; 12] = std::array::from_fn(|i| _mm256_set1_ps(i as f32 * 0.01));
        for _ in 0..iterations {
            for a in &mut acc {
                *a = _mm256_fmadd_ps(*a, x, y);
            }
        }
        let sum = acc
            .iter()
            .fold(_mm256_setzero_ps(), |s, &a| _mm256_add_ps(s, a));
        let mut lanes = [0f32; 8];
        // SAFETY: `lanes` holds 8 f32, the 32 bytes the unaligned store writes.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), sum) };
        lanes.iter().sum()
    }
}

#[cfg(target_arch = "aarch64")]
mod arm {
    use std::arch::aarch64::*;
    use std::hint::black_box;

    use super::{ADD, MUL};

    /// 16 chains of 4-lane FMAs (aarch64 has 32 vector registers; NEON is part of the base
    /// architecture, so no detection).
    // Some toolchains declare these intrinsics `unsafe fn`, newer ones safe under the
    // enabled `neon` feature: the blocks below suit both.
    #[allow(unused_unsafe)]
    pub(super) fn chains_neon(iterations: u64) -> f32 {
        // SAFETY: NEON is part of every aarch64 core; the intrinsics touch only registers.
        unsafe {
            let (x, y) = (vdupq_n_f32(black_box(MUL)), vdupq_n_f32(black_box(ADD)));
            let mut acc: [float32x4_t; 16] = std::array::from_fn(|i| vdupq_n_f32(i as f32 * 0.01));
            for _ in 0..iterations {
                for a in &mut acc {
                    *a = vfmaq_f32(y, *a, x);
                }
            }
            let sum = acc.iter().fold(vdupq_n_f32(0.0), |s, &a| vaddq_f32(s, a));
            vaddvq_f32(sum)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peak_is_a_positive_finite_figure_on_the_detected_unit() {
        let cores = crate::machine::affinity::available_cores();
        let peak = measure_on(VectorUnit::detect(), 1e-3, 2, cores).unwrap();
        assert_eq!(peak.unit, VectorUnit::detect());
        for v in [peak.per_core_gflops, peak.all_cores_gflops] {
            assert!(v.is_finite() && v > 0.0, "{peak:?}");
        }
        assert_eq!(peak.cores, cores);
        assert!(peak.method.contains(peak.unit.facts().2), "{}", peak.method);
        // The scalar chains run everywhere.
        let scalar = measure_on(VectorUnit::Scalar, 1e-3, 1, 1).unwrap();
        assert!(scalar.per_core_gflops > 0.0 && scalar.all_cores_gflops == scalar.per_core_gflops);
    }

    #[test]
    fn the_peak_for_some_threads_scales_to_the_cores_then_stops() {
        let peak = FmaPeak::of_two_cores(100.0, 190.0);
        assert_eq!(peak.for_threads(0), 100.0);
        assert_eq!(peak.for_threads(1), 100.0);
        assert_eq!(peak.for_threads(2), 190.0);
        assert_eq!(peak.for_threads(8), 190.0);
        assert_eq!(
            serde_json::to_value(VectorUnit::Avx2Fma).unwrap(),
            serde_json::json!("avx2_fma")
        );
    }
}
