//! CUDA events: a completion event marks the end of an op's work for a poller, a ready event
//! (stream order) marks when a buffer's last write is done, for readers elsewhere. Ready
//! events are pooled.

use std::sync::{Arc, Mutex};

use cudarc::driver::{sys, CudaStream, DriverError};

/// Flags of a completion event: `BLOCKING_SYNC`, so a poller sleeps in the driver instead of
/// spinning a core (which would skew every CPU-side measurement), and `DISABLE_TIMING`, since
/// the event only synchronizes (CUDA's docs: such events are cheaper to record and wait on).
/// cudarc's `new_event` takes a single enum flag, so the event is made with the raw API.
const COMPLETION_EVENT_FLAGS: std::ffi::c_uint = sys::CUevent_flags::CU_EVENT_BLOCKING_SYNC
    as std::ffi::c_uint
    | sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as std::ffi::c_uint;

/// Flags of a ready event (stream order): no `BLOCKING_SYNC`, so a host that waits for one
/// (`wait_to_read`) spins or yields per the context's scheduling, as PyTorch's synchronize
/// does, instead of sleeping until an interrupt wakes it (tens of microseconds per wait).
const READY_EVENT_FLAGS: std::ffi::c_uint =
    sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as std::ffi::c_uint;

/// Ready events are made once per op in stream order: kept for reuse instead of destroyed,
/// since creating and destroying an event costs as much as the kernel launch it marks.
#[derive(Default)]
pub(crate) struct EventPool {
    free: Mutex<Vec<sys::CUevent>>,
}

// SAFETY: the pool only stores event handles, which any thread of the process may use.
unsafe impl Send for EventPool {}
unsafe impl Sync for EventPool {}

impl Drop for EventPool {
    fn drop(&mut self) {
        let free = std::mem::take(self.free.get_mut().unwrap_or_else(|e| e.into_inner()));
        for raw in free {
            // SAFETY: each pooled handle is live and owned by the pool alone.
            let _ = unsafe { sys::cuEventDestroy_v2(raw) };
        }
    }
}

/// An event recorded after an op's work on a stream; destroyed (or returned to its pool)
/// when dropped.
pub struct CompletionEvent {
    raw: sys::CUevent,
    pool: Option<Arc<EventPool>>,
}

// SAFETY: a CUevent handle may be used and destroyed from any thread of its process, and
// waiting on or synchronizing with one event from several threads at once is allowed.
unsafe impl Send for CompletionEvent {}
unsafe impl Sync for CompletionEvent {}

impl CompletionEvent {
    /// Create and record on `stream` (the context must be current on this thread).
    pub(super) fn record(stream: &CudaStream) -> Result<CompletionEvent, DriverError> {
        let mut raw = std::mem::MaybeUninit::uninit();
        // SAFETY: an out-parameter creation with valid flags; on success `raw` is initialized.
        let raw = unsafe {
            sys::cuEventCreate(raw.as_mut_ptr(), COMPLETION_EVENT_FLAGS).result()?;
            raw.assume_init()
        };
        let event = CompletionEvent { raw, pool: None };
        // SAFETY: both handles are live; the stream belongs to the current context.
        unsafe { sys::cuEventRecord(event.raw, stream.cu_stream()) }.result()?;
        Ok(event)
    }

    /// A ready event from `pool` (or a new one), recorded on `stream`.
    pub(super) fn record_pooled(
        stream: &CudaStream,
        pool: &Arc<EventPool>,
    ) -> Result<CompletionEvent, DriverError> {
        let reused = pool.free.lock().ok().and_then(|mut f| f.pop());
        let raw = match reused {
            Some(raw) => raw,
            None => {
                let mut raw = std::mem::MaybeUninit::uninit();
                // SAFETY: an out-parameter creation with valid flags.
                unsafe {
                    sys::cuEventCreate(raw.as_mut_ptr(), READY_EVENT_FLAGS).result()?;
                    raw.assume_init()
                }
            }
        };
        let event = CompletionEvent {
            raw,
            pool: Some(pool.clone()),
        };
        // SAFETY: both handles are live; re-recording an event that nothing waits on is allowed.
        unsafe { sys::cuEventRecord(event.raw, stream.cu_stream()) }.result()?;
        Ok(event)
    }

    /// Block (sleeping, for a blocking-sync event) until the GPU has reached the event.
    pub(crate) fn synchronize(&self) -> Result<(), DriverError> {
        // SAFETY: the handle is live until drop.
        unsafe { sys::cuEventSynchronize(self.raw) }.result()
    }

    /// Make `stream` wait, on the device, until the GPU has reached the event.
    pub(crate) fn wait_on(&self, stream: &CudaStream) -> Result<(), DriverError> {
        // SAFETY: both handles are live; flags 0 is the only documented value.
        unsafe { sys::cuStreamWaitEvent(stream.cu_stream(), self.raw, 0) }.result()
    }
}

impl Drop for CompletionEvent {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            if let Ok(mut free) = pool.free.lock() {
                free.push(self.raw);
                return;
            }
        }
        // SAFETY: created by `record`, destroyed once. A failure cannot be acted on here.
        let _ = unsafe { sys::cuEventDestroy_v2(self.raw) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completion_events_block_without_timing() {
        assert_eq!(COMPLETION_EVENT_FLAGS, 0x1 | 0x2);
    }
}
