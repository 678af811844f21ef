//! What `allreduce` computes besides its times, whichever backend measured them: the inputs,
//! nccl-tests' bandwidths, the check of every device's result against a float64 sum, and what
//! a run records per size and at its end (the busbw curves, the crossover, the explanation).

use super::explain::{conclude, explain, ring_faster_from, SizeTimes};
use super::{size_label, Algorithm};
use crate::harness::Summary;
use crate::report::evidence::Estimate;
use crate::report::{Better, Figure, RunRecord, Unit};
use crate::scenario::backend::Backend;

/// nccl-tests' algorithm bandwidth: the message's `bytes` over the time, in GB/s (10⁹ B/s).
pub(super) fn algbw_gbytes_per_s(bytes: u64, seconds: f64) -> f64 {
    bytes as f64 / seconds / 1e9
}

/// nccl-tests' bus bandwidth of an all-reduce on `k` ranks: algbw × 2(k − 1)/k, the rate at
/// which each rank's link moves data in an optimal ring; 0 on one rank, which moves nothing.
pub(super) fn busbw_gbytes_per_s(algbw: f64, k: usize) -> f64 {
    if k == 0 {
        return 0.0;
    }
    algbw * 2.0 * (k as f64 - 1.0) / k as f64
}

/// Element `i` of device `d`'s input: a seeded value in [-1, 1), cheap enough for a GiB.
pub(super) fn input(d: usize, i: usize) -> f32 {
    // SplitMix64's finalizer on (device, index).
    let mut z = ((d as u64) << 40 ^ i as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    // 24 random bits: exactly representable, spread over [-1, 1).
    ((z >> 40) as f32 / (1u64 << 23) as f32) - 1.0
}

/// The result of checking one all-reduce on every device.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(super) struct Checked {
    /// Elements, over all devices, farther from the float64 sum than the tolerance allows (or
    /// not finite): nccl-tests' `#wrong`.
    pub wrong: u64,
    /// Elements checked, over all devices.
    pub checked: u64,
    /// The largest error found, relative to the sum of the inputs' magnitudes.
    pub max_error: f64,
}

impl Checked {
    pub fn passed(&self) -> bool {
        self.wrong == 0
    }
}

/// Float32 sums of `k` terms in any order stay within (k − 1)·ε·Σ|x| of the exact sum; the
/// check allows twice that, so a correct reduction passes in any order and a lost or doubled
/// term (an error of the size of a term) does not.
pub(super) fn tolerance(k: usize, magnitude: f64) -> f64 {
    2.0 * k.max(2) as f64 * f32::EPSILON as f64 * magnitude
}

/// Compare every device's `outputs` with the float64 sum of the `inputs`, element by element.
pub(super) fn check(inputs: &[&[f32]], outputs: &[&[f32]]) -> Checked {
    let n = inputs.first().map_or(0, |i| i.len());
    check_against(inputs.len(), n, |d, i| inputs[d][i], outputs)
}

/// Compare one rank's `output` with the float64 sum of every rank's seeded input ([`input`]
/// of ranks 0..`k`), computed here rather than received: under MPI a rank holds only its own
/// input, and the check must not trust the transport it checks.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(super) fn check_seeded(k: usize, output: &[f32]) -> Checked {
    check_against(k, output.len(), input, &[output])
}

/// Compare `outputs` with the float64 sum of `k` inputs of `n` elements, `input(d, i)` the
/// element `i` of input `d`; an output too short is wrong where it is missing.
fn check_against(
    k: usize,
    n: usize,
    input: impl Fn(usize, usize) -> f32,
    outputs: &[&[f32]],
) -> Checked {
    let mut c = Checked::default();
    for i in 0..n {
        let (want, magnitude) = (0..k).fold((0f64, 0f64), |(s, m), d| {
            let x = input(d, i) as f64;
            (s + x, m + x.abs())
        });
        for out in outputs {
            // A missing element is as wrong as a NaN.
            let error = (out.get(i).map_or(f64::NAN, |&got| got as f64) - want).abs();
            c.checked += 1;
            if !error.is_finite() || error > tolerance(k, magnitude) {
                c.wrong += 1;
            }
            if magnitude > 0.0 && error.is_finite() {
                c.max_error = c.max_error.max(error / magnitude);
            }
        }
    }
    c
}

/// A figure of the `--verbose` table and the JSON.
pub(super) const fn detail(unit: Unit, better: Better) -> Figure {
    Figure {
        unit,
        better,
        detail: true,
        against_limits: false,
    }
}

