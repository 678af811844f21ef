//! The command line's clap types: the commands, the options every running command shares, and
//! the command of one scenario (its parameters plus those options). Parsing them and acting on
//! them is `commands.rs`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use super::values::{parse_budget, parse_machine, parse_seconds, parse_threshold};
use crate::device::{GpuOrder, MemoryFraction};
use crate::engine::Mode;
use crate::export::{self, ComparisonFormat};
use crate::scenario::Scenario;

/// `parbench --version`'s line after the name: the version and the commit built (with `-dirty`
/// for a changed tree), so `ab` can tell a build of HEAD from a stale one.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("PARBENCH_GIT_COMMIT"),
    ")"
);

/// Reproduce, measure and explain the computational-performance chapter of Dive into Deep
/// Learning on a built-in asynchronous dependency engine.
#[derive(Parser, Debug)]
#[command(name = "parbench", version = VERSION, about, long_about = None, disable_help_subcommand = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// The GPU to open, by CUDA ordinal (after CUDA_VISIBLE_DEVICES; `parbench devices` lists
    /// them). Before a scenario's name: `parbench --gpu 1 async --device cuda`.
    #[arg(long, global = true, value_name = "N", default_value_t = 0)]
    pub gpu: usize,
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
        /// Also measure the machine's limits (f32 FMA peak, clock, memory bandwidth, cache-line
        /// latency between cores), as every report records them: about 0.3 s in a release
        /// build; a debug build says it does not measure.
        #[arg(long)]
        probe: bool,
    },
    /// Run every scenario with book-sized parameters (scenarios/default.toml), into one report;
    /// each finished run is journaled, so an interrupted one resumes (--resume).
    All {
        #[command(flatten)]
        common: CommonArgs,
        #[command(flatten)]
        journal: SuiteJournalArgs,
    },
    /// Run a suite file (scenarios/*.toml) into one report; it is checked whole before anything
    /// runs, and each finished run is journaled, so an interrupted one resumes (--resume).
    Run {
        /// The suite: a TOML list of [[run]] entries.
        suite: PathBuf,
        #[command(flatten)]
        common: CommonArgs,
        #[command(flatten)]
        journal: SuiteJournalArgs,
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
    /// Time a program of yours as a process, hyperfine-style: `parbench command -- sleep 0.01`
    /// (a suite's command entry from the command line; see docs/usage.md).
    Command {
        /// The run's name in the report (default: the command line).
        #[arg(long)]
        name: Option<String>,
        #[command(flatten)]
        common: CommonArgs,
        /// The program and its arguments, run directly (no shell), after `--`.
        #[arg(last = true, required = true, value_name = "PROGRAM ARGS")]
        argv: Vec<String>,
    },
    /// Run one scenario over the cartesian product of parameter axes, into one report; each
    /// finished point is appended to a JSON Lines journal, so an interrupted sweep can resume.
    Sweep(SweepArgs),
    /// Draw a report as SVG: time against the swept parameter (a line per variant, 95% CI
    /// band), a training run's loss curves, or the variants' medians as bars.
    Plot {
        /// The JSON report.
        report: PathBuf,
        /// The SVG to write (default: the report's path with .svg).
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Compare stored reports, each change judged against the figure's run-to-run noise:
    /// `compare BASE NEW`, or reruns a side, `compare BASE... -- NEW...`. Exit 1 for a time
    /// slower beyond its noise, 2 if they cannot be compared. The gate for CI is `ab`.
    Compare(CompareArgs),
    /// Paired A/B run of two parbench builds over a suite (default scenarios/ci.toml):
    /// ABBA order, one short process per side and pair, decided on the pairs' ratios; exit 1 if
    /// the candidate is slower, 2 on bad input.
    Ab(AbArgs),
    /// Every report of a folder over time: one self-contained HTML page with a chart per entry
    /// (CI bands, environment changes marked, steps flagged), or the flagged steps as Markdown.
    History(HistoryArgs),
    /// Write a report as one self-contained HTML page (tables, checks, figures), or two
    /// reports side by side with `compare`'s verdicts.
    Report(ReportArgs),
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
    /// Name the machine in the report (`environment.machine`): reports compare as one
    /// machine's only under one name, as asv's machine names.
    #[arg(long, value_name = "NAME", value_parser = parse_machine)]
    pub machine: Option<String>,
    /// Also write the JSON report to FILE (atomically: a complete file or none).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// No progress bar or notes on stderr; a sweep prints one line per point.
    #[arg(short, long)]
    pub quiet: bool,
    /// Also show the detail figures (engine internals, the machine's probes) and the
    /// sentences that quote them; the JSON always has them.
    #[arg(short, long)]
    pub verbose: bool,
    /// Execution engine: threaded (asynchronous, the default) or naive (push returns once its op completed).
    #[arg(long, value_name = "MODE", env = Mode::ENV, value_parser = Mode::from_setting)]
    pub engine: Option<Mode>,
    /// Bound the ops pending in the engine (push blocks at the bound).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub max_inflight: Option<u64>,
    /// When a GPU op completes in the engine: stream (when enqueued; dependent GPU ops are
    /// ordered on the device, the front end runs ahead) or host (when the GPU has finished it).
    #[arg(long, value_name = "ORDER", value_enum, default_value_t = GpuOrderArg::Stream)]
    pub gpu_order: GpuOrderArg,
    /// Cap parbench's GPU allocations at this fraction of the GPU's total memory, in (0, 1]
    /// (TensorFlow's per_process_gpu_memory_fraction): an allocation past it fails with a
    /// one-line error naming what is live, reserved and free.
    #[arg(long, value_name = "F", allow_hyphen_values = true)]
    pub gpu_memory_fraction: Option<MemoryFraction>,
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

/// How a suite (`all`, `run`) uses its journal of finished runs.
#[derive(Args, Debug, Clone, Default)]
pub struct SuiteJournalArgs {
    /// The journal of finished runs (default: the -o file with .jsonl, or
    /// parbench-<all|run>-<hash of the runs>.jsonl); removed once the report is written, or
    /// kept as <name>.done.jsonl when named here.
    #[arg(long, value_name = "FILE")]
    pub journal: Option<PathBuf>,
    /// Continue an interrupted suite: the runs in its journal are not run again. Refused when
    /// the engine, sampling or build differ from the journal's.
    #[arg(long)]
    pub resume: bool,
    /// Start over: replace an unfinished journal instead of refusing it.
    #[arg(long, conflicts_with = "resume")]
    pub fresh: bool,
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
    let chapter = match &sc.spec().lesson {
        Some(lesson) => {
            let book = match sc.spec().book {
                [] => "its section prints no figures".to_string(),
                figures => format!(
                    "the book's figures: {}",
                    crate::report::book::cited(figures)
                ),
            };
            format!(
                "Lesson ({}): {}.\nThe defaults are the sizes of the chapter's source texts; the \
                 run sets its figures beside {book}.",
                lesson.source.cite(),
                lesson.claim
            )
        }
        None => "A scenario of the program's own: it tests no lesson of the book.".to_string(),
    };
    let mut cmd = clap::Command::new(sc.name())
        .bin_name(format!("parbench {}", sc.name()))
        .after_help(format!("{chapter}\n\n{sampling}"));
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

#[derive(clap::Args, Debug)]
pub struct SweepArgs {
    /// The scenario to sweep.
    pub(super) scenario: String,
    /// An axis: NAME=V1,V2,... with START:STOP:STEP ranges for whole numbers
    /// (e.g. --set cpu_size=500:2000:500 --set ops=5,10). Repeat for more axes.
    #[arg(long = "set", value_name = "NAME=VALUES")]
    pub(super) set: Vec<String>,
    /// The journal to append finished points to (default: the -o file with .jsonl, or
    /// parbench-sweep-<scenario>-<hash of the axes>.jsonl without -o or when -o is a device
    /// or pipe). Once the report is written it is kept as <name>.done.jsonl.
    #[arg(long, value_name = "FILE")]
    pub(super) journal: Option<PathBuf>,
    /// Continue the sweep recorded in the journal (this FILE, or --journal's, or the
    /// default): its finished points are not run again. Refused when the engine, sampling
    /// or build differ from the journal's.
    #[arg(long, value_name = "FILE", num_args = 0..=1)]
    pub(super) resume: Option<Option<PathBuf>>,
    /// Start over: replace an unfinished journal instead of refusing it.
    #[arg(long, conflicts_with = "resume")]
    pub(super) fresh: bool,
    /// Refuse a sweep of more points than this (counted before any is built).
    #[arg(long, value_name = "N", default_value_t = crate::scenario::sweep::MAX_POINTS,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) max_points: u64,
    #[command(flatten)]
    pub(super) common: CommonArgs,
}

#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// The baseline report and the report to judge; with `--`, the baseline's reports
    /// (reruns of one build).
    #[arg(required = true, value_name = "REPORT")]
    pub(super) reports: Vec<PathBuf>,
    /// After `--`: the reports to judge (reruns of one build).
    #[arg(last = true, value_name = "NEW")]
    pub(super) new: Vec<PathBuf>,
    /// Earlier reports (a folder, or a file as `history` reads it): each figure's spread
    /// over their reruns of one commit, on the baseline's machine, is learned from them.
    #[arg(long, value_name = "DIR")]
    pub(super) history: Option<PathBuf>,
    /// Smallest change that counts: a percentage (5%) or a fraction (0.05).
    #[arg(long, default_value = "5%", value_parser = parse_threshold, allow_hyphen_values = true)]
    pub(super) threshold: f64,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ComparisonFormat::Table)]
    pub(super) format: ComparisonFormat,
    /// Fail (exit 1) when an entry is on one side only or looks renamed; without it such
    /// entries are listed and warned about.
    #[arg(long)]
    pub(super) require_all: bool,
}

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// The JSON report; a second one is compared against the first (the baseline).
    #[arg(required = true, num_args = 1..=2, value_name = "REPORT")]
    pub(super) reports: Vec<PathBuf>,
    /// The page to write (default: the last report's path with .html).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub(super) output: Option<PathBuf>,
    /// With two reports: the smallest change that counts, as for `compare`.
    #[arg(long, default_value = "5%", value_parser = parse_threshold, allow_hyphen_values = true)]
    pub(super) threshold: f64,
}

