//! Pieces several scenarios share: choosing the accelerator or its CPU fallback, memory checks
//! for matrix workloads, and checking matrix products against a float64 reference.

use crate::device::discovery::GpuInfo;
use std::time::Duration;

use crate::device::memory::{available_bytes, check_fits, f32_bytes};
use crate::device::{discovery, DeviceRequest, GpuOrder, Runtime, RuntimeOptions};
use crate::engine::{trace, Engine, EngineError, TraceRecord};
use crate::harness::SamplerConfig;
use crate::report::RunRecord;
use crate::tensor::{Tensor, TensorError};

use super::{DeviceChoice, Params, ScenarioError, Warning};

/// Sampling for scenarios whose round takes seconds (`cpu-gpu`, `run-copy`): three rounds after
/// one warm-up keep `parbench all` near two minutes.
pub const SECONDS_PER_ROUND: SamplerConfig = SamplerConfig {
    warmup: 1,
    min_samples: 3,
    max_samples: 30,
    min_time: Duration::from_secs(3),
    max_time: Duration::from_secs(60),
};

/// The device a scenario asked for as its GPU: the GPU itself, or a CPU device in its place.
pub struct ChosenDevice {
    /// The device to request for it.
    pub request: DeviceRequest,
    /// Set when no GPU could be used: the note for the table and the JSON.
    pub fallback_note: Option<String>,
}

/// The GPU if one is usable, else a CPU device with `fallback_threads` threads, named
/// `fallback_name` in the note ("GPU unavailable: <reason>; using cpu:1").
pub fn accelerator(fallback_name: &str, fallback_threads: usize) -> ChosenDevice {
    accelerator_from(&discovery::probe_gpu(), fallback_name, fallback_threads)
}

/// The device a scenario's `--device cpu|cuda` parameter asks for: the GPU, or a CPU device;
/// `threads` either way. A GPU that was asked for and cannot be used is an error (a usage
/// error: the reason is the probe's, as `parbench devices` prints it) unless `fallback` accepts
/// a CPU device named `cpu:0` in its place, with the note that says so.
pub fn chosen_device(
    choice: DeviceChoice,
    threads: usize,
    fallback: bool,
) -> Result<ChosenDevice, ScenarioError> {
    if choice == DeviceChoice::Cpu {
        return Ok(ChosenDevice {
            request: DeviceRequest::Cpu { threads },
            fallback_note: None,
        });
    }
    let gpu = discovery::probe_gpu();
    if !gpu.available && !fallback {
        return Err(ScenarioError::Input(format!(
            "--device cuda asks for a GPU, and none can be used ({}; see 'parbench devices'): \
             add --fallback to run on a CPU device instead",
            gpu.reason.as_deref().unwrap_or("unknown reason")
        )));
    }
    Ok(accelerator_from(&gpu, "cpu:0", threads))
}

impl ChosenDevice {
    /// The run's device descriptions, the device at `index` (this one) marked as the GPU's CPU
    /// stand-in when it is one, so the table's header says so.
    pub fn describe_devices(&self, rt: &Runtime, index: usize) -> Vec<String> {
        rt.describe_devices_standing_in(self.fallback_note.as_ref().map(|_| index))
    }
}

/// Before anything runs: the GPU that `params` ask for (`device = "cuda"`) can be used, or
/// `fallback` accepts a CPU device instead. Scenarios without a `device` parameter pass.
pub fn check_requested_device(params: &Params, fallback: bool) -> Result<(), ScenarioError> {
    match params.device()? {
        Some(DeviceChoice::Cuda) => chosen_device(DeviceChoice::Cuda, 1, fallback).map(|_| ()),
        Some(DeviceChoice::Cpu) | None => Ok(()),
    }
}

fn accelerator_from(gpu: &GpuInfo, fallback_name: &str, fallback_threads: usize) -> ChosenDevice {
    if gpu.available {
        ChosenDevice {
            request: DeviceRequest::Cuda,
            fallback_note: None,
        }
    } else {
        let reason = gpu.reason.as_deref().unwrap_or("unknown reason");
        ChosenDevice {
            request: DeviceRequest::Cpu {
                threads: fallback_threads,
            },
            fallback_note: Some(format!("GPU unavailable: {reason}; using {fallback_name}")),
        }
    }
}

