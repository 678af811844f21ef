//! The command line: clap types, parsing and dispatch here; running a scenario, a sweep or a
//! plan and finishing its report in `run.rs`; progress bars in `progress.rs`; output paths and
//! stdout in `output.rs`.
//!
//! Exit codes: 0 ok, 1 a check failed or a run failed, 2 a usage or input error. Every error
//! is one line on stderr; clap's own usage errors are cut to their first line too.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::device::{self, GpuOrder, RuntimeOptions};
use crate::engine::Mode;
use crate::export::{self, table, Exporter};
use crate::report::{compare, write_atomic, Environment, Report};
use crate::scenario::{
    self, suite, support, sweep, Params, RunContext, SamplingOverrides, Scenario, ScenarioError,
};

/// `eprintln!` that ignores a failed write: stderr may be a pipe whose reader has gone
/// (`2>&1 | head -1`), where `eprintln!` panics and turns any exit code into 101. A message that
/// cannot be shown is dropped; the exit code still tells.
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod ab;
mod check;
pub use check::{check_command_line, CommandLineError};
mod output;
mod pages;
mod progress;
mod run;

use output::{check_output_path, stdout};
use progress::{progress_bar, style_bar};
use run::{run_plan, run_scenario_command, run_sweep};

/// An error in what the user asked for: exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Reproduce, measure and explain the computational-performance chapter of Dive into Deep
/// Learning on a built-in asynchronous dependency engine.
#[derive(Parser, Debug)]
#[command(name = "parbench", version, about, long_about = None, disable_help_subcommand = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// List the scenarios with a line on each.
    List,
    /// List the devices found (CPU model and cores; GPU name, memory, compute capability, driver)
    /// or the exact reason a GPU is unavailable.
    Devices {
        /// Print the environment block as JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Run every scenario with book-sized parameters (scenarios/default.toml), into one report.
    All(CommonArgs),
    /// Run a suite file (scenarios/*.toml) into one report; it is checked whole before anything runs.
    Run {
        /// The suite: a TOML list of [[run]] entries.
        suite: PathBuf,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Convert a JSON report to another format: github-action-benchmark's customSmallerIsBetter
    /// (the default), the terminal table, an SVG chart, or the JSON itself.
    Export {
        /// The parbench report.
        report: PathBuf,
        /// Target format.
        #[arg(long, value_enum, default_value_t = export::Format::GithubActionBenchmark)]
        format: export::Format,
        /// Write to FILE (atomically) instead of stdout.
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Run one scenario over the cartesian product of parameter axes, into one report; each
    /// finished point is appended to a JSON Lines journal, so an interrupted sweep can resume.
    Sweep {
        /// The scenario to sweep.
        scenario: String,
        /// An axis: NAME=V1,V2,... with START:STOP:STEP ranges for whole numbers
        /// (e.g. --set cpu_size=500:2000:500 --set ops=5,10). Repeat for more axes.
        #[arg(long = "set", value_name = "NAME=VALUES", required = true)]
        set: Vec<String>,
        /// The journal to append finished points to (default: the -o file with .jsonl, or
        /// parbench-sweep-<scenario>.jsonl without -o or when -o is a device or pipe).
        #[arg(long, value_name = "FILE", conflicts_with = "resume")]
        journal: Option<PathBuf>,
        /// Continue the sweep recorded in this journal: its finished points are not run again.
        #[arg(long, value_name = "FILE")]
        resume: Option<PathBuf>,
        #[command(flatten)]
        common: CommonArgs,
    },
    /// Draw a report as SVG: time against the swept parameter (a line per variant, 95% CI
    /// band), a training run's loss curves, or the variants' medians as bars.
    Plot {
        /// The JSON report.
        report: PathBuf,
        /// The SVG to write (default: the report's path with .svg).
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Compare two JSON reports: exit 1 if any entry regressed, 2 if they cannot be compared.
    Compare {
        /// The reference report.
        baseline: PathBuf,
        /// The report to judge.
        new: PathBuf,
        /// Smallest change that counts: a percentage (5%) or a fraction (0.05).
        #[arg(long, default_value = "5%", value_parser = parse_threshold)]
        threshold: f64,
        /// Output format.
        #[arg(long, value_enum, default_value_t = CompareFormat::Table)]
        format: CompareFormat,
    },
    /// Paired A/B run of two parbench builds over a suite (default scenarios/ci.toml):
    /// ABBA order, one short process per side and pair, decided on the pairs' ratios; exit 1 if
    /// the candidate is slower, 2 on bad input.
    Ab(ab::AbArgs),
    /// Write a report as one self-contained HTML page (tables, checks, figures), or two
    /// reports side by side with `compare`'s verdicts.
    Report {
        /// The JSON report; a second one is compared against the first (the baseline).
        #[arg(required = true, num_args = 1..=2, value_name = "REPORT")]
        reports: Vec<PathBuf>,
        /// The page to write (default: the last report's path with .html).
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
        /// With two reports: the smallest change that counts, as for `compare`.
        #[arg(long, default_value = "5%", value_parser = parse_threshold)]
        threshold: f64,
    },
    /// Print a shell completion script: `parbench completions bash > ~/.local/share/bash-completion/completions/parbench`.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print this help, or the help of a command or scenario (`parbench help cpu-gpu`).
    Help {
        /// A command or scenario.
        topic: Option<String>,
    },
    /// Run one scenario: `parbench <scenario> [--param value ...]` (see `parbench list`).
    #[command(external_subcommand)]
    Scenario(Vec<OsString>),
}

/// Options shared by every command that runs scenarios.
#[derive(Args, Debug, Clone, Default)]
pub struct CommonArgs {
    /// Print the JSON report on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON report to FILE (atomically: a complete file or none).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// No progress bar or notes on stderr.
    #[arg(short, long)]
    pub quiet: bool,
    /// Execution engine: threaded (asynchronous, the default) or naive (push returns once its op completed).
    #[arg(long, value_name = "MODE", env = Mode::ENV, value_parser = parse_mode)]
    pub engine: Option<Mode>,
    /// Bound the ops pending in the engine (push blocks at the bound).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub max_inflight: Option<u64>,
    /// When a GPU op completes in the engine: stream (when enqueued; dependent GPU ops are
    /// ordered on the device, the front end runs ahead) or host (when the GPU has finished it).
    #[arg(long, value_name = "ORDER", value_enum, default_value_t = GpuOrderArg::Stream)]
    pub gpu_order: GpuOrderArg,
    /// Threads per CPU device (default: the machine's cores split between the devices).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub cpu_threads: Option<u64>,
    /// Write a Chrome trace (Perfetto, chrome://tracing) of one extra repeat of every variant
    /// to FILE: one track per lane.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Print a text timeline (one row per lane) of one extra repeat of every variant.
    #[arg(long)]
    pub timeline: bool,
    /// Also write the report as a self-contained HTML page to FILE (tables, checks, figures,
    /// and the lane timeline of one extra traced repeat of every variant).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// With --device cuda and no usable GPU, run on a CPU device (with a note saying so)
    /// instead of failing.
    #[arg(long)]
    pub fallback: bool,
    /// Print the lane of each op as it starts (the book's log_device_placement): the first 20
    /// ops of each lane, then a count of the rest.
    #[arg(long)]
    pub log_placement: bool,
    /// Untimed warm-up rounds before sampling.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub warmup: Option<u64>,
    /// Measure at least N rounds.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub min_samples: Option<u64>,
    /// Measure at most N rounds.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub max_samples: Option<u64>,
    /// Keep sampling until this many seconds were measured (after --min-samples).
    #[arg(long, value_name = "SECS", value_parser = parse_seconds)]
    pub min_time: Option<Duration>,
    /// Stop sampling after this many seconds of measuring, once 3 rounds (or --min-samples,
    /// if fewer) are in. Not a bound on the whole run: warm-up, set-up, checks and the
    /// --trace/--timeline repeat come on top (a run that overruns it says so in a note).
    #[arg(long, value_name = "SECS", value_parser = parse_seconds)]
    pub max_time: Option<Duration>,
}

/// `--gpu-order` (see [`GpuOrder`]).
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GpuOrderArg {
    #[default]
    Stream,
    Host,
}

impl From<GpuOrderArg> for GpuOrder {
    fn from(o: GpuOrderArg) -> GpuOrder {
        match o {
            GpuOrderArg::Stream => GpuOrder::Stream,
            GpuOrderArg::Host => GpuOrder::Host,
        }
    }
}

/// How `compare` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CompareFormat {
    Table,
    Markdown,
    /// The rows, verdicts and any environment differences as JSON.
    Json,
}

fn parse_threshold(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (number, scale) = match t.strip_suffix('%') {
        Some(n) => (n, 0.01),
        None => (t, 1.0),
    };
    let v = number
        .trim()
        .parse::<f64>()
        .map(|v| v * scale)
        .map_err(|_| format!("expected a percentage like 5% or a fraction like 0.05, got '{s}'"))?;
    if !(v > 0.0 && v < 1.0) {
        // `--threshold 5` most likely meant 5%.
        let hint = if scale == 1.0 && (1.0..100.0).contains(&v) {
            format!(" (did you mean {v}%?)")
        } else {
            String::new()
        };
        return Err(format!(
            "the threshold must be between 0% and 100%, got '{s}'{hint}"
        ));
    }
    Ok(v)
}

fn parse_mode(s: &str) -> Result<Mode, String> {
    s.parse()
}

fn parse_seconds(s: &str) -> Result<Duration, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("expected seconds, got '{s}'"))?;
    crate::harness::sampler::seconds(v)
}

