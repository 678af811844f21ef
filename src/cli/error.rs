//! How a command ends when it does not succeed, and the exit code of each way: every command
//! returns `Result<(), CliError>`, and [`CliError::exit_code`] is the one place a code is
//! chosen.
//!
//! - 0: success (and `--help`, `--version`);
//! - 1: something failed while running: a correctness check, a scenario; or `compare`/`ab`
//!   found a regression;
//! - 2: what the user asked for cannot be done as asked: the command line, an input file, an
//!   output path or a stdout that cannot be written, a scenario's parameters;
//! - 130: a sweep stopped by its test hook, as an interrupt would.
//!
//! Every error is one line on stderr (see [`CliError::line`]), except where the output already
//! says it: clap's help shown for a missing command, a regression in the printed table.

use std::error::Error as _;
use std::fmt::Write as _;

use super::check::CommandLineError;
use crate::distributed::DistributedError;
use crate::export::ExportError;
use crate::report::atomic::AtomicWriteError;
use crate::report::compare::CompareError;
use crate::scenario::suite::{SuiteError, SuiteReadError};
use crate::scenario::sweep::JournalError;
use crate::scenario::ScenarioError;

/// Why a command did not succeed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// What the user asked for cannot be done as asked (a bad combination of options, an
    /// unreadable suite or journal, an output path that cannot be written), in the CLI's words.
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    CommandLine(#[from] CommandLineError),
    /// No command was given: clap has printed the help already.
    #[error("a command is required")]
    NoCommand,
    /// A report to read is missing, not a report, or of another schema.
    #[error(transparent)]
    Report(#[from] CompareError),
    /// A report cannot be rendered in the format asked for (an SVG of nothing).
    #[error(transparent)]
    Export(#[from] ExportError),
    #[error(transparent)]
    Write(#[from] AtomicWriteError),
    #[error(transparent)]
    Suite(#[from] SuiteError),
    /// A suite file cannot be read, or is not a suite's text.
    #[error(transparent)]
    SuiteRead(#[from] SuiteReadError),
    /// A sweep's journal cannot be read, opened or appended to.
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(transparent)]
    Distributed(#[from] DistributedError),
    /// A scenario refused its parameters or device, or failed while running.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// A correctness check of a run failed; the report says which.
    #[error("a correctness check failed (see the report)")]
    CheckFailed,
    /// `compare` or `ab` found this many regressions; the printed table says which.
    #[error("{0} regression(s)")]
    Regression(usize),
    /// `compare --require-all` left this many entries uncompared (on one side only, or
    /// renamed); the output lists them.
    #[error(
        "{0} entries on one side only or renamed, and --require-all asks for every entry in both"
    )]
    Incomplete(usize),
    /// Something other than an output file failed to read or write.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// Stdout was closed or refused the output (a full device); a reader that went away is
    /// not an error.
    #[error("cannot write to standard output: {0}")]
    Stdout(std::io::Error),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A sweep stopped after this many new points ([`SWEEP_STOP_AFTER`]).
    #[error("stopped after {0} points ({SWEEP_STOP_AFTER})")]
    Stopped(usize),
}

/// Test hook: stop a sweep after this many newly finished points, as a kill would.
pub(super) const SWEEP_STOP_AFTER: &str = "PARBENCH_SWEEP_STOP_AFTER";

/// A parse's value, or how the CLI ends on its error ([`CommandLineError::into_exit`]): `None`
/// where that is a success (help or the version shown).
pub(super) fn parsed<T>(parse: Result<T, CommandLineError>) -> Result<Option<T>, CliError> {
    parse.map(Some).or_else(|e| e.into_exit().map(|()| None))
}

impl CommandLineError {
    /// How the CLI ends on it: help and version print and exit 0; help shown because nothing
    /// was given prints and exits 2 ([`CliError::NoCommand`]); anything else is a one-line
    /// usage error.
    pub(super) fn into_exit(self) -> Result<(), CliError> {
        if let CommandLineError::Clap { error, .. } = &self {
            let missing = clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand;
            if error.kind() == missing || self.is_display_request() {
                let _ = error.print();
                return if error.kind() == missing {
                    Err(CliError::NoCommand)
                } else {
                    Ok(())
                };
            }
        }
        Err(CliError::CommandLine(self))
    }
}

impl CliError {
    /// The process's exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_)
            | CliError::CommandLine(_)
            | CliError::NoCommand
            | CliError::Report(_)
            | CliError::Export(_)
            | CliError::Write(_)
            | CliError::Suite(_)
            | CliError::SuiteRead(_)
            | CliError::Journal(_)
            | CliError::Stdout(_)
            | CliError::Distributed(_) => 2,
            CliError::Scenario(e) if e.is_usage() => 2,
            CliError::Scenario(_)
            | CliError::CheckFailed
            | CliError::Regression(_)
            | CliError::Incomplete(_)
            | CliError::Io(_)
            | CliError::Json(_) => 1,
            CliError::Stopped(_) => 130,
        }
    }

    /// The line stderr shows (without `error: `): the message and its causes, joined with
    /// `: ` into one line, its lines trimmed and joined by spaces (clap's and some OS messages
    /// span lines). `None` where the output already said it.
    pub fn line(&self) -> Option<String> {
        if matches!(self, CliError::NoCommand | CliError::Regression(_)) {
            return None;
        }
        let mut text = self.to_string();
        let mut cause = self.source();
        while let Some(e) = cause {
            let _ = write!(text, ": {e}");
            cause = e.source();
        }
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        Some(lines.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_errors_exit_2_failures_1() {
        assert_eq!(CliError::Usage("bad".into()).exit_code(), 2);
        assert_eq!(CliError::NoCommand.exit_code(), 2);
        assert_eq!(CliError::CheckFailed.exit_code(), 1);
        assert_eq!(CliError::Regression(3).exit_code(), 1);
        assert_eq!(CliError::Incomplete(3).exit_code(), 1);
        assert_eq!(CliError::Stopped(2).exit_code(), 130);
        let io = std::io::Error::other("disk full");
        assert_eq!(CliError::Io(io).exit_code(), 1);
        let full = CliError::Stdout(std::io::Error::other("disk full"));
        assert_eq!(full.exit_code(), 2);
        assert_eq!(
            full.line().as_deref(),
            Some("cannot write to standard output: disk full")
        );
    }

    #[test]
    fn a_regression_and_a_missing_command_print_no_line_of_their_own() {
        assert_eq!(CliError::Regression(1).line(), None);
        assert_eq!(CliError::NoCommand.line(), None);
        assert_eq!(
            CliError::Usage("one\n  two\n".into()).line().as_deref(),
            Some("one two")
        );
    }
}
