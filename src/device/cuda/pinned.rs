//! Page-locked host memory for device→host copies, pooled by length: a page-locked allocation
//! is slow and can synchronize streams.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::PinnedHostSlice;

use super::error::GpuError;
use super::CudaDevice;

/// Pinned buffers by length, kept for reuse.
#[derive(Default)]
pub(super) struct PinnedPool {
    free: Mutex<HashMap<usize, Vec<PinnedHostSlice<f32>>>>,
    /// Fill reused buffers with NaN before handing them out (see
    /// [`Device::poison_reused_host_buffers`](crate::device::Device::poison_reused_host_buffers)).
    pub(super) poison: AtomicBool,
}

impl PinnedPool {
    pub(super) fn take(&self, len: usize) -> Option<PinnedHostSlice<f32>> {
        let mut buf = self.free.lock().ok()?.get_mut(&len)?.pop()?;
        if self.poison.load(Ordering::Acquire) {
            // The buffer's last copy completed before it came back (its op's event fired).
            if let Ok(values) = buf.as_mut_slice() {
                values.fill(f32::NAN);
            }
        }
        Some(buf)
    }

    fn give(&self, buf: PinnedHostSlice<f32>) {
        if let Ok(mut pool) = self.free.lock() {
            pool.entry(buf.len()).or_default().push(buf);
        }
    }
}

/// A pinned host buffer that returns to its device's pool when dropped.
pub struct PinnedBuffer {
    pub(super) buf: Option<PinnedHostSlice<f32>>,
    pub(super) device: Arc<CudaDevice>,
}

impl PinnedBuffer {
    /// The values. Only read after the copy that filled it has completed (the engine orders
    /// that: readers of a tensor start after its producing op completed on the GPU).
    pub fn as_slice(&self) -> Result<&[f32], GpuError> {
        let buf = self.buf.as_ref().ok_or(GpuError::PinnedReleased)?;
        Ok(buf.as_slice()?)
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        if let Some(buf) = self.buf.take() {
            self.device.pinned.give(buf);
        }
    }
}
