//! The caching allocator: a compute-stream buffer goes back to a cache of its device's when
//! freed, by size class, and the next allocation of that class on the compute stream takes it
//! back without a driver call, as PyTorch's caching allocator does, rather than each op paying
//! a `cuMemFreeAsync` for its input and a `cuMemAllocFromPoolAsync` for its output (the driver
//! tier "launch, alloc and free" of `floor.rs`). It is the one way a tensor's buffer is
//! allocated: on an H200 it cut the synchronous loop's op from 18.4 to 12.8 µs
//! (`results/gpu/README.md`).
//!
//! Why reuse is safe: a block is cached when the last handle of its buffer goes, which is
//! when `cuMemFreeAsync` on the compute stream would have been called; it is only ever
//! handed out again to work on that same stream, which runs after every use already
//! enqueued there. Work on other streams (a copy to the host) keeps its buffers alive until
//! the GPU has finished it, as before. The cache gives its blocks back to the pool
//! (`cuMemFreeAsync`) when an allocation fails for room (out of memory, or past
//! `--gpu-memory-fraction`'s cap, then the allocation is tried once more), when the device
//! goes, and when the last buffer holding it goes.

use std::collections::HashMap;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::{sys, CudaSlice, CudaStream};

/// Blocks of at most this many bytes are rounded up to [`SMALL_STEP`], larger ones to
/// [`LARGE_STEP`] (PyTorch's allocator rounds small requests to 512 B and serves large ones
/// from 2 MiB segments).
const SMALL_LIMIT: u64 = 1 << 20;
const SMALL_STEP: u64 = 512;
const LARGE_STEP: u64 = 2 << 20;

/// The bytes of the block that serves a request of `bytes` (at least one small step).
pub(super) fn size_class(bytes: u64) -> u64 {
    let step = if bytes <= SMALL_LIMIT {
        SMALL_STEP
    } else {
        LARGE_STEP
    };
    bytes.max(1).div_ceil(step).saturating_mul(step)
}

/// Bytes of the cache's blocks that are in live buffers, and their high-water mark: the
/// pool's own mark counts a cached block as used, so a cache must count what is lent itself.
#[derive(Default)]
pub(super) struct Lent {
    now: AtomicU64,
    high: AtomicU64,
}

impl Lent {
    fn lend(&self, bytes: u64) {
        let now = self.now.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.high.fetch_max(now, Ordering::Relaxed);
    }

    fn give_back(&self, bytes: u64) {
        // Never below zero, whatever the order of concurrent updates.
        let _ = self
            .now
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                Some(v.saturating_sub(bytes))
            });
    }

    /// Bytes in live buffers now.
    pub(super) fn now(&self) -> u64 {
        self.now.load(Ordering::Relaxed)
    }

    /// The most bytes in live buffers at once since the last [`reset`](Self::reset).
    pub(super) fn high(&self) -> u64 {
        self.high.load(Ordering::Relaxed)
    }

    /// Start the high-water mark again from what is lent now.
    pub(super) fn reset(&self) {
        self.high.store(self.now(), Ordering::Relaxed);
    }
}

/// Freed compute-stream blocks by size class, and their bytes.
pub(crate) struct BlockCache {
    /// The compute stream: blocks are reused on it and, when trimmed, freed on it.
    stream: Arc<CudaStream>,
    free: Mutex<HashMap<u64, Vec<sys::CUdeviceptr>>>,
    bytes: AtomicU64,
    /// The cache's blocks in live buffers.
    pub(super) lent: Lent,
}

// SAFETY: the cache stores device addresses (plain integers) and a stream handle, which any
// thread of the process may use; the map is behind a mutex.
unsafe impl Send for BlockCache {}
// SAFETY: as for Send.
unsafe impl Sync for BlockCache {}

impl BlockCache {
    pub(super) fn new(stream: Arc<CudaStream>) -> BlockCache {
        BlockCache {
            stream,
            free: Mutex::default(),
            bytes: AtomicU64::new(0),
            lent: Lent::default(),
        }
    }

