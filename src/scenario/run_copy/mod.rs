//! `run-copy`: overlapping computation with communication (book §13.3.2).
//!
//! `ops` products on the accelerator, each result then copied to host memory. The copies run on
//! the device's copy lane (its own stream on a GPU), so when pushed together the copy of y[i]
//! overlaps the computation of y[i+1] and the total approaches max(run, copy) plus one copy.

mod explain;
mod lesson;
mod upload;

use std::cell::RefCell;

use explain::{explain, CopyOverlap};
use lesson::{conclude, BOOK, LESSON};
use upload::{Direction, HostMemory};

use super::kit::{
    accelerator, check_matrices, host_ordered, matmul_error, matmul_tolerance, run_matmuls, traced,
    SECONDS_PER_ROUND,
};
use super::{
    Choice, ParamError, ParamKind, ParamSpec, Params, RunContext, Scenario, ScenarioError,
};
use crate::device::{available_cores, Runtime};
use crate::engine::{trace, LaneId};
use crate::harness::stats::median;
use crate::harness::{synced, Variant};
use crate::report::evidence::Estimate;
use crate::report::{Better, FigureSpec, RunRecord, Unit};
use crate::tensor::Tensor;

/// The derived figures this scenario records, each with its unit and direction.
const LOWER_BOUND_S: FigureSpec = FigureSpec::new("lower_bound_s", Unit::Seconds, Better::Neither);
const IDEAL_S: FigureSpec = FigureSpec::new("ideal_s", Unit::Seconds, Better::Neither);
const OVERLAP_EFFICIENCY: FigureSpec =
    FigureSpec::new("overlap_efficiency", Unit::Number, Better::Higher);
const SEQUENTIAL_OVER_OVERLAPPED_SPEEDUP: FigureSpec = FigureSpec::new(
    "sequential_over_overlapped_speedup",
    Unit::Ratio,
    Better::Higher,
);
const COPY_GBYTES_PER_S: FigureSpec =
    FigureSpec::new("copy_gbytes_per_s", Unit::GbytesPerSecond, Better::Higher);
const OVERLAPPED_OVER_BOUND_RATIO: FigureSpec =
    FigureSpec::new("overlapped_over_bound_ratio", Unit::Ratio, Better::Lower);
const OVERLAPPED_OVER_IDEAL_RATIO: FigureSpec =
    FigureSpec::new("overlapped_over_ideal_ratio", Unit::Ratio, Better::Lower);

super::variant::variants! {
    /// What `run-copy` times.
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

/// The `run-copy` scenario.
pub struct RunCopy;

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "ops",
        help: "products, each copied to the host",
        kind: ParamKind::Int { min: 1, max: 1000 },
        default: "10",
    },
    ParamSpec {
        name: "size",
        help: "matrix size N (N×N float32)",
        kind: ParamKind::Int {
            min: 1,
            max: 100_000,
        },
        default: "2000",
    },
    ParamSpec {
        name: "direction",
        help: "d2h (products copied to host), h2d (inputs uploaded, then multiplied) or both \
               (upload x[i+1] while computing on x[i] and downloading y[i-1])",
        kind: ParamKind::Choice(Direction::WORDS),
        default: "d2h",
    },
    ParamSpec {
        name: "host_memory",
        help: "where uploads read from: pinned (page-locked, pooled) or pageable; for h2d and both",
        kind: ParamKind::Choice(HostMemory::WORDS),
        default: "pinned",
    },
];

/// The parameters, read once.
#[derive(Clone, Copy)]
struct Config {
    ops: u64,
    size: usize,
    direction: Direction,
    host_memory: HostMemory,
}

