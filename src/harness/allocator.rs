//! The allocator setting every timed process shares: the `parbench` binary and the benches
//! call [`keep_freed_memory`] first, so their figures measure the same allocator behaviour.

/// `mi_option_purge_delay` in mimalloc's `mi_option_e` (v2 and v3 alike): how long freed
/// memory stays committed before it is returned to the OS; -1 is never.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Keeps memory mimalloc has freed committed for reuse instead of returning it to the OS.
///
/// A benchmark measures the work, not when the allocator last gave pages back: with the
/// default 10 ms delay a buffer freed during a long product is returned to the OS, and the
/// next one of its size faults in every page on first touch (on this VM `run-then-copy`'s
/// copies took 150-200 ms instead of the 5-10 ms of `copy`). With this, only the first use of
/// each size pays the faults, in the warm-up round. It matters only where mimalloc is the
/// global allocator; call it before the threads that allocate start.
pub fn keep_freed_memory() {
    // SAFETY: sets a process-wide option; mimalloc reads its options with atomics, so a call
    // races with nothing.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
}
