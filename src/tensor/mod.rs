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

use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::device::memory::MemTracker;

use ndarray::{ArrayD, ArrayViewD, Ix2, IxDyn};

#[cfg(feature = "cuda")]
use crate::device::cuda::ops::Map as Kernel;
use crate::device::{cpu, Device, DeviceKind};
use crate::engine::{DataVar, Engine, EngineError, OpError, OpVars, Var, VarData, VarKey};

/// Errors of the tensor front end.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
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
    Read(String),
    /// An op upstream failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// Where a tensor's values are.
pub(crate) enum Storage {
    /// Not written yet.
    Empty,
    /// Host memory, row-major in its cell's shape, counted by the cell's tracker while it
    /// lives (the cell stores and frees it: see [`BufferCell::put_flat`]). Flat rather than
    /// an `ndarray` array: an element-wise op maps one slice into a new one, without the
    /// stride bookkeeping of a dynamic-rank array (a fifth of a worker's time per small op,
    /// measured with `perf`), with one allocation instead of two, and storing it writes two
    /// words into the cell the pushing thread allocated rather than an array's header.
    Host(Box<[f32]>),
    #[cfg(feature = "cuda")]
    Cuda(Arc<gpu::GpuBuffer>),
    /// Page-locked host memory, filled by a device→host copy, in its cell's shape.
    #[cfg(feature = "cuda")]
    Pinned(Arc<crate::device::cuda::PinnedBuffer>),
}

impl Storage {
    /// The bytes of host memory this storage holds.
    fn host_bytes(&self) -> u64 {
        match self {
            Storage::Host(a) => (a.len() * std::mem::size_of::<f32>()) as u64,
            _ => 0,
        }
    }

    /// The values in host memory, row-major: an ordinary host buffer, or a pinned buffer
    /// that a device→host copy filled (so a host copy is usable by host ops).
    fn flat(&self) -> Result<&[f32], OpError> {
        match self {
            Storage::Host(values) => Ok(values),
            #[cfg(feature = "cuda")]
            Storage::Pinned(buf) => buf.as_slice().map_err(OpError::msg),
            _ => Err(OpError::msg("expected a tensor in host memory")),
        }
    }

