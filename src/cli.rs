//! The command line: parsing, running scenarios, printing and writing reports, exit codes.
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
use crate::report::{compare, plot, table, trace, write_atomic, Environment, Report};
use crate::scenario::{
    self, suite, sweep, Params, RunContext, SamplingOverrides, Scenario, ScenarioError,
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
    /// Convert a JSON report for other tools (github-action-benchmark's customSmallerIsBetter).
    Export {
        /// The parbench report.
        report: PathBuf,
        /// Target format.
        #[arg(long, value_enum, default_value_t = ExportFormat::GithubActionBenchmark)]
        format: ExportFormat,
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
    /// Draw a report as SVG: time against the swept parameter (a line per variant, min–max
    /// band), or the variants' medians as bars.
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
    /// Print each op's lane as it starts (the book's log_device_placement).
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
    /// Stop sampling after this many seconds (keeping at least 3 rounds).
    #[arg(long, value_name = "SECS", value_parser = parse_seconds)]
    pub max_time: Option<Duration>,
}

/// What `export` writes.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    /// customSmallerIsBetter JSON for github-action-benchmark.
    GithubActionBenchmark,
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
        return Err(format!(
            "the threshold must be between 0% and 100%, got '{s}'"
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
            traces: (self.trace.is_some() || self.timeline).then(Default::default),
        }
    }

    fn shows_progress(&self) -> bool {
        !self.quiet && std::io::stderr().is_terminal()
    }

    fn mode(&self) -> Mode {
        self.engine.unwrap_or(Mode::Threaded)
    }
}

