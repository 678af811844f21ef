//! A lazy tensor front end over the engine.
//!
//! Every operation pushes an op and returns a new [`Tensor`] at once; the data is computed when
//! the engine gets to it. Reading the values back ([`Tensor::to_vec`]) is the only blocking
//! call, exactly like MXNet's `NDArray` and the book's `y.wait_to_read()`.
//!
//! The buffer sits behind an `RwLock` only to make the sharing safe in Rust's terms: the
//! engine already orders every access through the tensor's [`Var`], so the lock is never
//! contended.

use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use ndarray::{ArrayD, Ix2, IxDyn};

#[cfg(feature = "cuda")]
use crate::device::cuda_ops::Map as Kernel;
use crate::device::{cpu, Device, DeviceKind};
use crate::engine::{Engine, EngineError, OpError, Var};

/// Errors of the tensor front end.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TensorError {
    /// Shapes that cannot be combined; caught at push time, before anything runs.
    #[error("shape mismatch: {0}")]
    Shape(String),
    /// Reading the values back failed (device copy, poisoned buffer).
    #[error("reading tensor values failed: {0}")]
    Read(String),
    /// An op upstream failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// Where a tensor's values are.
pub(crate) enum Storage {
    /// Not written yet.
    Empty,
    /// Host memory, registered with the device's tracker while it lives (the guard is held
    /// only for its drop, which unregisters the bytes).
    Host(
        ArrayD<f32>,
        #[allow(dead_code)] crate::device::memory::Allocation,
    ),
    #[cfg(feature = "cuda")]
    Cuda(Arc<gpu::GpuBuffer>),
    /// Page-locked host memory, filled by a device→host copy, with its shape.
    #[cfg(feature = "cuda")]
    Pinned(Arc<crate::device::cuda::PinnedBuffer>, Arc<[usize]>),
}

impl Storage {
    /// A host buffer, counted by `memory` until it is freed.
    fn host_tracked(
        array: ArrayD<f32>,
        memory: &Arc<crate::device::memory::MemTracker>,
    ) -> Storage {
        let bytes = (array.len() * std::mem::size_of::<f32>()) as u64;
        Storage::Host(array, memory.track(bytes))
    }

    /// The values in host memory: borrowed from an ordinary host buffer, or copied out of a
    /// pinned buffer that a device→host copy filled (so a host copy is usable by host ops).
    fn host(&self) -> Result<std::borrow::Cow<'_, ArrayD<f32>>, OpError> {
        match self {
            Storage::Host(a, _) => Ok(std::borrow::Cow::Borrowed(a)),
            #[cfg(feature = "cuda")]
            Storage::Pinned(buf, shape) => {
                let values = buf.as_slice().map_err(OpError::msg)?.to_vec();
                ArrayD::from_shape_vec(IxDyn(shape), values)
                    .map(std::borrow::Cow::Owned)
                    .map_err(OpError::from)
            }
            _ => Err(OpError::msg("expected a tensor in host memory")),
        }
    }

    #[cfg(feature = "cuda")]
    fn cuda(&self) -> Result<Arc<gpu::GpuBuffer>, OpError> {
        match self {
            Storage::Cuda(s) => Ok(s.clone()),
            _ => Err(OpError::msg("expected a tensor in GPU memory")),
        }
    }
}

type Buffer = Arc<RwLock<Storage>>;

/// Which element-wise kernel an op runs on a GPU (the host closure's twin).
#[derive(Clone, Copy)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
enum Map {
    AddScalar(f32),
    Scale(f32),
    Relu,
}

#[cfg(feature = "cuda")]
impl From<Map> for Kernel {
    fn from(m: Map) -> Kernel {
        match m {
            Map::AddScalar(s) => Kernel::AddScalar(s),
            Map::Scale(s) => Kernel::Scale(s),
            Map::Relu => Kernel::Relu,
        }
    }
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

fn read(buf: &Buffer) -> Result<RwLockReadGuard<'_, Storage>, OpError> {
    buf.read()
        .map_err(|_| OpError::msg("tensor buffer poisoned by an earlier panic"))
}

/// Read locks on two buffers that may be one (`x · x`): the lock is then taken once, since a
/// second read lock of one `RwLock` on one thread deadlocks if a writer queued in between.
/// The second guard is `None` when both are the same buffer.
type ReadPair<'a> = (
    RwLockReadGuard<'a, Storage>,
    Option<RwLockReadGuard<'a, Storage>>,
);

fn read_both<'a>(x: &'a Buffer, y: &'a Buffer) -> Result<ReadPair<'a>, OpError> {
    let first = read(x)?;
    let second = if Arc::ptr_eq(x, y) {
        None
    } else {
        Some(read(y)?)
    };
    Ok((first, second))
}

fn write(buf: &Buffer) -> Result<RwLockWriteGuard<'_, Storage>, OpError> {
    buf.write()
        .map_err(|_| OpError::msg("tensor buffer poisoned by an earlier panic"))
}

/// A handle to a tensor on a device. Cloning shares the same data.
#[derive(Clone)]
pub struct Tensor {
    engine: Engine,
    device: Arc<Device>,
    var: Var,
    data: Buffer,
    shape: Arc<[usize]>,
}

impl Tensor {
    /// A tensor whose value will be written by the op the caller pushes next.
    fn pending(engine: &Engine, device: &Arc<Device>, shape: &[usize]) -> Tensor {
        Tensor::pending_shaped(engine, device, shape.into())
    }

    fn pending_shaped(engine: &Engine, device: &Arc<Device>, shape: Arc<[usize]>) -> Tensor {
        Tensor {
            engine: engine.clone(),
            device: device.clone(),
            var: Var::new(),
            data: Arc::new(RwLock::new(Storage::Empty)),
            shape,
        }
    }

