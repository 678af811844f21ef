//! The command line: clap types in `args.rs` (option values in `values.rs`), dispatch and the
//! short commands in `commands.rs`, how a command ends and its exit code in `error.rs`; running
//! a scenario, a sweep or a plan and finishing its report in `run.rs`; `ab` in `ab.rs`; pages
//! and completions in `pages.rs`; the parse the docs test checks in `check.rs`; the scenario
//! list of the help in `help.rs`; progress bars in `progress.rs`; output paths and stdout in
//! `output.rs`.
//!
//! Exit codes: 0 ok, 1 a check failed, a run failed or a regression was found, 2 a usage or
//! input error (see [`CliError::exit_code`]). Every error is one line on stderr; clap's own
//! usage errors are cut to their first line too.

use std::ffi::OsString;
use std::process::ExitCode;

/// `eprintln!` that ignores a failed write: stderr may be a pipe whose reader has gone
/// (`2>&1 | head -1`), where `eprintln!` panics and turns any exit code into 101. A message that
/// cannot be shown is dropped; the exit code still tells. Each line is one write
/// (`stderr::write_line`), so the ranks of an MPI job never interleave within a line.
macro_rules! note {
    ($($arg:tt)*) => {{
        $crate::cli::stderr::write_line(&mut std::io::stderr(), format_args!($($arg)*));
    }};
}

mod ab;
mod ab_build;
mod ab_result;
mod args;
mod axes;
mod check;
mod closed_stdout;
mod commands;
mod error;
mod eta;
mod finish;
mod help;
mod history;
mod interrupt;
mod journaling;
mod launch;
mod output;
mod pages;
mod partial;
mod progress;
mod reports;
mod run;
mod stderr;
mod sweep_ranks;
mod values;

pub use args::{scenario_command, Cli, Command, CommonArgs, GpuOrderArg};
pub use check::{check_command_line, CommandLineError};
pub use error::CliError;

/// Entry point of a program that adds scenarios of its own to parbench's
/// ([`crate::scenario::registry::add`]): its `main` hands over its scenarios and the
/// arguments, and every command works on them as on the built-in ones. A name that is taken
/// (a scenario's or a command's) is refused in one line, exit 2.
pub fn main_with_scenarios(
    extra: &[&'static dyn crate::scenario::Scenario],
    args: Vec<OsString>,
) -> ExitCode {
    use clap::CommandFactory;
    let commands = Cli::command();
    let taken = extra.iter().map(|s| s.name()).find(|n| {
        commands
            .get_subcommands()
            .any(|c| c.get_name() == *n || c.get_all_aliases().any(|a| a == *n))
    });
    let added = match taken {
        Some(name) => Err(format!(
            "'{name}' is a parbench command: a scenario needs a name of its own"
        )),
        None => crate::scenario::registry::add(extra).map_err(|e| e.to_string()),
    };
    match added {
        Ok(()) => main_with_args(args),
        Err(line) => {
            note!("error: {line}");
            ExitCode::from(2)
        }
    }
}

/// Entry point used by `main`: never panics on user input, always returns an exit code.
pub fn main_with_args(args: Vec<OsString>) -> ExitCode {
    let outcome = commands::run(args);
    // An MPI job's ranks finalize on the way out (mpirun counts a rank that exits without it
    // as failed); a no-op for every other run.
    crate::distributed::finalize();
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if let Some(line) = e.line() {
                note!("error: {line}");
            }
            ExitCode::from(e.exit_code())
        }
    }
}
