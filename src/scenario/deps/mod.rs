//! `deps`: the chapter's exercise "try tasks with more complex data dependencies: are the
//! results still correct, and is it faster?".
//!
//! A seeded random DAG over `width` slots. Each op reads one or two slots and either writes a
//! new value into a slot (a product `(x · y) / 4n + 3/4` or a mix `(x + y) / 2`) or updates a slot
//! **in place** (`x ← (x + y) / 2` on the slot's existing var), on a device chosen by the seed.
//! The in-place updates make the engine honour write-after-read and write-after-write order,
//! not only read-after-write. Every run starts from fresh copies of the inputs. The same
//! program runs op by op (each op waited for: no overlap at all) and pushed at once (the
//! engine finds the parallelism); the results must be bit-identical.
//!
//! The lower bound comes from each parallel sample's own trace: the run times of its ops and
//! the dependencies between them (rebuilt from the vars each op read and wrote). No schedule
//! of those ops can finish before max(critical path, work / devices), so a sample faster than
//! its bound would mean the engine broke a dependency; the check says so.
//!
//! With `--device cuda` the same program runs on one GPU (`gpu.rs`): op by op and pushed at
//! once on one compute stream, then pushed at once on `--streams` streams (engine lanes),
//! ordered by events where one reads or overwrites what another used (`plan.rs` says which).

mod bound;
mod explain;
#[cfg(feature = "cuda")]
mod gpu;
mod measure;
// Without the `cuda` feature the plan is only tested.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
mod plan;
mod program;

use explain::LESSON;

use super::kit::{self, check_matrices, number, ratio, seconds};
use super::{Choice, DeviceChoice, Params, RunContext, Scenario, ScenarioError};
use crate::report::{Better, FigureSpec, RunRecord};

const ASYNCHRONY_SPEEDUP: FigureSpec = ratio("asynchrony_speedup", Better::Higher);
const PARALLELISM_SPEEDUP: FigureSpec = ratio("parallelism_speedup", Better::Higher);
const PARALLEL_SPEEDUP: FigureSpec = ratio("parallel_speedup", Better::Higher);
const WORK_S: FigureSpec = seconds("work_s", Better::Neither);
const CRITICAL_PATH_S: FigureSpec = seconds("critical_path_s", Better::Neither);
const LOWER_BOUND_S: FigureSpec = seconds("lower_bound_s", Better::Neither);
const PARALLEL_OVER_BOUND_RATIO: FigureSpec = ratio("parallel_over_bound_ratio", Better::Lower);
const PARALLEL_OVER_BOUND_RATIO_MIN: FigureSpec =
    number("parallel_over_bound_ratio_min", Better::Neither);
/// On the GPU: the ops of the program (copies included) that wait for an event of another
/// stream, by the plan.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
const PROGRAM_OPS_WAITING: FigureSpec = number("cross_stream_ops", Better::Neither);

/// The most compute streams `--streams` takes: CUDA's default of hardware work queues per
/// device (`CUDA_DEVICE_MAX_CONNECTIONS`) is 8; more streams share them.
const MAX_STREAMS: u64 = 16;

super::variant::variants! {
    /// What `deps` times: the two effects the chapter teaches, at the same cores in all.
    enum Timed {
        /// One device with every core; each op waited for before the next is pushed.
        OpByOp = "op-by-op",
        /// The same device, the whole DAG pushed at once: asynchrony alone.
        OneDevice = "one-device",
        /// `--devices` devices that split the cores, the whole DAG pushed at once: inter-op
        /// parallelism on top.
        Parallel = "parallel",
    }
}

pub struct Deps;

