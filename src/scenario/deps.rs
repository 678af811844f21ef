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
use std::sync::Arc;
use std::time::Duration;

use super::support::{check_matrices, traced, Explained};
use super::{
    ParamError, ParamKind, ParamSpec, Params, RunContext, Scenario, ScenarioError, Warning,
};
use crate::device::{Device, Runtime};
use crate::engine::trace::OrderViolation;
use crate::engine::{trace, Engine, TraceRecord};
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

/// What an op of the program does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// `out = (a · b) / n`, a new value for slot `out`.
    Product,
    /// `out = (a + b) / 2`, a new value for slot `out`.
    Mix,
    /// `out ← (out + a) / 2` in place: a read-modify-write of the slot's existing var.
    Update,
}

/// One op of the program.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Node {
    out: usize,
    a: usize,
    b: usize,
    kind: Kind,
    device: usize,
}

/// The seeded program (SplitMix64 draws, so the DAG is the same on every machine).
fn program(width: usize, depth: usize, devices: usize, seed: u64) -> Vec<Node> {
    let mut state = seed;
    let mut next = |n: usize| {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) % n as u64) as usize
    };
    (0..depth)
        .map(|_| Node {
            out: next(width),
            a: next(width),
            b: next(width),
            kind: [Kind::Product, Kind::Mix, Kind::Update][next(3)],
            device: next(devices),
        })
        .collect()
}

/// Push the program on fresh copies of `inputs` (in-place updates must not change them);
/// `wait_each` waits for every op (the op-by-op reference). The slots' final tensors come back.
fn execute(
    nodes: &[Node],
    inputs: &[Tensor],
    devices: &[Arc<Device>],
    n: usize,
    wait_each: bool,
) -> Result<Vec<Tensor>, ScenarioError> {
    let mut slots = Vec::with_capacity(inputs.len());
    for x in inputs {
        let copy = x.duplicate();
        if wait_each {
            copy.wait_to_read()?;
        }
        slots.push(copy);
    }
    for node in nodes {
        let device = &devices[node.device];
        let written = match node.kind {
            Kind::Product => {
                let y = slots[node.a]
                    .placed_on(device)?
                    .matmul(&slots[node.b])?
                    .scale(1.0 / n as f32);
                slots[node.out] = y;
                &slots[node.out]
            }
            Kind::Mix => {
                let y = slots[node.a]
                    .placed_on(device)?
                    .axpby(0.5, &slots[node.b], 0.5)?;
                slots[node.out] = y;
                &slots[node.out]
            }
            Kind::Update => {
                slots[node.out]
                    .placed_on(device)?
                    .axpby_assign(0.5, &slots[node.a], 0.5)?;
                &slots[node.out]
            }
        };
        if wait_each {
            written.wait_to_read()?;
        }
    }
    Ok(slots)
}

/// What one traced parallel sample says about its own lower bound.
#[derive(Clone, Debug, PartialEq)]
struct SampleBound {
    /// The sample's time, as the sampler recorded it.
    wall_s: f64,
    path_s: f64,
    work_s: f64,
    /// max(critical path, work / devices).
    bound_s: f64,
    /// `Err` names the first dependency the trace shows broken.
    order: Result<(), OrderViolation>,
}

impl SampleBound {
    fn from_trace(records: &[TraceRecord], wall: Duration, devices: usize) -> SampleBound {
        let cp = trace::critical_path(records);
        let (path_s, work_s) = (cp.path_ns as f64 * 1e-9, cp.work_ns as f64 * 1e-9);
        SampleBound {
            wall_s: wall.as_secs_f64(),
            path_s,
            work_s,
            bound_s: path_s.max(work_s / devices as f64),
            order: trace::check_order(records),
        }
    }

    /// wall / bound: at least 1 for any correct schedule.
    fn ratio(&self) -> f64 {
        self.wall_s / self.bound_s
    }

    fn holds(&self) -> bool {
        self.order.is_ok() && self.ratio() >= 1.0
    }
}

/// One parallel run, timed, with the bound from its own trace (none while a `--trace` repeat
/// records the ops).
fn parallel_sample(
    engine: &Engine,
    nodes: &[Node],
    inputs: &[Tensor],
    devices: &[Arc<Device>],
    n: usize,
) -> Result<(Duration, Option<SampleBound>), ScenarioError> {
    let (wall, records) = traced(engine, || {
        synced(engine, || execute(nodes, inputs, devices, n, false))
    })?;
    let bound = records.map(|r| SampleBound::from_trace(&r, wall, devices.len()));
    Ok((wall, bound))
}