/// `options` with a GPU's ops completing when the GPU has finished them ([`GpuOrder::Host`]):
/// for scenarios whose trace figures read a GPU op's span as its GPU time.
pub fn host_ordered(options: &RuntimeOptions) -> RuntimeOptions {
    RuntimeOptions {
        gpu_order: GpuOrder::Host,
        ..options.clone()
    }
}

/// Refuse a workload of `elements` f32 values (`None`: the count overflowed) that would not fit
/// in host memory: the one memory check every scenario's `validate` goes through.
pub fn check_elements(what: &str, elements: Option<u64>) -> Result<(), ScenarioError> {
    check_bytes(what, elements.and_then(|e| f32_bytes(e, 1)))
}

/// Refuse a workload of `bytes` (`None`: the estimate overflowed) that would not fit in host
/// memory.
pub fn check_bytes(what: &str, bytes: Option<u64>) -> Result<(), ScenarioError> {
    check_fits(what, bytes, available_bytes()).map_err(|e| ScenarioError::Input(e.to_string()))
}

/// Refuse square `size`² workloads of `tensors` f32 matrices that would not fit in host memory
/// (or, for a GPU, in its free memory).
pub fn check_matrices(
    what: &str,
    size: u64,
    tensors: u64,
    on_gpu_free: Option<u64>,
) -> Result<(), ScenarioError> {
    let bytes = size.checked_mul(size).and_then(|e| f32_bytes(e, tensors));
    let available = on_gpu_free.or_else(available_bytes);
    check_fits(what, bytes, available).map_err(|e| ScenarioError::Input(e.to_string()))
}

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
    trace::sort_by_push(&mut records);
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

/// What a run's figures show (sentences) and which figures lie outside their physical range
/// (warnings, each with its likely cause). Scenarios compute it from plain numbers, so tests
/// can feed synthetic medians and check every quoted number and claim.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Explained {
    pub sentences: Vec<String>,
    /// Sentences that quote detail figures (engine internals, machine probes), shown with
    /// `--verbose`.
    pub detail: Vec<String>,
    pub warnings: Vec<Warning>,
}

impl Explained {
    /// Put the sentences into the run's explanation and the warnings into its notes.
    pub fn record(self, run: &mut RunRecord) {
        run.explanation.extend(self.sentences);
        run.explanation_detail.extend(self.detail);
        for w in self.warnings {
            run.warn(w.to_string());
        }
    }
}

/// The likely cause of a figure outside its range when it compares medians of variants timed
/// in different rounds.
pub const BETWEEN_ROUNDS: &str =
    "likely noise between rounds: the variants are timed in different \
     rounds, and few samples leave their medians loose; raise --min-samples for firmer medians";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fallback_note_names_reason_and_device() {
        let a = accelerator_from(&GpuInfo::unavailable("no driver"), "cpu:1", 1);
        assert_eq!(a.request, DeviceRequest::Cpu { threads: 1 });
        assert_eq!(
            a.fallback_note.as_deref(),
            Some("GPU unavailable: no driver; using cpu:1")
        );
        let gpu = GpuInfo::detected("H100", "550", "12.4", 80 << 30, "9.0");
        assert_eq!(
            accelerator_from(&gpu, "cpu:1", 1).request,
            DeviceRequest::Cuda
        );
    }

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
        // A single wrong corner element is found.
        let mut bad = c.clone();
        bad[m * n - 1] += 1.0;
        assert!(matmul_error(&a, &b, &bad, (m, k, n), 8) > matmul_tolerance(k));
        let mut bad = c.clone();
        bad[0] -= 1.0;
        assert!(matmul_error(&a, &b, &bad, (m, k, n), 8) > matmul_tolerance(k));
        // NaN anywhere it looks (a buffer nothing was written to) fails too.
        let mut bad = c;
        bad[m * n - 1] = f32::NAN;
        assert!(matmul_error(&a, &b, &bad, (m, k, n), 8).is_infinite());
    }

    #[test]
    fn gflops_counts_two_flops_per_multiply_add() {
        assert_eq!(gflops(1, (1000, 1000, 1000), 1.0), 2.0);
    }
}
