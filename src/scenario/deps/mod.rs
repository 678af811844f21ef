//! `deps`: the chapter's exercise "try tasks with more complex data dependencies: are the
//! results still correct, and is it faster?".
//!
//! A seeded random DAG over `width` slots. Each op reads one or two slots and either writes a
//! new value into a slot (a product `(x · y) / n` or a mix `(x + y) / 2`) or updates a slot
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

use std::cell::RefCell;
use std::time::Duration;

mod bound;
mod program;

use bound::{parallel_sample, SampleBound};
use program::{execute, program, same_values, Kind};

use super::support::{check_matrices, Explained};
use super::{
    ParamError, ParamKind, ParamSpec, Params, RunContext, Scenario, ScenarioError, Warning,
};
use crate::device::Runtime;
use crate::harness::stats::median;
use crate::harness::{synced, SamplerConfig, Variant};
use crate::report::{Better, FigureSpec, RunRecord, Unit};
use crate::tensor::Tensor;
use crate::units::human_time;

/// The derived figures this scenario records, each with its unit and direction.
const PARALLEL_SPEEDUP: FigureSpec =
    FigureSpec::new("parallel_speedup", Unit::Ratio, Better::Higher);
const WORK_S: FigureSpec = FigureSpec::new("work_s", Unit::Seconds, Better::Neither);
const CRITICAL_PATH_S: FigureSpec =
    FigureSpec::new("critical_path_s", Unit::Seconds, Better::Neither);
const LOWER_BOUND_S: FigureSpec = FigureSpec::new("lower_bound_s", Unit::Seconds, Better::Neither);
const PARALLEL_OVER_BOUND_RATIO: FigureSpec =
    FigureSpec::new("parallel_over_bound_ratio", Unit::Ratio, Better::Lower);
const PARALLEL_OVER_BOUND_RATIO_MIN: FigureSpec = FigureSpec::new(
    "parallel_over_bound_ratio_min",
    Unit::Number,
    Better::Neither,
);

super::variant::variants! {
    /// What `deps` times.
    enum Timed {
        /// Each op waited for before the next is pushed.
        OpByOp = "op-by-op",
        /// The whole DAG pushed at once.
        Parallel = "parallel",
    }
}

/// The `deps` scenario.
pub struct Deps;

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "width",
        help: "slots (variables) the DAG reads and writes",
        kind: ParamKind::Int { min: 1, max: 1024 },
        default: "8",
    },
    ParamSpec {
        name: "depth",
        help: "ops in the DAG",
        kind: ParamKind::Int {
            min: 1,
            max: 100_000,
        },
        default: "64",
    },
    ParamSpec {
        name: "size",
        help: "matrix size N of every slot (N×N float32)",
        kind: ParamKind::Int {
            min: 1,
            max: 20_000,
        },
        default: "200",
    },
    ParamSpec {
        name: "devices",
        help: "CPU devices (lanes) the ops are spread over",
        kind: ParamKind::Int { min: 1, max: 64 },
        default: "2",
    },
    ParamSpec {
        name: "seed",
        help: "seed of the DAG and of the data",
        kind: ParamKind::Int {
            min: 0,
            max: u64::MAX,
        },
        default: "1",
    },
];

/// The parameters, read once.
struct Config {
    width: usize,
    depth: usize,
    size: usize,
    devices: usize,
    seed: u64,
}

impl Config {
    fn of(params: &Params) -> Result<Config, ParamError> {
        Ok(Config {
            width: params.count("width")?,
            depth: params.count("depth")?,
            size: params.count("size")?,
            devices: params.count("devices")?,
            seed: params.int("seed")?,
        })
    }
}

