//! `run-copy`: overlapping computation with communication (book §13.3.2).
//!
//! `ops` products on the accelerator, each result then copied to host memory. The copies run on
//! the device's copy lane (its own stream on a GPU), so when pushed together the copy of y[i]
//! overlaps the computation of y[i+1] and the total approaches max(run, copy) plus one copy.

mod explain;
mod measure;
mod upload;

use explain::{BOOK, LESSON};
use upload::{Direction, HostMemory};

use super::kit::{check_matrices, number, ratio, seconds, SECONDS_PER_ROUND};
use super::{Choice, Params, RunContext, Scenario, ScenarioError};
use crate::report::{Better, FigureSpec, RunRecord, Unit};

const LOWER_BOUND_S: FigureSpec = seconds("lower_bound_s", Better::Neither);
const IDEAL_S: FigureSpec = seconds("ideal_s", Better::Neither);
const OVERLAP_EFFICIENCY: FigureSpec = number("overlap_efficiency", Better::Higher);
const SEQUENTIAL_OVER_OVERLAPPED_SPEEDUP: FigureSpec =
    ratio("sequential_over_overlapped_speedup", Better::Higher);
const COPY_GBYTES_PER_S: FigureSpec =
    FigureSpec::new("copy_gbytes_per_s", Unit::GbytesPerSecond, Better::Higher);
const OVERLAPPED_OVER_BOUND_RATIO: FigureSpec = ratio("overlapped_over_bound_ratio", Better::Lower);
const OVERLAPPED_OVER_IDEAL_RATIO: FigureSpec = ratio("overlapped_over_ideal_ratio", Better::Lower);

super::variant::variants! {
    enum Timed {
        /// The products alone.
        Run = "run",
        /// The copies alone, of products computed before.
        Copy = "copy",
        /// All products, a wait, then all copies.
        RunThenCopy = "run-then-copy",
        /// Product i+1 and the copy of y[i] pushed together.
        Overlapped = "overlapped",
    }
}

pub struct RunCopy;

super::params::params! {
    #[derive(Clone, Copy)]
    struct Config {
        /// products, each copied to the host
        ops: u64 = Int { min: 1, max: 1000 }, "10";
        /// matrix size N (N×N float32)
        size: usize = Int { min: 1, max: 100_000 }, "2000";
        /// d2h (products copied to host), h2d (inputs uploaded, then multiplied) or both
        /// (upload x[i+1] while computing on x[i] and downloading y[i-1])
        direction: Direction = Choice(Direction::WORDS), "d2h";
        /// where uploads read from: pinned (page-locked, pooled) or pageable; for h2d and both
        host_memory: HostMemory = Choice(HostMemory::WORDS), "pinned";
    }
}

impl Config {
    /// `--host-memory pageable` names where uploads read from: with downloads only it would
    /// change nothing, so it is refused rather than ignored.
    fn check(&self) -> Result<(), ScenarioError> {
        if self.direction == Direction::D2h && self.host_memory == HostMemory::Pageable {
            return Err(ScenarioError::Input(
                "--host-memory pageable applies to uploads (--direction h2d or both); \
                 downloads land in pinned memory"
                    .into(),
            ));
        }
        Ok(())
    }
}

static SPEC: super::Spec = super::Spec {
    name: "run-copy",
    about:
        "matmuls on the accelerator, each copied to host: copy of y[i] overlaps computing y[i+1]",
    params: PARAMS,
    lesson: Some(LESSON),
    book: BOOK,
    sampling: SECONDS_PER_ROUND,
};

impl Scenario for RunCopy {
    fn spec(&self) -> &'static super::Spec {
        &SPEC
    }

    /// The GPU whenever one is usable (a CPU device stands in without one).
    fn may_use_gpu(&self, _params: &Params) -> bool {
        true
    }
    fn validate(&self, params: &Params) -> Result<(), ScenarioError> {
        let cfg = Config::of(params)?;
        cfg.check()?;
        let Config { ops, size, .. } = cfg;
        // x, the products kept for the copy variant, the products of the running variant, and
        // their host copies (with uploads: the host inputs too).
        check_matrices(
            "run-copy with this --size",
            size as u64,
            ops.saturating_mul(4).saturating_add(1),
            None,
        )
    }

    fn run(&self, params: &Params, ctx: &RunContext) -> Result<RunRecord, ScenarioError> {
        let cfg = Config::of(params)?;
        cfg.check()?;
        if cfg.direction != Direction::D2h {
            return upload::run(self, &cfg, params.to_json(), ctx);
        }
        measure::run_and_copy(self, params, ctx, &cfg)
    }
}
