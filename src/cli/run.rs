//! Running what the command line asked for: one scenario, a sweep, or a plan (suite).

use std::ffi::OsString;
use std::io::IsTerminal;

use super::args::{CommonArgs, SuiteJournalArgs, SweepArgs};
use super::check;
use super::error::{parsed, CliError, SWEEP_STOP_AFTER};
use super::eta;
use super::finish::finish_report;
use super::journaling;
use super::output::{check_outputs, json_on_stdout, stdout};
use super::partial::Shared;
use super::progress::{progress_bar, style_bar};
use super::sweep_ranks;
use crate::device::{self, RuntimeOptions};
use crate::engine::Mode;
use crate::export::{self, table};
use crate::report::{Environment, Report, RunRecord};
use crate::scenario::journal_header::{JournalPlan, SamplingConditions};
use crate::scenario::{
    kit, suite, sweep, Params, RunContext, SamplingOverrides, Scenario, ScenarioError,
};

pub(super) fn run_scenario_command(raw: Vec<OsString>) -> Result<(), CliError> {
    let Some((scenario, common, params)) = parsed(check::scenario_args(raw))? else {
        return Ok(());
    };
    let run = suite::PlannedRun {
        scenario,
        params,
        sampling: SamplingOverrides::default(),
        at: None,
    };
    run_plan(vec![run], &common, None)
}

