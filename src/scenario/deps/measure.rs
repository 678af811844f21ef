//! The timed runs of `deps` on CPU devices: the program op by op and pushed at once on one
//! device (every core), pushed at once on the split devices (each sample traced for its lower
//! bound), the checks that the values are bit-identical and every sample kept its bound, and
//! the figures.

use std::cell::RefCell;

use super::bound::{parallel_sample, SampleBound};
use super::explain::{conclude, explain, OpCounts, Schedules};
use super::program::{self, execute, program, same_values, Node};
use super::{
    Config, Deps, Timed, ASYNCHRONY_SPEEDUP, CRITICAL_PATH_S, LOWER_BOUND_S, PARALLELISM_SPEEDUP,
    PARALLEL_OVER_BOUND_RATIO, PARALLEL_OVER_BOUND_RATIO_MIN, PARALLEL_SPEEDUP, WORK_S,
};
use crate::device::Runtime;
use crate::harness::stats::median;
use crate::harness::{synced, Variant};
use crate::report::evidence::Estimate;
use crate::report::RunRecord;
use crate::scenario::{Params, RunContext, Scenario, ScenarioError};

/// The run on CPU devices (`--device cpu`, or `--device cuda --fallback` without a GPU): the
/// record with its checks, figures, explanation and lesson.
pub(super) fn run_cpu(
    scenario: &Deps,
    cfg: &Config,
    params: &Params,
    ctx: &RunContext,
) -> Result<RunRecord, ScenarioError> {
    let &Config {
        width,
        depth,
        size: n,
        devices,
        seed,
        ..
    } = cfg;
    // Device 0 has every core the split devices share between them; one engine runs both,
    // and only one configuration is busy at a time.
    let split = ctx.cpu_split(devices);
    let cores: usize = split.iter().sum();
    let rt = Runtime::cpu(&ctx.runtime, &[vec![cores], split].concat())?;
    let engine = &rt.engine;
    let (whole, parts) = (&rt.devices[..1], &rt.devices[1..]);
    let nodes = program(width, depth, devices, seed);
    let on_whole: Vec<Node> = nodes.iter().map(|x| Node { device: 0, ..*x }).collect();
    let inputs_on =
        |on: &[std::sync::Arc<crate::device::Device>]| program::inputs(engine, on, width, n, seed);
    let (whole_inputs, part_inputs) = (inputs_on(whole), inputs_on(parts));
    engine.wait_all()?;

    let bounds: RefCell<Vec<SampleBound>> = RefCell::new(Vec::new());
    let (nodes, on_whole, bounds) = (&nodes, &on_whole, &bounds);
    let (whole_inputs, part_inputs) = (&whole_inputs, &part_inputs);
    let mut variants: Vec<Variant<ScenarioError>> = Timed::each(|v| match v {
        Timed::OpByOp => Variant::new(v.name(), move || {
            synced(engine, || execute(on_whole, whole_inputs, whole, n, true))
        }),
        Timed::OneDevice => Variant::new(v.name(), move || {
            synced(engine, || execute(on_whole, whole_inputs, whole, n, false))
        }),
        Timed::Parallel => Variant::new(v.name(), move || {
            let (wall, bound) = parallel_sample(engine, nodes, part_inputs, parts, n)?;
            bounds.borrow_mut().extend(bound);
            Ok(wall)
        }),
    });
    let summaries = ctx.sample(scenario, engine, &mut variants)?;
    drop(variants);
    let bounds = bounds.take();

    let ops = OpCounts::of(nodes, width);
    let mut run = RunRecord::new(scenario.name(), params.to_json(), rt.describe_devices());
    Timed::add_to(&mut run, summaries, |v| {
        Some(match v {
            Timed::OpByOp => format!(
                "{}: each of the {} ops waited for before the next is pushed",
                whole[0].name,
                ops.total()
            ),
            Timed::OneDevice => format!("{}: {} pushed at once", whole[0].name, ops),
            Timed::Parallel => {
                let t = parts[0].threads;
                let threads = if t == 1 { "thread" } else { "threads" };
                format!("{devices} devices of {t} {threads}: {ops} pushed at once")
            }
        })
    });

    // Correctness: pushed at once gives exactly the op-by-op values on the same devices,
    // twice each (a product's bits may depend on its device's threads, so each schedule is
    // compared with op by op on its own devices).
    let mut identical = true;
    for (program, inputs, on) in [(on_whole, whole_inputs, whole), (nodes, part_inputs, parts)] {
        let reference = execute(program, inputs, on, n, true)?;
        for _ in 0..2 {
            identical &= same_values(&reference, &execute(program, inputs, on, n, false)?)?;
        }
    }
    run.check(
        "bit-identical to op-by-op execution",
        identical,
        format!(
            "{width} slots compared element by element, two runs pushed at once on one device \
             and two on {devices}; in-place updates exercise write-after-read and \
             write-after-write order"
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

    let med = |f: fn(&SampleBound) -> f64| {
        median(&bounds.iter().map(f).collect::<Vec<_>>()).unwrap_or(f64::NAN)
    };
    let f = Schedules {
        work: med(|b| b.work_s),
        path: med(|b| b.path_s),
        bound: med(|b| b.bound_s),
        ratio: median(&ratios).unwrap_or(f64::NAN),
        lowest,
        ..Schedules::of(&mut run, ops, devices, cores)
    };
    run.record(WORK_S, f.work);
    run.record(CRITICAL_PATH_S, f.path);
    run.record(LOWER_BOUND_S, f.bound);
    run.record(PARALLEL_OVER_BOUND_RATIO, f.ratio);
    run.record(PARALLEL_OVER_BOUND_RATIO_MIN, lowest);
    explain(&f).record(&mut run);
    conclude(&mut run, &f);
    Ok(run)
}

impl Schedules {
    /// The three timed schedules' medians from `run`, with their speedups recorded there; the
    /// traced bounds are NaN (the GPU traces none).
    pub(super) fn of(run: &mut RunRecord, ops: OpCounts, devices: usize, cores: usize) -> Self {
        let f = Schedules {
            op_by_op: Estimate::of(run, Timed::OpByOp.name()),
            one_device: Estimate::of(run, Timed::OneDevice.name()),
            parallel: Estimate::of(run, Timed::Parallel.name()),
            work: f64::NAN,
            path: f64::NAN,
            bound: f64::NAN,
            ratio: f64::NAN,
            lowest: f64::NAN,
            ops,
            devices,
            cores,
        };
        run.record(ASYNCHRONY_SPEEDUP, f.asynchrony().value);
        run.record(PARALLELISM_SPEEDUP, f.parallelism().value);
        run.record(PARALLEL_SPEEDUP, f.op_by_op.median / f.parallel.median);
        f
    }
}