    /// The host values, to change in place.
    fn flat_mut(&mut self) -> Result<&mut [f32], OpError> {
        match self {
            Storage::Host(values) => Ok(values),
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

/// A tensor's storage behind its lock, its shape, and the tracker that counts its host
/// bytes. Owned by the tensor's var, which keeps it alive while any op names the var.
pub(crate) struct BufferCell {
    /// Counts the host bytes of `lock`'s storage. Set when the buffer is made, on the pushing
    /// thread: a worker storing values moves no reference count.
    memory: Arc<MemTracker>,
    /// The shape of the values, fixed when the buffer is made: host values are stored flat.
    /// Inline (up to four dimensions), so a body that needs it moves no reference count.
    shape: CellShape,
    lock: RwLock<Storage>,
}

/// A cell's shape, inline up to four dimensions. Not ndarray's `IxDyn`, which an out-of-line
/// call returned through the stack, to be copied into the cell with loads wider than its
/// stores (a stall the CPU cannot forward around, on every push).
enum CellShape {
    Inline { len: usize, dims: [usize; 4] },
    Heap(Box<[usize]>),
}

impl CellShape {
    #[inline(always)]
    fn new(shape: &[usize]) -> CellShape {
        match shape.len() {
            // Element by element: a `copy_from_slice` of a run-time length is a `memcpy`
            // of bytes, read back as words (the same stall again).
            len @ 0..=4 => CellShape::Inline {
                len,
                dims: std::array::from_fn(|i| shape.get(i).copied().unwrap_or(0)),
            },
            _ => CellShape::Heap(shape.into()),
        }
    }

    fn dims(&self) -> &[usize] {
        match self {
            CellShape::Inline { len, dims } => &dims[..*len],
            CellShape::Heap(dims) => dims,
        }
    }

    /// The number of values.
    fn size(&self) -> usize {
        self.dims().iter().product()
    }
}

impl std::ops::Deref for BufferCell {
    type Target = RwLock<Storage>;
    fn deref(&self) -> &RwLock<Storage> {
        &self.lock
    }
}

impl BufferCell {
    /// A cell holding `storage`, counted from now on. Written field by field into its
    /// allocation: built on the stack, the cell was copied in with loads wider than the
    /// stores that had just written it, which the CPU cannot forward (a tenth of a push).
    #[inline(always)] // so a caller's `Storage::Empty` is written as constants, in place
    fn boxed(memory: Arc<MemTracker>, shape: &[usize], storage: Storage) -> Box<BufferCell> {
        memory.add(storage.host_bytes());
        let mut cell = Box::<BufferCell>::new_uninit();
        let slot = cell.as_mut_ptr();
        // SAFETY: every field of the cell is written (the pattern below names them all, so a
        // field added later fails to compile until it is written here too); `slot` points
        // into the allocation, which nothing else can see yet.
        unsafe {
            #[allow(dead_code)]
            fn every_field_is_written(cell: &BufferCell) {
                let BufferCell {
                    memory: _,
                    shape: _,
                    lock: _,
                } = cell;
            }
            std::ptr::addr_of_mut!((*slot).memory).write(memory);
            std::ptr::addr_of_mut!((*slot).shape).write(CellShape::new(shape));
            // An empty lock first, as constants: `RwLock::new(storage)` was built on the
            // stack and copied (the stall again). A pending tensor's cell stays empty.
            std::ptr::addr_of_mut!((*slot).lock).write(RwLock::new(Storage::Empty));
            let mut cell = cell.assume_init();
            if !matches!(storage, Storage::Empty) {
                *cell.lock.get_mut().unwrap_or_else(|e| e.into_inner()) = storage;
            }
            cell
        }
    }

    /// An empty cell for a tensor at `place`, which the op pushed with it will fill.
    #[inline(always)] // as `boxed`: a call here measured 1-3% more per push
    fn pending(place: &Placement) -> Box<BufferCell> {
        BufferCell::boxed(place.device.memory.clone(), &place.shape, Storage::Empty)
    }

    /// Store host values of the cell's shape, given as an array.
    fn put_host(&self, values: ArrayD<f32>) -> Result<(), OpError> {
        if values.shape() != self.shape.dims() {
            return Err(OpError::msg(format!(
                "an op produced values of shape {:?} for a tensor of shape {:?}",
                values.shape(),
                self.shape.dims()
            )));
        }
        self.put_flat(into_flat(values))
    }

    /// Store host values, row-major in the cell's shape: they count from now on, and what
    /// they replace stops counting.
    fn put_flat(&self, values: Box<[f32]>) -> Result<(), OpError> {
        if values.len() != self.shape.size() {
            return Err(OpError::msg(format!(
                "an op produced {} values for a tensor of shape {:?}",
                values.len(),
                self.shape.dims()
            )));
        }
        let mut slot = write(self)?;
        let new = Storage::Host(values);
        self.memory.add(new.host_bytes());
        let old = std::mem::replace(&mut *slot, new);
        self.memory.sub(old.host_bytes());
        Ok(())
    }

    /// `storage` (this cell's, locked by the caller) seen as an array of the cell's shape.
    fn view<'a>(&self, storage: &'a Storage) -> Result<ArrayViewD<'a, f32>, OpError> {
        Ok(ArrayViewD::from_shape(
            IxDyn(self.shape.dims()),
            storage.flat()?,
        )?)
    }
}

/// An array's values, row-major, without a copy when it is already laid out that way (what
/// `ndarray` makes by default).
fn into_flat(values: ArrayD<f32>) -> Box<[f32]> {
    if values.is_standard_layout() {
        let n = values.len();
        let (raw, offset) = values.into_raw_vec_and_offset();
        let start = offset.unwrap_or(0);
        if start == 0 && raw.len() == n {
            return raw.into_boxed_slice();
        }
        return raw[start..start + n].into();
    }
    values.iter().copied().collect()
}

impl VarData for BufferCell {
    /// Free the values as soon as nothing can read them.
    fn release(&self) {
        // A poisoned lock still holds storage that must stop counting.
        let mut slot = self.lock.write().unwrap_or_else(|e| e.into_inner());
        let old = std::mem::replace(&mut *slot, Storage::Empty);
        self.memory.sub(old.host_bytes());
    }
}

impl Drop for BufferCell {
    /// Whatever the cell still holds as it goes stops counting. Through `get_mut`, not the
    /// lock: every op's output is dropped here, and taking a lock nobody else can hold would
    /// cost the pushing thread two locked instructions per op.
    fn drop(&mut self) {
        let slot = self.lock.get_mut().unwrap_or_else(|e| e.into_inner());
        let old = std::mem::replace(slot, Storage::Empty);
        self.memory.sub(old.host_bytes());
    }
}

/// A tensor's buffer: a handle that owns its var's [`BufferCell`] (cloning it keeps the
/// values alive, as a tensor does).
#[derive(Clone)]
pub(crate) struct Buffer(DataVar);

impl Buffer {
    fn new(memory: Arc<MemTracker>, shape: &[usize], storage: Storage) -> Buffer {
        Buffer(DataVar::new(BufferCell::boxed(memory, shape, storage)))
    }

