//! Faults on the GPU. A kernel that reads an illegal address, traps or hits an uncorrectable
//! ECC error leaves the process's CUDA context unusable: the error is *sticky*, and every later
//! call on the context fails with the same code (CUDA's programming guide, "error checking").
//! The first such error is kept here, process-wide, so that [`probe`](super::probe) then
//! reports the GPU unavailable with it and a later GPU scenario (in `parbench all`) says why
//! it cannot run instead of failing with an error that is not its own.
//!
//! [`INJECT_FAULT_ENV`] plants such a fault on purpose, to prove the path: with it set, a
//! scenario's GPU device enqueues a kernel that reads address 0 right after it opens, so the
//! run's first wait reports the fault (the device that measures the GPU's limits before the
//! run plants none, or the run would find the GPU already unusable).

use std::sync::OnceLock;

use cudarc::driver::{sys::CUresult, DriverError};

/// Set to `1`, every scenario's CUDA device enqueues a faulting kernel when it opens (for the
/// GPU check: the run must end with exit 1 and one clear line, without hanging).
pub const INJECT_FAULT_ENV: &str = "PARBENCH_GPU_INJECT_FAULT";

/// Whether [`INJECT_FAULT_ENV`] asks for a fault.
pub(super) fn fault_requested() -> bool {
    std::env::var(INJECT_FAULT_ENV).is_ok_and(|v| v == "1")
}

/// Whether the driver's `code` leaves the context unusable (the codes CUDA documents as
/// sticky: the context "must be destroyed and recreated").
pub(crate) fn is_sticky(code: CUresult) -> bool {
    use CUresult::*;
    matches!(
        code,
        CUDA_ERROR_ILLEGAL_ADDRESS
            | CUDA_ERROR_LAUNCH_FAILED
            | CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUDA_ERROR_MISALIGNED_ADDRESS
            | CUDA_ERROR_INVALID_ADDRESS_SPACE
            | CUDA_ERROR_INVALID_PC
            | CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUDA_ERROR_ASSERT
            | CUDA_ERROR_LAUNCH_TIMEOUT
            | CUDA_ERROR_ECC_UNCORRECTABLE
            | CUDA_ERROR_CONTEXT_IS_DESTROYED
    )
}

static POISONED: OnceLock<String> = OnceLock::new();

/// Keep `e` as the reason the GPU is unusable when it is sticky (the first one wins).
pub(super) fn note(e: &DriverError) {
    if is_sticky(e.0) {
        let _ = POISONED.set(poisoned_reason(e));
    }
}

/// Worded from the code alone: `DriverError`'s Display asks the driver library for its text,
/// which is not there in the tests of a machine without one.
fn poisoned_reason(e: &DriverError) -> String {
    format!(
        "the GPU is unusable in this process after a fault ({:?}): such CUDA errors are \
         sticky; a new process gets a fresh context",
        e.0
    )
}

/// Why the GPU is unusable in this process, after a sticky fault.
pub fn poisoned() -> Option<&'static str> {
    POISONED.get().map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_are_sticky_and_ordinary_errors_are_not() {
        assert!(is_sticky(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS));
        assert!(is_sticky(CUresult::CUDA_ERROR_LAUNCH_FAILED));
        assert!(!is_sticky(CUresult::CUDA_ERROR_OUT_OF_MEMORY));
        assert!(!is_sticky(CUresult::CUDA_ERROR_INVALID_VALUE));
        assert!(!is_sticky(CUresult::CUDA_SUCCESS));
    }

    #[test]
    fn the_reason_names_the_error_and_what_to_do() {
        let why = poisoned_reason(&DriverError(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS));
        assert!(why.contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{why}");
        assert!(why.contains("new process"), "{why}");
    }
}
