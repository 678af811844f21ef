//! Suites: a TOML list of scenario runs with their parameters (`scenarios/*.toml`).
//!
//! ```toml
//! description = "what this suite is for"
//!
//! [[run]]
//! scenario = "cpu-gpu"
//! params = { ops = 10, cpu_size = 2000 }
//! sampling = { min_samples = 3 }      # optional: warmup, min_samples, max_samples, min_time, max_time
//!
//! [[run]]
//! name = "gzip"                         # your own commands instead of a scenario (`command.rs`)
//! command = ["gzip", "-kf", "big.txt"]  # or commands = { base = [...], new = [...] }
//! ```
//!
//! Everything is checked before anything runs (unknown scenario, unknown or ill-typed
//! parameter, sizes that do not fit, TOML syntax), and every error names the file and line.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::harness::sampler::seconds;
use toml::Spanned;

use super::command::{self, Commands};
use super::{find, registry, Params, RunContext, SamplingOverrides, Scenario};

/// `scenarios/default.toml`, built in: what `parbench all` runs, wherever it is started.
pub const DEFAULT_SUITE: &str = include_str!("../../scenarios/default.toml");

/// A suite file that cannot be read as a suite's text (a usage error), and why. An I/O error
/// is part of the message, not a `source()`, so the CLI's one-line error does not repeat it.
#[derive(Debug, thiserror::Error)]
#[error("cannot read {path}: {why}")]
pub struct SuiteReadError {
    path: String,
    why: String,
}

