//! Whether a workload fits: every scenario's `validate` estimates the buffers a run
//! allocates and refuses, before anything is allocated, what host (or GPU) memory cannot hold
//! — a usage error that states the estimate.

use crate::device::memory::{check_fits, f32_bytes, host_room, Bound, Room};
use crate::scenario::ScenarioError;

/// Refuse a workload of `elements` f32 values (`None`: the count overflowed) that would not fit
/// in host memory: the one memory check every scenario's `validate` goes through.
pub fn check_elements(what: &str, elements: Option<u64>) -> Result<(), ScenarioError> {
    check_bytes(what, elements.and_then(|e| f32_bytes(e, 1)))
}

/// Refuse a workload of `bytes` (`None`: the estimate overflowed) that would not fit in host
/// memory.
pub fn check_bytes(what: &str, bytes: Option<u64>) -> Result<(), ScenarioError> {
    check_fits(what, bytes, host_room()).map_err(|e| ScenarioError::Input(e.to_string()))
}

/// Refuse square `size`² workloads of `tensors` f32 matrices that would not fit in host memory
/// (or, for a GPU, in its free memory).
pub fn check_matrices(
    what: &str,
    size: u64,
    tensors: u64,
    on_gpu_free: Option<u64>,
) -> Result<(), ScenarioError> {
    let bytes = size.checked_mul(size).and_then(|e| f32_bytes(e, tensors));
    let room = match on_gpu_free {
        Some(bytes) => Some(Room {
            bytes,
            bound: Bound::GpuFree,
        }),
        None => host_room(),
    };
    check_fits(what, bytes, room).map_err(|e| ScenarioError::Input(e.to_string()))
}
