//! Device-side timing: a pair of CUDA events with timing enabled, recorded on a stream around
//! some work, whose difference is the time on the GPU's own clock from the first to the
//! second (`cuEventElapsedTime`).
//!
//! What the pair measures is a *span* of the stream's timeline: from the moment the GPU
//! reaches the start event to the moment it reaches the stop event, idle gaps included. Work
//! the host enqueues faster than the GPU runs it leaves no gaps, and the span is the GPU's
//! busy time; work enqueued slower (a launch-bound loop) leaves the GPU waiting between
//! kernels, and those waits are inside the span too.
//!
//! Completion and ready events (`events.rs`) are created with `DISABLE_TIMING`, which makes
//! them cheaper; a timer's events are the only ones created with `CU_EVENT_DEFAULT` (flags 0),
//! the one setting under which the driver keeps their timestamps.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use cudarc::driver::{sys, CudaEvent, CudaStream};

use super::{CudaDevice, GpuError};

/// Two timing events on one stream: [`start`](GpuTimer::start), then
/// [`stop`](GpuTimer::stop), then [`elapsed_s`](GpuTimer::elapsed_s). Reusable: each
/// `elapsed_s` consumes one start/stop pair.
pub struct GpuTimer {
    start: CudaEvent,
    stop: CudaEvent,
    stream: Arc<CudaStream>,
    /// Set once each event has been recorded since the last reading, so a reading without a
    /// fresh pair is an error rather than the previous pair's time again.
    started: AtomicBool,
    stopped: AtomicBool,
}

impl CudaDevice {
    /// A timer on the compute stream, where every op of the engine enqueues its kernels.
    pub fn timer(&self) -> Result<GpuTimer, GpuError> {
        self.bind()?;
        GpuTimer::on(&self.compute)
    }
}

impl GpuTimer {
    /// A timer whose events are recorded on `stream`.
    pub fn on(stream: &Arc<CudaStream>) -> Result<GpuTimer, GpuError> {
        let ctx = stream.context();
        // CU_EVENT_DEFAULT (0): timing enabled, the host spins or yields when it waits.
        let event = || {
            ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(GpuError::Timing)
        };
        Ok(GpuTimer {
            start: event()?,
            stop: event()?,
            stream: stream.clone(),
            started: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
        })
    }

    /// Record the start after the work enqueued so far on the stream.
    pub fn start(&self) -> Result<(), GpuError> {
        self.stopped.store(false, Ordering::Release);
        self.start.record(&self.stream).map_err(GpuError::Timing)?;
        self.started.store(true, Ordering::Release);
        Ok(())
    }

    /// Record the stop after the work enqueued so far on the stream. Any thread may call it
    /// (an engine op's worker does, to mark the end of the work it follows).
    pub fn stop(&self) -> Result<(), GpuError> {
        self.stop.record(&self.stream).map_err(GpuError::Timing)?;
        self.stopped.store(true, Ordering::Release);
        Ok(())
    }

    /// Seconds on the GPU's clock from the start event to the stop event. Waits for the GPU
    /// to reach the stop event: call it after the timed work has been waited for, so the wait
    /// is not added to anything the host times.
    pub fn elapsed_s(&self) -> Result<f64, GpuError> {
        let started = self.started.swap(false, Ordering::AcqRel);
        let stopped = self.stopped.swap(false, Ordering::AcqRel);
        if !(started && stopped) {
            return Err(GpuError::TimerIdle);
        }
        // cudarc synchronizes both events before `cuEventElapsedTime`, which refuses an
        // event the GPU has not reached yet.
        let ms = self
            .start
            .elapsed_ms(&self.stop)
            .map_err(GpuError::Timing)?;
        Ok(f64::from(ms) / 1_000.0)
    }
}

/// The device for a GPU test, or a failure naming why there is none: a test marked
/// `#[ignore = "needs a GPU"]` never passes without one.
#[cfg(test)]
pub(super) fn test_gpu() -> CudaDevice {
    let info = super::probe();
    assert!(
        info.available,
        "this test needs a GPU, and there is no usable GPU: {}",
        info.reason.unwrap_or_default()
    );
    CudaDevice::open(0, super::GpuOrder::Stream).expect("the probed GPU opens")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Map;

    /// 1,000 launches of `y = x + 1` on 16 Mi elements (128 MiB moved per launch): work the
    /// GPU cannot finish as fast as the host enqueues it, so its clock must read most of the
    /// host's time, never more, and no less than the fastest memory could move the bytes.
    #[test]
    #[ignore = "needs a GPU"]
    fn gpu_timer_measures_a_known_busy_kernel() {
        const N: usize = 1 << 24;
        const LAUNCHES: u32 = 1_000;
        let dev = test_gpu();
        let mut x = dev.alloc(N).expect("x");
        dev.fill(&mut x, 1.0).expect("fill");
        let mut y = dev.alloc(N).expect("y");
        let add = Map::AddScalar(1.0);
        dev.map(add, &x, &mut y).expect("warm-up");
        dev.synchronize().expect("warm-up done");
        let timer = dev.timer().expect("timer");
        let t = std::time::Instant::now();
        timer.start().expect("start");
        for _ in 0..LAUNCHES {
            dev.map(add, &x, &mut y).expect("launch");
        }
        timer.stop().expect("stop");
        dev.synchronize().expect("done");
        let host = t.elapsed().as_secs_f64();
        let gpu = timer.elapsed_s().expect("elapsed");
        assert!(gpu.is_finite() && gpu > 0.0, "{gpu}");
        // The events were recorded after the host's clock started and reached before the
        // synchronize returned (the clocks' resolution aside).
        assert!(gpu <= host * 1.01 + 10e-6, "GPU {gpu} s, host {host} s");
        assert!(
            gpu >= host * 0.5,
            "GPU {gpu} s, host {host} s: not GPU-bound?"
        );
        // 2 × 64 MiB per launch; no GPU's memory moves 10 TB/s.
        let bytes = 2.0 * 4.0 * N as f64 * f64::from(LAUNCHES);
        assert!(gpu >= bytes / 10e12, "GPU {gpu} s for {bytes} bytes");
        // The pair is consumed: a second reading without a new start and stop is refused.
        assert!(matches!(timer.elapsed_s(), Err(GpuError::TimerIdle)));
    }
}
