//! Finding GPUs without ever failing: a machine with no driver, no device or a hidden device
//! gets a GPU marked unavailable with the exact reason, and every scenario falls back to CPU.

pub use super::gpu_info::{GpuDevice, GpuInfo, LibraryInfo};

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

/// Every GPU the driver lists, with its attributes (empty without a driver or the `cuda`
/// feature); the one parbench opens is marked `selected`. Listed by the same single probe.
pub fn list_gpus() -> Vec<GpuDevice> {
    #[cfg(feature = "cuda")]
    {
        super::cuda::gpus()
    }
    #[cfg(not(feature = "cuda"))]
    {
        Vec::new()
    }
}