pub(super) fn run_sweep(args: SweepArgs) -> Result<(), CliError> {
    let (name, common) = (args.scenario.as_str(), &args.common);
    let Some((sc, axes, points)) = parsed(check::sweep_plan(name, &args.set, args.max_points))?
    else {
        return Ok(());
    };
    let ctx = common.context();
    let sampling = ctx.sampling.apply(sc.sampling());
    sampling
        .validate()
        .map_err(|e| CliError::Usage(e.to_string()))?;
    for p in &points {
        sc.validate(p)?;
        kit::check_requested_device(p, common.fallback)?;
    }
    // Every point spans the ranks of one MPI job, or none does: a rank cannot sit out a point.
    let spanning = points.iter().filter(|p| sc.distributed(p)).count();
    if spanning > 0 && spanning < points.len() {
        return Err(CliError::Usage(format!(
            "{spanning} of the sweep's {} points span MPI ranks and the others run in one \
             process: sweep the two backends separately",
            points.len()
        )));
    }
    let distributed = spanning > 0;
    super::launch::start(distributed, &[name], true)?;
    let timeout = sweep_ranks::timeout(&points);
    if crate::distributed::is_secondary_rank() {
        return sweep_ranks::follow(&points, timeout, stop_after(), |p| {
            run_timed(sc, p, &ctx).map(drop)
        });
    }
    // Until the points are shared, a refusal on rank 0 tells the other ranks to stop.
    let mut pending = distributed.then(|| sweep_ranks::PendingShare::new(points.len(), timeout));
    check_common(common)?;
    if let (Some(Some(r)), Some(j)) = (&args.resume, &args.journal) {
        if r != j {
            return Err(CliError::Usage(format!(
                "--resume {} and --journal {} name two journals: give one",
                r.display(),
                j.display()
            )));
        }
    }
    let mut opened = journaling::open_at_path(
        args.resume.clone().flatten().or(args.journal.clone()),
        common,
        (&format!("sweep-{name}"), &format!("{axes:?}")),
        (&sampling).into(),
        JournalPlan::Sweep {
            scenario: name.to_string(),
            axes: axes.clone(),
        },
        journaling::Start::of(args.fresh, args.resume.is_some()),
    )?;
    let (journal_path, done) = (&opened.path, &opened.done);
    // Points as their reports record them (`m=0` resolved to the size it stands for).
    let resolved: Vec<_> = points.iter().map(|p| sc.resolved_params(p, &ctx)).collect();
    if let Some(foreign) = done
        .iter()
        .find(|r| !resolved.iter().any(|p| sweep::same_point(r, name, p)))
    {
        return Err(CliError::Usage(format!(
            "journal {} holds a point that is not in this sweep ({}): resume it with the \
             axes it was started with, or start over with --fresh",
            journal_path.display(),
            sweep::describe_params(&foreign.scenario, &foreign.parameters)
        )));
    }
    // Each point's run in the journal, where it holds one.
    let held: Vec<_> = resolved
        .iter()
        .map(|p| done.iter().find(|r| sweep::same_point(r, name, p)))
        .collect();
    if let Some(share) = pending.take() {
        // The other ranks skip what the journal holds, as rank 0 does.
        share.send(&held.iter().map(Option::is_some).collect::<Vec<_>>())?;
    }
    let stop_after = stop_after();

    let mut report = common.empty_report();
    report.sweep = Some(sweep::SweepInfo {
        scenario: name.to_string(),
        axes: axes.clone(),
    });
    // SIGINT or SIGTERM ends the process at once (a point can take minutes); finished points
    // are in the journal already, so say how to go on from them.
    let partial = Shared::arm(
        &report,
        resolved
            .iter()
            .map(|p| sweep::describe_params(name, p))
            .collect(),
        common.output.clone(),
        format!(
            "interrupted: the finished points are in {0}; the same command with --resume {0} \
             runs the rest",
            journal_path.display()
        ),
    );
    if !json_on_stdout(common) && !common.quiet {
        stdout(&table::render_environment(&report))?;
    }
    let from_journal = held.iter().flatten().count();
    if !common.quiet {
        note!(
            "sweep of {} points ({} from the journal); journal {}",
            points.len(),
            from_journal,
            journal_path.display()
        );
    }
    let multi = indicatif::MultiProgress::new();
    let points_bar = common.shows_progress().then(|| {
        let bar = multi.add(indicatif::ProgressBar::new(points.len() as u64));
        style_bar(&bar, "sweep", "points");
        bar
    });
    // Each point still to measure, its work over the first's.
    let work = eta::relative(
        &points
            .iter()
            .zip(&held)
            .filter(|(_, h)| h.is_none())
            .map(|(p, _)| sc.work(p))
            .collect::<Vec<_>>(),
    );
    if let (false, Some(estimate)) = (common.quiet, eta::before(&work)) {
        note!("{estimate}");
    }
    let mut newly = 0;
    let mut traced = 0;
    for (params, held) in points.iter().zip(&held) {
        let run = match held {
            Some(r) => (*r).clone(),
            None => {
                let point_ctx = RunContext {
                    progress: points_bar
                        .as_ref()
                        .map(|_| progress_bar(Some(multi.clone()))),
                    ..ctx.clone()
                };
                let began = std::time::Instant::now();
                let run = run_timed(sc, params, &point_ctx)?;
                let first = began.elapsed().as_secs_f64();
                opened.journal.append(&run)?;
                newly += 1;
                if newly == 1 && !common.quiet {
                    let round: f64 = run.variants.iter().map(|v| v.summary.median_s).sum();
                    let rest = work.get(1..).unwrap_or_default();
                    if let Some(estimate) = eta::remaining(first, round, rest, &sampling) {
                        note!("{estimate}");
                    }
                }
                if stop_after == Some(newly) {
                    return Err(CliError::Stopped(newly));
                }
                run
            }
        };
        // Quiet, a point is one line: the summary's row.
        match (json_on_stdout(common), common.quiet) {
            (true, _) => {}
            (false, true) => stdout(&table::render_sweep_point(&run, &axes))?,
            (false, false) => stdout(&table::render_run_at(&run, common.depth()))?,
        }
        if let Some(bar) = &points_bar {
            bar.inc(1);
        }
        partial.finished(&run);
        push_run(&mut report, run, &ctx, &mut traced);
    }
    if let Some(bar) = points_bar {
        bar.finish_and_clear();
    }
    if !json_on_stdout(common) && !common.quiet {
        stdout(&table::render_sweep_summary(&report))?;
    }
    if !common.quiet {
        note!(
            "{} points, {from_journal} from the journal, {newly} measured now",
            points.len()
        );
    }
    opened.retire(finish_report(&report, common, &ctx), common.quiet)
}

/// How many new points a test asks a sweep to stop after ([`SWEEP_STOP_AFTER`]).
fn stop_after() -> Option<usize> {
    std::env::var(SWEEP_STOP_AFTER)
        .ok()
        .and_then(|v| v.parse().ok())
}

