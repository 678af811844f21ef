//! Your own workload: a suite entry that times commands (processes), hyperfine-style.
//!
//! ```toml
//! [[run]]
//! name = "gzip"                                   # required: the run's name in the report
//! command = ["gzip", "-kf", "big.txt"]            # argv, run directly; a string runs via `sh -c`
//! sampling = { warmup = 2, min_samples = 20 }     # optional, as for scenarios
//!
//! [[run]]
//! name = "grep"
//! commands = { base = ["./old/grep", "x", "f"], new = ["./new/grep", "x", "f"] }
//! ```
//!
//! Each run of a command is timed from spawn to exit, wall time, its output discarded; a
//! non-zero exit ends the run with an error naming it. Several commands are timed in
//! interleaved rounds by the [`Sampler`](crate::harness::Sampler), and the run is an ordinary
//! [`RunRecord`]: scenario `command`, parameters `name` and each command's line, a variant per
//! command, and the machine's state over it as the command line records it for every run.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::{Params, RunContext, Scenario, ScenarioError, Spec};
use crate::harness::{SamplerConfig, Variant};
use crate::report::RunRecord;

/// The scenario name every command run records.
pub const SCENARIO: &str = "command";

/// The parameter that holds the entry's name (a command may not be named so).
const NAME_PARAM: &str = "name";

/// A command that did not run to a successful exit (a run failure, exit 1): it could not
/// start, or it failed with its exit status.
#[derive(Debug, thiserror::Error)]
#[error("command '{name}' ({line}) {why}")]
pub struct CommandError {
    name: String,
    line: String,
    why: String,
}