const BANDWIDTH: Figure = detail(Unit::GbytesPerSecond, Better::Higher);
const BUSBW_OF_COPY: Figure = detail(Unit::Number, Better::Higher);
const WRONG: Figure = detail(Unit::Number, Better::Lower);
/// Why a run has no `busbw_of_copy` figures.
const NO_COPY: &str =
    "the machine's copy bandwidth was not measured (a debug build measures nothing)";

/// The machine's all-thread copy bandwidth (GB/s), when it was measured.
pub(super) fn copy_bandwidth() -> Option<f64> {
    crate::machine::limits()
        .memory
        .measured()
        .map(|m| m.copy.all_threads_gbytes_per_s)
        .filter(|c| c.is_finite() && *c > 0.0)
}

/// A run's figures as its sizes are recorded: the times the crossover needs and each
/// algorithm's busbw curve.
pub(super) struct Tally {
    pub backend: Backend,
    /// Devices (or ranks) taking part.
    pub devices: usize,
    pub copy: Option<f64>,
    times: Vec<SizeTimes>,
    /// Each algorithm's, in the order of [`Algorithm::of`].
    curves: Vec<Vec<serde_json::Value>>,
}

impl Tally {
    pub fn new(backend: Backend, devices: usize, copy: Option<f64>) -> Tally {
        Tally {
            backend,
            devices,
            copy,
            times: Vec::new(),
            curves: vec![Vec::new(); Algorithm::of(backend).len()],
        }
    }

    /// Record one size: its variants (a summary and a label an algorithm, in the order of
    /// [`Algorithm::of`]), each algorithm's bandwidths and `wrong` count, and the check that
    /// every device's result equals the float64 sum.
    pub fn size(
        &mut self,
        run: &mut RunRecord,
        bytes: u64,
        summaries: Vec<Summary>,
        labels: Vec<String>,
        checked: &[Checked],
    ) {
        let (k, algorithms) = (self.devices, Algorithm::of(self.backend));
        let names = algorithms.iter().map(|a| a.variant(bytes)).collect();
        run.add_variants(names, summaries, labels.into_iter().map(Some));
        for ((a, c), curve) in algorithms.iter().zip(checked).zip(&mut self.curves) {
            let stem = a.key(bytes);
            let median = Estimate::of(run, &a.variant(bytes)).median;
            let algbw = algbw_gbytes_per_s(bytes, median);
            let busbw = busbw_gbytes_per_s(algbw, k);
            run.derive_as(&format!("{stem}_algbw_gbytes_per_s"), algbw, BANDWIDTH);
            run.derive_as(&format!("{stem}_busbw_gbytes_per_s"), busbw, BANDWIDTH);
            let of_copy = format!("{stem}_busbw_of_copy");
            match self.copy {
                Some(copy) => run.derive_as(&of_copy, busbw / copy, BUSBW_OF_COPY),
                None => run.unmeasured_as(&of_copy, BUSBW_OF_COPY, NO_COPY),
            }
            run.derive_as(&format!("{stem}_wrong"), c.wrong as f64, WRONG);
            curve.push(serde_json::json!([bytes, busbw]));
        }
        let detail = algorithms.iter().zip(checked).map(|(a, c)| {
            format!(
                "{}: {} wrong of {} elements, largest error {:.1e} of the inputs' magnitude",
                a.name(),
                c.wrong,
                c.checked,
                c.max_error
            )
        });
        let (noun, size) = (self.backend.noun(), size_label(bytes));
        run.check(
            &format!("every {noun}'s result equals the float64 sum ({size})"),
            checked.iter().all(Checked::passed),
            detail.collect::<Vec<_>>().join("; "),
        );
        self.times.push(SizeTimes {
            bytes,
            ring: Estimate::of(run, &Algorithm::Ring.variant(bytes)),
            parameter_server: Estimate::of(run, &Algorithm::ParameterServer.variant(bytes)),
        });
    }

