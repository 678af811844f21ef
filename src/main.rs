//! The `parbench` binary: everything lives in the library; this only hands over the arguments.

/// Ops and tensors are allocated by the pushing thread and freed by a worker: glibc's malloc
/// serializes that on an arena lock, mimalloc does not.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    parbench::harness::allocator::keep_freed_memory();
    parbench::cli::main_with_args(std::env::args_os().collect())
}
