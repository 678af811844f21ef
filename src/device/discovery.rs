//! Finding GPUs without ever failing: a machine with no driver, no device or a hidden device
//! gets a GPU marked unavailable with the exact reason, and every scenario falls back to CPU.

pub use super::gpu_info::{GpuInfo, LibraryInfo};

/// Probe for a CUDA device (once per process; later calls return the cached answer).
pub fn probe_gpu() -> GpuInfo {
    #[cfg(feature = "cuda")]
    {
        super::cuda::probe()
    }
    #[cfg(not(feature = "cuda"))]
    {
        GpuInfo::unavailable("this binary was built without the `cuda` feature")
    }
}
