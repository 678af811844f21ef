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