impl Config {
    fn of(params: &Params) -> Result<Config, ParamError> {
        Ok(Config {
            ops: params.int("ops")?,
            size: params.count("size")?,
            direction: params.choice("direction")?,
            host_memory: params.choice("host_memory")?,
        })
    }

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

/// The accelerator `run-copy` runs on: on the CPU fallback the copy lane is a thread of its
/// own, so leave it a core.
fn accelerator_for(ctx: &RunContext) -> super::kit::ChosenDevice {
    let fallback_threads = ctx
        .cpu_threads
        .unwrap_or_else(|| available_cores().saturating_sub(1).max(1));
    accelerator(
        "cpu:0 (its copy lane moves results into separate host buffers)",
        fallback_threads,
    )
}

/// What `run-copy` declares.
static SPEC: super::Spec = super::Spec {
    name: "run-copy",
    about:
        "matmuls on the accelerator, each copied to host: copy of y[i] overlaps computing y[i+1]",
    params: PARAMS,
    lesson: LESSON,
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
        let Config { ops, size, .. } = cfg;
        let acc = accelerator_for(ctx);
        // Host order: the trace-derived bound reads each GPU op's span as its GPU time.
        let rt = Runtime::new(&host_ordered(&ctx.runtime), &[acc.request])?;
        let (engine, device) = (&rt.engine, &rt.devices[0]);
        if let Some(free) = device.free_memory() {
            check_matrices("run-copy on the GPU", size as u64, 1 + 2 * ops, Some(free))?;
        }
        let x = Tensor::uniform(engine, device, &[size, size], 1);
        let kept = run_matmuls(&x, ops)?;
        engine.wait_all()?;

        // Per traced `overlapped` sample: (its time, the busier of its two lanes).
        let bounds: RefCell<Vec<(f64, f64)>> = RefCell::new(Vec::new());
        let copy_all = |ys: &[Tensor]| ys.iter().map(Tensor::copy_to_host).collect::<Vec<_>>();
        let (x, kept, bounds, copy_all) = (&x, &kept, &bounds, &copy_all);
        let mut variants: Vec<Variant<ScenarioError>> = Timed::ALL
            .iter()
            .map(|&v| -> Variant<ScenarioError> {
                match v {
                    Timed::Run => Variant::new(v.name(), move || {
                        synced(engine, || Ok::<_, ScenarioError>(run_matmuls(x, ops)?))
                    }),
                    Timed::Copy => Variant::new(v.name(), move || {
                        synced(engine, || Ok::<_, ScenarioError>(copy_all(kept)))
                    }),
                    Timed::RunThenCopy => Variant::new(v.name(), move || {
                        synced(engine, || {
                            let ys = run_matmuls(x, ops)?;
                            engine.wait_all()?;
                            let mut all = copy_all(&ys);
                            all.extend(ys);
                            Ok(all)
                        })
                    }),
                    Timed::Overlapped => Variant::new(v.name(), move || {
                        let (wall, records) = traced(engine, || {
                            synced(engine, || {
                                let mut all = Vec::new();
                                for _ in 0..ops {
                                    let y = x.matmul(x)?;
                                    all.push(y.copy_to_host());
                                    all.push(y);
                                }
                                Ok::<_, ScenarioError>(all)
                            })
                        })?;
                        if let Some(records) = records {
                            let busy = |lane: LaneId| trace::lane_busy_ns(&records, lane.index());
                            let bound = busy(device.compute).max(busy(device.copy)) as f64 * 1e-9;
                            bounds.borrow_mut().push((wall.as_secs_f64(), bound));
                        }
                        Ok(wall)
                    }),
                }
            })
            .collect();
        let summaries = ctx.sample(self, engine, &mut variants)?;
        drop(variants);

        let devices = acc.describe_devices(&rt, 0);
        let mut run = RunRecord::new(self.name(), params.to_json(), devices);
        run.notes.extend(acc.fallback_note);
        let label = |v: Timed| match v {
            Timed::Run => format!("{ops} products {size}² on {}", device.name),
            Timed::Copy => format!("{ops} copies of {size}² to host on the copy lane"),
            Timed::RunThenCopy => "all products, wait, then all copies".to_string(),
            Timed::Overlapped => "product i+1 and copy of y[i] pushed together".to_string(),
        };
        run.add_variants(
            Timed::names(),
            summaries,
            Timed::ALL.iter().map(|&v| Some(label(v))),
        );
        let est = |v: Timed| Estimate::of(&run, v.name());
        let bounds = bounds.take();
        let ratios: Vec<f64> = bounds.iter().map(|(wall, b)| wall / b).collect();
        let f = CopyOverlap {
            ops,
            run: est(Timed::Run),
            copy: est(Timed::Copy),
            seq: est(Timed::RunThenCopy),
            overlapped: est(Timed::Overlapped),
            bound: median(&bounds.iter().map(|b| b.1).collect::<Vec<_>>()).unwrap_or(f64::NAN),
            bound_ratio: median(&ratios).unwrap_or(f64::NAN),
        };
        run.record(LOWER_BOUND_S, f.bound);
        run.record(OVERLAPPED_OVER_BOUND_RATIO, f.bound_ratio);
        run.record(IDEAL_S, f.ideal().median);
        run.record(OVERLAPPED_OVER_IDEAL_RATIO, f.vs_ideal().value);
        run.record(OVERLAP_EFFICIENCY, f.efficiency());
        run.record(SEQUENTIAL_OVER_OVERLAPPED_SPEEDUP, f.speedup().value);
        let bytes = (size * size * 4) as f64 * ops as f64;
        run.record(COPY_GBYTES_PER_S, bytes / f.copy.median / 1e9);

        // Correctness: distinct inputs per product, so a copy that moved nothing (or the
        // wrong buffer) cannot match; reused host buffers are poisoned with NaN before each
        // copy; and each copy is checked against a float64 product of its own input, read
        // back by another path than the copy lane.
        let checked = ops.min(3) as usize;
        device.poison_reused_host_buffers(true);
        let xs: Vec<Tensor> = (0..checked)
            .map(|i| Tensor::uniform(engine, device, &[size, size], 100 + i as u64))
            .collect();
        let ys = xs
            .iter()
            .map(|x| x.matmul(x))
            .collect::<Result<Vec<_>, _>>()?;
        let copies: Vec<Tensor> = ys.iter().map(Tensor::copy_to_host).collect();
        let mut worst = 0f64;
        let mut identical = true;
        for ((x, y), h) in xs.iter().zip(&ys).zip(&copies) {
            let (xv, yv, hv) = (x.to_vec()?, y.to_vec()?, h.to_vec()?);
            identical &= yv == hv;
            worst = worst.max(copy_error(&xv, &hv, size));
        }
        device.poison_reused_host_buffers(false);
        let tol = matmul_tolerance(size);
        run.check(
            "host copies equal the device values",
            identical && worst <= tol,
            format!(
                "{checked} products of distinct inputs, reused host buffers poisoned with NaN first: \
                 copies equal the device values element by element, and a float64 product of each \
                 input at 16 positions (max relative error {worst:.2e}, tolerance {tol:.1e})"
            ),
        );
        explain(&f).record(&mut run);
        conclude(&mut run, &f, device.is_gpu(), size);
        Ok(run)
    }
}

