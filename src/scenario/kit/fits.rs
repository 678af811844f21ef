//! Whether a workload fits: every scenario's `validate` estimates the buffers a run
//! allocates and refuses, before anything is allocated, what host (or GPU) memory cannot hold
//! — a usage error that states the estimate — and refuses device threads far beyond the
//! cores or beyond the address space `ulimit -v` leaves.

use crate::device::available_cores;
use crate::device::memory::{address_space, check_fits, f32_bytes, host_room, Bound, Room};
use crate::scenario::ScenarioError;
use crate::units::count;

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
    let gpu = |bytes| Room {
        bytes,
        bound: Bound::GpuFree,
    };
    let room = on_gpu_free.map(gpu).or_else(host_room);
    check_fits(what, bytes, room).map_err(|e| ScenarioError::Input(e.to_string()))
}

/// The most device threads a core: beyond it a run times the scheduler rather than the device
/// (`matmul --threads 2048 --ops 2` on 2 cores ran past 5 minutes), and every thread's stack
/// and buffers take address space (`matmul --threads 4096` aborted under `ulimit -v` 12 GiB).
pub const THREADS_PER_CORE: usize = 64;

/// Address space a thread reserves: its stack (2 MiB, Rust's default for a spawned thread).
const THREAD_STACK: u64 = 2 << 20;

/// Address space glibc reserves for each malloc arena (64 MiB on 64-bit), of which it makes
/// one for each new thread that allocates, up to 8 a core.
const MALLOC_ARENA: u64 = 64 << 20;

/// Address space `threads` new threads may reserve on `cores` cores: their stacks and their
/// malloc arenas. Without room for it a thread fails to start (`matmul --threads 64` under
/// `ulimit -v` 2 GB: "cannot start a thread pool … Resource temporarily unavailable").
fn threads_address_space(threads: usize, cores: usize) -> Option<u64> {
    let arenas = threads.min(cores.saturating_mul(8)) as u64;
    (threads as u64)
        .checked_mul(THREAD_STACK)?
        .checked_add(arenas.checked_mul(MALLOC_ARENA)?)
}

/// Refuse `threads` device threads asked for by `flag` when they are more than
/// [`THREADS_PER_CORE`] a core of this machine, or when their stacks and malloc arenas need
/// more than 80% of the address space `ulimit -v` leaves.
pub fn check_threads(flag: &str, threads: usize) -> Result<(), ScenarioError> {
    let cores = available_cores();
    let most = THREADS_PER_CORE * cores;
    if threads > most {
        return Err(ScenarioError::Input(format!(
            "{flag} {threads}: more than {THREADS_PER_CORE} threads a core on this machine's {} \
             ({most} at most): a run would time the scheduler, not the device",
            count(cores, "core")
        )));
    }
    check_fits(
        &format!("{flag} {threads}'s stacks and malloc arenas"),
        threads_address_space(threads, cores),
        address_space(),
    )
    .map_err(|e| ScenarioError::Input(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_far_beyond_the_cores_are_refused() {
        let most = THREADS_PER_CORE * available_cores();
        assert!(check_threads("--threads", most).is_ok());
        let e = check_threads("--threads", most + 1).unwrap_err();
        assert!(e.is_usage(), "{e}");
        assert!(
            e.to_string()
                .contains(&format!("({most} at most): a run would time the scheduler")),
            "{e}"
        );
        // Threads reserve their stacks, and at most 8 malloc arenas a core.
        assert_eq!(threads_address_space(1, 2), Some((2 << 20) + (64 << 20)));
        // 128 threads on 2 cores: 128 stacks, 16 arenas.
        assert_eq!(threads_address_space(128, 2), Some((256 << 20) + (1 << 30)));
        assert_eq!(threads_address_space(usize::MAX, 1), None);
    }
}
