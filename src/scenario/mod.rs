//! Scenarios: the experiments of the chapter, one file each, and their registry.
//!
//! A scenario declares its parameters (so the CLI, suites and sweeps parse them alike), checks
//! them before anything is allocated, runs its variants through the [`Sampler`], verifies its
//! results against a sequential reference, and returns a [`RunRecord`].

pub mod allreduce;
pub mod async_loop;
pub mod backend;
pub mod book;
pub mod collective;
pub mod command;
pub mod cpu_gpu;
pub mod data_parallel;
pub mod deps;
pub(crate) mod gpu_clocks;
#[cfg(feature = "cuda")]
pub(crate) mod gpu_time;
pub mod hybridize;
pub mod journal_header;
pub mod journal_lock;
pub mod kit;
pub mod matmul;
pub mod memory;
pub mod params;
pub mod registry;
pub mod run_copy;
pub mod suite;
pub mod sweep;
pub mod variant;

use std::sync::Arc;

pub use params::{Choice, DeviceChoice, ParamError, ParamKind, ParamSpec, ParamValue, Params};
pub use registry::{declared_defaults, find, registry};

use crate::device::{DeviceError, RuntimeOptions};
use crate::engine::EngineError;
use crate::harness::sampler::Progress;
use crate::harness::{Sampler, SamplerConfig};
use crate::report::{BookFigure, RunRecord};
use crate::tensor::TensorError;
pub use kit::LessonSpec;