    #[cfg(feature = "cuda")]
    fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// A tensor whose values the front end already holds (a minibatch a data loader just
    /// produced): its memory is allocated, and counted, now, not when an op runs.
    /// On a GPU the values are uploaded by an op on its compute lane (the host array is counted
    /// on the GPU's host device until then).
    pub fn from_host(engine: &Engine, device: &Arc<Device>, array: ArrayD<f32>) -> Tensor {
        let shape: Arc<[usize]> = array.shape().into();
        #[cfg(feature = "cuda")]
        if let DeviceKind::Cuda(dev) = &device.kind {
            let host = Tensor::from_host(engine, &device.host_device(device), array);
            let out = Tensor::pending_shaped(engine, device, shape);
            let (src, dst, n) = (host.data.clone(), out.data.clone(), out.len());
            let mem = device.memory.clone();
            gpu::push(
                engine,
                device.compute,
                "upload",
                &[&host.var],
                &[&out.var],
                dev,
                gpu::Stream::Compute,
                move |d| {
                    let mut slot = write(&dst).map_err(|e| e.to_string())?;
                    let values = read(&src).map_err(|e| e.to_string())?;
                    let values = values.host().map_err(|e| e.to_string())?;
                    let values = values.as_standard_layout();
                    let values = values
                        .as_slice()
                        .ok_or("upload: non-contiguous host array")?;
                    let mut y = gpu::alloc(d, n, &mem)?;
                    d.upload(values, &mut y.0)?;
                    *slot = Storage::Cuda(gpu::finish(d, y)?);
                    drop(slot);
                    Ok(dst)
                },
            );
            return out;
        }
        let storage = Storage::host_tracked(array, &device.memory);
        Tensor {
            engine: engine.clone(),
            device: device.clone(),
            var: Var::new(),
            data: Arc::new(RwLock::new(storage)),
            shape,
        }
    }