    fn var(&self) -> &Var {
        self.0.var()
    }

    /// What an op body pushed with `push_with` finds this buffer by.
    fn key(&self) -> VarKey {
        self.var().key()
    }

    /// True when both handles name one buffer.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    fn same(&self, other: &Buffer) -> bool {
        self.var().same(other.var())
    }
}

impl std::ops::Deref for Buffer {
    type Target = BufferCell;
    fn deref(&self) -> &BufferCell {
        // A `Buffer` is only ever made by `Buffer::new`, around a `BufferCell`.
        self.0.data().expect("a tensor's var owns a BufferCell")
    }
}

/// The buffer of the var `key` names, among the vars of the op whose body asks.
fn cell<'a>(vars: &OpVars<'a>, key: VarKey) -> Result<&'a BufferCell, OpError> {
    vars.data(key)
        .ok_or_else(|| OpError::msg("the op does not name the tensor it uses"))
}

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

fn read(buf: &BufferCell) -> Result<RwLockReadGuard<'_, Storage>, OpError> {
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

fn read_both<'a>(x: &'a BufferCell, y: &'a BufferCell) -> Result<ReadPair<'a>, OpError> {
    let first = read(x)?;
    let second = if std::ptr::eq(x, y) {
        None
    } else {
        Some(read(y)?)
    };
    Ok((first, second))
}

