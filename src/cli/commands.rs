//! Dispatch: the command line parsed, then each command run; the short commands (`list`,
//! `devices`, `plot`, `export`, `compare`, `help`) are here, the longer ones in their own
//! files (`run.rs`, `ab.rs`, `pages.rs`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::{CommandFactory, FromArgMatches};

use super::ab::run_ab;
use super::args::{Cli, Command, CompareArgs};
use super::check::{clap_parse, help_command};
use super::error::{parsed, CliError};
use super::help::scenarios_help;
use super::output::{check_output_path, output_name, stdout, write_output};
use super::pages::{completions, run_report};
use super::run::{run_plan, run_scenario_command, run_sweep, SuiteJournal};
use crate::device;
use crate::engine::Mode;
use crate::export::ComparisonFormat;
use crate::export::{self, table};
use crate::report::comparison::{Comparison, Learned};
use crate::report::identity::Identity;
use crate::report::{compare, Environment, Report};
use crate::scenario::suite;

/// Parse `args` (the program name first) and run the command they name.
pub(super) fn run(args: Vec<OsString>) -> Result<(), CliError> {
    let cmd = Cli::command().after_help(scenarios_help());
    let Some(cli) = parsed(clap_parse(cmd, args, Cli::from_arg_matches))? else {
        return Ok(());
    };
    // Before anything probes the GPU: the probe opens the selected ordinal.
    device::gpu_ordinal::select(cli.gpu).map_err(|e| CliError::Usage(e.to_string()))?;
    match cli.command {
        Command::List => stdout(&scenarios_help()),
        Command::Devices { json, probe } => devices(json, probe),
        Command::All { common, journal } => {
            let name = "scenarios/default.toml (built in)";
            let plan = suite::parse(name, suite::DEFAULT_SUITE)?;
            let journal = SuiteJournal {
                args: journal,
                command: "all".to_string(),
                suite: name.to_string(),
            };
            run_plan(plan, &common, Some(journal))
        }
        Command::Run {
            suite: path,
            common,
            journal,
        } => {
            let name = path.display().to_string();
            let text = suite::read(&path)?;
            let journal = SuiteJournal {
                args: journal,
                command: format!("run {name}"),
                suite: name.clone(),
            };
            run_plan(suite::parse(&name, &text)?, &common, Some(journal))
        }
        Command::Command { name, common, argv } => {
            let run =
                suite::command_line(name, argv).map_err(|e| CliError::Usage(e.to_string()))?;
            run_plan(vec![run], &common, None)
        }
        // The same text as `--help` of what it names.
        Command::Help { topic } => match parsed(help_command(topic.as_deref()))? {
            Some(mut cmd) => stdout(&format!("{}\n", cmd.render_long_help())),
            None => Ok(()),
        },
        Command::Report(args) => run_report(args),
        Command::Completions { shell } => completions(shell),
        Command::Ab(args) => run_ab(args),
        Command::History(args) => super::history::run_history(args),
        Command::Scenario(raw) => run_scenario_command(raw),
        Command::Sweep(args) => run_sweep(args),
        Command::Plot { report, output } => plot(&report, output),
        Command::Export {
            report,
            format,
            output,
        } => export(&report, format, output),
        Command::Compare(args) => compare(args),
    }
}

/// `parbench devices [--json] [--probe]`: the machine's limits only with `--probe`, so a quick
/// look stays quick.
fn devices(json: bool, probe: bool) -> Result<(), CliError> {
    let (engine, gpu) = (Mode::Threaded, device::discovery::probe_gpu());
    let env = if probe {
        Environment::capture(engine, gpu)
    } else {
        Environment::capture_without_limits(engine, gpu)
    };
    stdout(&if json {
        format!("{}\n", serde_json::to_string_pretty(&env)?)
    } else {
        table::render_devices(&env)
    })
}