/// The look of every progress bar: `name [=====>    ] 3/10 unit, eta 4s`.
fn style_bar(bar: &indicatif::ProgressBar, name: &str, unit: &str) {
    let template = format!("{{msg:>12}} [{{bar:30}}] {{pos}}/{{len}} {unit}, eta {{eta}}");
    if let Ok(style) = indicatif::ProgressStyle::with_template(&template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(name.to_string());
}

/// A progress bar on stderr, one per scenario, updated after every sampling round.
fn progress_bar(multi: Option<indicatif::MultiProgress>) -> scenario::ProgressFn {
    use indicatif::ProgressBar;
    use std::sync::Mutex;
    let state: Mutex<Option<(String, ProgressBar)>> = Mutex::new(None);
    Arc::new(move |name: &str, p| {
        let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
        let fresh = !matches!(&*s, Some((n, _)) if n == name);
        if fresh {
            if let Some((_, old)) = s.take() {
                old.finish_and_clear();
            }
            let mut bar = ProgressBar::new(p.rounds_expected as u64);
            if let Some(m) = &multi {
                bar = m.add(bar);
            }
            style_bar(&bar, name, "rounds");
            *s = Some((name.to_string(), bar));
        }
        if let Some((_, bar)) = &*s {
            bar.set_length(p.rounds_expected as u64);
            bar.set_position(p.rounds_done as u64);
            if p.rounds_done >= p.rounds_expected {
                bar.finish_and_clear();
            }
        }
    })
}

/// Entry point used by `main`: never panics on user input, always returns an exit code.
pub fn main_with_args(args: Vec<OsString>) -> ExitCode {
    match run(args) {
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
    let help_hint = format!(
        "see '{} --help'",
        cmd.get_bin_name().unwrap_or(cmd.get_name())
    );
    let result = cmd.try_get_matches_from(args).and_then(|m| from(&m));
    match result {
        Ok(v) => Ok(Ok(v)),
        Err(e) => match e.kind() {
            clap::error::ErrorKind::DisplayHelp
            | clap::error::ErrorKind::DisplayVersion
            | clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                let _ = e.print();
                Ok(Err(
                    if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
                    {
                        ExitCode::from(2)
                    } else {
                        ExitCode::SUCCESS
                    },
                ))
            }
            _ => {
                let rendered = e.render().to_string();
                let first = rendered.lines().next().unwrap_or("invalid arguments");
                let msg = first.trim_start_matches("error: ").to_string();
                Err(UsageError(format!("{msg} ({help_hint})")).into())
            }
        },
    }
}

fn scenarios_help() -> String {
    let mut s = String::from("Scenarios (parbench <scenario> --help for their options):\n");
    for sc in scenario::registry() {
        s.push_str(&format!("  {:<14} {}\n", sc.name(), sc.about()));
    }
    s
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
            let svg = plot::svg(&doc).map_err(|e| UsageError(e.to_string()))?;
            let out = output.unwrap_or_else(|| report.with_extension("svg"));
            check_output_path(&out)?;
            write_atomic(&out, svg.as_bytes()).map_err(|e| UsageError(e.to_string()))?;
            note!("wrote {}", out.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Export {
            report,
            format: ExportFormat::GithubActionBenchmark,
            output,
        } => {
            let report = compare::load(&report).map_err(|e| UsageError(e.to_string()))?;
            let mut text =
                serde_json::to_string_pretty(&compare::github_action_benchmark(&report))?;
            text.push('\n');
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
            stdout(&compare::render(
                &rows,
                threshold,
                format == CompareFormat::Markdown,
            ))?;
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
    let mut cmd = clap::Command::new(sc.name())
        .bin_name(format!("parbench {}", sc.name()))
        .about(sc.about());
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
    CommonArgs::augment_args(cmd)
}

fn run_scenario_command(raw: Vec<OsString>) -> anyhow::Result<ExitCode> {
    let name = raw
        .first()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let Some(sc) = scenario::find(&name) else {
        let known: Vec<&str> = scenario::registry().iter().map(|s| s.name()).collect();
        return Err(UsageError(format!(
            "unknown scenario '{name}' (known: {}; see 'parbench list')",
            known.join(", ")
        ))
        .into());
    };
    let parsed = parse_clap(scenario_command(sc), raw, |m| {
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
    let (common, given) = match parsed {
        Ok(v) => v,
        Err(code) => return Ok(code),
    };
    let params = Params::parse(sc.name(), sc.params(), &given)?;
    run_plan(
        vec![suite::PlannedRun {
            scenario: sc,
            params,
            sampling: SamplingOverrides::default(),
        }],
        &common,
    )
}

/// Test hook: stop a sweep after this many newly finished points, as a kill would.
const SWEEP_STOP_AFTER: &str = "PARBENCH_SWEEP_STOP_AFTER";

fn run_sweep(
    name: &str,
    set: &[String],
    journal: Option<PathBuf>,
    resume: Option<PathBuf>,
    common: &CommonArgs,
) -> anyhow::Result<ExitCode> {
    let sc = scenario::find(name)
        .ok_or_else(|| UsageError(format!("unknown scenario '{name}' (see 'parbench list')")))?;
    let axes = set
        .iter()
        .map(|spec| sweep::parse_axis(sc, spec))
        .collect::<Result<Vec<_>, _>>()
        .map_err(UsageError)?;
    let points = sweep::points(sc, &axes).map_err(UsageError)?;
    let ctx = common.context();
    ctx.sampling
        .apply(sc.sampling())
        .validate()
        .map_err(UsageError)?;
    for p in &points {
        sc.validate(p)?;
    }
    for out in [&common.output, &common.trace].into_iter().flatten() {
        check_output_path(out)?;
    }
    let journal_path = resume
        .clone()
        .or(journal)
        .unwrap_or_else(|| match &common.output {
            // Beside a report on a device (`-o /dev/null`) would be a stray file in /dev.
            Some(o) if !crate::report::atomic::writes_in_place(o) => o.with_extension("jsonl"),
            _ => PathBuf::from(format!("parbench-sweep-{name}.jsonl")),
        });
    if common.output.as_ref() == Some(&journal_path) {
        return Err(UsageError(format!(
            "the journal and the report would both be {}: choose another --journal",
            journal_path.display()
        ))
        .into());
    }
    let done = match &resume {
        Some(path) => sweep::read_journal(path).map_err(UsageError)?,
        // A device (`--journal /dev/null`) is written, never resumed: it may exist.
        None if journal_path.exists() && !crate::report::atomic::writes_in_place(&journal_path) => {
            return Err(UsageError(format!(
            "journal {} already exists: continue it with --resume {0} or choose another --journal",
            journal_path.display()
        ))
            .into())
        }
        None => Vec::new(),
    };
    let mut journal = sweep::Journal::open(&journal_path).map_err(UsageError)?;
    let stop_after: Option<usize> = std::env::var(SWEEP_STOP_AFTER)
        .ok()
        .and_then(|v| v.parse().ok());

    let environment = Environment::capture(common.mode().as_str(), device::discovery::probe_gpu());
    let mut report = Report::new(environment, Vec::new());
    report.sweep = Some(sweep::SweepInfo {
        scenario: name.to_string(),
        axes: axes.clone(),
    });
    if !common.json {
        stdout(&table::render_environment(&report))?;
    }
    if !common.quiet {
        note!(
            "sweep of {} points; journal {}",
            points.len(),
            journal_path.display()
        );
    }
    let multi = indicatif::MultiProgress::new();
    let points_bar = common.shows_progress().then(|| {
        let bar = multi.add(indicatif::ProgressBar::new(points.len() as u64));
        style_bar(&bar, "sweep", "points");
        bar.set_message("sweep");
        bar
    });
    let mut newly = 0;
    for params in &points {
        let run = match done.iter().find(|r| sweep::same_point(r, name, params)) {
            Some(r) => r.clone(),
            None => {
                let point_ctx = RunContext {
                    progress: points_bar
                        .as_ref()
                        .map(|_| progress_bar(Some(multi.clone()))),
                    ..ctx.clone()
                };
                let run = sc.run(params, &point_ctx)?;
                journal.append(&run).map_err(UsageError)?;
                newly += 1;
                if stop_after == Some(newly) {
                    note!("error: stopped after {newly} points ({SWEEP_STOP_AFTER})");
                    return Ok(ExitCode::from(130));
                }
                run
            }
        };
        if !common.json {
            stdout(&table::render_run(&run))?;
        }
        if let Some(bar) = &points_bar {
            bar.inc(1);
        }
        report.runs.push(run);
    }
    if let Some(bar) = points_bar {
        bar.finish_and_clear();
    }
    finish_report(&report, common, &ctx)
}

/// Write to stdout. A reader that went away (`parbench all | head`) is not an error: the
/// rest of the output is dropped, and the run still finishes and writes its `-o` file.
fn stdout(text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e),
        _ => Ok(()),
    }
}

/// Refuse an output path that cannot be written, before spending minutes on the benchmark.
fn check_output_path(path: &Path) -> Result<(), UsageError> {
    let fail = |why: &str| UsageError(format!("cannot write {}: {why}", path.display()));
    if path.is_dir() {
        return Err(fail("it is a directory"));
    }
    if crate::report::atomic::writes_in_place(path) {
        // A device or pipe is written in place: nothing is created next to it, so there is
        // no directory to probe (and a FIFO cannot be opened without blocking for a reader).
        return Ok(());
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        return Err(fail("its directory does not exist"));
    }
    let probe = dir.join(format!(".parbench-probe-{}", std::process::id()));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(fail(&e.to_string())),
    }
}

/// Validate everything, run each scenario, print as they finish, then write the report.
fn run_plan(plan: Vec<suite::PlannedRun>, common: &CommonArgs) -> anyhow::Result<ExitCode> {
    let base = common.context();
    // The command line's sampling options win over a suite's.
    let context_of = |run: &suite::PlannedRun| RunContext {
        sampling: base.sampling.or(&run.sampling),
        ..base.clone()
    };
    for run in &plan {
        context_of(run)
            .sampling
            .apply(run.scenario.sampling())
            .validate()
            .map_err(UsageError)?;
        run.scenario.validate(&run.params)?;
    }
    for out in [&common.output, &common.trace].into_iter().flatten() {
        check_output_path(out)?;
    }
    let gpu = device::discovery::probe_gpu();
    let environment = Environment::capture(common.mode().as_str(), gpu);
    let mut report = Report::new(environment, Vec::new());
    if !common.json {
        stdout(&table::render_environment(&report))?;
    }
    let mut shown = 0;
    let ctx = &base;
    for planned in plan {
        let run = planned
            .scenario
            .run(&planned.params, &context_of(&planned))?;
        if !common.json {
            stdout(&table::render_run(&run))?;
        }
        if let (true, Some(traces)) = (common.timeline, &ctx.traces) {
            let traces = traces.lock().unwrap_or_else(|e| e.into_inner());
            let text: String = traces[shown..]
                .iter()
                .map(|t| trace::timeline(t, 60))
                .collect();
            shown = traces.len();
            // The timeline is for a person: on stdout with the table, on stderr beside --json.
            if common.json {
                use std::io::Write as _;
                let _ = std::io::stderr().write_all(text.as_bytes());
            } else {
                stdout(&text)?;
            }
        }
        report.runs.push(run);
    }
    finish_report(&report, common, ctx)
}

/// Print or write the report (and the trace), and turn the checks into the exit code.
fn finish_report(
    report: &Report,
    common: &CommonArgs,
    ctx: &RunContext,
) -> anyhow::Result<ExitCode> {
    if common.json {
        stdout(&report.to_json())?;
    }
    if let Some(out) = &common.output {
        write_atomic(out, report.to_json().as_bytes()).map_err(|e| UsageError(e.to_string()))?;
        if !common.quiet {
            note!("wrote {}", out.display());
        }
    }
    if let (Some(path), Some(traces)) = (&common.trace, &ctx.traces) {
        let traces = traces.lock().unwrap_or_else(|e| e.into_inner());
        let mut text = serde_json::to_string(&trace::chrome_trace(&traces))?;
        text.push('\n');
        write_atomic(path, text.as_bytes()).map_err(|e| UsageError(e.to_string()))?;
        if !common.quiet {
            note!(
                "wrote {} (open it in https://ui.perfetto.dev or chrome://tracing)",
                path.display()
            );
        }
    }
    if report.all_checks_passed() {
        Ok(ExitCode::SUCCESS)
    } else {
        note!("error: a correctness check failed (see the report)");
        Ok(ExitCode::from(1))
    }
}
