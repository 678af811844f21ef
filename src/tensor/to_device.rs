//! [`Tensor::copy_to_device`]: a host tensor's values copied into a device's memory (the
//! host→device direction of `run-copy`). On a GPU the copy runs on the upload stream, from the
//! host tensor's own memory: page-locked when it was filled by a device→host copy, pageable
//! otherwise. On a CPU device, whose memory is host memory, it is a copy into a separate
//! buffer on the device's copy lane.

use std::sync::Arc;

use super::Tensor;
use crate::device::{Device, DeviceKind};

impl Tensor {
    /// This host tensor's values, copied to `device` by an op of its own.
    pub fn copy_to_device(&self, device: &Arc<Device>) -> Tensor {
        let out = Tensor::pending(&self.place.engine, device, &self.place.shape);
        match &device.kind {
            DeviceKind::Cpu { .. } => self.copy_host("copy to device", device.copy, &out),
            #[cfg(feature = "cuda")]
            DeviceKind::Cuda(dev) => gpu::upload_from_host(self, dev, &out),
        }
        out
    }
}

#[cfg(feature = "cuda")]
mod gpu {
    use std::sync::Arc;

    use super::super::gpu::{finish, CudaDevice, GpuOrder, Stream};
    use super::super::storage::{read, write, Storage};
    use super::Tensor;
    use crate::device::cuda::UploadSource;
    use crate::engine::OpError;

    /// Push the upload of `src` (a host tensor) into `out` on `dev`, on the GPU's compute lane
    /// (the lane only enqueues; the copy runs on the upload stream). The source is kept alive
    /// until the compute stream has passed the copy: under stream order the op completes at
    /// once and the compute poller releases the source later.
    pub(in crate::tensor) fn upload_from_host(src: &Tensor, dev: &Arc<CudaDevice>, out: &Tensor) {
        let (from, dst) = (src.data.clone(), out.data.clone());
        let mem = out.place.device.memory.clone();
        let n = out.len();
        let d = dev.clone();
        src.place.engine.push_async(
            "copy to device",
            out.place.device.compute,
            &[src.var()],
            &[out.var()],
            move |done| {
                let enqueued = (|| -> Result<(), OpError> {
                    let mut slot = write(&dst)?;
                    let storage = read(&from)?;
                    let source = match &*storage {
                        Storage::Pinned(p) => UploadSource::Pinned(p),
                        Storage::Host(values) => UploadSource::Pageable(values),
                        Storage::Cuda(_) | Storage::Empty => {
                            return Err(OpError::msg(
                                "copy to device: the source is not a host tensor with values",
                            ))
                        }
                    };
                    if source.len() != n {
                        return Err(OpError::msg(format!(
                            "copy to device: {} values for {n} slots",
                            source.len()
                        )));
                    }
                    let counted = mem.clone().track((n as u64).saturating_mul(4));
                    let slice = d.upload_on_copy_engine(source)?;
                    *slot = Storage::Cuda(finish(&d, (slice, counted))?);
                    Ok(())
                })();
                if let Err(e) = enqueued {
                    return done.complete(Err(e));
                }
                let keep = from;
                if d.order() == GpuOrder::Stream {
                    d.on_done(Stream::Compute, move |_| drop(keep));
                    done.complete(Ok(()));
                } else {
                    d.on_done(Stream::Compute, move |r| {
                        drop(keep);
                        done.complete(r.map_err(OpError::from));
                    });
                }
            },
        );
    }
}