    /// All ones.
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
        let (dst, s) = (out.data.clone(), shape.to_vec());
        let mem = device.memory.clone();
        let name = fill.name();
        match &device.kind {
            DeviceKind::Cpu { .. } => {
                engine.push(name, device.compute, &[], &[&out.var], move || {
                    let values = match fill {
                        Fill::Ones => ArrayD::ones(IxDyn(&s)),
                        Fill::Uniform(seed) => cpu::uniform(&s, seed),
                    };
                    *write(&dst)? = Storage::host_tracked(values, &mem);
                    Ok(())
                })
            }
            #[cfg(feature = "cuda")]
            DeviceKind::Cuda(dev) => {
                let n = out.len();
                gpu::push(
                    engine,
                    device.compute,
                    name,
                    &[],
                    &[&out.var],
                    dev,
                    gpu::Stream::Compute,
                    move |d| {
                        let mut slot = write(&dst).map_err(|e| e.to_string())?;
                        let mut out = gpu::alloc(d, n, &mem)?;
                        match fill {
                            Fill::Ones => d.fill(&mut out.0, 1.0)?,
                            Fill::Uniform(seed) => d.fill_uniform(&mut out.0, seed)?,
                        }
                        *slot = Storage::Cuda(gpu::finish(d, out)?);
                        drop(slot);
                        Ok(dst)
                    },
                )
            }
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
        let out = Tensor::pending_shaped(&self.engine, &self.device, self.shape.clone());
        let (src, dst) = (self.data.clone(), out.data.clone());
        let mem = self.device.memory.clone();
        #[cfg(feature = "cuda")]
        if let DeviceKind::Cuda(dev) = &self.device.kind {
            let n = self.len();
            gpu::push(
                &self.engine,
                self.device.compute,
                name,
                &[&self.var],
                &[&out.var],
                dev,
                gpu::Stream::Compute,
                move |d| {
                    let mut slot = write(&dst).map_err(|e| e.to_string())?;
                    let x = read(&src)
                        .and_then(|s| s.cuda())
                        .map_err(|e| e.to_string())?;
                    let mut y = gpu::alloc(d, n, &mem)?;
                    d.map(kernel.into(), &x.slice, &mut y.0)?;
                    *slot = Storage::Cuda(gpu::finish(d, y)?);
                    drop(slot);
                    Ok((x, dst))
                },
            );
            return out;
        }
        let _ = kernel;
        self.engine.push(
            name,
            self.device.compute,
            &[&self.var],
            &[&out.var],
            move || {
                let y = read(&src)?.host()?.mapv(&f);
                *write(&dst)? = Storage::host_tracked(y, &mem);
                Ok(())
            },
        );
        out
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
        f: impl FnOnce(&ArrayD<f32>) -> Result<ArrayD<f32>, E> + Send + 'static,
    ) -> Tensor
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        let out = Tensor::pending(&self.engine, &self.device, shape);
        let (src, dst) = (self.data.clone(), out.data.clone());
        let mem = self.device.memory.clone();
        self.engine.push(
            name,
            self.device.compute,
            &[&self.var],
            &[&out.var],
            move || {
                let y = f(&*read(&src)?.host()?)?;
                *write(&dst)? = Storage::host_tracked(y, &mem);
                Ok(())
            },
        );
        out
    }

    /// `self + row`, the 1×n `row` added to every row of the m×n `self` (a layer's bias).
    pub fn add_row(&self, row: &Tensor) -> Result<Tensor, TensorError> {
        let (a, r) = (&self.shape[..], &row.shape[..]);
        if a.len() != 2 || r != [1, a[1]] {
            return Err(TensorError::Shape(format!(
                "cannot add a {r:?} row to {a:?}"
            )));
        }
        let out = Tensor::pending_shaped(&self.engine, &self.device, self.shape.clone());
        let (x, b, dst) = (self.data.clone(), row.data.clone(), out.data.clone());
        let mem = self.device.memory.clone();
        #[cfg(feature = "cuda")]
        if let DeviceKind::Cuda(dev) = &self.device.kind {
            let (rows, cols) = (a[0], a[1]);
            gpu::push(
                &self.engine,
                self.device.compute,
                "add_row",
                &[&self.var, &row.var],
                &[&out.var],
                dev,
                gpu::Stream::Compute,
                move |d| {
                    let mut slot = write(&dst).map_err(|e| e.to_string())?;
                    let xs = read(&x).and_then(|s| s.cuda()).map_err(|e| e.to_string())?;
                    let bs = read(&b).and_then(|s| s.cuda()).map_err(|e| e.to_string())?;
                    let mut y = gpu::alloc(d, rows * cols, &mem)?;
                    d.add_row(&xs.slice, &bs.slice, &mut y.0, (rows, cols))?;
                    *slot = Storage::Cuda(gpu::finish(d, y)?);
                    drop(slot);
                    Ok((xs, bs, dst))
                },
            );
            return Ok(out);
        }
        self.engine.push(
            "add_row",
            self.device.compute,
            &[&self.var, &row.var],
            &[&out.var],
            move || {
                let z = {
                    let (x, b) = (read(&x)?, read(&b)?);
                    let (x, b) = (x.host()?, b.host()?);
                    let x = x.view().into_dimensionality::<Ix2>()?;
                    let b = b.view().into_dimensionality::<Ix2>()?;
                    (&x + &b.row(0).insert_axis(ndarray::Axis(0))).into_dyn()
                };
                *write(&dst)? = Storage::host_tracked(z, &mem);
                Ok(())
            },
        );
        Ok(out)
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
        if self.shape != other.shape {
            return Err(TensorError::Shape(format!(
                "cannot add {:?} and {:?}",
                &self.shape[..],
                &other.shape[..]
            )));
        }
        let out = Tensor::pending_shaped(&self.engine, &self.device, self.shape.clone());
        let (x, y, dst) = (self.data.clone(), other.data.clone(), out.data.clone());
        let mem = self.device.memory.clone();
        self.engine.push(
            "axpby",
            self.device.compute,
            &[&self.var, &other.var],
            &[&out.var],
            move || {
                let z = {
                    let (x, y) = (read(&x)?, read(&y)?);
                    let (x, y) = (x.host()?, y.host()?);
                    ndarray::Zip::from(&*x)
                        .and(&*y)
                        .map_collect(|&p, &q| a * p + b * q)
                };
                *write(&dst)? = Storage::host_tracked(z, &mem);
                Ok(())
            },
        );
        Ok(out)
    }

    /// `self ← a · self + b · other`, element-wise and **in place** (host tensors of one shape):
    /// the op reads `other` and read-modify-writes `self`'s var, so it must wait for every
    /// earlier reader of `self` (write after read) and every earlier write (write after write).
    /// `other` may be `self` itself.
    pub fn axpby_assign(&self, a: f32, other: &Tensor, b: f32) -> Result<(), TensorError> {
        if self.shape != other.shape {
            return Err(TensorError::Shape(format!(
                "cannot add {:?} into {:?}",
                &other.shape[..],
                &self.shape[..]
            )));
        }
        let (x, y) = (self.data.clone(), other.data.clone());
        self.engine.push(
            "axpby in place",
            self.device.compute,
            &[&other.var],
            &[&self.var],
            move || {
                let mut xg = write(&x)?;
                if Arc::ptr_eq(&x, &y) {
                    let Storage::Host(xs, _) = &mut *xg else {
                        return Err(OpError::msg("expected a tensor in host memory"));
                    };
                    xs.mapv_inplace(|p| a * p + b * p);
                    return Ok(());
                }
                let yg = read(&y)?;
                let ys = yg.host()?;
                let Storage::Host(xs, _) = &mut *xg else {
                    return Err(OpError::msg("expected a tensor in host memory"));
                };
                ndarray::Zip::from(xs)
                    .and(&*ys)
                    .for_each(|p, &q| *p = a * *p + b * q);
                Ok(())
            },
        );
        Ok(())
    }

    /// A new tensor with the same values, computed by an op on the device's compute lane.
    pub fn duplicate(&self) -> Tensor {
        self.map("duplicate", |v| v, Map::Scale(1.0))
    }

    /// Matrix product of two 2-D tensors, on `self`'s device.
    pub fn matmul(&self, rhs: &Tensor) -> Result<Tensor, TensorError> {
        let (a, b) = (&self.shape[..], &rhs.shape[..]);
        if a.len() != 2 || b.len() != 2 || a[1] != b[0] {
            return Err(TensorError::Shape(format!(
                "cannot multiply {a:?} by {b:?}"
            )));
        }
        let (m, n) = (a[0], b[1]);
        let out = Tensor::pending(&self.engine, &self.device, &[m, n]);
        let (x, y, dst) = (self.data.clone(), rhs.data.clone(), out.data.clone());
        let mem = self.device.memory.clone();
        let (reads, writes) = ([&self.var, &rhs.var], [&out.var]);
        match &self.device.kind {
            DeviceKind::Cpu { .. } => {
                self.engine
                    .push("matmul", self.device.compute, &reads, &writes, move || {
                        let c = {
                            let (xg, yg) = read_both(&x, &y)?;
                            let a = xg.host()?;
                            let b = yg.as_deref().unwrap_or(&xg).host()?;
                            let a = a.view().into_dimensionality::<Ix2>()?;
                            let b = b.view().into_dimensionality::<Ix2>()?;
                            cpu::matmul(a, b).into_dyn()
                        };
                        *write(&dst)? = Storage::host_tracked(c, &mem);
                        Ok(())
                    })
            }
            #[cfg(feature = "cuda")]
            DeviceKind::Cuda(dev) => {
                let k_dim = self.shape[1];
                gpu::push(
                    &self.engine,
                    self.device.compute,
                    "matmul",
                    &reads,
                    &writes,
                    dev,
                    gpu::Stream::Compute,
                    move |d| {
                        // Every fallible step comes before the GPU work is queued: once it is,
                        // the buffers must live until its event (they travel in the result).
                        let mut slot = write(&dst).map_err(|e| e.to_string())?;
                        let a = read(&x).and_then(|s| s.cuda()).map_err(|e| e.to_string())?;
                        // One lock at a time: `x · x` must not hold two reads of one buffer.
                        let b = if Arc::ptr_eq(&x, &y) {
                            a.clone()
                        } else {
                            read(&y).and_then(|s| s.cuda()).map_err(|e| e.to_string())?
                        };
                        let mut c = gpu::alloc(d, m * n, &mem)?;
                        d.matmul(&a.slice, &b.slice, &mut c.0, (m, k_dim, n))?;
                        *slot = Storage::Cuda(gpu::finish(d, c)?);
                        drop(slot);
                        Ok((a, b, dst))
                    },
                )
            }
        }
        Ok(out)
    }

    /// Copy the values to host memory on the device's *copy* lane, so the copy overlaps the
    /// device's compute (the book's `y.to('cpu')` in §8.3.2). On a GPU the destination is
    /// ordinary pinned memory; on a CPU device it is a separate host buffer.
    pub fn copy_to_host(&self) -> Tensor {
        // The copy lives in host memory: ops on it run on the host device (a GPU's companion
        // CPU device), not on the GPU's lanes.
        let host = self.device.host_device(&self.device);
        let out = Tensor::pending_shaped(&self.engine, &host, self.shape.clone());
        let (src, dst) = (self.data.clone(), out.data.clone());
        let mem = self.device.memory.clone();
        match &self.device.kind {
            DeviceKind::Cpu { .. } => self.engine.push(
                "copy to host",
                self.device.copy,
                &[&self.var],
                &[&out.var],
                move || {
                    let copy = read(&src)?.host()?.into_owned();
                    *write(&dst)? = Storage::host_tracked(copy, &mem);
                    Ok(())
                },
            ),
            #[cfg(feature = "cuda")]
            DeviceKind::Cuda(dev) => {
                let (n, shape) = (self.len(), self.shape.clone());
                gpu::push(
                    &self.engine,
                    self.device.copy,
                    "copy to host",
                    &[&self.var],
                    &[&out.var],
                    dev,
                    gpu::Stream::Copy,
                    move |d| {
                        let mut slot = write(&dst).map_err(|e| e.to_string())?;
                        let from = read(&src)
                            .and_then(|s| s.cuda())
                            .map_err(|e| e.to_string())?;
                        let mut host = d.alloc_pinned(n)?;
                        let ready = from.ready();
                        d.copy_to_host(&from.slice, ready.as_ref(), &mut host)?;
                        drop(ready);
                        *slot = Storage::Pinned(Arc::new(host), shape);
                        drop(slot);
                        Ok((from, dst))
                    },
                )
            }
        }
        out
    }

    /// The same host tensor, with ops on it placed on another CPU device (host memory is
    /// shared by all CPU devices, so nothing is copied). GPU tensors must be copied instead.
    pub fn placed_on(&self, device: &Arc<Device>) -> Result<Tensor, TensorError> {
        if (self.device.is_gpu() || device.is_gpu()) && self.device.name != device.name {
            return Err(TensorError::Shape(format!(
                "a tensor on {} cannot be used on {} without a copy",
                self.device.name, device.name
            )));
        }
        Ok(Tensor {
            device: device.clone(),
            ..self.clone()
        })
    }

    /// Block until the value is computed (the book's `wait_to_read`): on a GPU in stream
    /// order, also until the device has run the op that wrote it.
    pub fn wait_to_read(&self) -> Result<(), EngineError> {
        self.engine.wait_to_read(&self.var)?;
        #[cfg(feature = "cuda")]
        if let Ok(data) = self.data.read() {
            if let Storage::Cuda(buf) = &*data {
                buf.wait().map_err(EngineError::DeviceSync)?;
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
            .map_err(|_| TensorError::Read("tensor buffer poisoned by an earlier panic".into()))?;
        match &*data {
            Storage::Empty => Err(TensorError::Read("the tensor was never written".into())),
            Storage::Host(a, _) => Ok(a.iter().copied().collect()),
            #[cfg(feature = "cuda")]
            Storage::Cuda(slice) => match &self.device.kind {
                DeviceKind::Cuda(d) => d
                    .read_back(&slice.slice, slice.ready().as_ref())
                    .map_err(TensorError::Read),
                DeviceKind::Cpu { .. } => {
                    Err(TensorError::Read("GPU buffer on a CPU device".into()))
                }
            },
            #[cfg(feature = "cuda")]
            Storage::Pinned(host, _) => host
                .as_slice()
                .map(<[f32]>::to_vec)
                .map_err(TensorError::Read),
        }
    }

    /// The tensor's shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The var the engine tracks this tensor's buffer by.
    pub fn var(&self) -> &Var {
        &self.var
    }

    /// The device the tensor lives on.
    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }
}

