//! `matmul`: GFLOP/s of one device, the building block that sweeps vary (sizes, threads).

mod explain;
mod measure;

use self::explain::{BOOK, LESSON};
use super::kit::{check_elements, check_threads, number, sampling_to_95};
use super::{Choice, DeviceChoice, ParamKind, Params, RunContext, Scenario, ScenarioError};
use crate::device::available_cores;
use crate::report::{Better, FigureSpec, RunRecord, Unit};
use serde_json::{Map, Value};

super::variant::variants! {
    enum Timed {
        /// --ops products, pushed, one wait.
        Matmul = "matmul",
    }
}

pub struct Matmul;

const DIM: ParamKind = ParamKind::Int {
    min: 0,
    max: 100_000,
};

const GFLOPS: FigureSpec = FigureSpec::new("gflops", Unit::Gflops, Better::Higher);
const GFLOPS_PER_THREAD: FigureSpec =
    FigureSpec::new("gflops_per_thread", Unit::Gflops, Better::Higher);
const THREADS: FigureSpec = number("threads", Better::Neither);
/// GFLOP/s over the machine's f32 FMA peak for the device's threads (CPU devices only).
const FRACTION_OF_PEAK: FigureSpec = number("fraction_of_peak", Better::Higher).against_limits();

super::params::params! {
    struct Config {
        /// square size N of the N×N matrices
        size: usize = Int { min: 1, max: 100_000 }, "2000";
        /// rows of A and C (0: --size)
        m: usize = DIM, "0";
        /// columns of A, rows of B (0: --size)
        k: usize = DIM, "0";
        /// columns of B and C (0: --size)
        n: usize = DIM, "0";
        /// products pushed per sample
        ops: u64 = Int { min: 1, max: 10_000 }, "10";
        /// cpu, or cuda (an error without a usable GPU, unless --fallback)
        device: DeviceChoice = Choice(DeviceChoice::WORDS), "cpu";
        /// threads of the CPU device (0: all cores, or --cpu-threads)
        threads: Option<usize> = Int { min: 0, max: 4096 }, "0" => |t: usize| Some(t).filter(|&t| t > 0);
    }
}

impl Config {
    /// m, k and n, each 0 resolved to `--size`.
    fn dims(&self) -> (usize, usize, usize) {
        let or_size = |dim| if dim == 0 { self.size } else { dim };
        (or_size(self.m), or_size(self.k), or_size(self.n))
    }

    /// Threads of the CPU device: `--threads`, or with 0 `--cpu-threads`, or all cores.
    fn threads(&self, ctx: &RunContext) -> usize {
        self.threads
            .unwrap_or_else(|| ctx.cpu_threads.unwrap_or_else(available_cores))
    }
}

static SPEC: super::Spec = super::Spec {
    name: "matmul",
    about: "GFLOP/s of one device's matrix product (sizes, threads, device): the sweeps' building block",
    params: PARAMS,
    lesson: Some(LESSON),
    book: BOOK,
    sampling: sampling_to_95(50, 2),
};

impl Scenario for Matmul {
    fn spec(&self) -> &'static super::Spec {
        &SPEC
    }

    /// Flops: 2·m·k·n per product, `ops` products (threads share the work, not add to it).
    fn work(&self, params: &Params) -> f64 {
        Config::of(params).map_or_else(
            |_| params.size_product(),
            |c| {
                let (m, k, n) = c.dims();
                2.0 * m as f64 * k as f64 * n as f64 * c.ops as f64
            },
        )
    }

    fn validate(&self, params: &Params) -> Result<(), ScenarioError> {
        let cfg = Config::of(params)?;
        let ((m, k, n), ops) = (cfg.dims(), cfg.ops);
        if let Some(threads) = cfg.threads {
            check_threads("--threads", threads)?;
        }
        // A, B and `ops` outputs alive at once; the check then holds A, B, C and host copies
        // of all three: 2(A + B) + (ops + 2) C at most.
        let (m, k, n) = (m as u64, k as u64, n as u64);
        let elements = m
            .checked_mul(k)
            .and_then(|ak| ak.checked_add(k.checked_mul(n)?))
            .and_then(|ab| ab.checked_mul(2))
            .and_then(|ab| ab.checked_add(m.checked_mul(n)?.checked_mul(ops.checked_add(2)?)?));
        check_elements(
            &format!("matmul {m}×{k} · {k}×{n} with {ops} outputs"),
            elements,
        )
    }

    fn resolved_params(&self, params: &Params, ctx: &RunContext) -> Map<String, Value> {
        let mut out = params.to_json();
        // Parameters that `validate` refused never get here; unread ones stay as given.
        let Ok(cfg) = Config::of(params) else {
            return out;
        };
        let (m, k, n) = cfg.dims();
        for (name, v) in [("m", m), ("k", k), ("n", n), ("threads", cfg.threads(ctx))] {
            out.insert(name.into(), v.into());
        }
        out
    }

    fn run(&self, params: &Params, ctx: &RunContext) -> Result<RunRecord, ScenarioError> {
        measure::products(self, params, ctx, &Config::of(params)?)
    }
}