    /// The curves, the crossover, the notes, the explanation and the lesson's verdict.
    pub fn finish(self, run: &mut RunRecord) {
        let (k, noun) = (self.devices, self.backend.noun());
        for (a, points) in Algorithm::of(self.backend).iter().zip(self.curves) {
            let key = format!("{}_busbw_curve", a.name().replace('-', "_"));
            run.derive_detail_series(&key, serde_json::Value::Array(points));
        }
        let crossover = Figure::new(Unit::Bytes, Better::Neither);
        let why = "the ring was not faster beyond the intervals at the largest size";
        match ring_faster_from(&self.times) {
            Some(bytes) => run.derive_as("crossover_bytes", bytes as f64, crossover),
            None => run.unmeasured_as("crossover_bytes", crossover, why),
        }
        if k == 1 {
            run.notes.push(format!(
                "one {noun} moves nothing: busbw is 0 by nccl-tests' definition, and each \
                 algorithm is a copy"
            ));
        }
        let largest = self.times.last().and_then(|t| {
            let busbw = busbw_gbytes_per_s(algbw_gbytes_per_s(t.bytes, t.ring.median), k);
            Some((busbw, self.copy?))
        });
        explain(&self.times, k, self.backend, largest.filter(|_| k > 1)).record(run);
        conclude(run, &self.times, k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidths_follow_nccl_tests_definitions() {
        // 1 GB in 0.5 s is 2 GB/s; on 4 ranks the bus moves 2(4 − 1)/4 = 1.5× that.
        let algbw = algbw_gbytes_per_s(1_000_000_000, 0.5);
        assert!((algbw - 2.0).abs() < 1e-12);
        assert!((busbw_gbytes_per_s(algbw, 4) - 3.0).abs() < 1e-12);
        assert!((busbw_gbytes_per_s(algbw, 2) - 2.0).abs() < 1e-12);
        assert_eq!(busbw_gbytes_per_s(algbw, 1), 0.0);
        assert_eq!(busbw_gbytes_per_s(algbw, 0), 0.0);
    }

    #[test]
    fn inputs_are_seeded_and_in_range() {
        let v: Vec<f32> = (0..10_000).map(|i| input(1, i)).collect();
        assert!(v.iter().all(|x| (-1.0..1.0).contains(x)));
        assert_eq!(input(1, 7), v[7]);
        assert_ne!(input(0, 7), input(1, 7));
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64;
        assert!(mean.abs() < 0.05, "{mean}");
    }

    /// A reduction that is right passes; one that loses a term, or that a planted error
    /// breaks in a single element, is caught and counted.
    #[test]
    fn the_check_counts_planted_errors() {
        let (k, n) = (3, 1001);
        let inputs: Vec<Vec<f32>> = (0..k)
            .map(|d| (0..n).map(|i| input(d, i)).collect())
            .collect();
        let views: Vec<&[f32]> = inputs.iter().map(Vec::as_slice).collect();
        // A float32 sum in another order than the reference's is within the tolerance.
        let right: Vec<f32> = (0..n)
            .map(|i| (0..k).rev().map(|d| inputs[d][i]).sum())
            .collect();
        let ok = check(&views, &[&right, &right, &right]);
        assert!(ok.passed(), "{ok:?}");
        assert_eq!(ok.checked, 3 * n as u64);
        assert!(ok.max_error < 1e-6);
        // A broken reduction: device 2's input forgotten.
        let lost: Vec<f32> = (0..n).map(|i| inputs[0][i] + inputs[1][i]).collect();
        let bad = check(&views, &[&right, &lost, &right]);
        assert!(!bad.passed());
        assert!(bad.wrong > n as u64 / 2, "{bad:?}");
        // One element off by a little more than rounding allows, and a NaN.
        let mut planted = right.clone();
        planted[500] += 1e-3;
        planted[7] = f32::NAN;
        let c = check(&views, &[&right, &planted, &right]);
        assert_eq!(c.wrong, 2, "{c:?}");
        // An output that is too short is wrong where it is missing.
        assert_eq!(check(&views, &[&right[..1000]]).wrong, 1);
    }

    /// A rank's result checked against the seeded inputs it never received: the right sum
    /// passes, a lost rank's input and a planted error are counted.
    #[test]
    fn the_seeded_check_needs_no_other_ranks_buffers() {
        let (k, n) = (4, 777);
        let right: Vec<f32> = (0..n).map(|i| (0..k).map(|d| input(d, i)).sum()).collect();
        let ok = check_seeded(k, &right);
        assert!(ok.passed() && ok.checked == n as u64, "{ok:?}");
        let lost: Vec<f32> = (0..n)
            .map(|i| (0..k - 1).map(|d| input(d, i)).sum())
            .collect();
        assert!(check_seeded(k, &lost).wrong > n as u64 / 2);
        let mut planted = right.clone();
        planted[3] += 1e-3;
        planted[400] = f32::INFINITY;
        assert_eq!(check_seeded(k, &planted).wrong, 2);
        // Checked as another number of ranks, the same sums are wrong.
        assert!(!check_seeded(k + 1, &right).passed());
    }
}
