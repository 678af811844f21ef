//! The GPU's clock beside the host's for a scenario's GPU variants: one timer per variant
//! (see `gpu_time`), started before each sample, stopped after its last op, read after its
//! wait, and the medians recorded with a sentence each. On a CPU device, or a build without
//! CUDA, every call does nothing and nothing is recorded.

#[cfg(feature = "cuda")]
use super::gpu_time::{host_over_gpu_words, GpuSamples};
#[cfg(feature = "cuda")]
use crate::device::Device;
#[cfg(feature = "cuda")]
use crate::engine::LaneId;
use crate::engine::{Engine, Var};
#[cfg(feature = "cuda")]
use crate::report::FigureSpec;
use crate::report::RunRecord;

/// A variant's host and GPU medians per sample, as recorded.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct HostAndGpu {
    pub(crate) variant: &'static str,
    pub(crate) host_s: f64,
    pub(crate) gpu_s: f64,
}

/// The timers of a run's GPU variants.
#[derive(Default)]
pub(crate) struct Clocks {
    #[cfg(feature = "cuda")]
    timed: Vec<(&'static str, FigureSpec, GpuSamples)>,
    #[cfg(feature = "cuda")]
    lane: Option<LaneId>,
    /// Why the timers could not be made, and the figures they were for.
    #[cfg(feature = "cuda")]
    unopened: Option<(String, Vec<FigureSpec>)>,
}

impl Clocks {
    /// Timers for `variants` (each with the figure its median is recorded as) when `device` is
    /// a GPU; none otherwise.
    #[cfg(feature = "cuda")]
    pub(crate) fn open(device: &Device, variants: &[(&'static str, FigureSpec)]) -> Clocks {
        let crate::device::DeviceKind::Cuda(gpu) = &device.kind else {
            return Clocks::default();
        };
        let mut timed = Vec::new();
        for &(name, spec) in variants {
            match GpuSamples::new(gpu) {
                Ok(samples) => timed.push((name, spec, samples)),
                Err(e) => {
                    let specs = variants.iter().map(|&(_, spec)| spec).collect();
                    return Clocks {
                        unopened: Some((format!("no GPU timer: {e}"), specs)),
                        ..Clocks::default()
                    };
                }
            }
        }
        Clocks {
            timed,
            lane: Some(device.compute),
            unopened: None,
        }
    }

    #[cfg(feature = "cuda")]
    fn of(&self, variant: &str) -> Option<&GpuSamples> {
        self.timed
            .iter()
            .find(|(name, ..)| *name == variant)
            .map(|(.., s)| s)
    }

    /// Before `variant`'s sample pushes its first op, with the engine idle.
    pub(crate) fn start(&self, variant: &str) {
        #[cfg(feature = "cuda")]
        if let Some(s) = self.of(variant) {
            s.start();
        }
        let _ = variant;
    }

    /// After `variant`'s sample, when its last op is already done.
    pub(crate) fn stop_now(&self, variant: &str) {
        #[cfg(feature = "cuda")]
        if let Some(s) = self.of(variant) {
            s.stop_now();
        }
        let _ = variant;
    }

    /// Inside `variant`'s sample, after its last push: the stop follows the ops that write
    /// `after` on the GPU's compute lane.
    pub(crate) fn stop_after(&self, variant: &str, engine: &Engine, after: &[&Var]) {
        #[cfg(feature = "cuda")]
        if let (Some(s), Some(lane)) = (self.of(variant), self.lane) {
            s.stop_after(engine, lane, after);
        }
        let _ = (variant, engine, after);
    }

    /// After `variant`'s sample has been waited for.
    pub(crate) fn read(&self, variant: &str) {
        #[cfg(feature = "cuda")]
        if let Some(s) = self.of(variant) {
            s.read();
        }
        let _ = variant;
    }

    /// Record each timed variant's median GPU time and a sentence on host / GPU in the
    /// explanation (`traced`: the repeats after the samples, 1 with `--trace`); returns what
    /// was recorded. A variant whose timing failed is recorded as not measured, with why.
    pub(crate) fn derive(&self, run: &mut RunRecord, traced: usize) -> Vec<HostAndGpu> {
        #[cfg(feature = "cuda")]
        if let Some((why, specs)) = &self.unopened {
            for spec in specs {
                run.unmeasured(*spec, why.clone());
            }
        }
        #[allow(unused_mut)]
        let mut recorded = Vec::new();
        #[cfg(feature = "cuda")]
        for (variant, spec, samples) in &self.timed {
            let (Some(gpu_s), Some(host_s)) = (
                samples.record(run, *spec, variant, traced),
                run.median(variant),
            ) else {
                continue;
            };
            run.explanation
                .push(host_over_gpu_words(variant, host_s, gpu_s));
            recorded.push(HostAndGpu {
                variant,
                host_s,
                gpu_s,
            });
        }
        let _ = (traced, &run);
        recorded
    }
}

/// A run context that samples each variant three times after one warm-up: enough for the
/// figures to exist, quick enough for a test.
#[cfg(test)]
pub(crate) fn few_samples() -> super::RunContext {
    super::RunContext {
        sampling: super::SamplingOverrides {
            warmup: Some(1),
            min_samples: Some(3),
            max_samples: Some(3),
            min_time: Some(std::time::Duration::ZERO),
            max_time: Some(std::time::Duration::from_secs(10)),
        },
        ..super::RunContext::default()
    }
}

/// The params of `scenario` with `given` over its defaults.
#[cfg(test)]
pub(crate) fn params_of(scenario: &dyn super::Scenario, given: &[(&str, &str)]) -> super::Params {
    let given: Vec<(String, String)> = given
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    super::Params::parse(scenario.name(), scenario.params(), &given).expect("params")
}

/// The GPU figures a test expects, each finite and positive.
#[cfg(all(test, feature = "cuda"))]
pub(crate) fn assert_recorded(run: &RunRecord, keys: &[&str]) {
    for key in keys {
        let v = run.derived.get(*key).and_then(|v| v.as_f64());
        assert!(
            v.is_some_and(|v| v.is_finite() && v > 0.0),
            "{key}: {v:?}, not measured: {:?}",
            run.unmeasured.get(*key)
        );
    }
}