/// A suite's journal: the options, and the command that runs the suite (for the resume hint).
pub(super) struct SuiteJournal {
    pub args: SuiteJournalArgs,
    /// `all`, or `run SUITE`.
    pub command: String,
    /// The suite's name, for the header.
    pub suite: String,
}

/// Validate everything, run each scenario, print as they finish, then write the report. With
/// a journal (a suite), each finished run is appended to it, a resume skips the runs it holds,
/// and SIGINT/SIGTERM leave the finished runs and say how to resume.
pub(super) fn run_plan(
    plan: Vec<suite::PlannedRun>,
    common: &CommonArgs,
    suite_journal: Option<SuiteJournal>,
) -> Result<(), CliError> {
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
            .map_err(|e| {
                CliError::Usage(match &run.at {
                    // The command line's options override the entry's one by one, so the
                    // two can disagree: name the entry.
                    Some(at) => format!(
                        "{at}: {e} (the command line's sampling options override this \
                         entry's one by one)"
                    ),
                    None => e.to_string(),
                })
            })?;
        run.scenario.validate(&run.params)?;
        kit::check_requested_device(&run.params, common.fallback)?;
    }
    // An MPI job starts before anything prints or is checked for writing: only rank 0 prints
    // and writes (the other ranks' hosts need not have its output paths).
    let names: Vec<&str> = plan.iter().map(|r| r.scenario.name()).collect();
    let distributed = plan.iter().any(|r| r.scenario.distributed(&r.params));
    super::launch::start(distributed, &names, false)?;
    if crate::distributed::is_secondary_rank() {
        for planned in plan
            .into_iter()
            .filter(|r| r.scenario.distributed(&r.params))
        {
            run_timed(planned.scenario, &planned.params, &context_of(&planned))?;
        }
        return Ok(());
    }
    check_common(common)?;
    let ctx = &base;
    let resolved: Vec<_> = plan
        .iter()
        .map(|r| r.scenario.resolved_params(&r.params, &context_of(r)))
        .collect();
    let described: Vec<String> = plan
        .iter()
        .zip(&resolved)
        .map(|(r, p)| sweep::describe_params(r.scenario.name(), p))
        .collect();
    let mut journaled = (suite_journal.as_ref())
        .map(|j| open_suite_journal(j, common, &base.sampling, &plan, &resolved, &described))
        .transpose()?;
    let mut report = common.empty_report();
    let partial = suite_journal.zip(journaled.as_ref()).map(|(j, opened)| {
        Shared::arm(
            &report,
            described.clone(),
            common.output.clone(),
            format!(
                "interrupted: the finished runs are in {}; 'parbench {} --resume' (with the \
                 same options) runs the rest",
                opened.path.display(),
                j.command
            ),
        )
    });
    if !json_on_stdout(common) {
        stdout(&table::render_environment(&report))?;
    }
    let stop_after = stop_after();
    let from_journal = journaled.as_ref().map_or(0, |o| o.done.len());
    let total = plan.len();
    let mut newly = 0;
    let mut shown = 0;
    let mut traced = 0;
    for (i, planned) in plan.into_iter().enumerate() {
        let run = match journaled.as_ref().and_then(|o| o.done.get(i)) {
            Some(r) => r.clone(),
            None => run_timed(planned.scenario, &planned.params, &context_of(&planned))?,
        };
        // Into the report a signal writes before the journal: never in the journal alone.
        if let Some(partial) = &partial {
            partial.finished(&run);
        }
        if let (Some(opened), true) = (&mut journaled, i >= from_journal) {
            opened.journal.append(&run)?;
            newly += 1;
            if stop_after == Some(newly) {
                return Err(CliError::Stopped(newly));
            }
        }
        if !json_on_stdout(common) {
            stdout(&table::render_run_at(&run, common.depth()))?;
        }
        if let (true, Some(traces)) = (common.timeline, &ctx.traces) {
            let traces = traces.lock().unwrap_or_else(|e| e.into_inner());
            let text: String = traces[shown..]
                .iter()
                .map(|t| export::chrome_trace::timeline(t, 60))
                .collect();
            shown = traces.len();
            // The timeline is for a person: on stdout with the table, on stderr beside --json.
            if json_on_stdout(common) {
                use std::io::Write as _;
                let _ = std::io::stderr().write_all(text.as_bytes());
            } else {
                stdout(&text)?;
            }
        }
        push_run(&mut report, run, ctx, &mut traced);
    }
    if from_journal > 0 && !common.quiet {
        note!("{total} runs, {from_journal} from the journal, {newly} run now");
    }
    // A plan of several runs (`all`, a suite) ends with the chapter on this machine.
    let lessons = report.runs.iter().filter(|r| r.lesson.is_some()).count();
    if !json_on_stdout(common) && report.runs.len() > 1 && lessons > 0 {
        stdout(&export::summary::render(&report))?;
    }
    let outcome = finish_report(&report, common, ctx);
    match journaled {
        Some(opened) => opened.retire(outcome, common.quiet),
        None => outcome,
    }
}