/// A suite that cannot be run, with where and why (a usage error).
#[derive(Debug, thiserror::Error)]
#[error("{file}:{line}: {reason}")]
pub struct SuiteError {
    pub file: String,
    pub line: usize,
    pub reason: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SuiteFile {
    #[serde(default)]
    #[allow(dead_code)]
    description: Option<String>,
    run: Vec<Spanned<RunEntry>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RunEntry {
    #[serde(default)]
    scenario: Option<Spanned<String>>,
    /// A command entry's name, and its one command or its commands by variant.
    #[serde(default)]
    name: Option<Spanned<String>>,
    #[serde(default)]
    command: Option<Spanned<toml::Value>>,
    #[serde(default)]
    commands: Option<Spanned<toml::Table>>,
    #[serde(default)]
    params: Option<Spanned<BTreeMap<String, toml::Value>>>,
    #[serde(default)]
    sampling: Option<Spanned<SamplingEntry>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct SamplingEntry {
    warmup: Option<usize>,
    min_samples: Option<usize>,
    max_samples: Option<usize>,
    min_time: Option<f64>,
    max_time: Option<f64>,
}

/// One validated run of a suite.
pub struct PlannedRun {
    pub scenario: &'static dyn Scenario,
    pub params: Params,
    pub sampling: SamplingOverrides,
    /// Where the entry's sampling table is (else its `scenario` line), for an error that the
    /// command line's sampling options raise against it; `None` for a run not from a suite.
    pub at: Option<SuiteLine>,
}

/// A line of a suite file, shown as `file:line`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuiteLine {
    pub file: String,
    pub line: usize,
}

impl std::fmt::Display for SuiteLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// A TOML value as the text a command-line option would carry (`[1, 2]` → `1,2`), or why no
/// option takes it.
fn as_option_text(v: &toml::Value) -> Result<String, String> {
    match v {
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Array(items) => items
            .iter()
            .map(|i| match i {
                toml::Value::Integer(n) => Ok(n.to_string()),
                other => Err(format!(
                    "expected whole numbers in the list, found a {}",
                    other.type_str()
                )),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|parts| parts.join(",")),
        other => Err(format!(
            "expected a number, a word or a list of numbers, found a {}",
            other.type_str()
        )),
    }
}

/// Largest suite file read: suites are a few dozen lines, and a device or an endless pipe
/// (`parbench run /dev/zero`) must end in an error, not in running out of memory.
pub const MAX_SUITE_BYTES: u64 = 1 << 20;

/// Read a suite file as UTF-8 text, at most [`MAX_SUITE_BYTES`]. The error is one line naming
/// the file.
pub fn read(path: &std::path::Path) -> Result<String, SuiteReadError> {
    use std::io::Read;
    let fail = |why: String| SuiteReadError {
        path: path.display().to_string(),
        why,
    };
    let io = |error: std::io::Error| fail(error.to_string());
    let file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    file.take(MAX_SUITE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_SUITE_BYTES {
        let kib = MAX_SUITE_BYTES / 1024;
        return Err(fail(format!("larger than {kib} KiB, not a suite")));
    }
    String::from_utf8(bytes).map_err(|e| {
        let offset = e.utf8_error().valid_up_to();
        fail(format!("not UTF-8 text (invalid byte at offset {offset})"))
    })
}

/// An entry's scenario, the offsets its errors name (the entry's own: its `scenario` or its
/// `name`; its parameters'), and its parameters.
type Resolved = (&'static dyn Scenario, usize, usize, Params);

type ErrAt<'a> = dyn Fn(usize, String) -> SuiteError + 'a;

/// A `scenario = "..."` entry: the scenario and its parameters, parsed.
fn scenario_entry(
    name: &Spanned<String>,
    entry: &RunEntry,
    err: &ErrAt<'_>,
) -> Result<Resolved, SuiteError> {
    if let Some(n) = &entry.name {
        return Err(err(
            n.span().start,
            "name is for command entries: a scenario's run is named by its scenario and \
             parameters"
                .into(),
        ));
    }
    let at = name.span().start;
    let name = name.get_ref();
    let Some(scenario) = find(name) else {
        let known: Vec<&str> = registry().iter().map(|s| s.name()).collect();
        return Err(err(
            at,
            format!("unknown scenario '{name}' (known: {})", known.join(", ")),
        ));
    };
    let params_at = entry.params.as_ref().map_or(at, |p| p.span().start);
    let mut given = Vec::new();
    for (k, v) in entry.params.iter().flat_map(|p| p.get_ref()) {
        let text =
            as_option_text(v).map_err(|r| err(params_at, format!("parameter '{k}': {r}")))?;
        given.push((k.clone(), text));
    }
    let params = Params::parse(name, scenario.params(), &given)
        .map_err(|e| err(params_at, e.to_string()))?;
    Ok((scenario, at, params_at, params))
}

/// A `command = ...` or `commands = {...}` entry: its commands as a scenario of their own.
fn command_entry(
    entry_at: usize,
    entry: &RunEntry,
    err: &ErrAt<'_>,
) -> Result<Resolved, SuiteError> {
    if let Some(p) = &entry.params {
        return Err(err(
            p.span().start,
            "a command entry takes no params: its commands are its parameters".into(),
        ));
    }
    let Some(name) = &entry.name else {
        return Err(err(
            entry_at,
            "a command entry needs name = \"...\", its run's name in the report".into(),
        ));
    };
    let at = name.span().start;
    let given: Vec<(&str, &toml::Value)> = match (&entry.command, &entry.commands) {
        (Some(c), _) => vec![(command::SCENARIO, c.get_ref())],
        (None, cs) => cs
            .iter()
            .flat_map(|t| t.get_ref())
            .map(|(k, v)| (k.as_str(), v))
            .collect(),
    };
    let commands = Commands::new(name.get_ref(), given).map_err(|e| err(at, e.to_string()))?;
    Ok((planned(commands), at, at, Params::none()))
}

/// Commands as a plan's scenario: it lives as long as the process, as the registry's do.
fn planned(commands: Commands) -> &'static dyn Scenario {
    Box::leak(Box::new(commands))
}

/// `parbench command [--name NAME] -- PROGRAM ARGS` as a plan's one run: the variant
/// `command`, named by its line unless `name` is given.
pub fn command_line(
    name: Option<String>,
    argv: Vec<String>,
) -> Result<PlannedRun, command::EntryError> {
    let name = name.unwrap_or_else(|| command::line(&argv));
    let value = toml::Value::Array(argv.into_iter().map(toml::Value::String).collect());
    Ok(PlannedRun {
        scenario: planned(Commands::new(&name, [(command::SCENARIO, &value)])?),
        params: Params::none(),
        sampling: SamplingOverrides::default(),
        at: None,
    })
}

/// Parse and check a suite completely. `file` names it in messages.
pub fn parse(file: &str, text: &str) -> Result<Vec<PlannedRun>, SuiteError> {
    let err = |offset: usize, reason: String| SuiteError {
        file: file.to_string(),
        line: line_of(text, offset),
        reason,
    };
    let suite: SuiteFile = toml::from_str(text).map_err(|e| {
        let at = e.span().map_or(0, |s| s.start);
        err(at, e.message().trim().to_string())
    })?;
    if suite.run.is_empty() {
        return Err(err(0, "the suite has no [[run]] entries".into()));
    }
    let mut plan = Vec::new();
    // Each entry's scenario, parameters (defaults filled in) and line: a report holds each
    // scenario and parameters once, so a repeat would be paired wrongly by `compare`.
    let mut seen: Vec<(&'static str, Map<String, Value>, usize)> = Vec::new();
    for entry in suite.run {
        let entry_at = entry.span().start;
        let entry = entry.into_inner();
        let (scenario, at, params_at, params) =
            match (&entry.scenario, &entry.command, &entry.commands) {
                (Some(name), None, None) => scenario_entry(name, &entry, &err)?,
                (None, Some(_), None) | (None, None, Some(_)) => {
                    command_entry(entry_at, &entry, &err)?
                }
                _ => return Err(err(
                    entry_at,
                    "an entry has one of scenario = \"...\", command = [...] or commands = {...}"
                        .into(),
                )),
            };
        let name = scenario.name();
        scenario
            .validate(&params)
            .map_err(|e| err(params_at, e.to_string()))?;
        let identity = scenario.resolved_params(&params, &RunContext::default());
        if let Some((_, _, line)) = seen
            .iter()
            .find(|(s, p, _)| *s == scenario.name() && *p == identity)
        {
            return Err(err(
                at,
                format!(
                    "'{name}' with these parameters repeats the entry at line {line} (a report \
                     holds each scenario and parameters once: drop one or change a parameter)"
                ),
            ));
        }
        seen.push((scenario.name(), identity, line_of(text, at)));
        let sampling_at = entry.sampling.as_ref().map_or(at, |s| s.span().start);
        let sampling = match entry.sampling {
            None => SamplingOverrides::default(),
            Some(s) => {
                let at = s.span().start;
                let s = s.into_inner();
                let time = |v: Option<f64>, name: &str| {
                    v.map(seconds)
                        .transpose()
                        .map_err(|r| err(at, format!("{name}: {r}")))
                };
                let o = SamplingOverrides {
                    warmup: s.warmup,
                    min_samples: s.min_samples,
                    max_samples: s.max_samples,
                    min_time: time(s.min_time, "min_time")?,
                    max_time: time(s.max_time, "max_time")?,
                };
                o.apply(scenario.sampling())
                    .validate()
                    .map_err(|r| err(at, r.to_string()))?;
                o
            }
        };
        plan.push(PlannedRun {
            scenario,
            params,
            sampling,
            at: Some(SuiteLine {
                file: file.to_string(),
                line: line_of(text, sampling_at),
            }),
        });
    }
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_suites_parse() {
        let default = parse("scenarios/default.toml", DEFAULT_SUITE).unwrap();
        // `parbench all` runs every scenario.
        for s in registry() {
            assert!(
                default.iter().any(|r| r.scenario.name() == s.name()),
                "{} missing",
                s.name()
            );
        }
        let ci = include_str!("../../scenarios/ci.toml");
        assert!(!parse("scenarios/ci.toml", ci).unwrap().is_empty());
        let deepbench = include_str!("../../scenarios/deepbench-allreduce.toml");
        for run in parse("scenarios/deepbench-allreduce.toml", deepbench).unwrap() {
            run.scenario.validate(&run.params).unwrap();
        }
    }

    #[test]
    fn an_entry_repeated_is_refused_naming_both_lines() {
        // The second gives the default explicitly: the same run all the same.
        let text = "[[run]]\nscenario = \"async\"\nparams = { iterations = 5 }\n\n\
                    [[run]]\nscenario = \"matmul\"\n\n\
                    [[run]]\nscenario = \"async\"\nparams = { iterations = 5 }\n\
                    sampling = { min_samples = 3 }\n";
        let e = parse("s.toml", text).err().expect("refused");
        assert_eq!(e.line, 9, "{e}");
        assert!(e.reason.contains("repeats the entry at line 2"), "{e}");
        let distinct = "[[run]]\nscenario = \"async\"\nparams = { iterations = 5 }\n\
                        [[run]]\nscenario = \"async\"\nparams = { iterations = 6 }\n";
        assert_eq!(parse("s.toml", distinct).map(|p| p.len()).ok(), Some(2));
    }

    #[test]
    fn command_entries_are_runs_named_by_their_commands() {
        let text = "[[run]]\nname = \"a\"\ncommand = [\"true\"]\n\n\
                    [[run]]\nname = \"b\"\ncommands = { x = [\"true\"], y = \"true\" }\n\n\
                    [[run]]\nname = \"a\"\ncommand = [\"true\"]\n";
        let e = parse("s.toml", text)
            .err()
            .expect("the third repeats the first");
        assert_eq!((e.line, e.reason.contains("at line 2")), (10, true), "{e}");
        let plan = parse("s.toml", &text[..text.rfind("\n\n").unwrap()]).unwrap();
        let ctx = RunContext::default();
        let b = plan[1].scenario.resolved_params(&plan[1].params, &ctx);
        assert_eq!(plan[1].scenario.name(), command::SCENARIO);
        assert_eq!(
            (&b["name"], &b["x"], &b["y"]),
            (&"b".into(), &"true".into(), &"sh -c true".into())
        );
    }

    #[test]
    fn values_become_option_text() {
        let text = "[[run]]\nscenario = \"async\"\nparams = { iterations = 5, shape = [3, 4] }\n";
        let plan = parse("s.toml", text).unwrap();
        assert_eq!(plan[0].params.int("iterations"), Ok(5));
        assert_eq!(plan[0].params.shape("shape"), Ok(&[3, 4][..]));
    }

    #[test]
    fn every_error_names_file_and_line() {
        // Entries of scenario `async` whose error is on their third line.
        let on_async = [
            ("params = { iterations = 0 }\n", "--iterations"),
            ("params = { bogus = 1 }\n", "unknown parameter 'bogus'"),
            ("params = { shape = true }\n", "parameter 'shape'"),
            ("params = { iterations = 5 \n", ""),
            ("surprise = 1\n", "surprise"),
            (
                "sampling = { min_samples = 9, max_samples = 2 }\n",
                "--max-samples",
            ),
            ("name = \"x\"\n", "name is for command entries"),
        ];
        let others = [
            (
                "[[run]]\nscenario = \"nope\"\n",
                2,
                "unknown scenario 'nope'",
            ),
            (
                "\n\n[[run]]\nscenario = \"matmul\"\nparams = { size = 100000 }\n",
                5,
                "needs an estimated",
            ),
            ("description = \"empty\"\nrun = []\n", 1, "no [[run]]"),
            ("[[run]]\ncommand = [\"true\"]\n", 1, "needs name"),
            (
                "[[run]]\nscenario = \"async\"\ncommand = [\"true\"]\n",
                1,
                "one of scenario",
            ),
            ("[[run]]\nname = \"x\"\n", 1, "one of scenario"),
            (
                "[[run]]\nname = \"x\"\ncommand = [\"true\"]\nparams = { a = 1 }\n",
                4,
                "takes no params",
            ),
            ("\n[[run]]\nname = \"x\"\ncommand = []\n", 3, "is empty"),
            (
                "[[run]]\nname = \"x\"\ncommands = { a = [\"no-such-program-xyz\"] }\n",
                2,
                "'no-such-program-xyz' not found on PATH",
            ),
        ];
        let on_async = on_async.map(|(rest, needle)| {
            let text = format!("[[run]]\nscenario = \"async\"\n{rest}");
            (text, 3, needle)
        });
        let others = others.map(|(text, line, needle)| (text.to_string(), line, needle));
        for (text, line, needle) in on_async.into_iter().chain(others) {
            let e = parse("suite.toml", &text)
                .err()
                .unwrap_or_else(|| panic!("accepted: {text}"));
            let msg = e.to_string();
            assert!(
                msg.starts_with(&format!("suite.toml:{line}: ")),
                "{msg} for {text:?}"
            );
            assert!(msg.contains(needle), "{msg}");
            assert_eq!(msg.lines().count(), 1, "{msg}");
        }
    }
}