/// `parbench plot REPORT [-o FILE]`.
fn plot(report: &Path, output: Option<PathBuf>) -> Result<(), CliError> {
    let doc = compare::load(report)?;
    let svg = export::Format::Svg.render(&doc)?;
    let out = output.unwrap_or_else(|| report.with_extension("svg"));
    check_output_path(&out)?;
    write_output(&out, &svg)?;
    note!("wrote {}", output_name(&out));
    let skipped = export::svg::left_out(&doc);
    if !skipped.is_empty() {
        note!(
            "the chart shows {} only; left out: {} (a report of one scenario each charts them)",
            export::svg::main_scenario(&doc).unwrap_or_default(),
            skipped.join(", ")
        );
    }
    Ok(())
}

/// `parbench export REPORT --format F [-o FILE]`; a report of no runs is refused, as `plot`
/// refuses it, rather than exported as nothing.
fn export(path: &Path, format: export::Format, output: Option<PathBuf>) -> Result<(), CliError> {
    let report = compare::load(path)?;
    if report.runs.is_empty() {
        return Err(
            export::ExportError(format!("{} has no runs to export", path.display())).into(),
        );
    }
    // An entry twice would be two rows or benchmarks of one name, which a tracker merges.
    let repeated = report.duplicate_entries();
    if !repeated.is_empty() {
        return Err(compare::CompareError::Duplicates {
            path: path.display().to_string(),
            entries: repeated,
        }
        .into());
    }
    if let Some(path) = &output {
        check_output_path(path)?;
    }
    let text = format.render(&report)?;
    match output {
        Some(path) => write_output(&path, &text),
        None => stdout(&text),
    }
}

/// The reports of `compare`'s two sides: `compare A B`, or `compare A... -- B...`.
fn sides(reports: Vec<PathBuf>, new: Vec<PathBuf>) -> Result<[Vec<PathBuf>; 2], CliError> {
    if !new.is_empty() {
        return Ok([reports, new]);
    }
    match <[PathBuf; 2]>::try_from(reports) {
        Ok([a, b]) => Ok([vec![a], vec![b]]),
        Err(given) => Err(CliError::Usage(format!(
            "compare takes two reports (BASE NEW), or reruns a side separated by --: \
             compare BASE... -- NEW... ({} given, no --)",
            given.len()
        ))),
    }
}

/// `parbench compare BASE... [-- NEW...]`: the table, then a time slower beyond its noise is
/// exit 1; entries on one side only are listed, and fail it too with `--require-all`.
fn compare(args: CompareArgs) -> Result<(), CliError> {
    let [base, new] = sides(args.reports, args.new)?;
    let load = |paths: &[PathBuf]| -> Result<Vec<(Report, String)>, CliError> {
        paths
            .iter()
            .map(|p| Ok((super::reports::load_comparable(p)?, p.display().to_string())))
            .collect()
    };
    let (base, new) = (load(&base)?, load(&new)?);
    fn refs(s: &[(Report, String)]) -> Vec<(&Report, &str)> {
        s.iter().map(|(r, p)| (r, p.as_str())).collect()
    }
    let spreads = match (&args.history, base.first()) {
        (Some(dir), Some((first, _))) => {
            let h = super::history::load(dir)?;
            let identity = Identity::of(&first.environment);
            (h.spreads(&identity), h.reports.len())
        }
        _ => Default::default(),
    };
    let spread = |name: &str| spreads.0.get(name).copied().unwrap_or_default();
    let learned = Learned {
        spread: &spread,
        reports: spreads.1,
    };
    let c = Comparison::of_sides(&refs(&base), &refs(&new), &learned, args.threshold)?;
    // A regression with a busy side still fails: a false alarm that says why costs a rerun,
    // while a pass on a busy machine could hide a real regression (both sides' state is
    // printed).
    if !c.environment_differences.is_empty() {
        note!(
            "warning: the reports come from different environments ({}): a change may be the machine's, not the code's",
            c.environment_differences.join("; ")
        );
    }
    if args.format == ComparisonFormat::Table {
        for line in c.coverage.lines() {
            note!("{line}");
        }
    }
    stdout(&match args.format {
        ComparisonFormat::Json => export::compare::render_json(&c, args.require_all),
        other => export::compare::render(&c, other),
    })?;
    match c.regressions() {
        0 if args.require_all && !c.coverage.is_complete() => {
            Err(CliError::Incomplete(c.coverage.uncompared()))
        }
        0 => Ok(()),
        n => Err(CliError::Regression(n)),
    }
}
