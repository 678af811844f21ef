//! `matmul`: GFLOP/s of one device, the building block that sweeps vary (sizes, threads).

mod explain;
mod measure;

use std::time::Duration;

use self::explain::{BOOK, LESSON};
use super::kit::{check_elements, check_threads};
use super::{
    Choice, DeviceChoice, ParamError, ParamKind, ParamSpec, Params, RunContext, Scenario,
    ScenarioError,
};
use crate::device::available_cores;
use crate::harness::SamplerConfig;
use crate::machine::limits;
use crate::report::{Better, FigureSpec, RunRecord, Unit};
use serde_json::{Map, Value};

super::variant::variants! {
    /// What `matmul` times.
    enum Timed {
        /// --ops products, pushed, one wait.
        Matmul = "matmul",
    }
}

/// The `matmul` scenario.
pub struct Matmul;

const DIM: ParamKind = ParamKind::Int {
    min: 0,
    max: 100_000,
};

/// The derived figures this scenario records, each with its unit and direction.
const GFLOPS: FigureSpec = FigureSpec::new("gflops", Unit::Gflops, Better::Higher);
const GFLOPS_PER_THREAD: FigureSpec =
    FigureSpec::new("gflops_per_thread", Unit::Gflops, Better::Higher);
const THREADS: FigureSpec = FigureSpec::new("threads", Unit::Number, Better::Neither);
/// GFLOP/s over the machine's f32 FMA peak for the device's threads (CPU devices only).
const FRACTION_OF_PEAK: FigureSpec =
    FigureSpec::new("fraction_of_peak", Unit::Number, Better::Higher).against_limits();

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "size",
        help: "square size N of the N×N matrices",
        kind: ParamKind::Int {
            min: 1,
            max: 100_000,
        },
        default: "2000",
    },
    ParamSpec {
        name: "m",
        help: "rows of A and C (0: --size)",
        kind: DIM,
        default: "0",
    },
    ParamSpec {
        name: "k",
        help: "columns of A, rows of B (0: --size)",
        kind: DIM,
        default: "0",
    },
    ParamSpec {
        name: "n",
        help: "columns of B and C (0: --size)",
        kind: DIM,
        default: "0",
    },
    ParamSpec {
        name: "ops",
        help: "products pushed per sample",
        kind: ParamKind::Int {
            min: 1,
            max: 10_000,
        },
        default: "10",
    },
    ParamSpec {
        name: "device",
        help: "cpu, or cuda (an error without a usable GPU, unless --fallback)",
        kind: ParamKind::Choice(DeviceChoice::WORDS),
        default: "cpu",
    },
    ParamSpec {
        name: "threads",
        help: "threads of the CPU device (0: all cores, or --cpu-threads)",
        kind: ParamKind::Int { min: 0, max: 4096 },
        default: "0",
    },
];

/// The parameters, read once.
struct Config {
    /// m, k, n with the 0s resolved to `--size`.
    dims: (usize, usize, usize),
    ops: u64,
    device: DeviceChoice,
    /// `--threads`; `None` for 0 (`--cpu-threads`, or all cores).
    threads: Option<usize>,
}

impl Config {
    fn of(params: &Params) -> Result<Config, ParamError> {
        let size = params.count("size")?;
        let pick = |name: &str| -> Result<usize, ParamError> {
            Ok(match params.count(name)? {
                0 => size,
                v => v,
            })
        };
        Ok(Config {
            dims: (pick("m")?, pick("k")?, pick("n")?),
            ops: params.int("ops")?,
            device: params.choice("device")?,
            threads: Some(params.count("threads")?).filter(|&t| t > 0),
        })
    }

    /// Threads of the CPU device: `--threads`, or with 0 `--cpu-threads`, or all cores.
    fn threads(&self, ctx: &RunContext) -> usize {
        self.threads
            .unwrap_or_else(|| ctx.cpu_threads.unwrap_or_else(available_cores))
    }
}

/// What `matmul` declares.
static SPEC: super::Spec = super::Spec {
    name: "matmul",
    about: "GFLOP/s of one device's matrix product (sizes, threads, device): the sweeps' building block",
    params: PARAMS,
    lesson: Some(LESSON),
    book: BOOK,
    sampling: SamplerConfig {
            warmup: 1,
            min_samples: crate::harness::stats::SAMPLES_FOR_95,
            max_samples: 50,
            min_time: Duration::from_secs(2),
            max_time: Duration::from_secs(30),
        },
};

impl Scenario for Matmul {
    fn spec(&self) -> &'static super::Spec {
        &SPEC
    }

    /// Flops: 2·m·k·n per product, `ops` products (threads share the work, not add to it).
    fn work(&self, params: &Params) -> f64 {
        Config::of(params).map_or_else(
            |_| params.size_product(),
            |c| 2.0 * c.dims.0 as f64 * c.dims.1 as f64 * c.dims.2 as f64 * c.ops as f64,
        )
    }

    fn validate(&self, params: &Params) -> Result<(), ScenarioError> {
        let Config {
            dims: (m, k, n),
            ops,
            threads,
            ..
        } = Config::of(params)?;
        if let Some(threads) = threads {
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
        let (m, k, n) = cfg.dims;
        for (name, v) in [("m", m), ("k", k), ("n", n), ("threads", cfg.threads(ctx))] {
            out.insert(name.into(), v.into());
        }
        out
    }

    fn run(&self, params: &Params, ctx: &RunContext) -> Result<RunRecord, ScenarioError> {
        let cfg = Config::of(params)?;
        // The machine's FMA peak, measured once per process: before the device's threads
        // exist, so the probe has the cores to itself (the CLI has measured it already).
        let fma = &limits().fma;
        let mut measured = measure::products(self, params, ctx, &cfg)?;
        explain::explain_run(&mut measured, fma);
        Ok(measured.run)
    }
}
