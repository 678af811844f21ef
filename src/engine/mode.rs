//! How pushed ops are executed: the threaded engine, or the naive one that completes each op
//! before `push` returns.

use std::str::FromStr;

/// How pushed ops are executed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Ops run on lane workers as soon as their dependencies allow (the default).
    #[default]
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

    /// The mode a setting names (`--engine`, or [`Mode::ENV`] where it is not given): as
    /// [`FromStr`], and a refusal of the value [`Mode::ENV`] holds names the variable, so the
    /// user knows where the word came from.
    pub fn from_setting(s: &str) -> Result<Mode, UnknownMode> {
        s.parse().map_err(|e: UnknownMode| {
            let from_env = std::env::var(Mode::ENV).is_ok_and(|v| v.trim() == s.trim());
            match e {
                UnknownMode::Word(word) if from_env => UnknownMode::Env(word),
                other => other,
            }
        })
    }
}

/// A word that names no engine mode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnknownMode {
    /// The word given (to `--engine`).
    #[error("unknown engine mode '{0}' (expected 'threaded' or 'naive')")]
    Word(String),
    /// The value of [`Mode::ENV`].
    #[error(
        "{env} is '{0}', which names no engine mode (expected 'threaded', 'naive', or empty for the default)",
        env = Mode::ENV
    )]
    Env(String),
}

impl FromStr for Mode {
    type Err = UnknownMode;
    /// `threaded` or `naive`, in any case; an empty word (an empty [`Mode::ENV`]) is the
    /// default, threaded.
    fn from_str(s: &str) -> Result<Mode, UnknownMode> {
        match s.trim().to_ascii_lowercase().as_str() {
            "" => Ok(Mode::default()),
            "threaded" => Ok(Mode::Threaded),
            "naive" => Ok(Mode::Naive),
            _ => Err(UnknownMode::Word(s.trim().to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_in_any_case_and_empty_is_the_default() {
        assert_eq!("Naive".parse(), Ok(Mode::Naive));
        assert_eq!(" threaded ".parse(), Ok(Mode::Threaded));
        assert_eq!("".parse(), Ok(Mode::Threaded));
        let err = "warp".parse::<Mode>().expect_err("no such mode");
        assert_eq!(
            err.to_string(),
            "unknown engine mode 'warp' (expected 'threaded' or 'naive')"
        );
    }
}