super::params::params! {
    struct Config {
        /// slots (variables) the DAG reads and writes
        width: usize = Int { min: 1, max: 1024 }, "8";
        /// ops in the DAG
        depth: usize = Int { min: 1, max: 100_000 }, "64";
        /// matrix size N of every slot (N×N float32)
        size: usize = Int { min: 1, max: 20_000 }, "200";
        /// CPU devices (lanes) the ops are spread over (--device cpu)
        devices: usize = Int { min: 1, max: 64 }, "2";
        /// cpu, or cuda: the ops on compute streams of one GPU (an error without a usable GPU,
        /// unless --fallback)
        device: DeviceChoice = Choice(DeviceChoice::WORDS), "cpu";
        /// compute streams (engine lanes) of the GPU the ops are spread over (--device cuda; on
        /// the CPU, --devices)
        streams: usize = Int { min: 1, max: MAX_STREAMS }, "1";
        /// seed of the DAG and of the data
        seed: u64 = Int { min: 0, max: u64::MAX }, "1";
    }
}

impl Config {
    /// `--streams` above 1 with `--device cpu`: refused, with the option that does it there.
    fn check_streams(&self) -> Result<(), ScenarioError> {
        if self.device == DeviceChoice::Cpu && self.streams > 1 {
            return Err(ScenarioError::Input(format!(
                "--streams {} spreads the ops over compute streams of a GPU and needs --device \
                 cuda; on the CPU, --devices spreads them over CPU devices (lanes)",
                self.streams
            )));
        }
        Ok(())
    }
}

static SPEC: super::Spec = super::Spec {
    name: "deps",
    about: "a seeded random DAG of matmul/add ops on several lanes vs op by op: identical results, speed-up, critical path",
    params: PARAMS,
    lesson: Some(LESSON),
    book: &[],
    sampling: kit::sampling_to_95(50, 2),
};

impl Scenario for Deps {
    fn spec(&self) -> &'static super::Spec {
        &SPEC
    }

    /// Its samples are a few hundred microseconds of engine hand-offs between threads, which
    /// follow where the OS places them: eight reruns of `scenarios/ci.toml` by one binary on a
    /// quiet 2-core VM read `one-device` from 140 to 237 µs (×1.7; results/compare-detection.md);
    /// a change between single runs counts past ×2.
    fn drift_between_runs(&self) -> Option<f64> {
        Some(1.0)
    }

    fn validate(&self, params: &Params) -> Result<(), ScenarioError> {
        let cfg = Config::of(params)?;
        cfg.check_streams()?;
        if cfg.device == DeviceChoice::Cuda {
            // Host memory: the inputs before their upload, and a reference's and a run's
            // slots read back for a comparison. The GPU's own memory is checked once it is open.
            let tensors = (cfg.width as u64).saturating_mul(3);
            check_matrices("deps with this --size", cfg.size as u64, tensors, None)?;
        }
        // Two sets of inputs (one device's and the split devices') and a run's copies of them,
        // a product's intermediate and its result per op (all may be pending at once), three
        // runs' slots held for a comparison, and each device's all-ones matrix.
        let tensors = (cfg.width as u64)
            .saturating_mul(6)
            .saturating_add((cfg.depth as u64).saturating_mul(2))
            .saturating_add(cfg.devices as u64 + 1);
        check_matrices("deps with this --size", cfg.size as u64, tensors, None)
    }

    fn run(&self, params: &Params, ctx: &RunContext) -> Result<RunRecord, ScenarioError> {
        let cfg = Config::of(params)?;
        cfg.check_streams()?;
        if cfg.device == DeviceChoice::Cpu {
            return measure::run_cpu(self, &cfg, params, ctx);
        }
        match kit::on_gpu(ctx)? {
            #[cfg(feature = "cuda")]
            kit::OnGpu::Gpu => gpu::run(self, &cfg, params, ctx),
            kit::OnGpu::Fallback(note) => {
                let mut run = measure::run_cpu(self, &cfg, params, ctx)?;
                let instead = format!(
                    "the DAG runs on --devices {} CPU devices as with --device cpu, not on \
                     --streams {} GPU streams",
                    cfg.devices, cfg.streams
                );
                kit::note_fallback(&mut run, &note, &instead);
                Ok(run)
            }
        }
    }
}