/// A command entry a suite cannot run as written (a usage error).
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum EntryError {
    #[error("a command is a list of strings (argv) or a string (run by sh -c), found a {0}")]
    NotArgv(&'static str),
    #[error("command '{0}' is empty")]
    Empty(String),
    #[error("commands = {{}} names no command")]
    NoCommands,
    #[error("a command may not be called '{NAME_PARAM}': that parameter holds the entry's name")]
    ReservedName,
    #[error("name must not be empty")]
    NoName,
    #[error("command '{name}': program '{program}' not found{where_}")]
    NotFound {
        name: String,
        program: String,
        where_: &'static str,
    },
}

/// One command: its variant name and the argv it runs.
#[derive(Debug, Clone, PartialEq)]
struct Timed {
    name: String,
    argv: Vec<String>,
}

impl Timed {
    /// Run once, output discarded; the wall time from spawn to exit.
    fn time_once(&self) -> Result<Duration, CommandError> {
        let mut cmd = std::process::Command::new(&self.argv[0]);
        cmd.args(&self.argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let start = Instant::now();
        let status = cmd.status();
        let took = start.elapsed();
        let why = match status {
            Ok(status) if status.success() => return Ok(took),
            Ok(status) => format!("failed: {status}"),
            Err(error) => format!("could not start: {error}"),
        };
        let (name, line) = (self.name.clone(), line(&self.argv));
        Err(CommandError { name, line, why })
    }
}

/// `argv` as a shell would read it back (`sh -c 'sleep 0.01'`).
pub(super) fn line(argv: &[String]) -> String {
    argv.iter().map(|a| quoted(a)).collect::<Vec<_>>().join(" ")
}

/// `arg` as a POSIX shell reads it: bare where that is unambiguous, else single-quoted.
fn quoted(arg: &str) -> String {
    let bare = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if !arg.is_empty() && arg.chars().all(bare) {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// A suite's command entry: the commands of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Commands {
    name: String,
    commands: Vec<Timed>,
}

impl Commands {
    /// The entry `name` with its commands: `(variant, value)` pairs, a value an argv list or a
    /// shell line. A lone `command = ...` is the variant `command`.
    pub fn new<'a>(
        name: &str,
        given: impl IntoIterator<Item = (&'a str, &'a toml::Value)>,
    ) -> Result<Commands, EntryError> {
        if name.trim().is_empty() {
            return Err(EntryError::NoName);
        }
        let commands = given
            .into_iter()
            .map(|(variant, value)| {
                if variant == NAME_PARAM {
                    return Err(EntryError::ReservedName);
                }
                let argv = match value {
                    toml::Value::String(line) => vec!["sh".into(), "-c".into(), line.clone()],
                    toml::Value::Array(words) => words
                        .iter()
                        .map(|w| match w {
                            toml::Value::String(s) => Ok(s.clone()),
                            other => Err(EntryError::NotArgv(other.type_str())),
                        })
                        .collect::<Result<_, _>>()?,
                    other => return Err(EntryError::NotArgv(other.type_str())),
                };
                match argv.first() {
                    Some(program) if !program.is_empty() => Ok(Timed {
                        name: variant.to_string(),
                        argv,
                    }),
                    _ => Err(EntryError::Empty(variant.to_string())),
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        if commands.is_empty() {
            return Err(EntryError::NoCommands);
        }
        Ok(Commands {
            name: name.to_string(),
            commands,
        })
    }

    /// Check each program can be found, before anything runs.
    pub fn check_programs(&self) -> Result<(), EntryError> {
        for c in &self.commands {
            let program = &c.argv[0];
            let (found, where_) = if program.contains('/') {
                (is_executable(Path::new(program)), " (or not executable)")
            } else {
                let on_path = std::env::var_os("PATH").is_some_and(|path| {
                    std::env::split_paths(&path).any(|dir| is_executable(&dir.join(program)))
                });
                (on_path, " on PATH")
            };
            if !found {
                return Err(EntryError::NotFound {
                    name: c.name.clone(),
                    program: program.clone(),
                    where_,
                });
            }
        }
        Ok(())
    }
}

/// A file this process may execute.
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// What a command run declares: no parameters of its own, no lesson, no book figures; it
/// samples at least ten runs (as hyperfine does) and a second.
static SPEC: Spec = Spec {
    name: SCENARIO,
    about: "your own commands, timed as processes (a suite's command entries)",
    params: &[],
    lesson: None,
    book: &[],
    sampling: SamplerConfig {
        warmup: 1,
        min_samples: 10,
        max_samples: 1000,
        min_time: Duration::from_secs(1),
        max_time: Duration::from_secs(60),
    },
};

impl Scenario for Commands {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }

    /// The entry's name, and each command's line by its variant.
    fn resolved_params(&self, _params: &Params, _ctx: &RunContext) -> Map<String, Value> {
        let mut out = Map::new();
        out.insert(NAME_PARAM.into(), self.name.clone().into());
        for c in &self.commands {
            out.insert(c.name.clone(), line(&c.argv).into());
        }
        out
    }

    fn validate(&self, _params: &Params) -> Result<(), ScenarioError> {
        self.check_programs()
            .map_err(|e| ScenarioError::Input(e.to_string()))
    }

    fn run(&self, params: &Params, ctx: &RunContext) -> Result<RunRecord, ScenarioError> {
        let mut variants: Vec<Variant<'_, ScenarioError>> = self
            .commands
            .iter()
            .map(|c| Variant::new(c.name.clone(), move || Ok(c.time_once()?)))
            .collect();
        let summaries = ctx.sample_plain(self, &mut variants)?;
        let mut run = RunRecord::new(
            SCENARIO,
            self.resolved_params(params, ctx),
            vec!["host (a child process per run)".to_string()],
        );
        let names = self.commands.iter().map(|c| c.name.clone()).collect();
        run.add_variants(names, summaries, std::iter::repeat(None));
        run.notes.push(
            "each sample is one run's wall time from spawn to exit, the process start included"
                .into(),
        );
        Ok(run)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(text: &str) -> Result<Commands, EntryError> {
        let table: toml::Table = toml::from_str(text).unwrap();
        Commands::new("t", table.iter().map(|(k, v)| (k.as_str(), v)))
    }

    #[test]
    fn argv_lists_run_directly_and_strings_through_sh() {
        let c = entry("a = [\"sleep\", \"0.01\"]\nb = \"echo 'hi' | wc\"").unwrap();
        let p = c.resolved_params(&Params::none(), &RunContext::default());
        assert_eq!(p["name"], "t");
        assert_eq!(p["a"], "sleep 0.01");
        assert_eq!(p["b"], r#"sh -c 'echo '\''hi'\'' | wc'"#);
    }

    #[test]
    fn malformed_commands_are_refused() {
        let empty = || EntryError::Empty("a".into());
        for (text, want) in [
            ("a = []", empty()),
            ("a = [\"\"]", empty()),
            ("a = [1]", EntryError::NotArgv("integer")),
            ("a = 3", EntryError::NotArgv("integer")),
            ("name = \"x\"", EntryError::ReservedName),
            ("", EntryError::NoCommands),
        ] {
            assert_eq!(entry(text).unwrap_err(), want, "{text}");
        }
    }

    #[test]
    fn programs_are_found_on_path_or_by_path() {
        assert!(entry("a = [\"true\"]").unwrap().check_programs().is_ok());
        assert!(entry("a = [\"/bin/sh\"]").unwrap().check_programs().is_ok());
        for missing in ["no-such-program-xyz", "./no/such/file", "/etc"] {
            let e = entry(&format!("a = [\"{missing}\"]"))
                .unwrap()
                .check_programs()
                .unwrap_err();
            assert!(e.to_string().contains(missing), "{e}");
        }
        // A failing command is an error naming it.
        let c = entry("f = [\"false\"]").unwrap();
        let e = c.commands[0].time_once().unwrap_err().to_string();
        assert!(
            e.starts_with("command 'f' (false) failed: exit status: 1"),
            "{e}"
        );
        let ok = entry("t = [\"true\"]").unwrap();
        assert!(ok.commands[0].time_once().is_ok());
    }
}
