//! `deps --device cuda --streams k`: the program's ops on `k` compute streams of one GPU
//! (engine lanes), ordered by events across streams (`device::cuda::streams`).
//!
//! Variants as on the CPU: `op-by-op` on one stream, each op waited for on the GPU before the
//! next is pushed; `one-device`, the whole DAG pushed at once on one stream (asynchrony alone);
//! `parallel`, pushed at once on the `k` streams (parallelism on top). The final values of
//! both pushed-at-once schedules are read back and compared bit for bit with op by op's.

use super::explain::{conclude, explain_gpu, OpCounts, Schedules};
use super::plan::{Plan, StepKind};
use super::program::{input, product_affine, program, Node};
use super::{Config, Deps, Timed, PROGRAM_OPS_WAITING};
use crate::device::cuda::stream_lanes::{GpuMatrix, StreamRuntime};
use crate::device::cuda::streams::{StreamError, StreamOp};
use crate::device::{DeviceError, GpuOrder};
use crate::harness::{synced, Variant};
use crate::report::RunRecord;
use crate::scenario::kit::check_matrices;
use crate::scenario::{Params, RunContext, Scenario, ScenarioError};

impl From<StreamError> for ScenarioError {
    fn from(e: StreamError) -> ScenarioError {
        match e {
            StreamError::Engine(e) => ScenarioError::Engine(e),
            StreamError::Gpu(e) => ScenarioError::Device(DeviceError::Cuda(e)),
            other => ScenarioError::Device(DeviceError::Gpu(other.to_string())),
        }
    }
}

/// The GPU program's buffers: the inputs uploaded, the rest for the ops to write.
pub(super) fn buffers(
    sr: &StreamRuntime,
    plan: &Plan,
    width: usize,
    n: usize,
    seed: u64,
) -> Result<Vec<GpuMatrix>, ScenarioError> {
    let mut out = Vec::with_capacity(plan.buffers);
    for i in 0..plan.buffers {
        out.push(match i < width {
            true => sr.upload(&input(n, seed.wrapping_add(i as u64)), (n, n))?,
            false => sr.empty((n, n))?,
        });
    }
    sr.engine().wait_all()?;
    Ok(out)
}

/// Push the plan's steps on their streams; `wait_each` waits for every op on the GPU before
/// the next is pushed (op by op).
pub(super) fn execute(
    sr: &StreamRuntime,
    plan: &Plan,
    bufs: &[GpuMatrix],
    n: usize,
    wait_each: bool,
) -> Result<(), ScenarioError> {
    for step in &plan.steps {
        let (r, w) = (&step.reads, &bufs[step.write]);
        let b = |i: usize| &bufs[r[i]];
        let (op, inputs) = match step.kind {
            StepKind::Copy => (StreamOp::Copy, vec![b(0)]),
            StepKind::Product => {
                let (scale, shift) = product_affine(n);
                (StreamOp::Product { scale, shift }, vec![b(0), b(1)])
            }
            StepKind::Mix => (StreamOp::Average, vec![b(0), b(1)]),
            StepKind::Update => (StreamOp::Average, vec![w, b(0)]),
        };
        sr.push(step.stream, op, &inputs, w)?;
        if wait_each {
            sr.wait(w)?;
        }
    }
    Ok(())
}

/// The slots' final values after a run of `plan`, read back from the GPU.
pub(super) fn finals(
    sr: &StreamRuntime,
    plan: &Plan,
    bufs: &[GpuMatrix],
) -> Result<Vec<Vec<u32>>, ScenarioError> {
    plan.finals
        .iter()
        .map(|&b| Ok(sr.read(&bufs[b])?.iter().map(|v| v.to_bits()).collect()))
        .collect()
}

/// Run `plan` and read its final values back.
pub(super) fn run_and_read(
    sr: &StreamRuntime,
    plan: &Plan,
    bufs: &[GpuMatrix],
    n: usize,
    wait_each: bool,
) -> Result<Vec<Vec<u32>>, ScenarioError> {
    execute(sr, plan, bufs, n, wait_each)?;
    finals(sr, plan, bufs)
}

