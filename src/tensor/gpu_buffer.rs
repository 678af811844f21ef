//! A tensor's GPU memory: the buffer, the event its readers wait for, and the count of its
//! bytes while it lives.

use std::sync::{Mutex, MutexGuard};

use cudarc::driver::CudaSlice;

use crate::device::cuda::{CompletionEvent, CudaDevice, GpuError, GpuOrder};
use crate::device::memory::Allocation;

/// A tensor's GPU memory, counted by its device's tracker while it lives.
pub(crate) struct GpuBuffer {
    pub(super) slice: CudaSlice<f32>,
    /// Under [`GpuOrder::Stream`], recorded on the compute stream right after the work
    /// that last wrote the buffer: what a reader on another stream or on the host waits
    /// for. Behind a lock only because a replayed graph rewrites its output in place.
    pub(super) ready: Mutex<Option<CompletionEvent>>,
    pub(super) _counted: Allocation,
}

impl Drop for GpuBuffer {
    /// The last handle may be dropped on any thread (a CPU device's worker, a library user's
    /// thread): the context must be current there for the stream-ordered free that follows.
    fn drop(&mut self) {
        crate::device::cuda::make_current(self.slice.context());
    }
}

impl GpuBuffer {
    /// The event of the last write, if any (held while it is waited on).
    pub(super) fn ready(&self) -> MutexGuard<'_, Option<CompletionEvent>> {
        // Nothing can leave the slot half-written: a poisoned lock's value is still good.
        self.ready.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// After a new write was enqueued: what readers wait for from now on.
    pub(super) fn rewritten(&self, d: &CudaDevice) -> Result<(), GpuError> {
        if d.order() == GpuOrder::Stream {
            *self.ready() = Some(d.record_ready()?);
        }
        Ok(())
    }

    /// Block until the device has written the buffer.
    pub(super) fn wait(&self) -> Result<(), GpuError> {
        match &*self.ready() {
            Some(ready) => Ok(ready.synchronize()?),
            None => Ok(()),
        }
    }
}