impl CommonArgs {
    fn context(&self) -> RunContext {
        let progress = self.shows_progress().then(|| progress_bar(None));
        RunContext {
            runtime: RuntimeOptions {
                mode: Some(self.mode()),
                max_inflight: self.max_inflight.map(|n| n as usize),
                log_placement: self.log_placement,
                gpu_order: self.gpu_order.into(),
            },
            sampling: SamplingOverrides {
                warmup: self.warmup.map(|n| n as usize),
                min_samples: self.min_samples.map(|n| n as usize),
                max_samples: self.max_samples.map(|n| n as usize),
                min_time: self.min_time,
                max_time: self.max_time,
            },
            cpu_threads: self.cpu_threads.map(|n| n as usize),
            progress,
            traces: (self.trace.is_some() || self.timeline || self.html.is_some())
                .then(Default::default),
            gpu_fallback: self.fallback,
        }
    }

    fn shows_progress(&self) -> bool {
        !self.quiet && std::io::stderr().is_terminal()
    }

    fn mode(&self) -> Mode {
        self.engine.unwrap_or(Mode::Threaded)
    }
}

/// Entry point used by `main`: never panics on user input, always returns an exit code.
pub fn main_with_args(args: Vec<OsString>) -> ExitCode {
    let outcome = run(args);
    // An MPI job's ranks finalize on the way out (mpirun counts a rank that exits without it
    // as failed); a no-op for every other run.
    crate::distributed::finalize();
    match outcome {
        Ok(code) => code,
        Err(e) => {
            note!("error: {}", one_line(&format!("{e:#}")));
            if e.downcast_ref::<UsageError>().is_some() || is_usage(&e) {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

fn is_usage(e: &anyhow::Error) -> bool {
    e.downcast_ref::<ScenarioError>()
        .is_some_and(ScenarioError::is_usage)
        || e.downcast_ref::<scenario::ParamError>().is_some()
}

fn one_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Parse with clap; help and version print and exit 0, errors become one-line usage errors.
fn parse_clap<T>(
    cmd: clap::Command,
    args: Vec<OsString>,
    from: impl FnOnce(&clap::ArgMatches) -> Result<T, clap::Error>,
) -> anyhow::Result<Result<T, ExitCode>> {
    match check::clap_parse(cmd, args, from) {
        Ok(v) => Ok(Ok(v)),
        Err(e) => e.into_exit().map(Err),
    }
}

fn scenarios_help() -> String {
    let mut s = String::from("Scenarios (parbench <scenario> --help for their options):\n");
    for sc in scenario::registry() {
        s.push_str(&hanging(&format!("  {:<14} ", sc.name()), sc.about(), 96));
    }
    s
}

/// `lead` then `text` wrapped at `width` columns, continuation lines indented under the text
/// (clap would wrap a long line back to the margin).
fn hanging(lead: &str, text: &str, width: usize) -> String {
    let indent = lead.chars().count();
    let mut out = String::from(lead);
    let mut col = indent;
    for word in text.split_whitespace() {
        let len = word.chars().count();
        if col > indent && col + 1 + len > width {
            out.push('\n');
            out.push_str(&" ".repeat(indent));
            col = indent;
        }
        if col > indent {
            out.push(' ');
            col += 1;
        }
        out.push_str(word);
        col += len;
    }
    out.push('\n');
    out
}

fn run(args: Vec<OsString>) -> anyhow::Result<ExitCode> {
    let cmd = Cli::command().after_help(scenarios_help());
    let cli = match parse_clap(cmd, args, Cli::from_arg_matches)? {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    match cli.command {
        Command::List => {
            stdout(&scenarios_help())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Devices { json } => {
            let env = Environment::capture(Mode::Threaded.as_str(), device::discovery::probe_gpu());
            if json {
                stdout(&format!("{}\n", serde_json::to_string_pretty(&env)?))?;
            } else {
                stdout(&table::render_devices(&env))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::All(common) => {
            let plan = suite::parse("scenarios/default.toml (built in)", suite::DEFAULT_SUITE)
                .map_err(|e| UsageError(e.to_string()))?;
            run_plan(plan, &common)
        }
        Command::Run {
            suite: path,
            common,
        } => {
            let name = path.display().to_string();
            let text = suite::read(&path).map_err(UsageError)?;
            let plan = suite::parse(&name, &text).map_err(|e| UsageError(e.to_string()))?;
            run_plan(plan, &common)
        }
        Command::Help { topic } => help(topic.as_deref()),
        Command::Report {
            reports,
            output,
            threshold,
        } => pages::run_report(&reports, output, threshold),
        Command::Completions { shell } => pages::completions(shell),
        Command::Ab(args) => ab::run_ab(args),
        Command::Scenario(raw) => run_scenario_command(raw),
        Command::Sweep {
            scenario: name,
            set,
            journal,
            resume,
            common,
        } => run_sweep(&name, &set, journal, resume, &common),
        Command::Plot { report, output } => {
            let doc = compare::load(&report).map_err(|e| UsageError(e.to_string()))?;
            let svg = export::Svg
                .render(&doc)
                .map_err(|e| UsageError(e.to_string()))?;
            let out = output.unwrap_or_else(|| report.with_extension("svg"));
            check_output_path(&out)?;
            write_atomic(&out, svg.as_bytes()).map_err(|e| UsageError(e.to_string()))?;
            note!("wrote {}", out.display());
            let skipped = export::svg::left_out(&doc);
            if !skipped.is_empty() {
                note!(
                    "the chart shows {} only; left out: {} (a report of one scenario each charts them)",
                    export::svg::main_scenario(&doc).unwrap_or_default(),
                    skipped.join(", ")
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Export {
            report,
            format,
            output,
        } => {
            let report = compare::load(&report).map_err(|e| UsageError(e.to_string()))?;
            if let Some(path) = &output {
                check_output_path(path)?;
            }
            let text = format
                .exporter()
                .render(&report)
                .map_err(|e| UsageError(e.to_string()))?;
            match output {
                Some(path) => {
                    write_atomic(&path, text.as_bytes()).map_err(|e| UsageError(e.to_string()))?
                }
                None => stdout(&text)?,
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Compare {
            baseline,
            new,
            threshold,
            format,
        } => {
            let load = |p: &Path| compare::load(p).map_err(|e| UsageError(e.to_string()));
            let (base, new) = (load(&baseline)?, load(&new)?);
            let rows =
                compare::compare(&base, &new, threshold).map_err(|e| UsageError(e.to_string()))?;
            let differences = compare::environment_differences(&base, &new);
            if !differences.is_empty() {
                note!(
                    "warning: the reports come from different environments ({}): a change may be the machine's, not the code's",
                    differences.join("; ")
                );
            }
            stdout(&match format {
                CompareFormat::Json => export::compare::render_json(&rows, threshold, &differences),
                other => {
                    export::compare::render(&rows, threshold, other == CompareFormat::Markdown)
                }
            })?;
            Ok(if rows.iter().any(|r| r.verdict.is_regression()) {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
    }
}

/// The clap command of one scenario: its parameters plus the common options.
pub fn scenario_command(sc: &dyn Scenario) -> clap::Command {
    let s = sc.sampling();
    let sampling = format!(
        "Sampling defaults: {} warm-up round(s), then {} to {} rounds, at least {} s and at most {} s \
         of measuring (--warmup, --min-samples, --max-samples, --min-time, --max-time).",
        s.warmup,
        s.min_samples,
        s.max_samples,
        s.min_time.as_secs_f64(),
        s.max_time.as_secs_f64()
    );
    let mut cmd = clap::Command::new(sc.name())
        .bin_name(format!("parbench {}", sc.name()))
        .after_help(sampling);
    for p in sc.params() {
        cmd = cmd.arg(
            clap::Arg::new(p.name)
                .long(p.flag())
                .value_name("VALUE")
                .help(format!("{} [default: {}]", p.help, p.default))
                .allow_hyphen_values(true)
                .num_args(1),
        );
    }
    // After the shared options: their struct's doc would otherwise become the about line.
    CommonArgs::augment_args(cmd).about(sc.about())
}

/// `parbench help [COMMAND|SCENARIO]`: the same text as `--help` of what it names.
fn help(topic: Option<&str>) -> anyhow::Result<ExitCode> {
    let mut cmd = match check::help_command(topic) {
        Ok(cmd) => cmd,
        Err(e) => return e.into_exit(),
    };
    stdout(&format!("{}\n", cmd.render_long_help()))?;
    Ok(ExitCode::SUCCESS)
}