/// The largest relative error of a host copy `h` of `x · x` (n×n) against float64, at 16
/// positions (NaN, a poisoned buffer the copy never filled, is infinitely wrong); a copy of
/// the wrong length too.
fn copy_error(x: &[f32], h: &[f32], n: usize) -> f64 {
    if h.len() != n * n || x.len() != n * n {
        return f64::INFINITY;
    }
    matmul_error(x, x, h, (n, n, n), 16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::RuntimeOptions;

    #[test]
    fn copy_error_rejects_poison_and_another_products_copy() {
        let rt = Runtime::cpu(&RuntimeOptions::default(), &[1]).unwrap();
        let d = &rt.devices[0];
        let n = 12;
        let (x1, x2) = (
            Tensor::uniform(&rt.engine, d, &[n, n], 1),
            Tensor::uniform(&rt.engine, d, &[n, n], 2),
        );
        let h1 = x1.matmul(&x1).unwrap().copy_to_host().to_vec().unwrap();
        let h2 = x2.matmul(&x2).unwrap().copy_to_host().to_vec().unwrap();
        let xv = x1.to_vec().unwrap();
        assert!(copy_error(&xv, &h1, n) <= matmul_tolerance(n));
        // The copy of another product (a stale buffer), NaN poison, a short copy: all fail.
        assert!(copy_error(&xv, &h2, n) > matmul_tolerance(n));
        assert!(copy_error(&xv, &vec![f32::NAN; n * n], n).is_infinite());
        assert!(copy_error(&xv, &h1[1..], n).is_infinite());
    }
}