fn write(buf: &BufferCell) -> Result<RwLockWriteGuard<'_, Storage>, OpError> {
    buf.write()
        .map_err(|_| OpError::msg("tensor buffer poisoned by an earlier panic"))
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
            let host = Tensor::from_host(engine, &device.host_device(device), array);
            let out = Tensor::pending_at(place);
            let (src, dst, n) = (host.data.clone(), out.data.clone(), out.len());
            let mem = device.memory.clone();
            gpu::push(
                engine,
                device.compute,
                "upload",
                &[host.var()],
                &[out.var()],
                dev,
                gpu::Stream::Compute,
                move |d| {
                    let mut slot = write(&dst).map_err(|e| e.to_string())?;
                    let values = read(&src).map_err(|e| e.to_string())?;
                    let values = values.flat().map_err(|e| e.to_string())?;
                    let mut y = gpu::alloc(d, n, &mem)?;
                    d.upload(values, &mut y.0)?;
                    *slot = Storage::Cuda(gpu::finish(d, y)?);
                    drop(slot);
                    Ok(dst)
                },
            );
            return out;
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
        let name = fill.name();
        match &device.kind {
            DeviceKind::Cpu { .. } => {
                let (dst, s) = (out.data.key(), shape.to_vec());
                engine.push_with(name, device.compute, &[], &[out.var()], move |vars| {
                    let values = match fill {
                        Fill::Ones => ArrayD::ones(IxDyn(&s)),
                        Fill::Uniform(seed) => cpu::uniform(&s, seed),
                    };
                    cell(vars, dst)?.put_host(values)
                })
            }
            #[cfg(feature = "cuda")]
            DeviceKind::Cuda(dev) => {
                let n = out.len();
                let dst = out.data.clone();
                let mem = device.memory.clone();
                gpu::push(
                    engine,
                    device.compute,
                    name,
                    &[],
                    &[out.var()],
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

    /// Push an op on this tensor's compute lane that reads this tensor and writes a new one of
    /// `shape`: `body` gets the op's vars and the keys of the two buffers.
    fn push_unary(
        &self,
        name: &'static str,
        place: Arc<Placement>,
        body: impl FnOnce(&OpVars<'_>, VarKey, VarKey) -> Result<(), OpError> + Send + 'static,
    ) -> Tensor {
        let src = self.data.key();
        self.push_new(name, place, &[self.var()], move |vars, dst| {
            body(vars, src, dst)
        })
    }

    /// A host op on this tensor's compute lane that reads `reads` and computes a new tensor at
    /// `place`, whose buffer's key `body` gets: the engine makes its var with the op's write
    /// already counted.
    fn push_new(
        &self,
        name: &'static str,
        place: Arc<Placement>,
        reads: &[&Var],
        body: impl FnOnce(&OpVars<'_>, VarKey) -> Result<(), OpError> + Send + 'static,
    ) -> Tensor {
        let cell = BufferCell::pending(&place);
        let data =
            self.place
                .engine
                .push_with_new(name, self.place.device.compute, reads, cell, body);
        Tensor {
            place,
            data: Buffer(data),
        }
    }

    /// A host op of this tensor, computing a new one of `shape` with `f` from its values.
    fn push_host(
        &self,
        name: &'static str,
        place: Arc<Placement>,
        f: impl FnOnce(ArrayViewD<'_, f32>) -> Result<ArrayD<f32>, OpError> + Send + 'static,
    ) -> Tensor {
        self.push_unary(name, place, move |vars, src, dst| {
            let x = cell(vars, src)?;
            let y = f(x.view(&*read(x)?)?)?;
            cell(vars, dst)?.put_host(y)
        })
    }

    /// A host op that maps this tensor's values, row-major, to as many new ones: no array is
    /// built around either side.
    fn push_flat(
        &self,
        name: &'static str,
        f: impl FnOnce(&[f32]) -> Box<[f32]> + Send + 'static,
    ) -> Tensor {
        self.push_unary(name, self.place.clone(), move |vars, src, dst| {
            let y = f(read(cell(vars, src)?)?.flat()?);
            cell(vars, dst)?.put_flat(y)
        })
    }

    /// [`push_host`](Tensor::push_host) for an op of two tensors (`self` and `other` may share
    /// a buffer: it is then read once).
    fn push_host2(
        &self,
        name: &'static str,
        other: &Tensor,
        place: Arc<Placement>,
        f: impl FnOnce(ArrayViewD<'_, f32>, ArrayViewD<'_, f32>) -> Result<ArrayD<f32>, OpError>
            + Send
            + 'static,
    ) -> Tensor {
        let (x, y) = (self.data.key(), other.data.key());
        self.push_new(name, place, &[self.var(), other.var()], move |vars, dst| {
            let z = {
                let (xc, yc) = (cell(vars, x)?, cell(vars, y)?);
                let (xg, yg) = read_both(xc, yc)?;
                let a = xc.view(&xg)?;
                let b = yc.view(yg.as_deref().unwrap_or(&xg))?;
                f(a, b)?
            };
            cell(vars, dst)?.put_host(z)
        })
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
            let out = Tensor::pending_at(self.place.clone());
            let (src, dst) = (self.data.clone(), out.data.clone());
            let mem = self.place.device.memory.clone();
            let n = self.len();
            gpu::push(
                &self.place.engine,
                self.place.device.compute,
                name,
                &[self.var()],
                &[out.var()],
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
        self.push_flat(name, move |x| x.iter().map(|&v| f(v)).collect())
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
            let out = Tensor::pending_at(self.place.clone());
            let (x, b, dst) = (self.data.clone(), row.data.clone(), out.data.clone());
            let mem = self.place.device.memory.clone();
            let (rows, cols) = (a[0], a[1]);
            gpu::push(
                &self.place.engine,
                self.place.device.compute,
                "add_row",
                &[self.var(), row.var()],
                &[out.var()],
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
        Ok(self.push_host2("add_row", row, self.place.clone(), |x, b| {
            let x = x.into_dimensionality::<Ix2>()?;
            let b = b.into_dimensionality::<Ix2>()?;
            Ok((&x + &b.row(0).insert_axis(ndarray::Axis(0))).into_dyn())
        }))
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
        if self.place.shape != other.place.shape {
            return Err(TensorError::Shape(format!(
                "cannot add {:?} and {:?}",
                &self.place.shape[..],
                &other.place.shape[..]
            )));
        }
        Ok(
            self.push_host2("axpby", other, self.place.clone(), move |x, y| {
                Ok(ndarray::Zip::from(&x)
                    .and(&y)
                    .map_collect(|&p, &q| a * p + b * q))
            }),
        )
    }

    /// `self ← a · self + b · other`, element-wise and **in place** (host tensors of one shape):
    /// the op reads `other` and read-modify-writes `self`'s var, so it must wait for every
    /// earlier reader of `self` (write after read) and every earlier write (write after write).
    /// `other` may be `self` itself.
    pub fn axpby_assign(&self, a: f32, other: &Tensor, b: f32) -> Result<(), TensorError> {
        if self.place.shape != other.place.shape {
            return Err(TensorError::Shape(format!(
                "cannot add {:?} into {:?}",
                &other.place.shape[..],
                &self.place.shape[..]
            )));
        }
        let (x, y) = (self.data.key(), other.data.key());
        self.place.engine.push_with(
            "axpby in place",
            self.place.device.compute,
            &[other.var()],
            &[self.var()],
            move |vars| {
                let mut xg = write(cell(vars, x)?)?;
                if x == y {
                    for p in xg.flat_mut()? {
                        *p = a * *p + b * *p;
                    }
                    return Ok(());
                }
                let yg = read(cell(vars, y)?)?;
                let (xs, ys) = (xg.flat_mut()?, yg.flat()?);
                // Both tensors have one shape (checked at push), so one length.
                for (p, &q) in xs.iter_mut().zip(ys) {
                    *p = a * *p + b * q;
                }
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
        let (a, b) = (&self.place.shape[..], rhs.shape());
        if a.len() != 2 || b.len() != 2 || a[1] != b[0] {
            return Err(TensorError::Shape(format!(
                "cannot multiply {a:?} by {b:?}"
            )));
        }
        let (m, n) = (a[0], b[1]);
        #[cfg(feature = "cuda")]
        if let DeviceKind::Cuda(dev) = &self.place.device.kind {
            let out = Tensor::pending(&self.place.engine, &self.place.device, &[m, n]);
            let (x, y, dst) = (self.data.clone(), rhs.data.clone(), out.data.clone());
            let mem = self.place.device.memory.clone();
            let (reads, writes) = ([self.var(), rhs.var()], [out.var()]);
            let k_dim = self.place.shape[1];
            gpu::push(
                &self.place.engine,
                self.place.device.compute,
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
                    let b = if x.same(&y) {
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
            );
            return Ok(out);
        }
        Ok(
            self.push_host2("matmul", rhs, self.reshaped(&[m, n]), |a, b| {
                let a = a.into_dimensionality::<Ix2>()?;
                let b = b.into_dimensionality::<Ix2>()?;
                Ok(cpu::matmul(a, b).into_dyn())
            }),
        )
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
            DeviceKind::Cpu { .. } => {
                let (src, dst) = (self.data.key(), out.data.key());
                self.place.engine.push_with(
                    "copy to host",
                    self.place.device.copy,
                    &[self.var()],
                    &[out.var()],
                    move |vars| {
                        let copy = read(cell(vars, src)?)?.flat()?.into();
                        cell(vars, dst)?.put_flat(copy)
                    },
                )
            }
            #[cfg(feature = "cuda")]
            DeviceKind::Cuda(dev) => {
                let (src, dst) = (self.data.clone(), out.data.clone());
                let n = self.len();
                gpu::push(
                    &self.place.engine,
                    self.place.device.copy,
                    "copy to host",
                    &[self.var()],
                    &[out.var()],
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
                        *slot = Storage::Pinned(Arc::new(host));
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
            Storage::Host(values) => Ok(values.to_vec()),
            #[cfg(feature = "cuda")]
            Storage::Cuda(slice) => match &self.place.device.kind {
                DeviceKind::Cuda(d) => d
                    .read_back(&slice.slice, slice.ready().as_ref())
                    .map_err(TensorError::Read),
                DeviceKind::Cpu { .. } => {
                    Err(TensorError::Read("GPU buffer on a CPU device".into()))
                }
            },
            #[cfg(feature = "cuda")]
            Storage::Pinned(host) => host
                .as_slice()
                .map(<[f32]>::to_vec)
                .map_err(TensorError::Read),
        }
    }

    /// The tensor's shape.
    pub fn shape(&self) -> &[usize] {
        &self.place.shape
    }

    /// The var the engine tracks this tensor's buffer by.
    pub fn var(&self) -> &Var {
        self.data.var()
    }

    /// The device the tensor lives on.
    pub fn device(&self) -> &Arc<Device> {
        &self.place.device
    }
}

#[cfg(feature = "cuda")]
mod gpu;
#[cfg(feature = "cuda")]
mod graph;
#[cfg(feature = "cuda")]
pub use graph::CapturedGraph;

#[cfg(test)]
mod tests;
