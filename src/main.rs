//! The `parbench` binary: everything lives in the library; this only hands over the arguments.

fn main() -> std::process::ExitCode {
    parbench::cli::main_with_args(std::env::args_os().collect())
}
