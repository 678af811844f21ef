//! The `parbench` binary: everything lives in the library; this only hands over the arguments.

/// Ops and tensors are allocated by the pushing thread and freed by a worker: glibc's malloc
/// serializes that on an arena lock, mimalloc does not.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in mimalloc's `mi_option_e` (v2 and v3 alike): how long freed
/// memory stays committed before it is returned to the OS; -1 is never.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

fn main() -> std::process::ExitCode {
    // A benchmark measures the work, not when the allocator last gave pages back: with the
    // default 10 ms delay a buffer freed during a long product is returned to the OS, and the
    // next one of its size faults in every page on first touch (on this VM `run-then-copy`'s
    // copies took 150-200 ms instead of the 5-10 ms of `copy`). Freed memory now stays for
    // reuse; only the first use of each size pays the faults, in the warm-up round.
    // SAFETY: sets a process-wide option before any thread of ours runs; mimalloc reads it
    // with atomics.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    parbench::cli::main_with_args(std::env::args_os().collect())
}