impl Scenario for Deps {
    fn name(&self) -> &'static str {
        "deps"
    }

    fn about(&self) -> &'static str {
        "a seeded random DAG of matmul/add ops on several lanes vs op by op: identical results, speed-up, critical path"
    }

    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }

    fn sampling(&self) -> SamplerConfig {
        SamplerConfig {
            warmup: 1,
            min_samples: 5,
            max_samples: 50,
            min_time: Duration::from_secs(2),
            max_time: Duration::from_secs(30),
        }
    }

    fn validate(&self, params: &Params) -> Result<(), ScenarioError> {
        let cfg = Config::of(params)?;
        // The inputs and a run's copies of them, a product's intermediate and its result per
        // op (all may be pending at once), and three runs' slots held for the comparison.
        let tensors = (cfg.width as u64)
            .saturating_mul(5)
            .saturating_add((cfg.depth as u64).saturating_mul(2));
        check_matrices("deps with this --size", cfg.size as u64, tensors, None)
    }

    fn run(&self, params: &Params, ctx: &RunContext) -> Result<RunRecord, ScenarioError> {
        let Config {
            width,
            depth,
            size: n,
            devices,
            seed,
        } = Config::of(params)?;
        let threads = ctx.cpu_split(devices);
        let rt = Runtime::cpu(&ctx.runtime, &threads)?;
        let engine = &rt.engine;
        let nodes = program(width, depth, devices, seed);
        let inputs: Vec<Tensor> = (0..width)
            .map(|i| {
                Tensor::uniform(
                    engine,
                    &rt.devices[i % devices],
                    &[n, n],
                    seed.wrapping_add(i as u64),
                )
            })
            .collect();
        engine.wait_all()?;

        let bounds: RefCell<Vec<SampleBound>> = RefCell::new(Vec::new());
        let (nodes, inputs, devices_used, bounds) = (&nodes, &inputs, &rt.devices, &bounds);
        let mut variants: Vec<Variant<ScenarioError>> = Timed::ALL
            .iter()
            .map(|&v| -> Variant<ScenarioError> {
                match v {
                    Timed::OpByOp => Variant::new(v.name(), move || {
                        synced(engine, || execute(nodes, inputs, devices_used, n, true))
                    }),
                    Timed::Parallel => Variant::new(v.name(), move || {
                        let (wall, bound) =
                            parallel_sample(engine, nodes, inputs, devices_used, n)?;
                        bounds.borrow_mut().extend(bound);
                        Ok(wall)
                    }),
                }
            })
            .collect();
        let summaries = ctx.sample(self, engine, &mut variants)?;
        drop(variants);
        let bounds = bounds.take();

        let mut run = RunRecord::new(self.name(), params.to_json(), rt.describe_devices());
        let count = |k: Kind| nodes.iter().filter(|x| x.kind == k).count();
        run.add_variants(
            Timed::names(),
            summaries,
            Timed::ALL.iter().map(|&v| {
                Some(match v {
                    Timed::OpByOp => "each op waited for before the next is pushed".to_string(),
                    Timed::Parallel => format!(
                        "{depth} ops ({} products, {} mixes, {} in-place updates) pushed at once",
                        count(Kind::Product),
                        count(Kind::Mix),
                        count(Kind::Update)
                    ),
                })
            }),
        );

        // Correctness: the parallel schedule gives exactly the op-by-op values, twice.
        let reference = execute(nodes, inputs, &rt.devices, n, true)?;
        let first = execute(nodes, inputs, &rt.devices, n, false)?;
        let second = execute(nodes, inputs, &rt.devices, n, false)?;
        let identical = same_values(&reference, &first)? && same_values(&reference, &second)?;
        run.check(
            "bit-identical to op-by-op execution",
            identical,
            format!(
                "{width} slots compared element by element, two parallel runs; in-place updates \
                 exercise write-after-read and write-after-write order"
            ),
        );

        let broken = bounds.iter().find_map(|b| b.order.clone().err());
        let ratios: Vec<f64> = bounds.iter().map(SampleBound::ratio).collect();
        let lowest = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        run.check(
            "every parallel sample kept its dependencies and its lower bound",
            !bounds.is_empty() && bounds.iter().all(SampleBound::holds),
            match &broken {
                Some(e) => e.to_string(),
                None => format!(
                    "{} traced samples; lowest time / bound {lowest:.3} (below 1 would mean a broken dependency)",
                    bounds.len()
                ),
            },
        );

        let m = |v: Timed| run.median(v.name()).unwrap_or(f64::NAN);
        let (seq, par) = (m(Timed::OpByOp), m(Timed::Parallel));
        let med = |f: fn(&SampleBound) -> f64| {
            median(&bounds.iter().map(f).collect::<Vec<_>>()).unwrap_or(f64::NAN)
        };
        let (work, path, bound) = (med(|b| b.work_s), med(|b| b.path_s), med(|b| b.bound_s));
        let ratio = median(&ratios).unwrap_or(f64::NAN);
        run.record(PARALLEL_SPEEDUP, seq / par);
        run.record(WORK_S, work);
        run.record(CRITICAL_PATH_S, path);
        run.record(LOWER_BOUND_S, bound);
        run.record(PARALLEL_OVER_BOUND_RATIO, ratio);
        run.record(PARALLEL_OVER_BOUND_RATIO_MIN, lowest);
        let f = Schedules {
            seq,
            par,
            work,
            path,
            bound,
            ratio,
            lowest,
            ops: depth + width,
            devices,
        };
        explain(&f).record(&mut run);
        Ok(run)
    }
}