#[derive(clap::Args, Debug)]
pub struct AbArgs {
    /// The base: a parbench executable, or a git revision (built once into target/ab/).
    #[arg(required_unless_present = "from")]
    pub(super) base: Option<PathBuf>,
    /// The candidate: a parbench executable, or a git revision.
    #[arg(required_unless_present = "from")]
    pub(super) candidate: Option<PathBuf>,
    /// The suite file.
    pub(super) suite: Option<PathBuf>,
    /// Smallest change that counts: a percentage (5%) or a fraction (0.05).
    #[arg(long, default_value = "5%", value_parser = parse_threshold, allow_hyphen_values = true)]
    pub(super) threshold: f64,
    /// Samples per process: each side's median of these is its value in a pair.
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub(super) samples: u64,
    /// Pairs per suite entry before it may stop early.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u64).range(2..=100_000))]
    pub(super) min_pairs: u64,
    /// Pairs per suite entry at most.
    #[arg(long, value_name = "N", default_value_t = 40, value_parser = clap::value_parser!(u64).range(2..=100_000))]
    pub(super) max_pairs: u64,
    /// Seconds of measuring at most, shared between the suite's entries: no pair starts that
    /// would end past it, and a side still running at it is stopped; an entry stops earlier
    /// once every time of it is settled.
    #[arg(long, value_name = "SECS", default_value = "240", value_parser = parse_budget, allow_hyphen_values = true)]
    pub(super) budget: Duration,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ComparisonFormat::Table)]
    pub(super) format: ComparisonFormat,
    /// Also write the JSON, with every pair, to this file.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub(super) output: Option<PathBuf>,
    /// Judge the pairs of an earlier run's JSON again (at this --threshold) instead of
    /// running anything.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["base", "candidate", "suite"])]
    pub(super) from: Option<PathBuf>,
    /// Let a side be the checkout's HEAD while the working tree has uncommitted changes: the
    /// working tree is built and measured as it is (refused without this flag).
    #[arg(long)]
    pub(super) allow_dirty: bool,
}

#[derive(clap::Args, Debug)]
pub struct HistoryArgs {
    /// A folder of parbench reports (`*.json`; other files are skipped with a note), or a file:
    /// one report, or reports one JSON document per line. They are ordered by when each run started.
    pub(super) reports: PathBuf,
    /// Write to FILE (atomically) instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub(super) output: Option<PathBuf>,
    /// Output format: the self-contained page, or the flagged steps as a Markdown table.
    #[arg(long, value_enum, default_value_t = HistoryFormat::Html)]
    pub(super) format: HistoryFormat,
    /// Smallest change of an entry's median that is a step: a percentage (10%) or a fraction.
    #[arg(long, default_value = "10%", value_parser = parse_threshold, allow_hyphen_values = true)]
    pub(super) threshold: f64,
    /// Fewest reports on each side of a step.
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub(super) min_window: u64,
    /// The most commits a chart shows, the newest; older ones are summarized under it.
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u64).range(2..=100_000))]
    pub(super) max_items: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum HistoryFormat {
    Html,
    Markdown,
}
