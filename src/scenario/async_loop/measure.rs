//! The timed loops of `async`: the devices (and the two single-thread CPU lanes of the
//! ping-pong chain), every variant timed on the host's clock and, on a GPU, the GPU's; the
//! checks of what the timed work computed; and the untimed extra runs the explanation reads:
//! the instrumented run of the book's model and the traced ping-pong chain's hand-offs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::checks::LastOutputs;
use super::{add_chain, AsyncLoop, Config, Timed, MODEL_OPS};
use super::{explain, model};
#[cfg(feature = "cuda")]
use super::{ASYNC_GPU_S, CHAIN_GPU_S, SYNC_GPU_S};
use crate::device::{available_cores, DeviceRequest, Runtime};
use crate::engine::{Engine, LaneId, OpError, Var};
use crate::harness::{synced, Variant};
use crate::report::RunRecord;
use crate::scenario::gpu_clocks::Clocks;
use crate::scenario::kit::chosen_device;
use crate::scenario::{Params, RunContext, Scenario, ScenarioError};
use crate::tensor::Tensor;

pub(super) fn loops(
    scenario: &AsyncLoop,
    params: &Params,
    ctx: &RunContext,
    cfg: &Config,
) -> Result<RunRecord, ScenarioError> {
    let n = cfg.iterations;
    // The machine's limits, measured once per process: before the devices' threads exist,
    // so the probes have the cores to themselves (the CLI has measured them already).
    let limits = crate::machine::limits();
    let threads = ctx.cpu_threads.unwrap_or_else(available_cores);
    let chosen = chosen_device(cfg.device, threads, ctx.gpu_fallback)?;
    // A single-thread CPU device beside it for the ping-pong chain, which alternates
    // between two single-worker CPU lanes: this one and the CPU device's (for a GPU run, a
    // second single-thread CPU device), so its traced repeat shows on the same engine.
    let is_cpu = matches!(chosen.request, DeviceRequest::Cpu { .. });
    let one = DeviceRequest::Cpu { threads: 1 };
    let requests = [chosen.request, one, one];
    let rt = Runtime::new(&ctx.runtime, &requests[..3 - usize::from(is_cpu)])?;
    let (engine, device) = (&rt.engine, &rt.devices[0]);
    let ping_pong_lanes = [
        rt.devices[rt.devices.len() - 2].compute,
        rt.devices[rt.devices.len() - 1].compute,
    ];
    let x = Tensor::ones(engine, device, &cfg.shape);
    x.wait_to_read()?;
    let m = Tensor::uniform(engine, device, &[cfg.product_size, cfg.product_size], 7);
    m.wait_to_read()?;

    // The GPU's clock around each sample of the GPU variants timed to completion.
    #[cfg(feature = "cuda")]
    let clocks = Clocks::open(
        device,
        &[
            (Timed::Sync.name(), SYNC_GPU_S),
            (Timed::Async.name(), ASYNC_GPU_S),
            (Timed::Chain.name(), CHAIN_GPU_S),
        ],
    );
    #[cfg(not(feature = "cuda"))]
    let clocks = Clocks::default();
    let clocks = &clocks;
    // The last output of every timed variant, checked after sampling: the timed work itself
    // must have computed what it was asked to, not only the checks' own loops.
    let last = LastOutputs::default();
    let push_products = || -> Result<Option<Tensor>, ScenarioError> {
        Ok((0..cfg.products).try_fold(None, |_, _| m.matmul(&m).map(Some))?)
    };
    // Time `push` from its first push to its last pushed op's completion; keep its output.
    // On a GPU the GPU's clock starts before the first push and stops after the last op.
    let waited = |v: Timed, push: &dyn Fn() -> Result<Option<Tensor>, ScenarioError>| {
        let mut y = None;
        engine.wait_all()?;
        clocks.start(v.name());
        let elapsed = synced(engine, || {
            y = push()?;
            let after: Vec<&crate::engine::Var> = y.iter().map(Tensor::var).collect();
            clocks.stop_after(v.name(), engine, &after);
            Ok::<_, ScenarioError>(())
        })?;
        clocks.read(v.name());
        last.keep(v, y);
        Ok(elapsed)
    };
    // Time `push` until its last op is pushed, then wait untimed: the pitfall.
    let pushed_only = |v: Timed, push: &dyn Fn() -> Result<Option<Tensor>, ScenarioError>| {
        engine.wait_all()?;
        let t = Instant::now();
        let y = push()?;
        let pushed = t.elapsed();
        engine.wait_all()?;
        last.keep(v, y);
        Ok(pushed)
    };
    let add_one = || -> Result<Option<Tensor>, ScenarioError> {
        Ok((0..n).fold(None, |_, _| Some(x.add_scalar(1.0))))
    };
    let (x, last, add_one, push_products) = (&x, &last, &add_one, &push_products);
    let (waited, pushed_only) = (&waited, &pushed_only);
    let mut variants: Vec<Variant<ScenarioError>> = Timed::each(|v| match v {
        Timed::Sync => Variant::new(v.name(), move || {
            engine.wait_all()?;
            clocks.start(v.name());
            let t = Instant::now();
            let mut y = None;
            for _ in 0..n {
                let out = x.add_scalar(1.0);
                out.wait_to_read()?;
                y = Some(out);
            }
            let elapsed = t.elapsed();
            // The last op is done: the stop follows it on the idle stream.
            clocks.stop_now(v.name());
            clocks.read(v.name());
            last.keep(v, y);
            Ok(elapsed)
        }),
        Timed::Async => Variant::new(v.name(), move || waited(v, add_one)),
        Timed::PushOnly => Variant::new(v.name(), move || pushed_only(v, add_one)),
        Timed::Chain => Variant::new(v.name(), move || waited(v, &|| Ok(Some(add_chain(x, n))))),
        Timed::PingPong => Variant::new(v.name(), move || {
            let mut counter = None;
            let elapsed = synced(engine, || {
                counter = Some(ping_pong(engine, ping_pong_lanes, n));
                Ok::<_, ScenarioError>(())
            })?;
            last.keep_counter(counter);
            Ok(elapsed)
        }),
        Timed::Products => Variant::new(v.name(), move || waited(v, push_products)),
        Timed::ProductsPushOnly => Variant::new(v.name(), move || pushed_only(v, push_products)),
    });
    let summaries = ctx.sample(scenario, engine, &mut variants)?;
    drop(variants);

    let mut run = RunRecord::new(scenario.name(), params.to_json(), rt.describe_devices());
    run.notes.extend(chosen.fallback_note);
    Timed::add_to(&mut run, summaries, |v| v.label(cfg));

    last.check(&mut run, cfg, x, &m)?;
    clocks.derive(&mut run, usize::from(ctx.traces.is_some()));

    let phases = model::measure_phases(engine, x, n.min(MODEL_OPS))?;
    // Each hop's latency in a traced ping-pong chain: from one op's end on one lane to the
    // next op's start on the other, in seconds, sorted.
    let (_, records) = crate::scenario::kit::traced(engine, || -> Result<(), ScenarioError> {
        ping_pong(engine, ping_pong_lanes, n.min(MODEL_OPS));
        engine.wait_all()?;
        Ok(())
    })?;
    let mut records = records.unwrap_or_default();
    records.retain(|r| r.name == PING_PONG_OP);
    let mut hops: Vec<f64> = records
        .windows(2)
        .map(|w| w[1].started_ns.saturating_sub(w[0].ended_ns) as f64 * 1e-9)
        .collect();
    hops.sort_by(f64::total_cmp);
    model::derive(&mut run, engine.mode(), n, &phases);
    explain::derive_handoffs(&mut run, n, &hops);
    explain::derive_chain(&mut run, device.gpu_order(), n);
    if is_cpu {
        explain::derive_against_limits(&mut run, n, limits);
    }
    explain::derive_pitfall(&mut run, cfg.products, cfg.product_size);
    explain::conclude(&mut run, n, cfg.products, cfg.product_size);
    Ok(run)
}

/// The name of every op of the chain: the traced repeat keeps only these.
const PING_PONG_OP: &str = "ping-pong";

/// Push `n` ops that alternate between two lanes, each writing the same var (so each
/// waits for the one before, on the other lane), each checking it runs in its turn; returns
/// the counter they advance.
fn ping_pong(engine: &Engine, lanes: [LaneId; 2], n: u64) -> Arc<AtomicU64> {
    let counter = Arc::new(AtomicU64::new(0));
    let turn = Var::new();
    for i in 0..n {
        let c = counter.clone();
        let lane = lanes[(i % 2) as usize];
        engine.push(PING_PONG_OP, lane, &[], &[&turn], move || {
            match c.compare_exchange(i, i + 1, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => Ok(()),
                Err(seen) => Err(OpError::msg(format!(
                    "op {i} of the ping-pong chain ran when {seen} ops had run, not {i}"
                ))),
            }
        });
    }
    counter
}