    /// Bytes the cache holds (reserved from the pool, in no live buffer).
    pub(super) fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Vec<sys::CUdeviceptr>>> {
        // A panic cannot leave the map half-updated: a poisoned lock's value is still good.
        self.free.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A cached block of `class` bytes, if one is free (lent from now on).
    pub(super) fn take(&self, class: u64) -> Option<sys::CUdeviceptr> {
        let ptr = self.lock().get_mut(&class)?.pop()?;
        self.bytes.fetch_sub(class, Ordering::Relaxed);
        self.lent.lend(class);
        Some(ptr)
    }

    /// A new block of `class` bytes, lent from now on, that comes back to the cache.
    pub(super) fn lend_new(&self, class: u64) {
        self.lent.lend(class);
    }

    /// Keep a freed block of `class` bytes for reuse.
    fn put(&self, class: u64, ptr: sys::CUdeviceptr) {
        self.lent.give_back(class);
        self.lock().entry(class).or_default().push(ptr);
        self.bytes.fetch_add(class, Ordering::Relaxed);
    }

    /// Give every cached block back to the pool, in the compute stream's order.
    pub(super) fn trim(&self) {
        let blocks = std::mem::take(&mut *self.lock());
        if blocks.is_empty() {
            return;
        }
        super::make_current(self.stream.context());
        for (class, ptrs) in blocks {
            for ptr in ptrs {
                // SAFETY: each block came from the pool and is in no live buffer; the free is
                // ordered after every use enqueued on the compute stream, its only user.
                let _ = unsafe { sys::cuMemFreeAsync(ptr, self.stream.cu_stream()) };
                self.bytes.fetch_sub(class, Ordering::Relaxed);
            }
        }
    }
}

impl Drop for BlockCache {
    fn drop(&mut self) {
        self.trim();
    }
}

/// A device buffer of `len` f32: freed in the compute stream's order when it goes, or, from
/// the caching allocator, given back to its cache.
pub struct DeviceBuffer {
    slice: ManuallyDrop<CudaSlice<f32>>,
    home: Option<(Arc<BlockCache>, u64)>,
}

impl DeviceBuffer {
    /// A buffer freed with `cuMemFreeAsync` when it goes.
    pub(super) fn plain(slice: CudaSlice<f32>) -> DeviceBuffer {
        DeviceBuffer {
            slice: ManuallyDrop::new(slice),
            home: None,
        }
    }

    /// A block of `class` bytes that goes back to `cache` when the buffer goes.
    pub(super) fn cached(slice: CudaSlice<f32>, cache: Arc<BlockCache>, class: u64) -> Self {
        DeviceBuffer {
            slice: ManuallyDrop::new(slice),
            home: Some((cache, class)),
        }
    }
}

impl Deref for DeviceBuffer {
    type Target = CudaSlice<f32>;
    fn deref(&self) -> &CudaSlice<f32> {
        &self.slice
    }
}

impl DerefMut for DeviceBuffer {
    fn deref_mut(&mut self) -> &mut CudaSlice<f32> {
        &mut self.slice
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: taken exactly once, here; the field is not used again.
        let slice = unsafe { ManuallyDrop::take(&mut self.slice) };
        match self.home.take() {
            Some((cache, class)) => cache.put(class, slice.leak()),
            None => {
                // The last handle may go on any thread (a CPU device's worker, a library
                // user's thread): the context must be current for the free that follows.
                super::make_current(slice.context());
                drop(slice);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lent_bytes_keep_their_own_high_water_mark() {
        let lent = Lent::default();
        lent.lend(100);
        lent.lend(50);
        lent.give_back(100);
        assert_eq!((lent.now(), lent.high()), (50, 150));
        lent.reset();
        assert_eq!((lent.now(), lent.high()), (50, 50));
        lent.lend(10);
        lent.give_back(1000);
        assert_eq!((lent.now(), lent.high()), (0, 60));
    }

    #[test]
    fn requests_round_up_to_their_class() {
        assert_eq!(size_class(0), 512);
        assert_eq!(size_class(1), 512);
        assert_eq!(size_class(512), 512);
        assert_eq!(size_class(513), 1024);
        assert_eq!(size_class(1 << 20), 1 << 20);
        assert_eq!(size_class((1 << 20) + 1), 2 << 20);
        assert_eq!(size_class(5 << 20), 6 << 20);
        assert!(size_class(u64::MAX) >= u64::MAX - LARGE_STEP);
    }
}