/// A suite's journal, opened as its options say, with the runs it holds (a prefix of the plan:
/// a suite runs in order).
fn open_suite_journal(
    j: &SuiteJournal,
    common: &CommonArgs,
    sampling: &SamplingOverrides,
    plan: &[suite::PlannedRun],
    resolved: &[serde_json::Map<String, serde_json::Value>],
    described: &[String],
) -> Result<journaling::Opened, CliError> {
    let what = j.command.split_whitespace().next().unwrap_or("run");
    let opened = journaling::open_at_path(
        j.args.journal.clone(),
        common,
        (what, &described.join("\n")),
        SamplingConditions::from(sampling),
        JournalPlan::Suite {
            suite: j.suite.clone(),
            runs: described.to_vec(),
        },
        journaling::Start::of(j.args.fresh, j.args.resume),
    )?;
    if opened.done.len() > plan.len() {
        return Err(CliError::Usage(format!(
            "journal {} holds {} runs, more than this suite's {}: resume it with the suite it \
             was started with, or start over with --fresh",
            opened.path.display(),
            opened.done.len(),
            plan.len()
        )));
    }
    for (i, (record, (planned, resolved))) in opened
        .done
        .iter()
        .zip(plan.iter().zip(resolved))
        .enumerate()
    {
        if !sweep::same_point(record, planned.scenario.name(), resolved) {
            return Err(CliError::Usage(format!(
                "journal {}'s run {} ({}) is not this suite's ({}): resume it with the suite \
                 it was started with, or start over with --fresh",
                opened.path.display(),
                i + 1,
                sweep::describe_params(&record.scenario, &record.parameters),
                described[i]
            )));
        }
    }
    Ok(opened)
}

/// The one-thread FMA probe repeated before and after each run (a fall of more than 10% says a
/// core was shared): loops of 2 ms, best of 3, a few tens of milliseconds in all. A debug
/// build has none, and the state leaves `probe_before`/`probe_after` out.
fn fma_probe() -> Option<f64> {
    crate::machine::fma::one_core_gflops(0.002, 3)
}

/// Add a finished run to the report; the first that used the GPU brings the GPU's limits into
/// the report's environment (measured after it, never before a CPU-only run). The lane
/// timelines of its traced repeats (the traces from `*traced` on) come with it, so the
/// report's JSON and HTML can draw them.
fn push_run(report: &mut Report, run: RunRecord, ctx: &RunContext, traced: &mut usize) {
    let used_gpu = crate::device::record::uses_gpu(&run.device_records);
    let index = report.runs.len();
    report.runs.push(run);
    if used_gpu {
        report.environment.note_gpu_run();
    }
    let Some(traces) = &ctx.traces else { return };
    let traces = traces.lock().unwrap_or_else(|e| e.into_inner());
    report.timelines.extend(
        traces[(*traced).min(traces.len())..]
            .iter()
            .map(|t| crate::report::Timeline::of(index, t)),
    );
    *traced = traces.len();
}

