//! Page-locked host memory for copies, pooled by length: a page-locked allocation is slow and
//! can synchronize streams, so buffers are reused. The pool is bounded (at most
//! [`PER_LENGTH`] buffers of one length and [`PinnedPool::max_bytes`] bytes in all; a buffer
//! returned past either bound is freed at once, with `cuMemFreeHost`), since page-locked memory
//! is memory the OS can no longer page out; what it keeps is freed when the device goes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::PinnedHostSlice;

use super::error::GpuError;
use super::events::CompletionEvent;
use super::CudaDevice;

/// Buffers of one length kept at most: more than `run-copy`'s largest `--ops` (1000), so a
/// run's buffers all come back, and bounded so that a stray pattern cannot grow without end.
pub(super) const PER_LENGTH: usize = 1024;

/// The pool's total bound without a reading of host memory.
const DEFAULT_MAX_BYTES: u64 = 1 << 30;

/// Free buffers by length, within two bounds; generic over the buffer so its bookkeeping is
/// tested without a GPU.
pub(super) struct Bounded<T> {
    free: HashMap<usize, Vec<T>>,
    bytes: u64,
    per_length: usize,
    max_bytes: u64,
    size: fn(&T) -> u64,
}

impl<T> Bounded<T> {
    /// An empty pool keeping at most `per_length` buffers of one length and `max_bytes` bytes,
    /// each buffer's bytes given by `size`.
    pub(super) fn new(per_length: usize, max_bytes: u64, size: fn(&T) -> u64) -> Bounded<T> {
        Bounded {
            free: HashMap::new(),
            bytes: 0,
            per_length,
            max_bytes,
            size,
        }
    }

    /// A kept buffer of `len` elements, if there is one.
    pub(super) fn take(&mut self, len: usize) -> Option<T> {
        let item = self.free.get_mut(&len)?.pop()?;
        self.bytes = self.bytes.saturating_sub((self.size)(&item));
        Some(item)
    }

    /// Keep `item` (of `len` elements), or hand it back when it would pass a bound: the caller
    /// drops it outside any lock.
    pub(super) fn give(&mut self, len: usize, item: T) -> Option<T> {
        let bytes = (self.size)(&item);
        let same = self.free.entry(len).or_default();
        if same.len() >= self.per_length || self.bytes.saturating_add(bytes) > self.max_bytes {
            return Some(item);
        }
        same.push(item);
        self.bytes += bytes;
        None
    }

    /// Bytes kept.
    pub(super) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Buffers kept.
    pub(super) fn count(&self) -> usize {
        self.free.values().map(Vec::len).sum()
    }

    /// Every kept buffer, taken out (to be freed).
    pub(super) fn drain(&mut self) -> Vec<T> {
        self.bytes = 0;
        self.free.drain().flat_map(|(_, v)| v).collect()
    }
}

fn pinned_bytes(b: &PinnedHostSlice<f32>) -> u64 {
    b.num_bytes() as u64
}

/// Pinned buffers by length, kept for reuse within bounds.
pub(super) struct PinnedPool {
    free: Mutex<Bounded<PinnedHostSlice<f32>>>,
    /// Fill reused buffers with NaN before handing them out (see
    /// [`Device::poison_reused_host_buffers`](crate::device::Device::poison_reused_host_buffers)).
    pub(super) poison: AtomicBool,
}

impl Default for PinnedPool {
    fn default() -> PinnedPool {
        PinnedPool {
            free: Mutex::new(Bounded::new(
                PER_LENGTH,
                PinnedPool::max_bytes(),
                pinned_bytes,
            )),
            poison: AtomicBool::new(false),
        }
    }
}

impl PinnedPool {
    /// The total bound: a quarter of the memory the OS can give now, at least 1 GiB (1 GiB
    /// when unknown): page-locked memory the pool keeps is memory nothing else can use.
    pub(super) fn max_bytes() -> u64 {
        crate::device::memory::available_bytes()
            .map_or(DEFAULT_MAX_BYTES, |b| (b / 4).max(DEFAULT_MAX_BYTES))
    }

    pub(super) fn take(&self, len: usize) -> Option<PinnedHostSlice<f32>> {
        let mut buf = self.free.lock().ok()?.take(len)?;
        if self.poison.load(Ordering::Acquire) {
            // The buffer's last copy completed before it came back (its op's event fired).
            if let Ok(values) = buf.as_mut_slice() {
                values.fill(f32::NAN);
            }
        }
        Some(buf)
    }

    fn give(&self, buf: PinnedHostSlice<f32>) {
        let excess = match self.free.lock() {
            Ok(mut pool) => pool.give(buf.len(), buf),
            Err(_) => Some(buf),
        };
        // Freed (cuMemFreeHost, through cudarc's drop) outside the lock, and outside any graph
        // capture: the free synchronizes (see `capture_guard`).
        if excess.is_some() {
            let _outside = super::capture_guard::outside_captures();
            drop(excess);
        }
    }

