//! `cpu-gpu`: automatic parallelism across devices (book §13.3.1).
//!
//! `run(x)` is `ops` products `x · x`. Device A is a CPU device, device B the GPU or, without
//! one, a second CPU device. Pushing `run(x_a)` and `run(x_b)` back to back with no wait
//! between lets the engine run them at once: the total approaches max(a, b) rather than a + b.
//! Pushing both workloads to one device gains nothing: its lane runs them one after the other.

mod checks;
mod explain;
mod measure;

use super::kit::{check_matrices, number, ratio, seconds, SECONDS_PER_ROUND};
use super::{Params, RunContext, Scenario, ScenarioError};
use crate::report::{Better, FigureSpec, RunRecord, Unit};

const SEQUENTIAL_S: FigureSpec = seconds("sequential_s", Better::Neither);
const PARALLEL_SPEEDUP: FigureSpec = ratio("parallel_speedup", Better::Higher);
const OVERLAP_EFFICIENCY: FigureSpec = number("overlap_efficiency", Better::Higher);
const ONE_DEVICE_SPEEDUP: FigureSpec = ratio("one_device_speedup", Better::Higher);
const PARALLELISM_SPEEDUP: FigureSpec = ratio("parallelism_speedup", Better::Higher);
const A_GFLOPS: FigureSpec = FigureSpec::new("a_gflops", Unit::Gflops, Better::Higher);
const B_GFLOPS: FigureSpec = FigureSpec::new("b_gflops", Unit::Gflops, Better::Higher);
const TRACED_PARALLEL_S: FigureSpec = seconds("traced_parallel_s", Better::Neither);
const TRACED_OVERLAP_S: FigureSpec = seconds("traced_overlap_s", Better::Neither);
const BARE_THREADS_OVERLAP_EFFICIENCY: FigureSpec =
    number("bare_threads_overlap_efficiency", Better::Higher);

pub struct CpuGpu;

super::params::params! {
    struct Config {
        /// products per run(x)
        ops: u64 = Int { min: 1, max: 1000 }, "10";
        /// matrix size on the CPU device A (and on the CPU fallback for B)
        cpu_size: usize = Int { min: 1, max: 50_000 }, "2000";
        /// matrix size on the GPU (device B when a GPU is present)
        gpu_size: usize = Int { min: 1, max: 100_000 }, "6000";
    }
}

super::variant::variants! {
    enum Timed {
        /// `run(x)` on device A (the CPU) alone.
        AAlone = "a-alone",
        /// `run(x)` on device B (the GPU, or a second CPU device) alone.
        BAlone = "b-alone",
        /// Both pushed back to back, no wait between.
        Parallel = "parallel",
        /// Both workloads on device B alone.
        OneDevice = "one-device",
    }
}

static SPEC: super::Spec = super::Spec {
    name: "cpu-gpu",
    about: "matmuls on two devices, alone and pushed together: does the total approach max(a, b)?",
    params: PARAMS,
    lesson: Some(explain::LESSON),
    book: explain::BOOK,
    sampling: SECONDS_PER_ROUND,
};

impl Scenario for CpuGpu {
    fn spec(&self) -> &'static super::Spec {
        &SPEC
    }

    /// The GPU whenever one is usable (a CPU device stands in without one).
    fn may_use_gpu(&self, _params: &Params) -> bool {
        true
    }
    fn validate(&self, params: &Params) -> Result<(), ScenarioError> {
        let cfg = Config::of(params)?;
        // Host, on the CPU fallback: x_a and x_b, their copies on the one device, the outputs
        // of both runs, and the check's host copies of an input and an output.
        check_matrices(
            "cpu-gpu with this --cpu-size",
            cfg.cpu_size as u64,
            cfg.ops.saturating_mul(2).saturating_add(6),
            None,
        )
    }

    fn run(&self, params: &Params, ctx: &RunContext) -> Result<RunRecord, ScenarioError> {
        measure::devices(self, params, ctx, Config::of(params)?)
    }
}