/// Run a scenario, recording the machine's state around the whole run (rank 0 only in an MPI
/// job: the other ranks print and write nothing); when it took longer than its sampling's
/// `--max-time`, say in a note what that option bounds and what came on top, so a reader is
/// not left wondering.
fn run_timed(
    sc: &dyn Scenario,
    params: &Params,
    ctx: &RunContext,
) -> Result<RunRecord, ScenarioError> {
    let recording = (!crate::distributed::is_secondary_rank()).then(|| {
        let gpu = sc
            .may_use_gpu(params)
            .then(crate::device::gpu_selector::selected)
            .flatten();
        crate::machine::Recording::start(&fma_probe, gpu)
    });
    let start = std::time::Instant::now();
    let mut run = sc.run(params, ctx)?;
    let took = start.elapsed();
    run.drift_between_runs = sc.drift_between_runs();
    if let Some(recording) = recording {
        let used_gpu = crate::device::record::uses_gpu(&run.device_records);
        let undeclared = (!sc.may_use_gpu(params))
            .then(|| "the scenario used the GPU without declaring that it may".to_string());
        let unwatched = recording.gpu_unwatched().map(ToString::to_string);
        if let Some(why) = unwatched.or(undeclared).filter(|_| used_gpu) {
            run.notes.push(format!(
                "the GPU's state over this run was not recorded: {why}"
            ));
        }
        let mut state = recording.finish(&fma_probe, used_gpu);
        state.engine_threads = crate::device::record::cpu_threads(&run.device_records);
        state.peak_per_core = crate::machine::limits()
            .fma
            .measured()
            .map(|peak| peak.per_core_gflops);
        state.mpi = sc.distributed(params);
        run.record_state(state);
    }
    let sampling = ctx.sampling.apply(sc.sampling());
    if took > sampling.max_time {
        run.notes.push(format!(
            "the run took {}, more than --max-time {}: that option ends the sampling, once {} \
             round(s) are in; the warm-up ({} round(s)), set-up, checks{} come on top",
            crate::units::human_time(took.as_secs_f64()),
            crate::units::human_time(sampling.max_time.as_secs_f64()),
            sampling.min_samples.min(3),
            sampling.warmup,
            if ctx.traces.is_some() {
                " and the traced repeat of each variant (--trace, --timeline)"
            } else {
                ""
            }
        ));
    }
    Ok(run)
}

/// The shared options checked before anything runs: the outputs, and `--cpu-threads` against
/// the cores.
fn check_common(common: &CommonArgs) -> Result<(), CliError> {
    check_outputs(common)?;
    match common.cpu_threads {
        Some(n) => Ok(kit::check_threads("--cpu-threads", n as usize)?),
        None => Ok(()),
    }
}

/// What running needs from the shared options: the run context, whether a progress bar shows,
/// the engine mode.
impl CommonArgs {
    fn context(&self) -> RunContext {
        // Before the environment is captured: the GPU's limits are probed within the cap.
        crate::device::gpu_limits::keep_within(self.gpu_memory_fraction);
        let progress = self.shows_progress().then(|| progress_bar(None));
        RunContext {
            runtime: RuntimeOptions {
                mode: Some(self.mode()),
                max_inflight: self.max_inflight.map(|n| n as usize),
                log_placement: self.log_placement,
                gpu_order: self.gpu_order.into(),
                gpu_memory_fraction: self.gpu_memory_fraction,
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

    /// A report of no runs yet, in the environment the runs will have.
    fn empty_report(&self) -> Report {
        let gpu = device::discovery::probe_gpu();
        // The machine's limits, not yet the GPU's: those come with the first run that uses
        // the GPU (`note_gpu_run`), as measuring them takes a device and up to a GiB of it.
        let environment = Environment {
            limits: Some(crate::machine::limits().clone()),
            machine: self.machine.clone(),
            ..Environment::capture_without_limits(self.mode(), gpu)
        };
        Report::new(environment, Vec::new())
    }

    fn depth(&self) -> table::Depth {
        if self.verbose {
            table::Depth::Verbose
        } else {
            table::Depth::Reader
        }
    }

    fn shows_progress(&self) -> bool {
        !self.quiet && std::io::stderr().is_terminal()
    }

    fn mode(&self) -> Mode {
        self.engine.unwrap_or(Mode::Threaded)
    }
}
