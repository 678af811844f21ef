//! The GPU's own time of each sample of a GPU variant, beside the host's: a [`GpuTimer`] whose
//! start event is recorded on the compute stream before the sample's first op is pushed, and
//! whose stop event an engine op records on the same stream once the sample's last op has
//! been enqueued (it reads the sample's last outputs, so the engine runs it after them). The
//! timer is read after the sample's own wait, so no wait is added to what the host times; the
//! one op the stop adds to the sample is pushed, not waited for.
//!
//! The two events measure a span of the GPU's timeline, idle gaps included (see
//! `device::cuda::timing`): host / GPU near 1 says the host adds little around the GPU's
//! span, well above 1 that most of the host's time lies outside it.

use std::cell::RefCell;
use std::sync::{Arc, Mutex};

use crate::device::cuda::{CudaDevice, GpuError, GpuTimer};
use crate::engine::{Engine, LaneId, Var};
use crate::harness::stats::median;
use crate::report::RunRecord;
use crate::report::{Better, FigureSpec};
use crate::units::human_time;

/// The key of a variant's GPU time: its name with `-` as `_`, then `_gpu_s` (what each
/// scenario's declared figure must be called; its tests check it).
#[cfg(test)]
pub(crate) fn gpu_key(variant: &str) -> String {
    format!("{}_gpu_s", variant.replace('-', "_"))
}

/// A variant's GPU time per sample: it describes what the GPU did, so a detail figure with no
/// direction.
pub(crate) const fn gpu_seconds(key: &'static str) -> FigureSpec {
    super::kit::seconds(key, Better::Neither).detail()
}

/// host / GPU at or below this: the host adds little around the GPU's span.
pub(crate) const GPU_BOUND_AT: f64 = 1.1;
/// host / GPU at or above this: most of the host's time lies outside the GPU's span.
pub(crate) const LAUNCH_BOUND_AT: f64 = 2.0;

/// One sentence on a variant's host and GPU medians per sample.
pub(crate) fn host_over_gpu_words(variant: &str, host_s: f64, gpu_s: f64) -> String {
    let ratio = host_s / gpu_s;
    let (h, g) = (human_time(host_s), human_time(gpu_s));
    if !(ratio.is_finite() && ratio > 0.0) {
        return format!(
            "{variant}: the host took {h} per sample and the GPU's clock read {g}, which give \
             no ratio."
        );
    }
    let verdict = if ratio <= GPU_BOUND_AT {
        format!(
            "at most {GPU_BOUND_AT}×: the host adds little around the GPU's span, so the sample \
             is GPU-bound, or its launches pace the GPU within that span (the span includes the \
             gaps where the GPU waits for the next launch)"
        )
    } else if ratio >= LAUNCH_BOUND_AT {
        format!(
            "at least {LAUNCH_BOUND_AT}×: most of the host's time lies outside the GPU's span, \
             in launching, pushing and waking up: launch-bound"
        )
    } else {
        format!(
            "the host adds {:.0}% around the GPU's span (launching before the first kernel, \
             waking up after the last)",
            (ratio - 1.0) * 100.0
        )
    };
    format!(
        "{variant}: {h} per sample on the host's clock, {g} on the GPU's (timing events on the \
         compute stream around the sample's ops): host / GPU = {ratio:.2}×, {verdict}."
    )
}

/// The GPU times of one variant's samples, in the order the sampler ran them.
pub(crate) struct GpuSamples {
    timer: Arc<GpuTimer>,
    times: RefCell<Vec<f64>>,
    /// The first timing error; once set, nothing more is timed and no figure is recorded.
    failure: Arc<Mutex<Option<String>>>,
}

impl GpuSamples {
    /// A timer on `gpu`'s compute stream.
    pub(crate) fn new(gpu: &CudaDevice) -> Result<GpuSamples, GpuError> {
        Ok(GpuSamples {
            timer: Arc::new(gpu.timer()?),
            times: RefCell::default(),
            failure: Arc::default(),
        })
    }

    fn failed(&self) -> bool {
        lock(&self.failure).is_some()
    }

    fn fail(failure: &Mutex<Option<String>>, e: GpuError) {
        lock(failure).get_or_insert_with(|| e.to_string());
    }

    /// Record the start: call it after the engine is idle and before the sample's first push.
    pub(crate) fn start(&self) {
        if !self.failed() {
            if let Err(e) = self.timer.start() {
                Self::fail(&self.failure, e);
            }
        }
    }

    /// Record the stop from this thread: for a sample whose last op is already done.
    pub(crate) fn stop_now(&self) {
        if !self.failed() {
            if let Err(e) = self.timer.stop() {
                Self::fail(&self.failure, e);
            }
        }
    }