/// True when every slot of `got` holds exactly the values of the same slot of `reference`.
fn same_values(reference: &[Tensor], got: &[Tensor]) -> Result<bool, ScenarioError> {
    if reference.len() != got.len() {
        return Ok(false);
    }
    for (r, g) in reference.iter().zip(got) {
        if r.to_vec()? != g.to_vec()? {
            return Ok(false);
        }
    }
    Ok(true)
}

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

    #[test]
    fn the_program_is_a_function_of_the_seed() {
        assert_eq!(program(8, 50, 2, 7), program(8, 50, 2, 7));
        assert_ne!(program(8, 50, 2, 7), program(8, 50, 2, 8));
        let p = program(8, 200, 3, 1);
        assert!(p
            .iter()
            .all(|x| x.out < 8 && x.a < 8 && x.b < 8 && x.device < 3));
        for k in [Kind::Product, Kind::Mix, Kind::Update] {
            assert!(p.iter().any(|x| x.kind == k), "{k:?} never drawn");
        }
    }

    fn setup(width: usize, devices: usize, n: usize) -> (Runtime, Vec<Tensor>) {
        let rt = Runtime::cpu(&Default::default(), &vec![1; devices]).unwrap();
        let inputs: Vec<Tensor> = (0..width)
            .map(|i| Tensor::uniform(&rt.engine, &rt.devices[i % devices], &[n, n], i as u64))
            .collect();
        (rt, inputs)
    }

    #[test]
    fn the_check_catches_a_wrong_reference() {
        let (rt, inputs) = setup(4, 2, 9);
        let nodes = program(4, 20, 2, 3);
        let reference = execute(&nodes, &inputs, &rt.devices, 9, true).unwrap();
        let parallel = execute(&nodes, &inputs, &rt.devices, 9, false).unwrap();
        assert!(same_values(&reference, &parallel).unwrap());
        // A reference from another program (another seed) must not pass.
        let wrong = execute(&program(4, 20, 2, 4), &inputs, &rt.devices, 9, true).unwrap();
        assert!(!same_values(&wrong, &parallel).unwrap());
    }

    #[test]
    fn runs_leave_the_inputs_alone_and_repeat_exactly() {
        let (rt, inputs) = setup(3, 2, 5);
        let before: Vec<Vec<f32>> = inputs.iter().map(|x| x.to_vec().unwrap()).collect();
        // Only in-place updates: without fresh copies they would change the inputs.
        let nodes: Vec<Node> = (0..12)
            .map(|i| Node {
                out: i % 3,
                a: (i + 1) % 3,
                b: 0,
                kind: Kind::Update,
                device: i % 2,
            })
            .collect();
        let first = execute(&nodes, &inputs, &rt.devices, 5, false).unwrap();
        let second = execute(&nodes, &inputs, &rt.devices, 5, false).unwrap();
        assert!(same_values(&first, &second).unwrap());
        let after: Vec<Vec<f32>> = inputs.iter().map(|x| x.to_vec().unwrap()).collect();
        assert_eq!(before, after);
    }

    #[test]
    fn in_place_updates_must_wait_for_earlier_readers() {
        // slot 1 = slot0 · slot0 reads slot 0; the update of slot 0 right after must not
        // overtake it. Sequentially the product sees the old slot 0; an engine that ignored
        // write-after-read would give another product.
        let (rt, inputs) = setup(2, 2, 16);
        let node = |out, a, b, kind, device| Node {
            out,
            a,
            b,
            kind,
            device,
        };
        let nodes = [
            node(1, 0, 0, Kind::Product, 0),
            node(0, 1, 1, Kind::Update, 1),
            node(0, 0, 0, Kind::Update, 1),
        ];
        let reference = execute(&nodes, &inputs, &rt.devices, 16, true).unwrap();
        for _ in 0..20 {
            let got = execute(&nodes, &inputs, &rt.devices, 16, false).unwrap();
            assert!(same_values(&reference, &got).unwrap());
        }
        // The product computed after the updates (what a broken order would give) differs.
        let reordered = [nodes[1], nodes[2], nodes[0]];
        let wrong = execute(&reordered, &inputs, &rt.devices, 16, true).unwrap();
        assert!(!same_values(&reference, &wrong).unwrap());
    }

    #[test]
    fn no_parallel_sample_beats_its_own_bound_over_many_seeds() {
        let (rt, inputs) = setup(6, 2, 24);
        for seed in 0..40 {
            let nodes = program(6, 40, 2, seed);
            let (_, bound) = parallel_sample(&rt.engine, &nodes, &inputs, &rt.devices, 24).unwrap();
            let bound = bound.expect("traced");
            assert!(bound.order.is_ok(), "seed {seed}: {:?}", bound.order);
            assert!(bound.ratio() >= 1.0, "seed {seed}: {bound:?}");
            assert!(bound.path_s > 0.0 && bound.work_s >= bound.path_s);
        }
    }

    #[test]
    fn a_sample_faster_than_its_bound_fails_the_check() {
        let ok = SampleBound {
            wall_s: 2.0,
            path_s: 1.5,
            work_s: 3.0,
            bound_s: 1.5,
            order: Ok(()),
        };
        assert!(ok.holds());
        let beaten = SampleBound {
            wall_s: 1.0,
            ..ok.clone()
        };
        assert!(!beaten.holds());
        let broken = SampleBound {
            order: Err(OrderViolation {
                op: 3,
                op_name: "matmul".into(),
                early_ns: 10,
                dependency: 2,
                dependency_name: "matmul".into(),
            }),
            ..ok
        };
        assert!(!broken.holds());
    }

    #[test]
    fn a_trace_records_the_vars_so_the_bound_sees_every_dependency() {
        let (rt, inputs) = setup(2, 2, 8);
        let nodes = [Node {
            out: 0,
            a: 1,
            b: 1,
            kind: Kind::Update,
            device: 0,
        }];
        let (_, records) = traced(&rt.engine, || {
            let slots = execute(&nodes, &inputs, &rt.devices, 8, false)?;
            rt.engine.wait_all()?;
            Ok::<_, ScenarioError>(slots)
        })
        .unwrap();
        let records = records.unwrap();
        // Two copies, then the update, which reads slot 1's copy and writes slot 0's.
        assert_eq!(records.len(), 3);
        let update = &records[2];
        assert_eq!(update.writes, records[0].writes);
        assert_eq!(update.reads, records[1].writes);
        assert_eq!(trace::dependencies(&records)[2], vec![0, 1]);
    }
}
