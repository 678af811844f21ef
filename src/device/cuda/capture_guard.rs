//! Graph captures against the calls that would break them. A stream capture in CUDA's
//! thread-local mode restricts only the capturing thread; another thread of the process may
//! still make a call that synchronizes the device or the legacy stream (cuRAND's generator
//! setting up its states, a page-locked allocation or free, a context, stream, module, pool or
//! library handle created or destroyed), and such a call invalidates the capture
//! (`CUDA_ERROR_STREAM_CAPTURE_INVALIDATED`) and fails itself (cuRAND's
//! `CURAND_STATUS_LAUNCH_FAILURE`). Seen on an H200: a capture beside a cuRAND fill on another
//! device of the same process broke both.
//!
//! So a capture holds this process-wide lock exclusively from its start to its end, and those
//! calls hold it shared: they wait for a capture in progress (microseconds to a millisecond)
//! instead of breaking it, and never wait for each other. Kernels, copies, event records and
//! stream-ordered allocations and frees need no lock: they do not synchronize.

use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

static CAPTURES: RwLock<()> = RwLock::new(());

/// Held while a graph is captured: no synchronizing call starts meanwhile.
pub(super) fn capturing() -> RwLockWriteGuard<'static, ()> {
    // Nothing is kept under the lock: a poisoned one (a panic while held) is still good.
    CAPTURES.write().unwrap_or_else(|e| e.into_inner())
}

/// Held around a call that synchronizes: it waits for a capture in progress to end.
pub(super) fn outside_captures() -> RwLockReadGuard<'static, ()> {
    CAPTURES.read().unwrap_or_else(|e| e.into_inner())
}

/// Whether a synchronizing call holds the guard now (no capture could start): for tests of
/// the calls that must take it.
#[cfg(test)]
pub(super) fn held_outside_captures() -> bool {
    matches!(
        CAPTURES.try_write(),
        Err(std::sync::TryLockError::WouldBlock)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[test]
    fn a_synchronizing_call_waits_for_the_capture_and_not_for_another_call() {
        let capture = capturing();
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let _a = outside_captures();
                done.store(true, Ordering::SeqCst);
            });
            std::thread::sleep(Duration::from_millis(50));
            assert!(
                !done.load(Ordering::SeqCst),
                "the call started during the capture"
            );
            drop(capture);
        });
        assert!(done.load(Ordering::SeqCst));
        // Two synchronizing calls at once do not wait for each other.
        let (_a, _b) = (outside_captures(), outside_captures());
    }
}
