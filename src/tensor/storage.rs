//! Where a tensor's values live: the storage (host, GPU or pinned memory), the cell that
//! holds it behind its lock together with its shape and its memory tracker, the var-owned
//! handle to that cell, and the lock helpers op bodies reach it through.

use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use ndarray::{ArrayD, ArrayViewD, IxDyn};

#[cfg(feature = "cuda")]
use super::gpu_buffer::GpuBuffer;
use super::Placement;
use crate::device::memory::MemTracker;
use crate::engine::{DataVar, OpError, OpVars, Var, VarData, VarKey};

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
    Cuda(Arc<GpuBuffer>),
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
    pub(super) fn flat(&self) -> Result<&[f32], OpError> {
        match self {
            Storage::Host(values) => Ok(values),
            #[cfg(feature = "cuda")]
            Storage::Pinned(buf) => buf.as_slice().map_err(OpError::msg),
            _ => Err(OpError::msg("expected a tensor in host memory")),
        }
    }

    /// The host values, to change in place.
    pub(super) fn flat_mut(&mut self) -> Result<&mut [f32], OpError> {
        match self {
            Storage::Host(values) => Ok(values),
            _ => Err(OpError::msg("expected a tensor in host memory")),
        }
    }

    #[cfg(feature = "cuda")]
    pub(super) fn cuda(&self) -> Result<Arc<GpuBuffer>, OpError> {
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
pub(super) enum CellShape {
    Inline { len: usize, dims: [usize; 4] },
    Heap(Box<[usize]>),
}

impl CellShape {
    #[inline(always)]
    pub(super) fn new(shape: &[usize]) -> CellShape {
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

    pub(super) fn dims(&self) -> &[usize] {
        match self {
            CellShape::Inline { len, dims } => &dims[..*len],
            CellShape::Heap(dims) => dims,
        }
    }

    pub(super) fn size(&self) -> usize {
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
    pub(super) fn pending(place: &Placement) -> Box<BufferCell> {
        BufferCell::boxed(place.device.memory.clone(), &place.shape, Storage::Empty)
    }

    /// Store host values of the cell's shape, given as an array.
    pub(super) fn put_host(&self, values: ArrayD<f32>) -> Result<(), OpError> {
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
    pub(super) fn put_flat(&self, values: Box<[f32]>) -> Result<(), OpError> {
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
    pub(super) fn view<'a>(&self, storage: &'a Storage) -> Result<ArrayViewD<'a, f32>, OpError> {
        Ok(ArrayViewD::from_shape(
            IxDyn(self.shape.dims()),
            storage.flat()?,
        )?)
    }
}

/// An array's values, row-major, without a copy when it is already laid out that way (what
/// `ndarray` makes by default).
pub(super) fn into_flat(values: ArrayD<f32>) -> Box<[f32]> {
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
pub(crate) struct Buffer(pub(super) DataVar);

impl Buffer {
    pub(super) fn new(memory: Arc<MemTracker>, shape: &[usize], storage: Storage) -> Buffer {
        Buffer(DataVar::new(BufferCell::boxed(memory, shape, storage)))
    }

    pub(super) fn var(&self) -> &Var {
        self.0.var()
    }

    /// What an op body pushed with `push_with` finds this buffer by.
    pub(super) fn key(&self) -> VarKey {
        self.var().key()
    }

    /// True when both handles name one buffer.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub(super) fn same(&self, other: &Buffer) -> bool {
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
pub(super) fn cell<'a>(vars: &OpVars<'a>, key: VarKey) -> Result<&'a BufferCell, OpError> {
    vars.data(key)
        .ok_or_else(|| OpError::msg("the op does not name the tensor it uses"))
}

pub(super) fn read(buf: &BufferCell) -> Result<RwLockReadGuard<'_, Storage>, OpError> {
    buf.read()
        .map_err(|_| OpError::msg("tensor buffer poisoned by an earlier panic"))
}

/// Read locks on two buffers that may be one (`x · x`): the lock is then taken once, since a
/// second read lock of one `RwLock` on one thread deadlocks if a writer queued in between.
/// The second guard is `None` when both are the same buffer.
pub(super) type ReadPair<'a> = (
    RwLockReadGuard<'a, Storage>,
    Option<RwLockReadGuard<'a, Storage>>,
);

pub(super) fn read_both<'a>(x: &'a BufferCell, y: &'a BufferCell) -> Result<ReadPair<'a>, OpError> {
    let first = read(x)?;
    let second = if std::ptr::eq(x, y) {
        None
    } else {
        Some(read(y)?)
    };
    Ok((first, second))
}

pub(super) fn write(buf: &BufferCell) -> Result<RwLockWriteGuard<'_, Storage>, OpError> {
    buf.write()
        .map_err(|_| OpError::msg("tensor buffer poisoned by an earlier panic"))
}