    /// Push the op that records the stop on `lane` (the GPU's compute lane) once the ops
    /// writing `after` have completed in the engine, which for the compute stream means
    /// their work is enqueued (stream order) or done (host order).
    pub(crate) fn stop_after(&self, engine: &Engine, lane: LaneId, after: &[&Var]) {
        if self.failed() {
            return;
        }
        let (timer, failure) = (self.timer.clone(), self.failure.clone());
        engine.push("gpu timer stop", lane, after, &[], move || {
            if let Err(e) = timer.stop() {
                Self::fail(&failure, e);
            }
            Ok(())
        });
    }

    /// Read the sample's GPU time: call it after the sample's wait.
    pub(crate) fn read(&self) {
        if self.failed() {
            return;
        }
        match self.timer.elapsed_s() {
            Ok(s) => self.times.borrow_mut().push(s),
            Err(e) => Self::fail(&self.failure, e),
        }
    }

    /// The median of the timed samples: the `sampled` readings before the last `traced`
    /// (the sampler's warm-up calls come first, a traced repeat last).
    pub(crate) fn median_of(&self, sampled: usize, traced: usize) -> Result<f64, String> {
        if let Some(e) = lock(&self.failure).clone() {
            return Err(e);
        }
        sampled_median(&self.times.borrow(), sampled, traced)
    }

    /// Record `variant`'s median GPU time as `spec`, or `spec` not measured and why;
    /// returns it.
    pub(crate) fn record(
        &self,
        run: &mut RunRecord,
        spec: FigureSpec,
        variant: &str,
        traced: usize,
    ) -> Option<f64> {
        let sampled = run
            .variants
            .iter()
            .find(|v| v.name == variant)
            .map_or(0, |v| v.summary.samples_s.len());
        match self.median_of(sampled, traced) {
            Ok(s) => {
                run.record(spec, s);
                Some(s)
            }
            Err(why) => {
                run.unmeasured(spec, format!("{variant}'s GPU time: {why}"));
                None
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The median of `times[len - traced - sampled .. len - traced]`.
fn sampled_median(times: &[f64], sampled: usize, traced: usize) -> Result<f64, String> {
    let end = times.len().checked_sub(traced);
    let start = end.and_then(|e| e.checked_sub(sampled));
    let (Some(start), Some(end)) = (start, end) else {
        return Err(format!(
            "{} GPU times were read for {sampled} samples",
            times.len()
        ));
    };
    if sampled == 0 {
        return Err("the variant has no samples".into());
    }
    median(&times[start..end]).ok_or_else(|| "a GPU time was not finite".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Unit;

    #[test]
    fn keys_follow_the_variant_names() {
        assert_eq!(gpu_key("sync"), "sync_gpu_s");
        assert_eq!(gpu_key("push-only"), "push_only_gpu_s");
        assert_eq!(gpu_key("products-push-only"), "products_push_only_gpu_s");
        let spec = gpu_seconds("sync_gpu_s");
        assert_eq!(spec.figure.better, Better::Neither);
        assert_eq!(spec.figure.unit, Unit::Seconds);
    }

    #[test]
    fn the_median_skips_warm_ups_and_the_traced_repeat() {
        // Two warm-ups (100), three samples, one traced repeat (50).
        let times = [100.0, 100.0, 1.0, 3.0, 2.0, 50.0];
        assert_eq!(sampled_median(&times, 3, 1), Ok(2.0));
        assert_eq!(sampled_median(&times[..5], 3, 0), Ok(2.0));
        // Fewer readings than samples: no figure.
        let err = sampled_median(&times[..2], 3, 0).expect_err("too few");
        assert!(err.contains("2 GPU times were read for 3 samples"), "{err}");
        assert!(sampled_median(&times, 0, 0).is_err());
        assert!(sampled_median(&[1.0, f64::NAN], 2, 0).is_err());
    }

    #[test]
    fn the_words_tell_gpu_bound_from_launch_bound() {
        let gpu_bound = host_over_gpu_words("hybridized", 1.05e-3, 1e-3);
        assert!(
            gpu_bound.contains("1.050 ms per sample on the host's clock, 1.000 ms on the GPU's")
                && gpu_bound.contains("host / GPU = 1.05×")
                && gpu_bound.contains("GPU-bound"),
            "{gpu_bound}"
        );
        let launch_bound = host_over_gpu_words("sync", 5e-3, 1e-3);
        assert!(
            launch_bound.contains("5.00×") && launch_bound.contains("launch-bound"),
            "{launch_bound}"
        );
        let between = host_over_gpu_words("async", 1.5e-3, 1e-3);
        assert!(between.contains("adds 50% around"), "{between}");
        assert!(!between.contains("-bound"), "{between}");
        let none = host_over_gpu_words("chain", 1e-3, 0.0);
        assert!(none.contains("no ratio"), "{none}");
    }
}
