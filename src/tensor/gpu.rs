//! GPU ops: enqueue on a stream, then complete through the device's poller when the GPU is
//! done (host order), or at once (stream order); the buffers they write, counted while they live.

use std::sync::Arc;

use cudarc::driver::CudaSlice;
use std::sync::{Mutex, MutexGuard};

use crate::device::cuda::{driver_error, CompletionEvent};
pub(super) use crate::device::cuda::{CudaDevice, GpuOrder, Stream};
use crate::device::memory::{Allocation, MemTracker};
use crate::engine::{Engine, LaneId, OpError, Var};

/// A tensor's GPU memory, counted by its device's tracker while it lives.
pub(crate) struct GpuBuffer {
    pub(super) slice: CudaSlice<f32>,
    /// Under [`GpuOrder::Stream`], recorded on the compute stream right after the work
    /// that last wrote the buffer: what a reader on another stream or on the host waits
    /// for. Behind a lock only because a replayed graph rewrites its output in place.
    ready: Mutex<Option<CompletionEvent>>,
    _counted: Allocation,
}

impl GpuBuffer {
    /// The event of the last write, if any (held while it is waited on).
    pub(super) fn ready(&self) -> MutexGuard<'_, Option<CompletionEvent>> {
        // Nothing can leave the slot half-written: a poisoned lock's value is still good.
        self.ready.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// After a new write was enqueued: what readers wait for from now on.
    pub(super) fn rewritten(&self, d: &CudaDevice) -> Result<(), String> {
        if d.order() == GpuOrder::Stream {
            *self.ready() = Some(d.record_ready()?);
        }
        Ok(())
    }

    /// Block until the device has written the buffer.
    pub(super) fn wait(&self) -> Result<(), String> {
        match &*self.ready() {
            Some(ready) => ready.synchronize().map_err(|e| driver_error(&e)),
            None => Ok(()),
        }
    }
}

/// A new, uninitialized buffer of `n` f32, counted from now on.
pub(super) fn alloc(
    d: &CudaDevice,
    n: usize,
    mem: &Arc<MemTracker>,
) -> Result<(CudaSlice<f32>, Allocation), String> {
    let counted = mem.clone().track((n as u64).saturating_mul(4));
    Ok((d.alloc(n)?, counted))
}

/// A captured graph and every buffer it reads or writes (they must outlive it).
pub(super) struct GraphState {
    pub(super) graph: crate::device::cuda::ops::GpuGraph,
    pub(super) output: Arc<GpuBuffer>,
    pub(super) _keep: Vec<Arc<GpuBuffer>>,
}

impl Drop for GraphState {
    fn drop(&mut self) {
        // A replay may still be queued: let it finish before the graph and its buffers go.
        let _ = self.graph.device().compute.synchronize();
    }
}

/// The buffer, once the work that writes it is enqueued.
pub(super) fn finish(
    d: &CudaDevice,
    (slice, counted): (CudaSlice<f32>, Allocation),
) -> Result<Arc<GpuBuffer>, String> {
    let buffer = Arc::new(GpuBuffer {
        slice,
        ready: Mutex::new(None),
        _counted: counted,
    });
    buffer.rewritten(d)?;
    Ok(buffer)
}

/// Push an op that runs `enqueue` on the lane's worker; whatever `enqueue` returns is kept
/// alive until the GPU has finished, then the op completes.
#[allow(clippy::too_many_arguments)]
pub(super) fn push<K: Send + 'static>(
    engine: &Engine,
    lane: LaneId,
    name: &'static str,
    reads: &[&Var],
    writes: &[&Var],
    dev: &Arc<CudaDevice>,
    stream: Stream,
    enqueue: impl FnOnce(&Arc<CudaDevice>) -> Result<K, String> + Send + 'static,
) {
    let dev = dev.clone();
    engine.push_async(name, lane, reads, writes, move |done| {
        // An op boundary: an error a drop left on the context is not this op's.
        if let Err(e) = dev.bind() {
            return done.complete(Err(OpError::msg(e)));
        }
        match enqueue(&dev) {
            // Stream order: the compute stream orders what follows, and frees buffers in
            // stream order, so nothing has to be kept alive (see `device::cuda`).
            Ok(keep_alive) if stream == Stream::Compute && dev.order() == GpuOrder::Stream => {
                drop(keep_alive);
                done.complete(Ok(()));
            }
            Ok(keep_alive) => dev.on_done(stream, move |r| {
                drop(keep_alive);
                done.complete(r.map_err(OpError::msg));
            }),
            Err(e) => done.complete(Err(OpError::msg(e))),
        }
    });
}
