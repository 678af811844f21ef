//! How pushed ops are executed: the threaded engine, or the naive one that completes each op
//! before `push` returns.

use std::str::FromStr;

/// How pushed ops are executed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Ops run on lane workers as soon as their dependencies allow (the default).
    Threaded,
    /// `push` returns only once its op has completed (the op still runs on its lane, so it
    /// uses its device's threads): nothing overlaps, as with MXNet's `NaiveEngine`, the
    /// baseline that shows what asynchrony buys.
    Naive,
}

impl Mode {
    /// The environment variable that selects the mode when `--engine` is not given.
    pub const ENV: &'static str = "PARBENCH_ENGINE";

    /// Lower-case name, as accepted by `--engine`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Threaded => "threaded",
            Mode::Naive => "naive",
        }
    }
}

/// A word that names no engine mode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown engine mode '{0}' (expected 'threaded' or 'naive')")]
pub struct UnknownMode(pub String);

impl FromStr for Mode {
    type Err = UnknownMode;
    fn from_str(s: &str) -> Result<Mode, UnknownMode> {
        match s.trim().to_ascii_lowercase().as_str() {
            "threaded" => Ok(Mode::Threaded),
            "naive" => Ok(Mode::Naive),
            other => Err(UnknownMode(other.to_string())),
        }
    }
}