    /// Bytes and buffers kept now.
    pub(super) fn kept(&self) -> (u64, usize) {
        self.free.lock().map_or((0, 0), |p| (p.bytes(), p.count()))
    }

    /// Free every kept buffer (when the device goes).
    pub(super) fn trim(&self) {
        let kept = self.free.lock().map(|mut p| p.drain()).unwrap_or_default();
        if !kept.is_empty() {
            let _outside = super::capture_guard::outside_captures();
            drop(kept);
        }
    }
}

impl Drop for PinnedPool {
    fn drop(&mut self) {
        self.trim();
    }
}

/// A pinned host buffer that returns to its device's pool when dropped.
pub struct PinnedBuffer {
    pub(super) buf: Option<PinnedHostSlice<f32>>,
    pub(super) device: Arc<CudaDevice>,
    /// Recorded on the copy stream right after the last copy into the buffer: a host read
    /// and the buffer's return to the pool wait for it. The engine already orders readers
    /// after the copy's op completes; with cudarc's event tracking off, nothing else would
    /// guard the host side, so the buffer carries its own guard.
    pub(super) written: Option<CompletionEvent>,
}

impl PinnedBuffer {
    /// The values, once the copy that filled it has completed on the GPU.
    pub fn as_slice(&self) -> Result<&[f32], GpuError> {
        let buf = self.buf.as_ref().ok_or(GpuError::PinnedReleased)?;
        if let Some(written) = &self.written {
            written.synchronize()?;
        }
        Ok(buf.as_slice()?)
    }

    /// The values, to write (the host side of an upload from pinned memory). Only while no
    /// copy reads or writes the buffer (the engine orders that).
    pub fn as_mut_slice(&mut self) -> Result<&mut [f32], GpuError> {
        let buf = self.buf.as_mut().ok_or(GpuError::PinnedReleased)?;
        if let Some(written) = &self.written {
            written.synchronize()?;
        }
        Ok(buf.as_mut_slice()?)
    }
}

impl Drop for PinnedBuffer {
    /// Back to the pool once no copy writes it any more; a buffer whose copy cannot be waited
    /// for is freed instead (cudarc's drop frees it), never handed out again.
    fn drop(&mut self) {
        let done = self.written.take().is_none_or(|w| w.synchronize().is_ok());
        if let Some(buf) = self.buf.take() {
            if done {
                self.device.pinned.give(buf);
            } else {
                let _outside = super::capture_guard::outside_captures();
                drop(buf);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(per_length: usize, max_bytes: u64) -> Bounded<Vec<f32>> {
        Bounded::new(per_length, max_bytes, |v| (v.len() * 4) as u64)
    }

    #[test]
    fn buffers_come_back_by_length() {
        let mut p = pool(4, 1 << 20);
        assert!(p.give(3, vec![1.0; 3]).is_none());
        assert!(p.give(5, vec![2.0; 5]).is_none());
        assert_eq!((p.bytes(), p.count()), (32, 2));
        assert_eq!(p.take(5), Some(vec![2.0; 5]));
        assert_eq!(p.take(5), None);
        assert_eq!(p.take(4), None);
        assert_eq!((p.bytes(), p.count()), (12, 1));
    }

    #[test]
    fn the_pool_keeps_at_most_its_bounds() {
        // Two per length: the third buffer of one length is handed back to be freed.
        let mut p = pool(2, 1 << 20);
        assert!(p.give(1, vec![0.0]).is_none());
        assert!(p.give(1, vec![0.0]).is_none());
        assert_eq!(p.give(1, vec![9.0]), Some(vec![9.0]));
        assert_eq!(p.count(), 2);
        // 40 bytes in all: a 10-float buffer fits, the next 4 bytes do not.
        let mut p = pool(8, 40);
        assert!(p.give(10, vec![0.0; 10]).is_none());
        assert_eq!(p.give(1, vec![1.0]), Some(vec![1.0]));
        assert_eq!(p.bytes(), 40);
        // Once one is taken, there is room again.
        assert!(p.take(10).is_some());
        assert!(p.give(1, vec![1.0]).is_none());
        assert_eq!(p.bytes(), 4);
    }

    #[test]
    fn draining_empties_the_pool() {
        let mut p = pool(4, 1 << 20);
        for n in 1..=3 {
            assert!(p.give(n, vec![0.0; n]).is_none());
        }
        let out = p.drain();
        assert_eq!(out.len(), 3);
        assert_eq!((p.bytes(), p.count()), (0, 0));
        assert_eq!(p.take(2), None);
    }
}
