//! GPU op bodies: enqueue on a stream, then complete through the device's poller when the GPU
//! is done (host order), or at once (stream order). An op that writes a new GPU buffer goes
//! through [`write_new`], which owns the steps every such op shares; the copy to pinned host
//! memory and the CUDA graph (`graph.rs`) push their bodies with [`push`] directly.

use std::sync::Arc;

use cudarc::driver::CudaSlice;
use ndarray::ArrayD;

use super::gpu_buffer::GpuBuffer;
use super::storage::{read, write, Buffer, Storage};
use super::{Fill, Map, Placement, Tensor};
pub(super) use crate::device::cuda::{CudaDevice, GpuOrder, Stream};
use crate::device::cuda::{DeviceBuffer, GpuError};
use crate::device::memory::{Allocation, MemTracker};
use crate::device::Device;
use crate::engine::{Engine, LaneId, OpError, Var};

/// The GPU buffers of `x` and `y`, one lock at a time: `x · x` must not hold two reads of one
/// buffer.
fn read_pair(x: &Buffer, y: &Buffer) -> Result<(Arc<GpuBuffer>, Arc<GpuBuffer>), OpError> {
    let a = read(x).and_then(|s| s.cuda())?;
    let b = if x.same(y) {
        a.clone()
    } else {
        read(y).and_then(|s| s.cuda())?
    };
    Ok((a, b))
}

/// A new, uninitialized buffer of `n` f32, counted from now on.
pub(super) fn alloc(
    d: &CudaDevice,
    n: usize,
    mem: &Arc<MemTracker>,
) -> Result<(DeviceBuffer, Allocation), GpuError> {
    let counted = mem.clone().track((n as u64).saturating_mul(4));
    Ok((d.alloc_buffer(n)?, counted))
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
    (slice, counted): (DeviceBuffer, Allocation),
) -> Result<Arc<GpuBuffer>, GpuError> {
    Ok(Arc::new(GpuBuffer::written(d, slice, counted)?))
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
    enqueue: impl FnOnce(&Arc<CudaDevice>) -> Result<K, OpError> + Send + 'static,
) {
    let dev = dev.clone();
    engine.push_async(name, lane, reads, writes, move |done| {
        // An op boundary: an error a drop left on the context is not this op's.
        if let Err(e) = dev.bind() {
            return done.complete(Err(OpError::from(e)));
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
                done.complete(r.map_err(OpError::from));
            }),
            Err(e) => done.complete(Err(e)),
        }
    });
}

/// Push the op that writes `out`, a new tensor on a GPU, on its device's compute lane: lock
/// `out`'s buffer, take the inputs with `inputs`, allocate the output (counted from now on),
/// enqueue `launch`, and store the output once its work is enqueued. Every fallible step comes
/// before the GPU work is queued: once it is, the inputs and the output must live until its
/// event (they travel in the result, kept alive until the GPU is done).
fn write_new<I: Send + 'static>(
    name: &'static str,
    out: &Tensor,
    reads: &[&Var],
    dev: &Arc<CudaDevice>,
    inputs: impl FnOnce() -> Result<I, OpError> + Send + 'static,
    launch: impl FnOnce(&CudaDevice, &I, &mut CudaSlice<f32>) -> Result<(), OpError> + Send + 'static,
) {
    let place = &out.place;
    let (dst, n, mem) = (out.data.clone(), out.len(), place.device.memory.clone());
    push(
        &place.engine,
        place.device.compute,
        name,
        reads,
        &[out.var()],
        dev,
        Stream::Compute,
        move |d| {
            let mut slot = write(&dst)?;
            let inputs = inputs()?;
            let mut y = alloc(d, n, &mem)?;
            launch(d, &inputs, &mut y.0)?;
            *slot = Storage::Cuda(finish(d, y)?);
            drop(slot);
            Ok((inputs, dst))
        },
    );
}

