//! A command line parsed as the CLI parses it, without running anything: what the docs test
//! checks every documented command with. The parsing steps here are the ones `run.rs` and
//! `help` take before they run, so the two cannot disagree.

use std::ffi::OsString;

use clap::{CommandFactory, FromArgMatches};

use super::args::{scenario_command, Cli, Command, CommonArgs};
use super::help::scenarios_help;
use crate::scenario::{self, sweep, Params, Scenario};

/// Why a command line would be refused before anything runs (the CLI's exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum CommandLineError {
    /// clap refused the arguments (an unknown option, a missing value, a bad value of a typed
    /// option), or the command line asks for help or a version (never returned by
    /// [`check_command_line`], which accepts those).
    #[error("{}", clap_message(.error, .help))]
    Clap {
        error: clap::Error,
        /// The command whose `--help` the message points to (`parbench async`).
        help: String,
    },
    /// The scenario named (to run, sweep or explain) does not exist.
    #[error("unknown scenario '{name}' (known: {known}; see 'parbench list')")]
    UnknownScenario { name: String, known: String },
    #[error(transparent)]
    Param(#[from] scenario::ParamError),
    /// A sweep's `--set` axis does not parse, or one of its points has a bad value.
    #[error(transparent)]
    Sweep(sweep::SweepError),
    /// A sweep names one parameter in two `--set`s, or one value twice.
    #[error(transparent)]
    RepeatedAxis(#[from] super::axes::RepeatedAxis),
    /// `parbench help TOPIC` with a topic that is neither a command nor a scenario.
    #[error("no command or scenario '{0}' to explain (see 'parbench help')")]
    UnknownHelpTopic(String),
}

impl CommandLineError {
    /// A request to show help or the version: clap's way of answering `--help`, `--version`.
    pub(super) fn is_display_request(&self) -> bool {
        matches!(self, CommandLineError::Clap { error, .. } if matches!(
            error.kind(),
            clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
        ))
    }
}

/// clap's error cut to its first line, with where to look for the usage.
fn clap_message(error: &clap::Error, help: &str) -> String {
    // clap's error is the whole help here (which the CLI prints).
    if error.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        return format!("a command is required (see '{help} --help')");
    }
    let rendered = error.render().to_string();
    let first = rendered.lines().next().unwrap_or("invalid arguments");
    let msg = first.trim_start_matches("error: ");
    // `; expected one of: a, b` where an option takes one of a list of values (clap prints the
    // list on a line of its own, which the one-line message would cut).
    let valid = match error.get(clap::error::ContextKind::ValidValue) {
        Some(clap::error::ContextValue::Strings(values)) if !values.is_empty() => {
            format!("; expected one of: {}", values.join(", "))
        }
        _ => String::new(),
    };
    format!("{msg}{valid} (see '{help} --help')")
}

/// Check that `args` (the program name first, as in `std::env::args_os`) is a command line
/// parbench accepts: the same parsing the CLI does before it runs anything, and nothing more.
///
/// - every command: clap's parse (`--help` and `--version` anywhere count as accepted);
/// - a scenario (`parbench async ...`): the scenario exists, its options parse and its
///   parameter values are valid;
/// - `sweep`: the scenario exists and every `--set` axis and point parses;
/// - `help TOPIC`: the topic is a command or a scenario.
///
/// Files named on the command line (a suite, a report) are not read, GPUs are not probed and
/// nothing is written.
pub fn check_command_line(
    args: impl IntoIterator<Item = impl Into<OsString>>,
) -> Result<(), CommandLineError> {
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let outcome =
        clap_parse(Cli::command(), args, Cli::from_arg_matches).and_then(|cli| match cli.command {
            Command::Scenario(raw) => scenario_args(raw).map(drop),
            Command::Sweep(a) => sweep_plan(&a.scenario, &a.set, a.max_points).map(drop),
            Command::Help { topic } => help_command(topic.as_deref()).map(drop),
            _ => Ok(()),
        });
    match outcome {
        Err(e) if e.is_display_request() => Ok(()),
        other => other,
    }
}

/// Parse `args` with `cmd`, then turn the matches into a `T` with `from`.
pub(super) fn clap_parse<T>(
    cmd: clap::Command,
    args: Vec<OsString>,
    from: impl FnOnce(&clap::ArgMatches) -> Result<T, clap::Error>,
) -> Result<T, CommandLineError> {
    let help = cmd.get_bin_name().unwrap_or(cmd.get_name()).to_string();
    cmd.try_get_matches_from(args)
        .and_then(|m| from(&m))
        .map_err(|error| CommandLineError::Clap { error, help })
}

