//! Host→device copies on the upload stream, beside the compute stream and the download
//! (`copy`) stream: with one copy engine per direction, an upload, a kernel and a download
//! run at once.
//!
//! The new buffer is allocated in the upload stream's order and the copy enqueued there; the
//! compute stream then waits for the copy's event (`cuStreamWaitEvent`), so every later use
//! of the buffer, and its stream-ordered free on the compute stream, comes after the copy,
//! while the upload itself waits for nothing queued on the compute stream.

use super::block_cache::DeviceBuffer;
use super::error::GpuError;
use super::events::CompletionEvent;
use super::pinned::PinnedBuffer;
use super::CudaDevice;

/// Where an upload's values are: page-locked memory, which the copy engine reads directly
/// (the copy is asynchronous), or ordinary pageable memory, which the driver first stages
/// through a page-locked buffer of its own (the call returns once `src` is staged).
pub enum UploadSource<'a> {
    Pinned(&'a PinnedBuffer),
    Pageable(&'a [f32]),
}

impl UploadSource<'_> {
    /// Values to copy.
    pub fn len(&self) -> usize {
        match self {
            UploadSource::Pinned(p) => p.buf.as_ref().map_or(0, |b| b.len()),
            UploadSource::Pageable(s) => s.len(),
        }
    }

    /// True when there is nothing to copy.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl CudaDevice {
    /// Enqueue a copy of `src` into a new device buffer on the upload stream, and make the
    /// compute stream wait for it. A pinned `src` must stay alive and unwritten until the
    /// compute stream has passed this point (the caller keeps it until an event recorded
    /// there after this call fires).
    pub fn upload_on_copy_engine(&self, src: UploadSource<'_>) -> Result<DeviceBuffer, GpuError> {
        self.bind()?;
        let len = src.len();
        let mut dst = self.memory.alloc(&self.upload, &self.compute, len)?;
        match src {
            UploadSource::Pinned(p) => {
                let buf = p.buf.as_ref().ok_or(GpuError::PinnedReleased)?;
                self.upload.memcpy_htod(buf, &mut dst)?;
            }
            UploadSource::Pageable(values) => self.upload.memcpy_htod(values, &mut dst)?,
        }
        let copied = CompletionEvent::record_pooled(&self.upload, &self.ready_events)?;
        copied.wait_on(&self.compute)?;
        // Allocated in the upload stream's order: freed, not cached for the compute stream.
        Ok(DeviceBuffer::plain(dst))
    }
}
