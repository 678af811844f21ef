//! A lazy tensor front end over the engine.
//!
//! Every operation pushes an op and returns a new [`Tensor`] at once; the data is computed when
//! the engine gets to it. Reading the values back ([`Tensor::to_vec`]) is the only blocking
//! call, exactly like MXNet's `NDArray` and the book's `y.wait_to_read()`.
//!
//! The buffer sits behind an `RwLock` only to make the sharing safe in Rust's terms: the
//! engine already orders every access through the tensor's [`Var`], so the lock is never
//! contended. The var owns the buffer ([`DataVar`]): the ops of the hot paths reach it
//! through the vars they name rather than through handles of their own, so the worker that
//! runs them moves no reference count the pushing thread also moves, and the engine frees the
//! values once the last tensor handle is gone and the last op that uses them has finished.
//!
//! One concept per file: `storage.rs` (where the values live and the locks around them),
//! `host.rs` (host op bodies), `gpu.rs` (GPU op bodies), `gpu_buffer.rs` (a tensor's GPU
//! memory), `graph.rs` (a CUDA graph of tensor ops); this file is the public API, which checks
//! shapes and devices at push time and picks the body.

use std::sync::Arc;

use ndarray::{ArrayD, ArrayViewD};

#[cfg(feature = "cuda")]
use crate::device::cuda::GpuError;
use crate::device::{Device, DeviceKind, Map};
use crate::engine::{DataVar, Engine, EngineError, OpError, Var};
use storage::{into_flat, Buffer, BufferCell, Storage};

#[cfg(feature = "cuda")]
mod gpu;
#[cfg(feature = "cuda")]
mod gpu_buffer;
#[cfg(feature = "cuda")]
mod graph;
mod host;
mod storage;
mod to_device;

#[cfg(feature = "cuda")]
pub use graph::CapturedGraph;

#[derive(Debug, thiserror::Error)]
pub enum TensorError {
    /// Shapes that cannot be combined; caught at push time, before anything runs.
    #[error("shape mismatch: {0}")]
    Shape(String),
    /// The op needs the tensor on another kind of device (a GPU tensor where host memory is
    /// needed, or the reverse); caught at push time.
    #[error("wrong device: {0}")]
    Device(String),
    /// Reading the values back failed (device copy, poisoned buffer).
    #[error("reading tensor values failed: {0}")]
    Read(#[source] ReadError),
    /// An op upstream failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// Why [`Tensor::to_vec`] could not read the values back.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("tensor buffer poisoned by an earlier panic")]
    Poisoned,
    #[error("the tensor was never written")]
    NeverWritten,
    #[cfg(feature = "cuda")]
    #[error("GPU buffer on a CPU device")]
    GpuOnCpu,
    /// The copy back from the device failed.
    #[cfg(feature = "cuda")]
    #[error(transparent)]
    Gpu(#[from] GpuError),
}

/// How `Tensor::filled` generates values.
#[derive(Clone, Copy)]
enum Fill {
    Ones,
    Uniform(u64),
}

impl Fill {
    fn name(self) -> &'static str {
        match self {
            Fill::Ones => "ones",
            Fill::Uniform(_) => "uniform",
        }
    }
}

/// A handle to a tensor on a device. Cloning shares the same data.
#[derive(Clone)]
pub struct Tensor {
    place: Arc<Placement>,
    /// The values, owned by the var the engine tracks them by.
    data: Buffer,
}

/// Where a tensor lives and its shape: what the output of an element-wise op shares with its
/// input. One handle instead of three, so a new tensor moves one reference count, not three.
struct Placement {
    engine: Engine,
    device: Arc<Device>,
    shape: Box<[usize]>,
}

impl Placement {
    fn new(engine: &Engine, device: &Arc<Device>, shape: &[usize]) -> Arc<Placement> {
        Arc::new(Placement {
            engine: engine.clone(),
            device: device.clone(),
            shape: shape.into(),
        })
    }
}

impl Tensor {
    /// A tensor whose value will be written by the op the caller pushes next.
    fn pending(engine: &Engine, device: &Arc<Device>, shape: &[usize]) -> Tensor {
        Tensor::pending_at(Placement::new(engine, device, shape))
    }

    /// [`pending`](Tensor::pending) where `place` says where and of what shape.
    fn pending_at(place: Arc<Placement>) -> Tensor {
        Tensor {
            data: Buffer(DataVar::new(BufferCell::pending(&place))),
            place,
        }
    }

    /// A placement beside this tensor's (same engine and device) with another shape.
    fn reshaped(&self, shape: &[usize]) -> Arc<Placement> {
        Placement::new(&self.place.engine, &self.place.device, shape)
    }

    #[cfg(feature = "cuda")]
    fn len(&self) -> usize {
        self.place.shape.iter().product()
    }