/// A scenario by name, or the error that lists the known ones.
pub(super) fn find_scenario(name: &str) -> Result<&'static dyn Scenario, CommandLineError> {
    scenario::find(name).ok_or_else(|| CommandLineError::UnknownScenario {
        name: name.to_string(),
        known: scenario::registry()
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// Parse `parbench <scenario> [options]` (`raw` starts at the scenario's name): the scenario,
/// the common options and its parameters.
pub(super) fn scenario_args(
    raw: Vec<OsString>,
) -> Result<(&'static dyn Scenario, CommonArgs, Params), CommandLineError> {
    let name = raw
        .first()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let sc = find_scenario(&name)?;
    let (common, given) = clap_parse(scenario_command(sc), raw, |m| {
        let common = CommonArgs::from_arg_matches(m)?;
        let given: Vec<(String, String)> = sc
            .params()
            .iter()
            .filter_map(|p| {
                m.get_one::<String>(p.name)
                    .map(|v| (p.name.to_string(), v.clone()))
            })
            .collect();
        Ok((common, given))
    })?;
    Ok((sc, common, Params::parse(sc.name(), sc.params(), &given)?))
}

/// A sweep's axes: each parameter's name and values.
pub(super) type Axes = Vec<(String, Vec<String>)>;

/// Parse `parbench sweep <scenario> --set ...`: the scenario, each axis, each point.
pub(super) fn sweep_plan(
    name: &str,
    set: &[String],
    max_points: u64,
) -> Result<(&'static dyn Scenario, Axes, Vec<Params>), CommandLineError> {
    let sc = find_scenario(name)?;
    if set.is_empty() {
        return Err(CommandLineError::Sweep(sweep::no_axes(sc)));
    }
    let axes = set
        .iter()
        .map(|spec| sweep::parse_axis(sc, spec))
        .collect::<Result<Vec<_>, _>>()
        .map_err(CommandLineError::Sweep)?;
    super::axes::distinct(&axes)?;
    let points = sweep::points(sc, &axes, max_points).map_err(CommandLineError::Sweep)?;
    Ok((sc, axes, points))
}

/// What `parbench help [TOPIC]` shows: the whole CLI's help, a scenario's or a command's.
pub(super) fn help_command(topic: Option<&str>) -> Result<clap::Command, CommandLineError> {
    let Some(name) = topic else {
        return Ok(Cli::command().after_help(scenarios_help()));
    };
    if let Some(sc) = scenario::find(name) {
        return Ok(scenario_command(sc));
    }
    match Cli::command().find_subcommand(name) {
        Some(sub) => Ok(sub.clone().bin_name(format!("parbench {name}"))),
        None => Err(CommandLineError::UnknownHelpTopic(name.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(line: &str) -> Result<(), CommandLineError> {
        check_command_line(line.split_whitespace())
    }

    #[test]
    fn accepts_what_the_cli_runs_and_help_and_version() {
        for line in [
            "parbench async --iterations 10",
            "parbench sweep matmul --set size=500:2000:500",
            "parbench sweep matmul --set size=500:2000:500 --set threads=1,2 -o s.json",
            "parbench list",
            "parbench help cpu-gpu",
            "parbench help sweep",
            "parbench help",
            // The suite file is not read: it need not exist.
            "parbench run no/such/suite.toml -o a.json",
            "parbench compare a.json b.json --threshold 5%",
            // Help and the version count as accepted.
            "parbench --help",
            "parbench --version",
            "parbench async --help",
            "parbench sweep --help",
        ] {
            assert!(check(line).is_ok(), "{line}: {:?}", check(line));
        }
    }

    #[test]
    fn rejects_an_unknown_scenario_or_help_topic() {
        let e = check("parbench warp --size 1").unwrap_err();
        assert!(matches!(e, CommandLineError::UnknownScenario { .. }), "{e}");
        assert!(e.to_string().contains("unknown scenario 'warp'"), "{e}");
        let e = check("parbench sweep warp --set size=1").unwrap_err();
        assert!(matches!(e, CommandLineError::UnknownScenario { .. }), "{e}");
        let e = check("parbench help warp").unwrap_err();
        assert!(matches!(e, CommandLineError::UnknownHelpTopic(_)), "{e}");
    }

    #[test]
    fn rejects_an_unknown_option() {
        let e = check("parbench async --colour red").unwrap_err();
        assert!(matches!(e, CommandLineError::Clap { .. }), "{e}");
        assert!(e.to_string().contains("--colour"), "{e}");
        assert!(e.to_string().contains("see 'parbench async --help'"), "{e}");
        // `compare a.json -- b.json` is one report a side, so one report alone is refused
        // when it runs (tests/cli/compare.rs); none at all is clap's to refuse.
        let e = check("parbench compare").unwrap_err();
        assert!(matches!(e, CommandLineError::Clap { .. }), "{e}");
        // No command at all: the CLI shows its help and exits 2.
        let e = check("parbench").unwrap_err();
        assert!(e.to_string().starts_with("a command is required"), "{e}");
    }

    #[test]
    fn rejects_a_bad_parameter_value_or_sweep_axis() {
        let e = check("parbench async --shape 1000y1000").unwrap_err();
        assert!(matches!(e, CommandLineError::Param(_)), "{e}");
        assert!(e.to_string().contains("--shape"), "{e}");
        let e = check("parbench sweep matmul --set colour=1").unwrap_err();
        assert!(matches!(e, CommandLineError::Sweep(_)), "{e}");
        assert!(e.to_string().contains("no parameter 'colour'"), "{e}");
        let e = check("parbench sweep matmul --set size=9:1:1").unwrap_err();
        assert!(e.to_string().contains("START <= STOP"), "{e}");
    }
}
