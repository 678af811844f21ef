//! A tensor's GPU memory: the buffer, the event its readers wait for, and the count of its
//! bytes while it lives.

use std::sync::atomic::{AtomicBool, Ordering};
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
    /// Under `lazy-ready-events`: the buffer was written since its ready event (if any), and
    /// the event is recorded when a reader first asks for it. Changed under `ready`'s lock.
    unrecorded: AtomicBool,
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
            unrecorded: AtomicBool::new(false),
            _counted: counted,
        };
        buffer.rewritten(d)?;
        Ok(buffer)
    }

    fn lock(&self) -> MutexGuard<'_, Option<CompletionEvent>> {
        // Nothing can leave the slot half-written: a poisoned lock's value is still good.
        self.ready.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The event of the last write, if any (held while it is waited on). Under
    /// `lazy-ready-events` it is recorded now, on `d`'s compute stream, if the buffer was
    /// written since: a reader runs after the writing op was enqueued, so the event marks a
    /// point at or after the write.
    pub(super) fn ready(
        &self,
        d: &CudaDevice,
    ) -> Result<MutexGuard<'_, Option<CompletionEvent>>, GpuError> {
        let mut slot = self.lock();
        if self.unrecorded.load(Ordering::Acquire) {
            *slot = Some(d.record_ready()?);
            self.unrecorded.store(false, Ordering::Release);
        }
        Ok(slot)
    }

    /// After a new write was enqueued on `d`'s compute stream: what readers wait for from now
    /// on.
    pub(super) fn rewritten(&self, d: &CudaDevice) -> Result<(), GpuError> {
        if d.order() != GpuOrder::Stream {
            return Ok(());
        }
        let mut slot = self.lock();
        if d.ops().lazy_ready_events {
            *slot = None;
            self.unrecorded.store(true, Ordering::Release);
        } else {
            *slot = Some(d.record_ready()?);
        }
        Ok(())
    }

    /// Block until `d` (the buffer's device) has written the buffer.
    pub(super) fn wait(&self, d: &CudaDevice) -> Result<(), GpuError> {
        match &*self.ready(d)? {
            Some(ready) => Ok(ready.synchronize()?),
            None => Ok(()),
        }
    }
}