/// A dense-ReLU stack (`h = relu(h · W + b)` per layer) captured from the GPU as one CUDA graph
/// and replayed by one engine op that launches it: MXNet's cached op after `hybridize()`, on a
/// GPU. The graph reads the input and parameter buffers it was captured with and writes one
/// output tensor in place, so every replay returns that tensor (the engine orders its readers
/// and the next replay through its var).
#[cfg(feature = "cuda")]
pub struct CapturedGraph {
    state: Arc<std::sync::Mutex<Option<gpu::GraphState>>>,
    reads: Vec<Tensor>,
    output: Tensor,
    dev: Arc<gpu::CudaDevice>,
}

#[cfg(feature = "cuda")]
impl Tensor {
    /// Capture `relu(... relu(self · W₁ + b₁) ... · Wₗ + bₗ)` on this tensor's GPU. The capture
    /// is an op on the compute lane: it runs the stack once (which also leaves its output in the
    /// returned graph's output tensor), then captures the same launches.
    pub fn capture_dense_relu(
        &self,
        layers: &[(Tensor, Tensor)],
    ) -> Result<CapturedGraph, TensorError> {
        let DeviceKind::Cuda(dev) = &self.device.kind else {
            return Err(TensorError::Shape(format!(
                "a CUDA graph needs a GPU tensor, not one on {}",
                self.device.name
            )));
        };
        let mut dims = Vec::new();
        let (m, mut k) = match &self.shape[..] {
            [m, k] => (*m, *k),
            s => {
                return Err(TensorError::Shape(format!(
                    "the graph's input must be 2-D, not {s:?}"
                )))
            }
        };
        for (w, b) in layers {
            match (&w.shape[..], &b.shape[..]) {
                ([wk, n], [1, bn]) if *wk == k && bn == n => {
                    dims.push((m, k, *n));
                    k = *n;
                }
                (ws, bs) => {
                    return Err(TensorError::Shape(format!(
                        "layer {ws:?} + {bs:?} does not follow a {m}×{k} input"
                    )))
                }
            }
        }
        let output = Tensor::pending(&self.engine, &self.device, &[m, k]);
        let mut reads = vec![self.clone()];
        for (w, b) in layers {
            reads.extend([w.clone(), b.clone()]);
        }
        let state = Arc::new(std::sync::Mutex::new(None));
        let (slot_state, buffers, dst) = (
            state.clone(),
            reads.iter().map(|t| t.data.clone()).collect::<Vec<_>>(),
            output.data.clone(),
        );
        let mem = self.device.memory.clone();
        let vars: Vec<&Var> = reads.iter().map(|t| &t.var).collect();
        gpu::push(
            &self.engine,
            self.device.compute,
            "capture graph",
            &vars,
            &[&output.var],
            dev,
            gpu::Stream::Compute,
            move |d| {
                let mut slot = write(&dst).map_err(|e| e.to_string())?;
                let inputs = buffers
                    .iter()
                    .map(|b| read(b).and_then(|s| s.cuda()).map_err(|e| e.to_string()))
                    .collect::<Result<Vec<_>, _>>()?;
                // Every buffer the graph touches exists before the capture starts.
                let mut steps = Vec::new();
                for &(m, _, n) in &dims {
                    steps.push([
                        gpu::alloc(d, m * n, &mem)?,
                        gpu::alloc(d, m * n, &mem)?,
                        gpu::alloc(d, m * n, &mem)?,
                    ]);
                }
                let mut forward = |d: &gpu::CudaDevice| -> Result<(), String> {
                    for (l, &(m, k, n)) in dims.iter().enumerate() {
                        let (w, b) = (&inputs[1 + 2 * l], &inputs[2 + 2 * l]);
                        let (done, rest) = steps.split_at_mut(l);
                        let h = match done.last() {
                            Some([_, _, y]) => &y.0,
                            None => &inputs[0].slice,
                        };
                        let [z, a, y] = &mut rest[0];
                        d.matmul(h, &w.slice, &mut z.0, (m, k, n))?;
                        d.add_row(&z.0, &b.slice, &mut a.0, (m, n))?;
                        d.map(Kernel::Relu, &a.0, &mut y.0)?;
                    }
                    Ok(())
                };
                // Once for real: the output's first value, and cuBLAS's lazy set-up kept out of
                // the capture.
                forward(d)?;
                let graph = d.capture(|d| forward(d))?;
                let mut buffers = Vec::new();
                for step in steps {
                    for b in step {
                        buffers.push(gpu::finish(d, b)?);
                    }
                }
                let out = buffers
                    .last()
                    .cloned()
                    .ok_or("a graph needs at least one layer")?;
                *slot = Storage::Cuda(out.clone());
                drop(slot);
                let mut keep: Vec<_> = inputs;
                keep.extend(buffers);
                *slot_state
                    .lock()
                    .map_err(|_| "graph state poisoned".to_string())? = Some(gpu::GraphState {
                    graph,
                    output: out,
                    _keep: keep,
                });
                Ok(())
            },
        );
        Ok(CapturedGraph {
            state,
            reads,
            output,
            dev: dev.clone(),
        })
    }
}

