//! A tensor's GPU memory: the buffer, the event its readers wait for, and the count of its
//! bytes while it lives.

use std::sync::{Mutex, MutexGuard};

use crate::device::cuda::{CompletionEvent, CudaDevice, DeviceBuffer, GpuError, GpuOrder};
use crate::device::memory::Allocation;

/// A tensor's GPU memory, counted by its device's tracker while it lives. Dropping it frees
/// the buffer in the compute stream's order, or gives it back to the caching allocator.
pub(crate) struct GpuBuffer {
    pub(super) slice: DeviceBuffer,
    /// Under [`GpuOrder::Stream`], recorded on the compute stream right after the work
    /// that last wrote the buffer: what a reader on another stream or on the host waits
    /// for. Behind a lock only because a replayed graph rewrites its output in place.
    ready: Mutex<Option<CompletionEvent>>,
    pub(super) _counted: Allocation,
}

impl GpuBuffer {
    /// A buffer whose writing work is enqueued on `d`'s compute stream: what readers wait for.
    pub(super) fn written(
        d: &CudaDevice,
        slice: DeviceBuffer,
        counted: Allocation,
    ) -> Result<GpuBuffer, GpuError> {
        let buffer = GpuBuffer {
            slice,
            ready: Mutex::new(None),
            _counted: counted,
        };
        buffer.rewritten(d)?;
        Ok(buffer)
    }

    /// The event of the last write, if any (held while it is waited on).
    pub(super) fn ready(&self) -> MutexGuard<'_, Option<CompletionEvent>> {
        // Nothing can leave the slot half-written: a poisoned lock's value is still good.
        self.ready.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// After a new write was enqueued on `d`'s compute stream: what readers wait for from now
    /// on.
    pub(super) fn rewritten(&self, d: &CudaDevice) -> Result<(), GpuError> {
        if d.order() != GpuOrder::Stream {
            return Ok(());
        }
        let mut slot = self.ready();
        *slot = Some(d.record_ready()?);
        Ok(())
    }

    /// Block until the buffer's device has written the buffer.
    pub(super) fn wait(&self) -> Result<(), GpuError> {
        match &*self.ready() {
            Some(ready) => Ok(ready.synchronize()?),
            None => Ok(()),
        }
    }
}