impl Tensor {
    /// [`from_host`](Tensor::from_host) on a GPU: the values are uploaded by an op on its
    /// compute lane (the host array is counted on the GPU's host device until then).
    pub(super) fn upload(
        engine: &Engine,
        device: &Arc<Device>,
        dev: &Arc<CudaDevice>,
        place: Arc<Placement>,
        array: ArrayD<f32>,
    ) -> Tensor {
        let host = Tensor::from_host(engine, &device.host_device(device), array);
        let out = Tensor::pending_at(place);
        let src = host.data.clone();
        write_new(
            "upload",
            &out,
            &[host.var()],
            dev,
            move || Ok(src),
            |d, src, y| {
                let values = read(src)?;
                Ok(d.upload(values.flat()?, y)?)
            },
        );
        out
    }

    /// [`filled`](Tensor::filled) on a GPU: `out`'s values generated on its compute stream.
    pub(super) fn fill_gpu(dev: &Arc<CudaDevice>, out: &Tensor, fill: Fill) {
        write_new(
            fill.name(),
            out,
            &[],
            dev,
            || Ok(()),
            move |d, (), y| {
                match fill {
                    Fill::Ones => d.fill(y, 1.0)?,
                    Fill::Uniform(seed) => d.fill_uniform(y, seed)?,
                }
                Ok(())
            },
        );
    }

    /// An element-wise op on a GPU: the kernel `kernel`.
    pub(super) fn map_gpu(&self, dev: &Arc<CudaDevice>, name: &'static str, kernel: Map) -> Tensor {
        let out = Tensor::pending_at(self.place.clone());
        let src = self.data.clone();
        write_new(
            name,
            &out,
            &[self.var()],
            dev,
            move || read(&src).and_then(|s| s.cuda()),
            move |d, x, y| Ok(d.map(kernel, &x.slice, y)?),
        );
        out
    }

    /// [`add_row`](Tensor::add_row) on a GPU, of a `rows`×`cols` tensor (shapes checked by the
    /// caller).
    pub(super) fn add_row_gpu(
        &self,
        row: &Tensor,
        dev: &Arc<CudaDevice>,
        (rows, cols): (usize, usize),
    ) -> Tensor {
        let out = Tensor::pending_at(self.place.clone());
        let (x, b) = (self.data.clone(), row.data.clone());
        write_new(
            "add_row",
            &out,
            &[self.var(), row.var()],
            dev,
            move || read_pair(&x, &b),
            move |d, (xs, bs), y| Ok(d.add_row(&xs.slice, &bs.slice, y, (rows, cols))?),
        );
        out
    }

    /// [`matmul`](Tensor::matmul) on a GPU, of an `m`×`n` result (shapes checked by the
    /// caller).
    pub(super) fn matmul_gpu(
        &self,
        rhs: &Tensor,
        dev: &Arc<CudaDevice>,
        (m, n): (usize, usize),
    ) -> Tensor {
        let out = Tensor::pending(&self.place.engine, &self.place.device, &[m, n]);
        let (x, y) = (self.data.clone(), rhs.data.clone());
        let k_dim = self.place.shape[1];
        write_new(
            "matmul",
            &out,
            &[self.var(), rhs.var()],
            dev,
            move || read_pair(&x, &y),
            move |d, (a, b), c| Ok(d.matmul(&a.slice, &b.slice, c, (m, k_dim, n))?),
        );
        out
    }

    /// [`copy_to_host`](Tensor::copy_to_host) from a GPU: into ordinary pinned memory, on the
    /// copy stream, after the source's ready event.
    pub(super) fn copy_to_host_from_gpu(&self, dev: &Arc<CudaDevice>, out: &Tensor) {
        let (src, dst) = (self.data.clone(), out.data.clone());
        let n = self.len();
        push(
            &self.place.engine,
            self.place.device.copy,
            "copy to host",
            &[self.var()],
            &[out.var()],
            dev,
            Stream::Copy,
            move |d| {
                let mut slot = write(&dst)?;
                let from = read(&src).and_then(|s| s.cuda())?;
                let mut host = d.alloc_pinned(n)?;
                let ready = from.ready();
                d.copy_to_host(&from.slice, ready.as_ref(), &mut host)?;
                drop(ready);
                *slot = Storage::Pinned(Arc::new(host));
                drop(slot);
                Ok((from, dst))
            },
        )
    }
}