#[cfg(feature = "cuda")]
impl CapturedGraph {
    /// Push one replay: one engine op that launches the whole graph. Returns the output tensor.
    pub fn replay(&self) -> Tensor {
        let state = self.state.clone();
        let vars: Vec<&Var> = self.reads.iter().map(|t| &t.var).collect();
        gpu::push(
            &self.output.engine,
            self.output.device.compute,
            "replay graph",
            &vars,
            &[&self.output.var],
            &self.dev,
            gpu::Stream::Compute,
            move |d| {
                let guard = state
                    .lock()
                    .map_err(|_| "graph state poisoned".to_string())?;
                let st = guard.as_ref().ok_or("the graph's capture failed")?;
                st.graph.launch()?;
                st.output.rewritten(d)?;
                Ok(())
            },
        );
        self.output.clone()
    }
}

/// GPU ops: enqueue on a stream, then complete through the device's poller when the GPU is done.
#[cfg(feature = "cuda")]
mod gpu {
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
        let counted = mem.track((n as u64).saturating_mul(4));
        Ok((d.alloc(n)?, counted))
    }

    /// A captured graph and every buffer it reads or writes (they must outlive it).
    pub(super) struct GraphState {
        pub(super) graph: crate::device::cuda_ops::GpuGraph,
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{Runtime, RuntimeOptions};

    fn rt() -> Runtime {
        Runtime::cpu(&RuntimeOptions::default(), &[2]).unwrap()
    }

    #[test]
    fn add_scalar_chain_computes_in_order() {
        let rt = rt();
        let d = &rt.devices[0];
        let mut y = Tensor::ones(&rt.engine, d, &[1, 2]);
        for _ in 0..100 {
            y = y.add_scalar(1.0);
        }
        assert_eq!(y.to_vec().unwrap(), vec![101.0, 101.0]);
    }

    #[test]
    fn matmul_matches_a_naive_product() {
        let rt = rt();
        let d = &rt.devices[0];
        let a = Tensor::uniform(&rt.engine, d, &[3, 5], 1);
        let b = Tensor::uniform(&rt.engine, d, &[5, 7], 2);
        let c = a.matmul(&b).unwrap();
        let (av, bv, cv) = (
            a.to_vec().unwrap(),
            b.to_vec().unwrap(),
            c.to_vec().unwrap(),
        );
        assert_eq!(c.shape(), &[3, 7]);
        for i in 0..3 {
            for j in 0..7 {
                let want: f32 = (0..5).map(|k| av[i * 5 + k] * bv[k * 7 + j]).sum();
                assert!((cv[i * 7 + j] - want).abs() < 1e-5);
            }
        }
    }

    #[test]
    fn matmul_rejects_bad_shapes_at_push() {
        let rt = rt();
        let d = &rt.devices[0];
        let a = Tensor::ones(&rt.engine, d, &[3, 5]);
        assert!(matches!(a.matmul(&a), Err(TensorError::Shape(_))));
    }

    #[test]
    fn relu_and_add_row_compute_a_dense_layer() {
        let rt = rt();
        let d = &rt.devices[0];
        let x = Tensor::from_host(
            &rt.engine,
            d,
            ndarray::arr2(&[[1.0f32, -2.0], [3.0, -4.0]]).into_dyn(),
        );
        let b = Tensor::from_host(&rt.engine, d, ndarray::arr2(&[[0.5f32, 1.0]]).into_dyn());
        let y = x.add_row(&b).unwrap().relu();
        assert_eq!(y.to_vec().unwrap(), vec![1.5, 0.0, 3.5, 0.0]);
        assert!(matches!(x.add_row(&x), Err(TensorError::Shape(_))));
    }

    #[test]
    fn reading_one_buffer_twice_takes_one_lock() {
        let buf: Buffer = Arc::new(RwLock::new(Storage::Empty));
        // The pair of one buffer is one guard; of two buffers, two.
        let (one, two) = read_both(&buf, &buf).unwrap();
        assert!(two.is_none());
        drop(one);
        let other: Buffer = Arc::new(RwLock::new(Storage::Empty));
        assert!(read_both(&buf, &other).unwrap().1.is_some());
    }

    #[test]
    fn axpby_assign_updates_in_place_after_earlier_readers() {
        let rt = rt();
        let d = &rt.devices[0];
        let x = Tensor::from_host(&rt.engine, d, ndarray::arr1(&[1.0f32, 2.0]).into_dyn());
        let y = Tensor::from_host(&rt.engine, d, ndarray::arr1(&[10.0f32, 20.0]).into_dyn());
        // A reader of x pushed before the in-place write must see the old values (WAR)...
        let before = x.duplicate();
        x.axpby_assign(0.5, &y, 0.5).unwrap();
        // ...and writes apply in push order (WAW), including one with x on both sides.
        x.axpby_assign(1.0, &x, 1.0).unwrap();
        assert_eq!(before.to_vec().unwrap(), vec![1.0, 2.0]);
        assert_eq!(x.to_vec().unwrap(), vec![11.0, 22.0]);
        assert!(matches!(
            x.axpby_assign(1.0, &Tensor::ones(&rt.engine, d, &[3]), 1.0),
            Err(TensorError::Shape(_))
        ));
    }

    #[test]
    fn a_host_copy_is_usable_by_host_ops() {
        let rt = rt();
        let d = &rt.devices[0];
        let x = Tensor::from_host(&rt.engine, d, ndarray::arr1(&[-1.0f32, 2.0]).into_dyn());
        let h = x.copy_to_host();
        assert!(Arc::ptr_eq(h.device(), d), "a CPU device is its own host");
        assert_eq!(h.relu().to_vec().unwrap(), vec![0.0, 2.0]);
    }

    /// A runtime with the GPU, or `None` after saying in one line (on the real stderr, past
    /// the test harness's capture) that the test was skipped.
    #[cfg(feature = "cuda")]
    fn gpu_runtime(test: &str) -> Option<Runtime> {
        gpu_runtime_in(test, crate::device::GpuOrder::Stream)
    }

    #[cfg(feature = "cuda")]
    fn gpu_runtime_in(test: &str, gpu_order: crate::device::GpuOrder) -> Option<Runtime> {
        use crate::device::{discovery, DeviceRequest};
        use std::io::Write;
        let gpu = discovery::probe_gpu();
        if !gpu.available {
            let _ = writeln!(
                std::io::stderr(),
                "{test}: skipped, no usable GPU ({})",
                gpu.reason.unwrap_or_default()
            );
            return None;
        }
        let options = RuntimeOptions {
            gpu_order,
            ..RuntimeOptions::default()
        };
        Some(Runtime::new(&options, &[DeviceRequest::Cuda]).unwrap())
    }

    #[cfg(feature = "cuda")]
    const BOTH_ORDERS: [crate::device::GpuOrder; 2] = [
        crate::device::GpuOrder::Stream,
        crate::device::GpuOrder::Host,
    ];

    /// Every element-wise kernel against its host closure, bit for bit, in both GPU orders
    /// (odd sizes, negatives, NaN and a size beyond one grid's worth of blocks).
    #[cfg(feature = "cuda")]
    #[test]
    fn gpu_elementwise_kernels_equal_the_host_ops() {
        for order in BOTH_ORDERS {
            let Some(rt) = gpu_runtime_in("gpu_elementwise_kernels_equal_the_host_ops", order)
            else {
                return;
            };
            let (e, d) = (&rt.engine, &rt.devices[0]);
            for (rows, cols) in [(1, 1), (3, 7), (129, 257), (1, (1 << 24) + 3)] {
                let mut host: Vec<f32> = (0..rows * cols)
                    .map(|i| ((i * 7919) % 1000) as f32 / 100.0 - 5.0)
                    .collect();
                host[0] = f32::NAN;
                let row: Vec<f32> = (0..cols).map(|j| j as f32 * 0.25 - 1.0).collect();
                let arr =
                    |v: &Vec<f32>, r, c| ArrayD::from_shape_vec(IxDyn(&[r, c]), v.clone()).unwrap();
                let x = Tensor::from_host(e, d, arr(&host, rows, cols));
                let b = Tensor::from_host(e, d, arr(&row, 1, cols));
                // Bit for bit, except that every NaN is one NaN: a GPU's NaN has another payload.
                let bits = |v: Vec<f32>| {
                    v.into_iter()
                        .map(|x| if x.is_nan() { u32::MAX } else { x.to_bits() })
                        .collect::<Vec<_>>()
                };
                let want = |f: &dyn Fn(usize, f32) -> f32| {
                    bits(host.iter().enumerate().map(|(i, &v)| f(i, v)).collect())
                };
                let what = format!("{rows}×{cols}, {order:?}");
                assert_eq!(bits(x.to_vec().unwrap()), want(&|_, v| v), "upload {what}");
                assert_eq!(
                    bits(x.add_scalar(1.5).to_vec().unwrap()),
                    want(&|_, v| v + 1.5),
                    "add {what}"
                );
                assert_eq!(
                    bits(x.scale(-0.5).to_vec().unwrap()),
                    want(&|_, v| v * -0.5),
                    "scale {what}"
                );
                assert_eq!(
                    bits(x.relu().to_vec().unwrap()),
                    want(&|_, v| v.max(0.0)),
                    "relu {what}"
                );
                assert_eq!(
                    bits(x.duplicate().to_vec().unwrap()),
                    want(&|_, v| v),
                    "duplicate {what}"
                );
                assert_eq!(
                    bits(x.add_row(&b).unwrap().to_vec().unwrap()),
                    want(&|i, v| v + row[i % cols]),
                    "add_row {what}"
                );
            }
        }
    }

    /// A long dependent chain pushed at once, read three ways: the host waits for the GPU's
    /// ready event (to_vec), the copy stream waits for it on the device (copy_to_host), and a
    /// host op on the copy runs after both.
    #[cfg(feature = "cuda")]
    #[test]
    fn gpu_dependent_chains_are_exact_and_their_readers_wait() {
        for order in BOTH_ORDERS {
            let Some(rt) = gpu_runtime_in(
                "gpu_dependent_chains_are_exact_and_their_readers_wait",
                order,
            ) else {
                return;
            };
            let d = &rt.devices[0];
            let x = Tensor::ones(&rt.engine, d, &[1000, 1000]);
            let mut y = x.clone();
            for _ in 0..2000 {
                y = y.add_scalar(1.0);
            }
            // Pushed before anything waits: the copy must see the chain's end, not a prefix.
            let copied = y.copy_to_host();
            let shifted = copied.add_scalar(-2001.0);
            assert!(
                y.to_vec().unwrap().iter().all(|&v| v == 2001.0),
                "{order:?}"
            );
            assert!(
                copied.to_vec().unwrap().iter().all(|&v| v == 2001.0),
                "{order:?}"
            );
            assert!(
                shifted.to_vec().unwrap().iter().all(|&v| v == 0.0),
                "{order:?}"
            );
            y.wait_to_read().unwrap();
            // Products that keep the GPU milliseconds behind the lanes: a copy enqueued without
            // waiting for its source's ready event would read the buffer before it is written.
            let x = Tensor::uniform(&rt.engine, d, &[4096, 4096], 7);
            // A pooled pinned buffer for the copy: allocating a new one would synchronize the
            // device and hide a missing wait.
            drop(x.copy_to_host().to_vec().unwrap());
            let mut p = x.clone();
            for _ in 0..4 {
                p = p.matmul(&x).unwrap().scale(1.0 / 2048.0);
            }
            let copied = p.copy_to_host();
            let (copied, direct) = (copied.to_vec().unwrap(), p.to_vec().unwrap());
            assert!(
                copied == direct,
                "{order:?}: the copy did not wait for the products"
            );
            assert!(
                direct.iter().all(|v| v.is_finite() && *v > 0.0),
                "{order:?}"
            );
            rt.engine.wait_all().unwrap();
        }
    }

    /// Random programs of element-wise GPU ops over a few slots, pushed without waiting, with
    /// host copies and reads at random points, against a sequential interpretation on plain
    /// vectors, bit for bit: the stream order, the ready events and the stream-ordered frees
    /// must never let an op see a stale or freed value.
    #[cfg(feature = "cuda")]
    #[test]
    fn gpu_random_programs_equal_a_sequential_interpretation() {
        for order in BOTH_ORDERS {
            let name = "gpu_random_programs_equal_a_sequential_interpretation";
            let Some(rt) = gpu_runtime_in(name, order) else {
                return;
            };
            let (e, d) = (&rt.engine, &rt.devices[0]);
            for seed in 1..=4u64 {
                let mut state = seed;
                let mut next = move || {
                    state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                    let mut z = state;
                    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                    z ^ (z >> 31)
                };
                let (rows, cols, slots) = (8, 16, 6);
                let arr = |v: &[f32], r: usize| {
                    ArrayD::from_shape_vec(IxDyn(&[r, v.len() / r]), v.to_vec()).unwrap()
                };
                let row: Vec<f32> = (0..cols).map(|j| j as f32 - 7.5).collect();
                let row_t = Tensor::from_host(e, d, arr(&row, 1));
                let mut want: Vec<Vec<f32>> = (0..slots)
                    .map(|k| {
                        (0..rows * cols)
                            .map(|i| ((i * 31 + k * 7) % 17) as f32 - 8.0)
                            .collect()
                    })
                    .collect();
                let mut got: Vec<Tensor> = want
                    .iter()
                    .map(|v| Tensor::from_host(e, d, arr(v, rows)))
                    .collect();
                let mut pending: Vec<(Tensor, Vec<f32>)> = Vec::new();
                for step in 0..400 {
                    let (a, b) = (
                        (next() % slots as u64) as usize,
                        (next() % slots as u64) as usize,
                    );
                    let src = want[b].clone();
                    let (t, v): (Tensor, Vec<f32>) = match next() % 7 {
                        0 => (
                            got[b].add_scalar(1.0),
                            src.iter().map(|x| x + 1.0).collect(),
                        ),
                        1 => (got[b].scale(0.5), src.iter().map(|x| x * 0.5).collect()),
                        2 => (got[b].scale(-2.0), src.iter().map(|x| x * -2.0).collect()),
                        3 => (got[b].relu(), src.iter().map(|x| x.max(0.0)).collect()),
                        4 => (
                            got[b].add_row(&row_t).unwrap(),
                            src.iter()
                                .enumerate()
                                .map(|(i, x)| x + row[i % cols])
                                .collect(),
                        ),
                        5 => (got[b].duplicate(), src),
                        _ => {
                            // A host copy, checked at the end: it must hold this step's value.
                            pending.push((got[b].copy_to_host(), src));
                            continue;
                        }
                    };
                    got[a] = t;
                    want[a] = v;
                    if next() % 50 == 0 {
                        assert_eq!(
                            got[a].to_vec().unwrap(),
                            want[a],
                            "seed {seed} step {step} {order:?}"
                        );
                    }
                }
                for (k, (t, v)) in got.iter().zip(&want).enumerate() {
                    assert_eq!(&t.to_vec().unwrap(), v, "seed {seed} slot {k} {order:?}");
                }
                for (i, (t, v)) in pending.iter().enumerate() {
                    assert_eq!(&t.to_vec().unwrap(), v, "seed {seed} copy {i} {order:?}");
                }
            }
            rt.engine.wait_all().unwrap();
        }
    }

    /// GPU buffers are counted while they live, exactly.
    #[cfg(feature = "cuda")]
    #[test]
    fn gpu_buffers_are_counted_while_they_live() {
        let Some(rt) = gpu_runtime("gpu_buffers_are_counted_while_they_live") else {
            return;
        };
        let d = &rt.devices[0];
        let before = d.memory.live();
        let x = Tensor::ones(&rt.engine, d, &[256, 1024]);
        let y = x.add_scalar(1.0);
        y.wait_to_read().unwrap();
        assert_eq!(d.memory.live() - before, 2 * 256 * 1024 * 4);
        drop((x, y));
        rt.engine.wait_all().unwrap();
        assert_eq!(d.memory.live(), before);
    }

    /// A captured CUDA graph replays the imperative kernels bit for bit, and its output is
    /// rewritten by each replay only after earlier readers are done with it.
    #[cfg(feature = "cuda")]
    #[test]
    fn gpu_graph_replay_equals_the_imperative_pass() {
        for order in BOTH_ORDERS {
            let Some(rt) = gpu_runtime_in("gpu_graph_replay_equals_the_imperative_pass", order)
            else {
                return;
            };
            let (e, d) = (&rt.engine, &rt.devices[0]);
            let m = |r: usize, c: usize, seed| {
                Tensor::from_host(e, d, cpu::uniform(&[r, c], seed).mapv(|v| v - 0.5))
            };
            let x = m(16, 48, 1);
            let layers = vec![(m(48, 64, 2), m(1, 64, 3)), (m(64, 32, 4), m(1, 32, 5))];
            let mut h = x.clone();
            for (w, b) in &layers {
                h = h.matmul(w).unwrap().add_row(b).unwrap().relu();
            }
            let want = h.to_vec().unwrap();
            let graph = x.capture_dense_relu(&layers).unwrap();
            let first = graph.replay();
            let copy = first.copy_to_host();
            let again = graph.replay();
            assert_eq!(copy.to_vec().unwrap(), want, "{order:?}");
            assert_eq!(again.to_vec().unwrap(), want, "{order:?}");
            assert!(
                want.iter().any(|&v| v > 0.0),
                "a ReLU stack of all zeros proves little"
            );
            // Shapes that do not chain are refused before anything is pushed.
            assert!(x.capture_dense_relu(&[(m(32, 8, 6), m(1, 8, 7))]).is_err());
        }
    }

    /// On a GPU the copy is pinned memory on the GPU's host device; host ops must accept it.
    #[cfg(feature = "cuda")]
    #[test]
    fn gpu_host_copy_is_usable_by_host_ops() {
        let Some(rt) = gpu_runtime("gpu_host_copy_is_usable_by_host_ops") else {
            return;
        };
        let d = &rt.devices[0];
        let x = Tensor::uniform(&rt.engine, d, &[64, 64], 3);
        let y = x.matmul(&x).unwrap();
        let h = y.copy_to_host();
        assert_eq!(h.device().name, "host");
        let got = h.add_scalar(-1.0).relu().to_vec().unwrap();
        let want: Vec<f32> = y
            .to_vec()
            .unwrap()
            .iter()
            .map(|v| (v - 1.0).max(0.0))
            .collect();
        assert_eq!(got, want);
    }

    /// cuBLAS's row-major product (odd sizes, so a transposition shows) against float64.
    #[cfg(feature = "cuda")]
    #[test]
    fn gpu_matmul_matches_float64() {
        let Some(rt) = gpu_runtime("gpu_matmul_matches_float64") else {
            return;
        };
        let d = &rt.devices[0];
        let (m, k, n) = (37, 53, 29);
        let a = Tensor::uniform(&rt.engine, d, &[m, k], 1);
        let b = Tensor::uniform(&rt.engine, d, &[k, n], 2);
        let c = a.matmul(&b).unwrap();
        let (av, bv, cv) = (
            a.to_vec().unwrap(),
            b.to_vec().unwrap(),
            c.to_vec().unwrap(),
        );
        let err = crate::scenario::support::matmul_error(&av, &bv, &cv, (m, k, n), 64);
        assert!(
            err <= crate::scenario::support::matmul_tolerance(k),
            "{err}"
        );
    }

    /// Pooled pinned buffers are reused: with poisoning on, every copy must still carry its
    /// own product, never a previous one or NaN.
    #[cfg(feature = "cuda")]
    #[test]
    fn gpu_copies_into_reused_pinned_buffers_are_complete() {
        let Some(rt) = gpu_runtime("gpu_copies_into_reused_pinned_buffers_are_complete") else {
            return;
        };
        let d = &rt.devices[0];
        d.poison_reused_host_buffers(true);
        for seed in 0..4 {
            let x = Tensor::uniform(&rt.engine, d, &[256, 256], seed);
            let y = x.matmul(&x).unwrap();
            let h = y.copy_to_host();
            assert_eq!(h.to_vec().unwrap(), y.to_vec().unwrap(), "seed {seed}");
        }
        d.poison_reused_host_buffers(false);
    }

    #[test]
    fn copy_to_host_runs_on_the_copy_lane_and_copies() {
        let rt = rt();
        let d = &rt.devices[0];
        rt.engine.set_tracing(true);
        let x = Tensor::uniform(&rt.engine, d, &[4, 4], 9);
        let y = x.copy_to_host();
        assert_eq!(y.to_vec().unwrap(), x.to_vec().unwrap());
        let trace = rt.engine.take_trace();
        let copy = trace.iter().find(|r| r.name == "copy to host").unwrap();
        assert_eq!(copy.lane_name, "cpu:0 copy");
    }
}