    /// A tensor whose values the front end already holds (a minibatch a data loader just
    /// produced): its memory is allocated, and counted, now, not when an op runs.
    /// On a GPU the values are uploaded by an op on its compute lane (the host array is counted
    /// on the GPU's host device until then).
    pub fn from_host(engine: &Engine, device: &Arc<Device>, array: ArrayD<f32>) -> Tensor {
        let place = Placement::new(engine, device, array.shape());
        #[cfg(feature = "cuda")]
        if let DeviceKind::Cuda(dev) = &device.kind {
            return Tensor::upload(engine, device, dev, place, array);
        }
        Tensor {
            data: Buffer::new(
                device.memory.clone(),
                &place.shape,
                Storage::Host(into_flat(array)),
            ),
            place,
        }
    }

    pub fn ones(engine: &Engine, device: &Arc<Device>, shape: &[usize]) -> Tensor {
        Tensor::filled(engine, device, shape, Fill::Ones)
    }

    /// Uniform values reproducible from `seed`: in [0, 1) on a CPU device whatever its thread
    /// count; in (0, 1] on a GPU (cuRAND's generator, reseeded for each tensor).
    pub fn uniform(engine: &Engine, device: &Arc<Device>, shape: &[usize], seed: u64) -> Tensor {
        Tensor::filled(engine, device, shape, Fill::Uniform(seed))
    }

    /// A new tensor whose values an op on `device` generates.
    fn filled(engine: &Engine, device: &Arc<Device>, shape: &[usize], fill: Fill) -> Tensor {
        let out = Tensor::pending(engine, device, shape);
        match &device.kind {
            DeviceKind::Cpu { .. } => Tensor::fill_host(engine, device, &out, shape, fill),
            #[cfg(feature = "cuda")]
            DeviceKind::Cuda(dev) => Tensor::fill_gpu(dev, &out, fill),
        }
        out
    }

    /// An element-wise op, run on the tensor's device's compute lane: `f` on a host tensor,
    /// the matching kernel on a GPU.
    fn map(
        &self,
        name: &'static str,
        f: impl Fn(f32) -> f32 + Send + 'static,
        kernel: Map,
    ) -> Tensor {
        #[cfg(feature = "cuda")]
        if let DeviceKind::Cuda(dev) = &self.place.device.kind {
            return self.map_gpu(dev, name, kernel);
        }
        let _ = kernel;
        self.map_host(name, f)
    }

    /// `max(self, 0)`, element-wise.
    pub fn relu(&self) -> Tensor {
        self.map("relu", |v| v.max(0.0), Map::Relu)
    }

    /// A host computation on this tensor as one engine op, producing a tensor of `shape`:
    /// how a captured graph is replayed (one push, one dependency resolution).
    pub fn apply<E>(
        &self,
        name: &'static str,
        shape: &[usize],
        f: impl FnOnce(ArrayViewD<'_, f32>) -> Result<ArrayD<f32>, E> + Send + 'static,
    ) -> Tensor
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        self.push_host(name, self.reshaped(shape), move |x| {
            f(x).map_err(OpError::from)
        })
    }

    /// `self + row`, the 1×n `row` added to every row of the m×n `self` (a layer's bias).
    pub fn add_row(&self, row: &Tensor) -> Result<Tensor, TensorError> {
        let (a, r) = (&self.place.shape[..], row.shape());
        if a.len() != 2 || r != [1, a[1]] {
            return Err(TensorError::Shape(format!(
                "cannot add a {r:?} row to {a:?}"
            )));
        }
        #[cfg(feature = "cuda")]
        if let DeviceKind::Cuda(dev) = &self.place.device.kind {
            return Ok(self.add_row_gpu(row, dev, (a[0], a[1])));
        }
        Ok(self.add_row_host(row))
    }

    /// `self + s`, element-wise.
    pub fn add_scalar(&self, s: f32) -> Tensor {
        self.map("add_scalar", move |v| v + s, Map::AddScalar(s))
    }

    /// `s · self`, element-wise.
    pub fn scale(&self, s: f32) -> Tensor {
        self.map("scale", move |v| v * s, Map::Scale(s))
    }

    /// `a · self + b · other`, element-wise (host tensors of one shape), on `self`'s device.
    pub fn axpby(&self, a: f32, other: &Tensor, b: f32) -> Result<Tensor, TensorError> {
        self.same_shape(other, |s, o| format!("cannot add {s:?} and {o:?}"))?;
        Ok(self.axpby_host(a, other, b))
    }

    /// `self ← a · self + b · other`, element-wise and **in place** (host tensors of one shape):
    /// the op reads `other` and read-modify-writes `self`'s var, so it must wait for every
    /// earlier reader of `self` (write after read) and every earlier write (write after write).
    /// `other` may be `self` itself.
    pub fn axpby_assign(&self, a: f32, other: &Tensor, b: f32) -> Result<(), TensorError> {
        self.same_shape(other, |s, o| format!("cannot add {o:?} into {s:?}"))?;
        self.axpby_assign_host(a, other, b);
        Ok(())
    }