/// Why a scenario could not run.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// A parameter is malformed or out of range (a usage error).
    #[error(transparent)]
    Param(#[from] ParamError),
    /// The parameters are well-formed but cannot be run here, e.g. too much memory (a usage error).
    #[error("{0}")]
    Input(String),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Tensor(#[from] TensorError),
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// A command of a suite's command entry did not run to a successful exit.
    #[error(transparent)]
    Command(#[from] command::CommandError),
}

impl ScenarioError {
    /// True for errors in what the user asked for (exit code 2), false for failures while running.
    pub fn is_usage(&self) -> bool {
        matches!(self, ScenarioError::Param(_) | ScenarioError::Input(_))
    }
}

/// Overrides of a scenario's sampling defaults (from the command line or a suite).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SamplingOverrides {
    pub warmup: Option<usize>,
    pub min_samples: Option<usize>,
    pub max_samples: Option<usize>,
    pub min_time: Option<std::time::Duration>,
    pub max_time: Option<std::time::Duration>,
}

impl SamplingOverrides {
    /// These overrides, falling back to `other`'s where unset.
    pub fn or(&self, other: &SamplingOverrides) -> SamplingOverrides {
        SamplingOverrides {
            warmup: self.warmup.or(other.warmup),
            min_samples: self.min_samples.or(other.min_samples),
            max_samples: self.max_samples.or(other.max_samples),
            min_time: self.min_time.or(other.min_time),
            max_time: self.max_time.or(other.max_time),
        }
    }

    /// Apply to a scenario's defaults. Raising `min_samples` above the default maximum raises
    /// the maximum with it, so `--min-samples 500` alone does what it says.
    pub fn apply(&self, mut c: SamplerConfig) -> SamplerConfig {
        if let Some(v) = self.warmup {
            c.warmup = v;
        }
        let samples = (self.min_samples, self.max_samples);
        let time = (self.min_time, self.max_time);
        overridden(&mut c.min_samples, &mut c.max_samples, samples);
        overridden(&mut c.min_time, &mut c.max_time, time);
        c
    }
}

/// A range's bounds with `given`'s applied: a raised minimum raises the maximum with it, and a
/// lowered maximum lowers the minimum unless that was given too.
fn overridden<T: Ord + Copy>(min: &mut T, max: &mut T, given: (Option<T>, Option<T>)) {
    if let Some(v) = given.0 {
        (*min, *max) = (v, (*max).max(v));
    }
    if let Some(v) = given.1 {
        *max = v;
        if given.0.is_none() {
            *min = (*min).min(v);
        }
    }
}

/// Callback for sampling progress: (scenario name, progress).
pub type ProgressFn = Arc<dyn Fn(&str, Progress) + Send + Sync>;

/// Everything a scenario needs besides its parameters.
#[derive(Clone, Default)]
pub struct RunContext {
    pub runtime: RuntimeOptions,
    pub sampling: SamplingOverrides,
    /// Threads for CPU devices (`--cpu-threads`); `None` splits the machine's cores.
    pub cpu_threads: Option<usize>,
    pub progress: Option<ProgressFn>,
    /// When set, one extra traced repeat of every variant is recorded here (`--trace`,
    /// `--timeline`).
    pub traces: Option<Arc<std::sync::Mutex<Vec<crate::report::TracedRun>>>>,
    /// Accept a CPU device where `--device cuda` asked for a GPU that cannot be used
    /// (`--fallback`); without it that is an error. `cpu-gpu` and `run-copy` always fall back:
    /// their CPU fallback is part of what they show.
    pub gpu_fallback: bool,
}

impl RunContext {
    /// Threads for each of `devices` CPU devices: `--cpu-threads` each, or the machine's cores
    /// split between them.
    pub fn cpu_split(&self, devices: usize) -> Vec<usize> {
        match self.cpu_threads {
            Some(t) => vec![t; devices],
            None => crate::device::split_cores(crate::device::available_cores(), devices),
        }
    }

    /// Sample `variants` with `scenario`'s defaults and the overrides applied; then, when
    /// traces are wanted, run each variant once more with the engine recording its ops.
    pub fn sample(
        &self,
        scenario: &dyn Scenario,
        engine: &crate::engine::Engine,
        variants: &mut [crate::harness::Variant<'_, ScenarioError>],
    ) -> Result<Vec<crate::harness::Summary>, ScenarioError> {
        let summaries = self.sample_plain(scenario, variants)?;
        if let Some(traces) = &self.traces {
            for v in variants.iter_mut() {
                engine.wait_all()?;
                let _ = engine.take_trace();
                engine.set_tracing(true);
                let outcome = v.run_once();
                engine.set_tracing(false);
                outcome?;
                let records = engine.take_trace();
                traces
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(crate::report::TracedRun {
                        scenario: scenario.name().to_string(),
                        variant: v.name.clone(),
                        records,
                    });
            }
        }
        Ok(summaries)
    }

    /// Sample `variants` with `scenario`'s defaults and the overrides applied, for work that
    /// pushes nothing to an engine (a program's own code): no traced repeat.
    pub fn sample_plain(
        &self,
        scenario: &dyn Scenario,
        variants: &mut [crate::harness::Variant<'_, ScenarioError>],
    ) -> Result<Vec<crate::harness::Summary>, ScenarioError> {
        let config = self.sampling.apply(scenario.sampling());
        let name = scenario.name();
        let report = self.progress.clone();
        let f = move |p: Progress| {
            if let Some(r) = &report {
                r(name, p)
            }
        };
        Sampler::new(config).with_progress(&f).run(variants)
    }
}

/// What a scenario declares, once: everything the CLI, suites, sweeps, `list`, `help` and the
/// lesson table read about it without running it.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The command name (`async`, `cpu-gpu`).
    pub name: &'static str,
    /// One line for `parbench list`.
    pub about: &'static str,
    /// Declared parameters with defaults.
    pub params: &'static [ParamSpec],
    /// The chapter's lesson this scenario puts to the test: its section and claim (none for a
    /// program's own scenario, which tests no lesson of the book).
    pub lesson: Option<LessonSpec>,
    /// The figures the book printed for this experiment, with their sources; none where its
    /// section printed none.
    pub book: &'static [BookFigure],
    /// Default sampling for this experiment's run time.
    pub sampling: SamplerConfig,
}

/// One experiment: its declaration ([`Spec`]) and how it validates and runs.
pub trait Scenario: Send + Sync {
    fn spec(&self) -> &'static Spec;
    fn name(&self) -> &'static str {
        self.spec().name
    }
    fn about(&self) -> &'static str {
        self.spec().about
    }
    fn params(&self) -> &'static [ParamSpec] {
        self.spec().params
    }
    fn sampling(&self) -> SamplerConfig {
        self.spec().sampling.clone()
    }
    /// The parameters as a report records them: where a value stands for another (`0`: the
    /// same as `--size`, all cores), the value that runs, so headers, compare keys and legends
    /// name what was measured.
    fn resolved_params(
        &self,
        params: &Params,
        _ctx: &RunContext,
    ) -> serde_json::Map<String, serde_json::Value> {
        params.to_json()
    }
    /// How much work a point of these parameters does, in any unit: a sweep's estimate scales
    /// its first point's time by it. By default the product of the sizes and counts
    /// ([`Params::size_product`]); a scenario whose work grows otherwise says so.
    fn work(&self, params: &Params) -> f64 {
        params.size_product()
    }
    /// Reject parameters that cannot run here (memory estimates), before anything is allocated.
    fn validate(&self, _params: &Params) -> Result<(), ScenarioError> {
        Ok(())
    }
    /// Whether this run spans processes (an MPI job): the command line then starts MPI before
    /// anything prints, and only rank 0 prints and writes.
    fn distributed(&self, _params: &Params) -> bool {
        false
    }
    /// How far two runs of one binary may read apart beyond their own intervals, where more
    /// than `compare`'s default ([`crate::report::noise::UNLEARNED_DRIFT`]): recorded in each
    /// run, so `compare` and `history` call a smaller change inconclusive, not a regression.
    fn drift_between_runs(&self) -> Option<f64> {
        None
    }
    /// Whether this run may use a GPU (`--device cuda` by default): only then is the GPU's
    /// state watched over it, so a CPU-only run on a GPU machine does not sample the GPU.
    fn may_use_gpu(&self, params: &Params) -> bool {
        matches!(params.device(), Ok(Some(DeviceChoice::Cuda)))
    }
    /// Run the experiment, with parameters that [`validate`](Scenario::validate) accepted
    /// (the command line validates a whole plan before anything runs).
    fn run(&self, params: &Params, ctx: &RunContext) -> Result<RunRecord, ScenarioError>;
    /// Validate, then run: the one call for a library user.
    fn execute(&self, params: &Params, ctx: &RunContext) -> Result<RunRecord, ScenarioError> {
        self.validate(params)?;
        self.run(params, ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn overrides_keep_bounds_consistent() {
        let base = SamplerConfig::default();
        let c = SamplingOverrides {
            min_samples: Some(500),
            ..Default::default()
        }
        .apply(base.clone());
        assert_eq!((c.min_samples, c.max_samples), (500, 500));
        let c = SamplingOverrides {
            max_samples: Some(3),
            ..Default::default()
        }
        .apply(base.clone());
        assert_eq!((c.min_samples, c.max_samples), (3, 3));
        let c = SamplingOverrides {
            max_time: Some(Duration::from_millis(10)),
            ..Default::default()
        }
        .apply(base);
        assert!(c.min_time <= c.max_time);
        assert!(c.validate().is_ok());
    }

    /// The GPU's state is watched over a run that may use the GPU: `--device cuda`, or the
    /// scenarios that take the GPU whenever one is usable; not over a CPU-only run. And every
    /// scenario reads its parameters into its own configuration struct, where a misspelt or
    /// mistyped lookup is an error: validating the defaults reads every one.
    #[test]
    fn runs_that_may_use_the_gpu_are_the_ones_watched() {
        let always = ["cpu-gpu", "run-copy"];
        for s in registry() {
            let defaults = Params::parse(s.name(), s.params(), &[]).expect("defaults parse");
            if let Err(e) = s.validate(&defaults) {
                panic!("{} refuses its own defaults: {e}", s.name());
            }
            assert_eq!(
                s.may_use_gpu(&defaults),
                always.contains(&s.name()),
                "{}",
                s.name()
            );
            if s.params().iter().any(|p| p.name == params::DEVICE_PARAM) {
                let cuda = [(params::DEVICE_PARAM.to_string(), "cuda".to_string())];
                let on_gpu = Params::parse(s.name(), s.params(), &cuda).unwrap();
                assert!(s.may_use_gpu(&on_gpu), "{} --device cuda", s.name());
            }
        }
    }

    /// Every scenario states the lesson it tests, and every figure it quotes from the book
    /// names its edition, section and the seed text it was read from.
    #[test]
    fn every_scenario_declares_a_lesson_and_every_book_figure_its_source() {
        for s in registry() {
            let spec = s.spec();
            let lesson = spec
                .lesson
                .as_ref()
                .expect("every built-in scenario tests a lesson");
            let source = &lesson.source;
            let named = !source.section.is_empty() && source.seed.ends_with(".txt");
            assert!(
                named && !lesson.claim.is_empty(),
                "{}: {lesson:?}",
                s.name()
            );
            for f in spec.book {
                let src = &f.source;
                let named = !src.section.is_empty() && src.seed.len() > 4;
                let named = named && src.seed.ends_with(".txt");
                assert!(
                    named && !f.what.is_empty() && f.value > 0.0,
                    "{}: {f:?}",
                    s.name()
                );
            }
        }
    }

    #[test]
    fn execute_validates_before_anything_runs() {
        // 100,000² f32 matrices are 40 GB each: refused as a usage error, nothing allocated.
        let m = find("matmul").expect("matmul");
        let p = Params::parse("matmul", m.params(), &[("size".into(), "100000".into())])
            .expect("params");
        let err = m
            .execute(&p, &RunContext::default())
            .expect_err("too big to run");
        assert!(err.is_usage(), "{err}");
    }

    /// Sizes that do not fit are refused before anything is allocated, with a usage error
    /// (exit 2), never an abort: each parameter at its largest allowed value alone must be
    /// accepted or refused as a usage error, and all of them at once refused.
    #[test]
    fn every_scenario_refuses_its_largest_sizes_before_allocating() {
        for s in registry() {
            let validate = |given: &[(String, String)]| {
                // A value refused by the parser (a shape whose elements overflow) is refused.
                let p = Params::parse(s.name(), s.params(), given)?;
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.validate(&p)))
                    .unwrap_or_else(|_| panic!("{} panicked validating {given:?}", s.name()))
            };
            let mut all = Vec::new();
            for spec in s.params() {
                let Some(value) = spec.largest() else {
                    continue;
                };
                let given = [(spec.name.to_string(), value)];
                if let Err(e) = validate(&given) {
                    assert!(e.is_usage(), "{} --{}: {e}", s.name(), spec.flag());
                }
                all.extend(given);
            }
            match validate(&all) {
                Err(e) => assert!(e.is_usage(), "{}: {e}", s.name()),
                Ok(()) => panic!("{} accepts every parameter at its largest", s.name()),
            }
        }
    }
}
