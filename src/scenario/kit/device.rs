//! Which device a scenario runs on: the GPU it asks for, or a CPU device in its place, with
//! the note that says so. The one place a `--device cuda` run is refused (a usage error, exit
//! 2) or falls back; a scenario never probes the GPU or words the fallback itself.

use crate::device::discovery::{self, GpuInfo};
use crate::device::record::Described;
use crate::device::{DeviceRequest, GpuOrder, Runtime, RuntimeOptions};
use crate::report::RunRecord;
use crate::scenario::{DeviceChoice, Params, RunContext, ScenarioError};

/// The device a scenario asked for as its GPU: the GPU itself, or a CPU device in its place.
pub struct ChosenDevice {
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
        return Err(refusal(&gpu));
    }
    Ok(accelerator_from(&gpu, "cpu:0", threads))
}

impl ChosenDevice {
    /// The run's device descriptions, the device at `index` (this one) marked as the GPU's CPU
    /// stand-in when it is one, so the table's header says so.
    pub fn describe_devices(&self, rt: &Runtime, index: usize) -> Described {
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
    ChosenDevice {
        request: match gpu.available {
            true => DeviceRequest::Cuda,
            false => DeviceRequest::Cpu {
                threads: fallback_threads,
            },
        },
        fallback_note: (!gpu.available).then(|| fallback_note(gpu, fallback_name)),
    }
}

/// "GPU unavailable: <reason>; using <device>": the note of a CPU device standing in.
fn fallback_note(gpu: &GpuInfo, device: &str) -> String {
    let reason = gpu.reason.as_deref().unwrap_or("unknown reason");
    format!("GPU unavailable: {reason}; using {device}")
}

/// `options` with a GPU's ops completing when the GPU has finished them ([`GpuOrder::Host`]):
/// for scenarios whose trace figures read a GPU op's span as its GPU time.
pub fn host_ordered(options: &RuntimeOptions) -> RuntimeOptions {
    RuntimeOptions {
        gpu_order: GpuOrder::Host,
        ..options.clone()
    }
}

/// Where a `--device cuda` run goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OnGpu {
    /// A GPU can be used (only a build with the `cuda` feature has one).
    #[cfg(feature = "cuda")]
    Gpu,
    /// No GPU can be used and `--fallback` accepts the CPU run instead: the note that says so.
    Fallback(String),
}

/// `--device cuda` for a scenario whose GPU run is an experiment of its own: the GPU when one
/// can be used, else with `--fallback` the scenario's CPU run, else a usage error naming why.
pub fn on_gpu(ctx: &RunContext) -> Result<OnGpu, ScenarioError> {
    placed(&discovery::probe_gpu(), ctx.gpu_fallback)
}

fn placed(gpu: &GpuInfo, fallback: bool) -> Result<OnGpu, ScenarioError> {
    #[cfg(feature = "cuda")]
    if gpu.available {
        return Ok(OnGpu::Gpu);
    }
    if !fallback {
        return Err(refusal(gpu));
    }
    Ok(OnGpu::Fallback(fallback_note(gpu, "cpu:0")))
}

/// The CPU run that stands in for a GPU run: its note, first, says what ran instead.
pub fn note_fallback(run: &mut RunRecord, note: &str, instead: &str) {
    run.notes.insert(0, format!("{note}: {instead}"));
}

/// The usage error for a GPU asked for and not usable.
fn refusal(gpu: &GpuInfo) -> ScenarioError {
    ScenarioError::Input(format!(
        "--device cuda asks for a GPU, and none can be used ({}; see 'parbench devices'): \
         add --fallback to run on a CPU device instead",
        gpu.reason.as_deref().unwrap_or("unknown reason")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fallback_note_names_reason_and_device() {
        let none = GpuInfo::unavailable("no driver");
        let a = accelerator_from(&none, "cpu:1", 1);
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
        // A usable GPU is taken (only a build with the `cuda` feature has one); without one, a
        // cuda run is refused or falls back with a note.
        #[cfg(feature = "cuda")]
        assert_eq!(placed(&gpu, false).expect("a GPU"), OnGpu::Gpu);
        let refused = placed(&none, false).expect_err("no GPU, no --fallback");
        assert!(refused.is_usage(), "{refused}");
        assert_eq!(refused.to_string(), "--device cuda asks for a GPU, and none can be used (no driver; see 'parbench devices'): add --fallback to run on a CPU device instead");
        assert_eq!(
            placed(&none, true).expect("falls back"),
            OnGpu::Fallback("GPU unavailable: no driver; using cpu:0".into())
        );
        let mut run = RunRecord::new("x", serde_json::Map::new(), vec![]);
        run.notes.push("later".into());
        note_fallback(&mut run, "GPU unavailable: no driver", "the CPU run");
        assert_eq!(run.notes[0], "GPU unavailable: no driver: the CPU run");
    }
}