    /// A shape error worded by `message` of `self`'s shape and `other`'s, unless they are one.
    fn same_shape(
        &self,
        other: &Tensor,
        message: fn(&[usize], &[usize]) -> String,
    ) -> Result<(), TensorError> {
        let (s, o) = (self.shape(), other.shape());
        (s == o)
            .then_some(())
            .ok_or_else(|| TensorError::Shape(message(s, o)))
    }

    /// A new tensor with the same values, computed by an op on the device's compute lane.
    pub fn duplicate(&self) -> Tensor {
        self.map("duplicate", |v| v, Map::Scale(1.0))
    }

    /// Matrix product of two 2-D tensors, on `self`'s device.
    pub fn matmul(&self, rhs: &Tensor) -> Result<Tensor, TensorError> {
        let (a, b) = (&self.place.shape[..], rhs.shape());
        if a.len() != 2 || b.len() != 2 || a[1] != b[0] {
            return Err(TensorError::Shape(format!(
                "cannot multiply {a:?} by {b:?}"
            )));
        }
        let (m, n) = (a[0], b[1]);
        #[cfg(feature = "cuda")]
        if let DeviceKind::Cuda(dev) = &self.place.device.kind {
            return Ok(self.matmul_gpu(rhs, dev, (m, n)));
        }
        Ok(self.matmul_host(rhs, m, n))
    }

    /// Copy the values to host memory on the device's *copy* lane, so the copy overlaps the
    /// device's compute (the book's `y.to('cpu')` in §8.3.2). On a GPU the destination is
    /// ordinary pinned memory; on a CPU device it is a separate host buffer.
    pub fn copy_to_host(&self) -> Tensor {
        // The copy lives in host memory: ops on it run on the host device (a GPU's companion
        // CPU device), not on the GPU's lanes.
        let host = self.place.device.host_device(&self.place.device);
        let out = Tensor::pending_at(Placement::new(&self.place.engine, &host, &self.place.shape));
        match &self.place.device.kind {
            DeviceKind::Cpu { .. } => self.copy_host("copy to host", self.place.device.copy, &out),
            #[cfg(feature = "cuda")]
            DeviceKind::Cuda(dev) => self.copy_to_host_from_gpu(dev, &out),
        }
        out
    }

    /// The same host tensor, with ops on it placed on another CPU device (host memory is
    /// shared by all CPU devices, so nothing is copied). GPU tensors must be copied instead.
    pub fn placed_on(&self, device: &Arc<Device>) -> Result<Tensor, TensorError> {
        if (self.place.device.is_gpu() || device.is_gpu()) && self.place.device.name != device.name
        {
            return Err(TensorError::Device(format!(
                "a tensor on {} cannot be used on {} without a copy",
                self.place.device.name, device.name
            )));
        }
        Ok(Tensor {
            place: Placement::new(&self.place.engine, device, &self.place.shape),
            data: self.data.clone(),
        })
    }

    /// Block until the value is computed (the book's `wait_to_read`): on a GPU in stream
    /// order, also until the device has run the op that wrote it.
    pub fn wait_to_read(&self) -> Result<(), EngineError> {
        self.place.engine.wait_to_read(self.var())?;
        #[cfg(feature = "cuda")]
        if let (Ok(data), DeviceKind::Cuda(_)) = (self.data.read(), &self.place.device.kind) {
            if let Storage::Cuda(buf) = &*data {
                buf.wait()
                    .map_err(|e| EngineError::DeviceSync(e.to_string()))?;
            }
        }
        Ok(())
    }

    /// Wait for the value and copy it out, row-major.
    pub fn to_vec(&self) -> Result<Vec<f32>, TensorError> {
        self.wait_to_read()?;
        let data = self
            .data
            .read()
            .map_err(|_| TensorError::Read(ReadError::Poisoned))?;
        match &*data {
            Storage::Empty => Err(TensorError::Read(ReadError::NeverWritten)),
            Storage::Host(values) => Ok(values.to_vec()),
            #[cfg(feature = "cuda")]
            Storage::Cuda(slice) => match &self.place.device.kind {
                DeviceKind::Cuda(d) => d
                    .read_back(&slice.slice, slice.ready().as_ref())
                    .map_err(|e| TensorError::Read(e.into())),
                DeviceKind::Cpu { .. } => Err(TensorError::Read(ReadError::GpuOnCpu)),
            },
            #[cfg(feature = "cuda")]
            Storage::Pinned(host) => host
                .as_slice()
                .map(<[f32]>::to_vec)
                .map_err(|e| TensorError::Read(e.into())),
        }
    }

    pub fn shape(&self) -> &[usize] {
        &self.place.shape
    }

    /// The var the engine tracks this tensor's buffer by.
    pub fn var(&self) -> &Var {
        self.data.var()
    }

    pub fn device(&self) -> &Arc<Device> {
        &self.place.device
    }
}

#[cfg(test)]
mod tests;

#[cfg(all(test, feature = "cuda"))]
mod gpu_hardening_tests;
#[cfg(all(test, feature = "cuda"))]
mod gpu_path_tests;