/// The medians (and the traced bounds) the explanation quotes, as plain numbers.
#[derive(Debug, Clone, Copy)]
struct Schedules {
    /// `op-by-op` and `parallel`.
    seq: f64,
    par: f64,
    /// Over the traced parallel samples: the ops' run time in all, along the critical path,
    /// the bound max(path, work / devices), and time / bound (median and lowest).
    work: f64,
    path: f64,
    bound: f64,
    ratio: f64,
    lowest: f64,
    /// Ops an op-by-op run waits for: the DAG's and the copies of the inputs.
    ops: usize,
    devices: usize,
}

/// What the figures show, and the figures outside their physical range: a speed-up above
/// the devices that the op-by-op run's hand-offs do not explain (each parallel sample took
/// at least work / devices, so op by op must have cost more than the work to be beaten by
/// more than the devices).
fn explain(f: &Schedules) -> Explained {
    let (seq, par, devices) = (f.seq, f.par, f.devices);
    let speedup = seq / par;
    let mut out = Explained::default();
    out.sentences.push(format!(
        "pushed at once, the DAG ran in {} instead of {} op by op ({speedup:.2}×).",
        human_time(par),
        human_time(seq),
    ));
    let per_op_extra = (seq - f.work) / f.ops as f64;
    if speedup > devices as f64 {
        if per_op_extra > 0.0 {
            out.sentences.push(format!(
                "the speed-up exceeds the {devices} devices because op by op also pays a hand-off and a wait \
                 per op: about {} per op beyond the ops' own run time.",
                human_time(per_op_extra)
            ));
        } else {
            out.warnings.push(Warning::SpeedupAboveDevices {
                speedup,
                devices,
                op_by_op_s: seq,
                work_s: f.work,
            });
        }
    }
    out.sentences.push(format!(
        "each parallel sample is traced: its ops ran for {} in all, {} along the longest chain of \
         dependencies, so no schedule of them could finish before max(critical path, work / {devices} \
         devices) = {} (medians over samples); the samples took {:.2}× their own bound \
         (at least {:.2}×): the rest is hand-offs, pushing and lanes left idle.",
        human_time(f.work),
        human_time(f.path),
        human_time(f.bound),
        f.ratio,
        f.lowest,
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2 devices, 10 ops; work 4 s along a 1.5 s path: the bound is max(1.5, 4 / 2) = 2 s.
    fn medians(seq: f64, par: f64) -> Schedules {
        Schedules {
            seq,
            par,
            work: 4.0,
            path: 1.5,
            bound: 2.0,
            ratio: 1.25,
            lowest: 1.1,
            ops: 10,
            devices: 2,
        }
    }

    #[test]
    fn the_explanation_quotes_its_own_arithmetic() {
        let e = explain(&medians(4.5, 2.5));
        let all = e.sentences.join("\n");
        assert!(
            all.contains("ran in 2.500 s instead of 4.500 s op by op (1.80×)"),
            "{all}"
        );
        assert!(!all.contains("exceeds"), "{all}");
        assert!(
            all.contains("ran for 4.000 s in all, 1.500 s along")
                && all.contains("/ 2 devices) = 2.000 s")
                && all.contains("took 1.25× their own bound (at least 1.10×)"),
            "{all}"
        );
        assert!(e.warnings.is_empty(), "{:?}", e.warnings);
    }

    #[test]
    fn a_speed_up_above_the_devices_is_explained_or_flagged() {
        // Op by op 6 s against 4 s of work: 0.2 s of hand-off per op explains 6 / 2.5 = 2.4×.
        let e = explain(&medians(6.0, 2.5));
        let all = e.sentences.join("\n");
        assert!(
            all.contains("(2.40×)") && all.contains("about 200.0 ms per op"),
            "{all}"
        );
        assert!(e.warnings.is_empty(), "{:?}", e.warnings);
        // Op by op 3.9 s, no longer than the work: 3.9 / 1.5 = 2.6× cannot happen in one round.
        let e = explain(&medians(3.9, 1.5));
        assert!(!e.sentences.join("\n").contains("hand-off and a wait"));
        assert_eq!(e.warnings.len(), 1, "{:?}", e.warnings);
        let w = e.warnings[0].to_string();
        assert!(
            w.contains("2.60× exceeds the 2 devices") && w.contains("(3.900 s)"),
            "{w}"
        );
        assert!(w.contains("--min-samples"), "{w}");
    }
}
