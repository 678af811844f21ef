//! A GPU runtime with `k` compute streams as engine lanes: `deps --device cuda --streams k`.
//!
//! Each stream of [`ComputeStreams`] gets a lane of one thread (`cuda:0 stream 0`, ...) that
//! enqueues the ops pushed to it. As on the device's own compute lane in stream order, an op
//! completes in the engine once its work is enqueued; the engine orders the ops by their vars
//! (so an op is enqueued only after every op it depends on was), and the streams order their
//! work on the GPU by events ([`StreamOrder`](crate::device::stream_order::StreamOrder)).
//! `wait_all` also waits for the `k` streams.

use std::sync::Arc;

use super::streams::{ComputeStreams, StreamError, StreamMatrix, StreamOp};
use crate::device::{Device, DeviceError, DeviceKind, DeviceRequest, Runtime, RuntimeOptions};
use crate::engine::{Engine, LaneId, LaneSpec, OpError, Var};

/// The runtime of one GPU and its `k` compute streams.
pub struct StreamRuntime {
    /// The engine and the GPU (with its own compute and copy lanes, and its host device).
    pub runtime: Runtime,
    streams: Arc<ComputeStreams>,
    lanes: Vec<LaneId>,
}

/// A matrix on the GPU that ops on the compute streams read and write, with its var.
pub struct GpuMatrix {
    var: Var,
    data: Arc<StreamMatrix>,
}

impl GpuMatrix {
    /// The var the engine orders its accesses by.
    pub fn var(&self) -> &Var {
        &self.var
    }
}

impl StreamRuntime {
    /// Open the GPU with `k` compute streams, each an engine lane.
    pub fn open(options: &RuntimeOptions, k: usize) -> Result<StreamRuntime, DeviceError> {
        let (runtime, (streams, lanes)) =
            Runtime::with_lanes(options, &[DeviceRequest::Cuda], |builder, devices| {
                let (name, dev) = devices
                    .iter()
                    .find_map(|d| match &d.kind {
                        DeviceKind::Cuda(dev) => Some((d.name.clone(), dev.clone())),
                        DeviceKind::Cpu { .. } => None,
                    })
                    .ok_or_else(|| DeviceError::Gpu("no GPU among the devices".into()))?;
                let streams = Arc::new(ComputeStreams::open(&dev, k)?);
                let lanes = (0..streams.len())
                    .map(|i| builder.lane(LaneSpec::threads(format!("{name} stream {i}"), 1)))
                    .collect();
                let sync = streams.clone();
                builder.on_wait_all(Box::new(move || {
                    sync.synchronize().map_err(|e| e.to_string())
                }));
                Ok((streams, lanes))
            })?;
        Ok(StreamRuntime {
            runtime,
            streams,
            lanes,
        })
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.runtime.engine
    }

    /// The GPU.
    pub fn gpu(&self) -> Option<&Arc<Device>> {
        self.runtime.devices.iter().find(|d| d.is_gpu())
    }

    /// The streams (and their lanes).
    pub fn streams(&self) -> &ComputeStreams {
        &self.streams
    }

    /// A `rows`×`cols` matrix holding `values` (uploaded before this returns an error-free
    /// handle; the first op on any stream waits for the upload).
    pub fn upload(&self, values: &[f32], shape: (usize, usize)) -> Result<GpuMatrix, StreamError> {
        Ok(GpuMatrix {
            var: Var::new(),
            data: Arc::new(self.streams.upload(values, shape)?),
        })
    }

    /// A `rows`×`cols` matrix for ops to write.
    pub fn empty(&self, shape: (usize, usize)) -> Result<GpuMatrix, StreamError> {
        Ok(GpuMatrix {
            var: Var::new(),
            data: Arc::new(self.streams.empty(shape)?),
        })
    }

    /// Push `out = op(inputs)` on stream `stream`'s lane; returns at once. An `out` among the
    /// inputs is read and written in place.
    pub fn push(
        &self,
        stream: usize,
        op: StreamOp,
        inputs: &[&GpuMatrix],
        out: &GpuMatrix,
    ) -> Result<(), StreamError> {
        let lane = *self.lanes.get(stream).ok_or(StreamError::NoStream {
            stream,
            streams: self.lanes.len(),
        })?;
        let reads: Vec<&Var> = inputs.iter().map(|m| &m.var).collect();
        let data: Vec<Arc<StreamMatrix>> = inputs.iter().map(|m| m.data.clone()).collect();
        let (target, streams) = (out.data.clone(), self.streams.clone());
        self.engine()
            .push(op.name(), lane, &reads, &[&out.var], move || {
                let dev = streams.device();
                dev.bind().map_err(OpError::from)?;
                let inputs: Vec<&StreamMatrix> = data.iter().map(|m| &**m).collect();
                streams
                    .enqueue(stream, op, &inputs, &target)
                    .map_err(OpError::from)
            });
        Ok(())
    }

    /// Block until `m`'s last write pushed so far is done on the GPU (op by op).
    pub fn wait(&self, m: &GpuMatrix) -> Result<(), StreamError> {
        self.engine().wait_to_read(&m.var)?;
        Ok(self.streams.wait_written(&m.data)?)
    }

    /// `m`'s values once every write pushed so far is done.
    pub fn read(&self, m: &GpuMatrix) -> Result<Vec<f32>, StreamError> {
        self.engine().wait_to_read(&m.var)?;
        Ok(self.streams.read(&m.data)?)
    }
}