pub(super) fn run(
    deps: &Deps,
    cfg: &Config,
    params: &Params,
    ctx: &RunContext,
) -> Result<RunRecord, ScenarioError> {
    let (width, n, k) = (cfg.width, cfg.size, cfg.streams);
    let sr = StreamRuntime::open(&ctx.runtime, k)?;
    let engine = sr.engine();
    let nodes = program(width, cfg.depth, k, cfg.seed);
    let on_one: Vec<Node> = nodes.iter().map(|x| Node { device: 0, ..*x }).collect();
    let (one, spread) = (Plan::of(&on_one, width, 1), Plan::of(&nodes, width, k));
    // Both plans index one set of buffers: the same ops, so the same buffers.
    if one.buffers != spread.buffers {
        return Err(ScenarioError::Input(format!(
            "deps on the GPU: the one-stream plan needs {} buffers and the {k}-stream plan {}",
            one.buffers, spread.buffers
        )));
    }
    if let Some(free) = sr.gpu().and_then(|g| g.free_memory()) {
        check_matrices(
            "deps on the GPU with this --size",
            n as u64,
            spread.buffers as u64,
            Some(free),
        )?;
    }
    let bufs = buffers(&sr, &spread, width, n, cfg.seed)?;

    let (sr, bufs, one_plan, spread_plan) = (&sr, &bufs, &one, &spread);
    let mut variants: Vec<Variant<ScenarioError>> = Timed::each(|v| {
        let (plan, wait_each) = match v {
            Timed::OpByOp => (one_plan, true),
            Timed::OneDevice => (one_plan, false),
            Timed::Parallel => (spread_plan, false),
        };
        Variant::new(v.name(), move || {
            synced(engine, || execute(sr, plan, bufs, n, wait_each))
        })
    });
    let summaries = ctx.sample(deps, engine, &mut variants)?;
    drop(variants);

    let ops = OpCounts::of(&nodes, width);
    let waiting = spread.cross_stream_ops();
    let gpu = sr
        .gpu()
        .map_or_else(|| "cuda:0".to_string(), |g| g.name.clone());
    let mut run = RunRecord::new(deps.name(), params.to_json(), sr.runtime.describe_devices());
    let s = if k == 1 { "" } else { "s" };
    Timed::add_to(&mut run, summaries, |v| {
        Some(match v {
            Timed::OpByOp => format!(
                "{gpu}, 1 stream: each of the {} ops waited for on the GPU before the next is pushed",
                ops.total()
            ),
            Timed::OneDevice => format!("{gpu}, 1 stream: {ops} pushed at once"),
            Timed::Parallel => format!(
                "{gpu}, {k} stream{s}: {ops} pushed at once, {waiting} waiting for another stream's event"
            ),
        })
    });
    run.notes.push(format!(
        "the ops run on {k} compute stream{s} of {gpu} (engine lanes '{gpu} stream 0'…): an op \
         completes in the engine once enqueued, and ops on different streams are ordered by \
         events; a trace's spans are enqueueing, not GPU time, so no lower bound is computed"
    ));
    if ctx.runtime.gpu_order == GpuOrder::Host {
        run.notes.push(
            "--gpu-order host applies to the GPU's own compute lane, not to its compute streams"
                .into(),
        );
    }

    // Correctness: op by op on one stream is the reference; pushed at once on one stream and
    // on the k streams must give exactly its bits, twice each.
    let reference = run_and_read(sr, one_plan, bufs, n, true)?;
    let mut identical = true;
    for plan in [one_plan, spread_plan] {
        for _ in 0..2 {
            identical &= run_and_read(sr, plan, bufs, n, false)? == reference;
        }
    }
    run.check(
        "bit-identical to op-by-op execution",
        identical,
        format!(
            "{width} slots read back from the GPU and compared bit for bit, two runs pushed at \
             once on one stream and two on {k}; in-place updates exercise write-after-read and \
             write-after-write order across streams"
        ),
    );

    let f = Schedules::of(&mut run, ops, k, 0);
    run.record(PROGRAM_OPS_WAITING, waiting as f64);
    explain_gpu(&f, k, n, waiting).record(&mut run);
    conclude(&mut run, &f);
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::RuntimeOptions;

    fn gpu() -> StreamRuntime {
        StreamRuntime::open(&RuntimeOptions::default(), 4).expect("a GPU (this test needs one)")
    }

    /// A producer on stream 0 and a consumer on stream 1: the consumer must see the produced
    /// values, however long the producer takes (a chain of products on stream 0 first), and an
    /// in-place writer on stream 2 must wait for the consumer's read.
    #[test]
    #[ignore = "needs a GPU"]
    fn gpu_streams_order_a_consumer_after_its_producer() {
        let sr = gpu();
        let n = 512;
        let x = sr.upload(&input(n, 1), (n, n)).unwrap();
        let (p, q) = (sr.empty((n, n)).unwrap(), sr.empty((n, n)).unwrap());
        let (y, z) = (sr.empty((n, n)).unwrap(), sr.empty((n, n)).unwrap());
        let (scale, shift) = product_affine(n);
        let product = StreamOp::Product { scale, shift };
        for round in 0..5 {
            // Stream 0: p = x·x / 4n + 3/4, then q = p·p / 4n + 3/4 and p = (q + x) / 2
            // (which keeps the values near 1), many times over.
            let chain = || {
                sr.push(0, product, &[&x, &x], &p).unwrap();
                for _ in 0..20 {
                    sr.push(0, product, &[&p, &p], &q).unwrap();
                    sr.push(0, StreamOp::Average, &[&q, &x], &p).unwrap();
                }
            };
            chain();
            // Stream 1 reads p as soon as it is enqueued; stream 2 then overwrites p in place.
            sr.push(1, StreamOp::Copy, &[&p], &y).unwrap();
            sr.push(2, StreamOp::Average, &[&p, &x], &p).unwrap();
            sr.push(3, StreamOp::Average, &[&y, &p], &z).unwrap();
            let (got_y, got_z) = (sr.read(&y).unwrap(), sr.read(&z).unwrap());
            // The same, one op at a time on stream 0.
            chain();
            let want_y = sr.read(&p).unwrap();
            sr.push(0, StreamOp::Average, &[&p, &x], &p).unwrap();
            sr.wait(&p).unwrap();
            sr.push(0, StreamOp::Average, &[&y, &p], &z).unwrap();
            let want_z = sr.read(&z).unwrap();
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&got_y),
                bits(&want_y),
                "round {round}: the consumer ran early"
            );
            assert_eq!(
                bits(&got_z),
                bits(&want_z),
                "round {round}: the writer overtook"
            );
        }
        assert!(sr.streams().waits() > 0);
        sr.engine().wait_all().unwrap();
    }

    /// Many random DAGs on 2 and 4 streams, each compared bit for bit with op by op on one.
    #[test]
    #[ignore = "needs a GPU"]
    fn gpu_deps_random_dags_match_op_by_op_bit_for_bit() {
        for k in [2, 4] {
            let sr = StreamRuntime::open(&RuntimeOptions::default(), k).expect("a GPU");
            for seed in 0..40u64 {
                let (width, n) = (2 + seed as usize % 7, [16, 64, 200][seed as usize % 3]);
                let nodes = program(width, 48, k, seed);
                let on_one: Vec<Node> = nodes.iter().map(|x| Node { device: 0, ..*x }).collect();
                let (one, spread) = (Plan::of(&on_one, width, 1), Plan::of(&nodes, width, k));
                let bufs = buffers(&sr, &spread, width, n, seed).unwrap();
                let reference = run_and_read(&sr, &one, &bufs, n, true).unwrap();
                // The affine product keeps every value near 1, as on the host: no subnormal
                // or non-finite value is timed.
                let normal = |bits: &u32| (0.25..4.0).contains(&f32::from_bits(*bits));
                assert!(
                    reference.iter().flatten().all(normal),
                    "{k} streams, seed {seed}: a value left [0.25, 4)"
                );
                for _ in 0..3 {
                    let got = run_and_read(&sr, &spread, &bufs, n, false).unwrap();
                    assert!(
                        got == reference,
                        "{k} streams, seed {seed}: not op by op's bits"
                    );
                }
                assert!(run_and_read(&sr, &one, &bufs, n, false).unwrap() == reference);
            }
            sr.engine().wait_all().unwrap();
        }
    }
}
