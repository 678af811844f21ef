//! `async`: synchronous vs asynchronous execution of `y = x + 1` (book §13.2).
//!
//! - `sync` waits for `y` after every op: each iteration pays the full round trip;
//! - `async` pushes all N ops and waits once: the front end keeps pushing while the worker
//!   executes, so the loop runs at the pace of the slower of the two;
//! - `push-only` stops the clock before the work is done: the "timing without synchronization"
//!   pitfall, shown so a reader recognizes it, never a cost to quote;
//! - `products` and `products-push-only` show that pitfall where it misleads most, as the book
//!   does: a few large matrix products, where computing dominates pushing (for `y = x + 1`
//!   pushing *is* most of the work, so `push-only` is close to `async` and the lesson hides).
//!
//! - `ping-pong` pushes N dependent ops that alternate between two single-thread CPU lanes
//!   and waits once: every op is a hand-off from one lane's worker to the other's, the cost a
//!   multi-device step pays each time it crosses devices; a traced run gives each hop's
//!   latency (`handoff_p50_s`, `handoff_p99_s`).
//!
//! Beside them, two references from the same run describe the machine: the channel floor (a
//! hand-off to a thread with no engine) and the one-way latency of a cache line between two
//! CPUs, measured before the samples, after each round of them and after them, since each op
//! moves a few lines between the pushing core and the worker's and a VM's host changes that
//! latency from minute to minute: a run whose rounds saw two latencies says so, and quotes
//! async's cost in each.
//!
//! The book's model splits one iteration into t1 (front end hands the op to the backend),
//! t2 (backend executes it) and t3 (result returns to the front end) and predicts
//! sync ≈ N(t1+t2+t3), async ≈ t1 + N·t2 + t3. An instrumented extra run measures the three
//! from engine timestamps so the predictions can be set against the measured medians.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::support::{
    check_bytes, check_matrices, chosen_device, matmul_error, matmul_tolerance, Accelerator,
};
use super::{
    Choice, DeviceChoice, ParamError, ParamKind, ParamSpec, Params, RunContext, Scenario,
    ScenarioError,
};
use crate::device::memory::f32_bytes;
use crate::device::{available_cores, Device, DeviceError, DeviceRequest, GpuOrder, Runtime};
use crate::engine::{Engine, LaneId, Mode, OpError, Var};
use crate::harness::floor;
use crate::harness::stats::{median, quantile};
use crate::harness::{synced, SamplerConfig, Variant};
use crate::report::{Better, Figure, FigureSpec, RunRecord, Unit};
use crate::tensor::Tensor;
use crate::units::human_time;

/// The derived figures this scenario records, each with its unit and direction.
const DRIVER_LAUNCH_S: FigureSpec =
    FigureSpec::new("driver_launch_s", Unit::Seconds, Better::Neither);
const DRIVER_LAUNCH_AND_WAIT_S: FigureSpec =
    FigureSpec::new("driver_launch_and_wait_s", Unit::Seconds, Better::Neither);
const ASYNC_OVER_DRIVER_LAUNCH_RATIO: FigureSpec = FigureSpec::new(
    "async_over_driver_launch_ratio",
    Unit::Ratio,
    Better::Neither,
);
const ASYNC_SPEEDUP: FigureSpec = FigureSpec::new("async_speedup", Unit::Ratio, Better::Higher);
const SYNC_PER_OP_S: FigureSpec = FigureSpec::new("sync_per_op_s", Unit::Seconds, Better::Neither);
const ASYNC_PER_OP_S: FigureSpec =
    FigureSpec::new("async_per_op_s", Unit::Seconds, Better::Neither);
const PUSH_PER_OP_S: FigureSpec = FigureSpec::new("push_per_op_s", Unit::Seconds, Better::Neither);
const T1_S: FigureSpec = FigureSpec::new("t1_s", Unit::Seconds, Better::Neither);
const T2_S: FigureSpec = FigureSpec::new("t2_s", Unit::Seconds, Better::Neither);
const T3_S: FigureSpec = FigureSpec::new("t3_s", Unit::Seconds, Better::Neither);
const PREDICTED_SYNC_S: FigureSpec =
    FigureSpec::new("predicted_sync_s", Unit::Seconds, Better::Neither);
const PREDICTED_ASYNC_S: FigureSpec =
    FigureSpec::new("predicted_async_s", Unit::Seconds, Better::Neither);
const MEASURED_OVER_PREDICTED_SYNC_RATIO: FigureSpec = FigureSpec::new(
    "measured_over_predicted_sync_ratio",
    Unit::Ratio,
    Better::Neither,
);
const MEASURED_OVER_PREDICTED_ASYNC_RATIO: FigureSpec = FigureSpec::new(
    "measured_over_predicted_async_ratio",
    Unit::Ratio,
    Better::Neither,
);
const CHAIN_PER_OP_S: FigureSpec =
    FigureSpec::new("chain_per_op_s", Unit::Seconds, Better::Neither);

/// The `async` scenario.
pub struct AsyncLoop;

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "iterations",
        help: "ops per loop: y = x + 1, N times",
        kind: ParamKind::Int {
            min: 1,
            max: 10_000_000,
        },
        default: "1000",
    },
    ParamSpec {
        name: "shape",
        help: "shape of x, e.g. 1,2 or 1000x1000",
        kind: ParamKind::Shape { max_dims: 4 },
        default: "1,2",
    },
    ParamSpec {
        name: "products",
        help:
            "matrix products pushed by the products and products-push-only variants (the book's 10)",
        kind: ParamKind::Int { min: 1, max: 1_000 },
        default: "10",
    },
    ParamSpec {
        name: "product_size",
        help: "size N of those N×N products (the book's 1000)",
        kind: ParamKind::Int {
            min: 1,
            max: 100_000,
        },
        default: "1000",
    },
    ParamSpec {
        name: "device",
        help: "cpu, or cuda (an error without a usable GPU, unless --fallback)",
        kind: ParamKind::Choice(DeviceChoice::WORDS),
        default: "cpu",
    },
];

/// Ops timed individually for the t1/t2/t3 model (enough for stable medians, bounded cost).
const MODEL_OPS: u64 = 2_000;

/// Raw driver launches timed for the GPU's floor (a few milliseconds).
#[cfg(feature = "cuda")]
const FLOOR_LAUNCHES: u32 = 5_000;

/// Length of the checked chain: every step adds exactly 1 in float32 (far below 2^24).
const CHAIN_OPS: u64 = 100_000;

/// `y = y + 1`, `n` times from `x`, pushed at once: each op reads the previous one's output.
fn add_chain(x: &Tensor, n: u64) -> Tensor {
    let mut y = x.clone();
    for _ in 0..n {
        y = y.add_scalar(1.0);
    }
    y
}

/// True when every value is exactly `want` (and there is at least one); the largest error.
fn all_equal(values: &[f32], want: f32) -> (bool, f32) {
    let err = values.iter().map(|v| (v - want).abs()).fold(0f32, |a, e| {
        if e.is_nan() {
            f32::INFINITY
        } else {
            a.max(e)
        }
    });
    (!values.is_empty() && err == 0.0, err)
}

/// Medians of the book's three phases, in seconds.
struct Phases {
    t1: f64,
    t2: f64,
    t3: f64,
}

/// The parameters, read once.
struct Config {
    iterations: u64,
    shape: Vec<usize>,
    products: u64,
    product_size: usize,
    device: DeviceChoice,
}

impl Config {
    fn of(params: &Params) -> Result<Config, ParamError> {
        Ok(Config {
            iterations: params.int("iterations")?,
            shape: params.shape("shape")?.to_vec(),
            products: params.int("products")?,
            product_size: params.count("product_size")?,
            device: params.choice("device")?,
        })
    }
}

impl Scenario for AsyncLoop {
    fn name(&self) -> &'static str {
        "async"
    }

    fn about(&self) -> &'static str {
        "sync vs async loop of y = x + 1: wait after every op or once; the push-only pitfall, also on the book's matrix products; t1/t2/t3 model"
    }

    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }

    fn sampling(&self) -> SamplerConfig {
        SamplerConfig {
            warmup: 3,
            min_samples: 15,
            max_samples: 300,
            min_time: Duration::from_secs(1),
            max_time: Duration::from_secs(30),
        }
    }

    fn validate(&self, params: &Params) -> Result<(), ScenarioError> {
        let cfg = Config::of(params)?;
        let elements = cfg
            .shape
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d as u64));
        // x, the y being computed, and the y the front end still holds; plus the queued ops
        // themselves (an op and its buffers' bookkeeping, about half a kilobyte each), all of
        // which the async loop may have pending at once.
        let queued = cfg.iterations.checked_mul(512);
        let bytes = elements
            .and_then(|e| f32_bytes(e, 3))
            .and_then(|b| b.checked_add(queued?));
        check_bytes("async with this --shape", bytes)?;
        // The input, the products in flight, and the checked product's host copies.
        check_matrices(
            "async with this --product-size",
            cfg.product_size as u64,
            cfg.products.saturating_add(4),
            None,
        )
    }

    fn run(&self, params: &Params, ctx: &RunContext) -> Result<RunRecord, ScenarioError> {
        let Config {
            iterations: n,
            shape,
            products,
            product_size,
            device: choice,
        } = Config::of(params)?;
        let threads = ctx.cpu_threads.unwrap_or_else(available_cores);
        let Accelerator {
            request,
            fallback_note: notes,
        } = chosen_device(choice, threads, ctx.gpu_fallback)?;
        // A single-thread CPU device beside it for the ping-pong chain, which alternates
        // between two single-worker CPU lanes: this one and the CPU device's (for a GPU run, a
        // second single-thread CPU device), so its traced repeat shows on the same engine.
        let is_cpu = matches!(request, DeviceRequest::Cpu { .. });
        let one = DeviceRequest::Cpu { threads: 1 };
        let requests = if is_cpu {
            vec![request, one]
        } else {
            vec![request, one, one]
        };
        let rt = Runtime::new(&ctx.runtime, &requests)?;
        let (engine, device) = (&rt.engine, &rt.devices[0]);
        let pp = [
            rt.devices[rt.devices.len() - 2].compute,
            rt.devices[rt.devices.len() - 1].compute,
        ];
        let x = Tensor::ones(engine, device, &shape);
        x.wait_to_read()?;

        // The last output of every timed variant, checked after sampling: the timed work itself
        // must have computed x + 1, not only the check's own loop.
        let outputs: RefCell<[Option<Tensor>; 4]> = RefCell::new([None, None, None, None]);
        let m = Tensor::uniform(engine, device, &[product_size, product_size], 7);
        m.wait_to_read()?;
        // The last product of each product variant, checked after sampling.
        let product_outputs: RefCell<[Option<Tensor>; 2]> = RefCell::new([None, None]);
        let keep_product = |i: usize, y: Tensor| product_outputs.borrow_mut()[i] = Some(y);
        let push_products = || -> Result<Option<Tensor>, ScenarioError> {
            let mut y = None;
            for _ in 0..products {
                y = Some(m.matmul(&m)?);
            }
            Ok(y)
        };
        let keep = |i: usize, y: Tensor| outputs.borrow_mut()[i] = Some(y);
        let pp_last: RefCell<Option<Arc<AtomicU64>>> = RefCell::new(None);
        let mut variants = vec![
            Variant::new("sync", || {
                engine.wait_all()?;
                let t = Instant::now();
                let mut y = None;
                for _ in 0..n {
                    let out = x.add_scalar(1.0);
                    out.wait_to_read()?;
                    y = Some(out);
                }
                let elapsed = t.elapsed();
                y.into_iter().for_each(|y| keep(0, y));
                Ok(elapsed)
            }),
            Variant::new("async", || {
                let mut y = None;
                let elapsed = synced(engine, || {
                    for _ in 0..n {
                        y = Some(x.add_scalar(1.0));
                    }
                    Ok::<_, ScenarioError>(())
                })?;
                y.into_iter().for_each(|y| keep(1, y));
                Ok(elapsed)
            }),
            Variant::new("push-only", || {
                engine.wait_all()?;
                let t = Instant::now();
                let mut y = None;
                for _ in 0..n {
                    y = Some(x.add_scalar(1.0));
                }
                let pushed = t.elapsed();
                engine.wait_all()?;
                y.into_iter().for_each(|y| keep(2, y));
                Ok(pushed)
            }),
            Variant::new("chain", || {
                let mut y = None;
                let elapsed = synced(engine, || {
                    y = Some(add_chain(&x, n));
                    Ok::<_, ScenarioError>(())
                })?;
                y.into_iter().for_each(|y| keep(3, y));
                Ok(elapsed)
            }),
            Variant::new("ping-pong", || {
                let mut counter = None;
                let elapsed = synced(engine, || {
                    counter = Some(ping_pong(engine, pp, n));
                    Ok::<_, ScenarioError>(())
                })?;
                counter
                    .into_iter()
                    .for_each(|c| *pp_last.borrow_mut() = Some(c));
                Ok(elapsed)
            }),
            Variant::new("products", || {
                let mut y = None;
                let elapsed = synced(engine, || {
                    y = push_products()?;
                    Ok::<_, ScenarioError>(())
                })?;
                y.into_iter().for_each(|y| keep_product(0, y));
                Ok(elapsed)
            }),
            Variant::new("products-push-only", || {
                engine.wait_all()?;
                let t = Instant::now();
                let y = push_products()?;
                let pushed = t.elapsed();
                engine.wait_all()?;
                y.into_iter().for_each(|y| keep_product(1, y));
                Ok(pushed)
            }),
        ];
        let names: Vec<String> = variants.iter().map(|v| v.name.clone()).collect();
        // The host's cross-core latency: just before the samples, between their rounds and
        // just after them.
        let line_rounds = |rounds: usize| -> Result<_, ScenarioError> {
            engine.wait_all()?;
            // Idle workers poll for a while before they park; on two CPUs one still polling
            // would share a CPU with the probe's threads.
            std::thread::sleep(LINE_QUIET);
            floor::line_rounds(floor::LINE_HOPS, rounds)
                .map_err(|e| ScenarioError::from(DeviceError::Workers(e)))
        };
        let line_before = line_rounds(LINE_ROUNDS)?;
        // One round of the probe after every round of samples, so that a run whose rounds
        // span two states of the host can tell which ran in which; then an op on each lane the
        // variants use, so the next round finds the workers polling, as the round before did,
        // rather than parked by the probe's quiet spell.
        let mut line_each_round = Vec::new();
        let mut between = || -> Result<(), ScenarioError> {
            if let Some(r) = line_rounds(1)? {
                line_each_round.extend(r);
            }
            for lane in [device.compute, pp[0], pp[1]] {
                engine.push("wake", lane, &[], &[], || Ok(()));
            }
            Ok(engine.wait_all()?)
        };
        let summaries = ctx.sample_between(self, engine, &mut variants, &mut between)?;
        drop(variants);
        let line_after = line_rounds(LINE_ROUNDS)?;

        let mut run = RunRecord::new(self.name(), params.to_json(), rt.describe_devices());
        run.notes.extend(notes);
        let labels = names.iter().map(|name| match name.as_str() {
            "push-only" | "products-push-only" => {
                Some("timing without synchronization: NOT the cost of the work".to_string())
            }
            "products" => Some(format!(
                "{products} products {product_size}×{product_size}, pushed, one wait"
            )),
            "chain" => Some(format!(
                "y = y + 1, {n} dependent ops, pushed at once, one wait"
            )),
            "ping-pong" => Some(format!(
                "{n} dependent ops alternating between two CPU lanes, one wait"
            )),
            _ => None,
        });
        let labels: Vec<Option<String>> = labels.collect();
        run.add_variants(names.clone(), summaries, labels);

        // Correctness 1: what the timed loops computed.
        let mut timed_ok = true;
        let mut worst = 0f32;
        for (i, y) in outputs.into_inner().into_iter().enumerate() {
            // The chain's last y is 1 + N (exact in float32 up to 2^24, far above the maximum
            // --iterations); every other variant's is x + 1 = 2.
            let want = if i == 3 { 1.0 + n as f32 } else { 2.0 };
            match y {
                Some(y) => {
                    let (ok, err) = all_equal(&y.to_vec()?, want);
                    timed_ok &= ok && y.shape() == shape.as_slice();
                    worst = worst.max(err);
                }
                None => timed_ok = false,
            }
        }
        run.check(
            "timed loops computed x + 1",
            timed_ok,
            format!(
                "last y of sync, async and push-only compared with 2 (x is ones), the chain's with {}, max abs err {worst}",
                1 + n
            ),
        );

        // Correctness of the products the product variants timed, against float64.
        let (a, k) = (m.to_vec()?, product_size);
        let mut product_err = 0f64;
        let mut products_ok = true;
        for y in product_outputs.into_inner() {
            match y {
                Some(y) => {
                    let err = matmul_error(&a, &a, &y.to_vec()?, (k, k, k), 16);
                    product_err = if err.is_nan() {
                        f64::INFINITY
                    } else {
                        product_err.max(err)
                    };
                }
                None => products_ok = false,
            }
        }
        let tol = matmul_tolerance(k);
        run.check(
            "timed products match float64",
            products_ok && product_err <= tol,
            format!(
                "the last product of products and products-push-only at 16 positions: max relative error \
                 {product_err:.2e} (tolerance {tol:.1e})"
            ),
        );

        // Correctness 2: ordering. A chain y = y + 1 pushed at once, through the same op the
        // timed loops push, must give exactly 1 + N: any op run out of order, twice, or
        // not at all changes the sum.
        let chain = n.min(CHAIN_OPS);
        let got = add_chain(&x, chain).to_vec()?;
        let want = 1.0 + chain as f32;
        let (ok, max_err) = all_equal(&got, want);
        run.check(
            "dependent chain matches sequential reference",
            ok && got.len() == x.shape().iter().product::<usize>(),
            format!(
                "y = y + 1, {chain} times from ones, pushed at once: expected {want} in all {} elements, max abs err {max_err}",
                got.len()
            ),
        );

        // The ping-pong chain ran every op once, in order, alternating lanes.
        let counted = pp_last.into_inner().map(|c| c.load(Ordering::SeqCst));
        run.check(
            "ping-pong ran its ops in order",
            counted == Some(n),
            format!(
                "the last timed chain counted {} of {n} ops, each checking its turn",
                counted.map_or_else(|| "none".to_string(), |c| c.to_string())
            ),
        );
        let phases = measure_phases(engine, &x, n.min(MODEL_OPS))?;
        derive(&mut run, engine.mode(), n, &phases);
        let hops = handoffs(engine, pp, n.min(MODEL_OPS))?;
        derive_handoffs(&mut run, n, &hops);
        derive_gpu(&mut run, device, n);
        if is_cpu {
            engine.wait_all()?;
            let floor =
                floor::channel_floor_per_op(n, FLOOR_ROUNDS).map_err(DeviceError::Workers)?;
            derive_floor(&mut run, n, floor);
        }
        let probes = line_before
            .zip(line_after)
            .map(|(before, after)| LineProbes {
                before,
                each_round: line_each_round,
                after,
            });
        derive_line(&mut run, n, probes);
        derive_pitfall(&mut run, products, product_size);
        #[cfg(feature = "cuda")]
        if let crate::device::DeviceKind::Cuda(gpu) = &device.kind {
            engine.wait_all()?;
            let (launch, launch_wait) = gpu.launch_floor(FLOOR_LAUNCHES).map_err(|e| {
                crate::device::DeviceError::Gpu(format!("timing the driver alone: {e}"))
            })?;
            run.record(DRIVER_LAUNCH_S, launch);
            run.record(DRIVER_LAUNCH_AND_WAIT_S, launch_wait);
            let (sync, asyn) = (per_op(&run, "sync", n), per_op(&run, "async", n));
            run.record(ASYNC_OVER_DRIVER_LAUNCH_RATIO, asyn / launch);
            run.explanation.push(format!(
                "the driver alone, without the engine, takes {} per launch of this kernel and {} per launch \
                 followed by a wait for it; the async loop's {} per op is {:.2}× a bare launch, the sync loop's \
                 {} is {:.2}× a bare launch and wait.",
                human_time(launch),
                human_time(launch_wait),
                human_time(asyn),
                asyn / launch,
                human_time(sync),
                sync / launch_wait,
            ));
        }
        Ok(run)
    }
}

/// A variant's median time per op of its `n` ops (NaN if it was not measured).
fn per_op(run: &RunRecord, variant: &str, n: u64) -> f64 {
    run.median(variant).unwrap_or(f64::NAN) / n as f64
}

/// A time that describes the machine, not parbench: a regression gate must not call it a
/// regression of the code when the host changes.
const MACHINE_SECONDS: Figure = Figure::new(Unit::Seconds, Better::Neither);

/// Derive a machine reference time measured beside the samples (`name`, in seconds) and
/// async's cost per op as a multiple of it (`ratio`, lower is better); returns async's cost
/// per op.
fn derive_reference(run: &mut RunRecord, n: u64, name: &str, seconds: f64, ratio: &str) -> f64 {
    run.derive_as(name, seconds, MACHINE_SECONDS);
    let asyn = per_op(run, "async", n);
    run.derive_as(ratio, asyn / seconds, Figure::RATIO_LOWER_IS_BETTER);
    asyn
}

/// Rounds of the channel floor (each of `--iterations` closures); the median is quoted.
const FLOOR_ROUNDS: usize = 15;

/// The engine's per-op cost against the machine's floor for handing work to a thread,
/// measured in the same run ([`floor::channel_round`]). Not a bound the engine cannot beat
/// (it could batch where the channel does not), so the sentence claims none.
fn derive_floor(run: &mut RunRecord, n: u64, floor: f64) {
    let asyn = derive_reference(
        run,
        n,
        "channel_floor_per_op_s",
        floor,
        "async_over_floor_ratio",
    );
    let push = per_op(run, "push-only", n);
    run.explanation.push(format!(
        "the floor: {n} boxed closures sent through a channel to one other thread, which runs \
         and frees them, took {} each here (median of {FLOOR_ROUNDS} rounds): handing work to \
         a thread, with no dependency tracking, no output tensor and no bookkeeping. async's \
         {} per op is {:.2}× that, push-only's {} is {:.2}×.",
        human_time(floor),
        human_time(asyn),
        asyn / floor,
        human_time(push),
        push / floor,
    ));
}

/// How long the engine is left idle before the line latency is measured (its workers park).
const LINE_QUIET: Duration = Duration::from_millis(5);

/// Rounds of [`floor::line_round`] before and after the samples.
const LINE_ROUNDS: usize = 5;

/// Before and after differing by more than this factor, the run is flagged as spanning two
/// regimes of the host.
const LINE_SHIFT: f64 = 1.5;

/// The probes of the cross-core line latency around the samples, in seconds per hop.
struct LineProbes {
    /// [`LINE_ROUNDS`] rounds just before the samples.
    before: Vec<f64>,
    /// One round after each round of samples, in order.
    each_round: Vec<f64>,
    /// [`LINE_ROUNDS`] rounds just after the samples.
    after: Vec<f64>,
}

/// The latency of a cache line between two cores, measured just before the samples, after
/// each round of them and just after them, beside async's cost per op: on a VM the host
/// changes that latency from minute to minute (it moves the vCPUs), and every op moves several
/// lines between the pushing thread and the worker, so a reader needs it to compare two runs'
/// per-op figures, and to know whether one run's samples all saw the same machine. `None` on
/// a machine with one CPU.
fn derive_line(run: &mut RunRecord, n: u64, probes: Option<LineProbes>) {
    let Some(probes) = probes else {
        run.notes.push(
            "the cross-core line latency was not measured: this machine offers one CPU".into(),
        );
        return;
    };
    let med = |v: &[f64]| median(v).unwrap_or(f64::NAN);
    let (b, a) = (med(&probes.before), med(&probes.after));
    run.derive_as("cross_core_line_before_s", b, MACHINE_SECONDS);
    run.derive_as("cross_core_line_after_s", a, MACHINE_SECONDS);
    run.derive_series(
        "cross_core_line_each_round_s",
        serde_json::json!(probes.each_round),
    );
    // The latency on either side of each round: round i lies between points i and i + 1.
    let points: Vec<f64> = std::iter::once(b)
        .chain(probes.each_round.iter().copied())
        .chain(std::iter::once(a))
        .collect();
    let unusable = points
        .iter()
        .filter(|p| !(p.is_finite() && **p > 0.0))
        .count();
    if unusable > 0 {
        // Nothing says which regime those rounds ran in: no latency is quoted.
        run.notes.push(format!(
            "{unusable} of the {} probes of the cross-core line latency gave no figure: async's \
             cost per op is not quoted against it",
            points.len()
        ));
        return;
    }
    let (lo, hi) = points.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &p| {
        (lo.min(p), hi.max(p))
    });
    let shift = hi / lo;
    let steady = shift <= LINE_SHIFT;
    if !steady {
        // No single latency describes the run: a median of all rounds would fall between
        // the two regimes, at a value the machine never showed.
        let asyn = per_op(run, "async", n);
        run.notes.push(format!(
            "the host's cross-core latency changed {shift:.1}× during the run (from {} to {} \
             across the probes before, between and after the rounds of samples): the per-op \
             figures of this run mix two regimes of the machine",
            human_time(lo),
            human_time(hi),
        ));
        run.explanation.push(format!(
            "a cache line took {} to move one way between two threads' cores just before the \
             samples and {} just after (median of {LINE_ROUNDS} rounds each), and from {} to {} \
             in the probes between rounds: the host changed during the run, so async's {} per \
             op is not quoted against any of them.",
            human_time(b),
            human_time(a),
            human_time(lo),
            human_time(hi),
            human_time(asyn),
        ));
        derive_by_regime(run, n, &points, (lo * hi).sqrt());
        return;
    }
    let all: Vec<f64> = probes
        .before
        .iter()
        .chain(&probes.each_round)
        .chain(&probes.after)
        .copied()
        .collect();
    let line = med(&all);
    let asyn = derive_reference(run, n, "cross_core_line_s", line, "async_over_line_ratio");
    run.explanation.push(format!(
        "a cache line took {} to move one way between two threads' cores here ({} before the \
         samples, {} after, median of {LINE_ROUNDS} rounds each; every probe, before, between \
         and after the rounds of samples, within {LINE_SHIFT}× of the others). async's {} per \
         op is {:.1}× that: an op moves several lines between the pushing thread and the worker \
         (the op, its output, reference and memory counts), so on a VM, whose host changes this \
         latency from minute to minute, compare per-op figures between runs only beside it.",
        human_time(line),
        human_time(b),
        human_time(a),
        human_time(asyn),
        asyn / line,
    ));
}

/// For a run whose line latency changed: async's cost per op in the rounds that ran wholly
/// below `threshold` (`async_per_op_low_line_s`) and wholly above it
/// (`async_per_op_high_line_s`), judged by the probes on either side of each round (`points`,
/// one more than the rounds), so a reader sees what each regime cost instead of a median of
/// both. Rounds with a probe on each side of the threshold are left out of both.
fn derive_by_regime(run: &mut RunRecord, n: u64, points: &[f64], threshold: f64) {
    let Some(samples) = run
        .variants
        .iter()
        .find(|v| v.name == "async")
        .map(|v| v.summary.samples_s.clone())
    else {
        return;
    };
    let (mut low, mut high, mut low_line, mut high_line) = (vec![], vec![], vec![], vec![]);
    for (sample, side) in samples.iter().zip(points.windows(2)) {
        let (x, y) = (side[0], side[1]);
        if x < threshold && y < threshold {
            low.push(sample / n as f64);
            low_line.extend([x, y]);
        } else if x >= threshold && y >= threshold {
            high.push(sample / n as f64);
            high_line.extend([x, y]);
        }
    }
    let mut parts = Vec::new();
    for (key, per_op, line, label) in [
        ("async_per_op_low_line_s", &low, &low_line, "lower"),
        ("async_per_op_high_line_s", &high, &high_line, "higher"),
    ] {
        if let (Some(cost), Some(line)) = (median(per_op), median(line)) {
            run.derive_as(key, cost, Figure::new(Unit::Seconds, Better::Lower));
            parts.push(format!(
                "{} of the {} rounds ran wholly at the {label} latency (about {}), async {} per op",
                per_op.len(),
                samples.len(),
                human_time(line),
                human_time(cost),
            ));
        }
    }
    let straddled = samples.len().min(points.len().saturating_sub(1)) - low.len() - high.len();
    if straddled > 0 {
        parts.push(format!("{straddled} straddled the change"));
    }
    if !parts.is_empty() {
        run.explanation.push(format!(
            "By the probes on either side of each round: {}.",
            parts.join("; ")
        ));
    }
}

/// Push `n` ops that alternate between two lanes, each writing the same var (so each
/// waits for the one before, on the other lane), each checking it runs in its turn; returns
/// the counter they advance.
fn ping_pong(engine: &Engine, lanes: [LaneId; 2], n: u64) -> Arc<AtomicU64> {
    let counter = Arc::new(AtomicU64::new(0));
    let turn = Var::new();
    for i in 0..n {
        let c = counter.clone();
        let lane = lanes[(i % 2) as usize];
        engine.push("ping-pong", lane, &[], &[&turn], move || {
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

/// Each hop's latency in a traced ping-pong chain of `ops` ops: from one op's end on one lane
/// to the next op's start on the other, in seconds, sorted.
fn handoffs(engine: &Engine, lanes: [LaneId; 2], ops: u64) -> Result<Vec<f64>, ScenarioError> {
    let (_, records) = super::support::traced(engine, || -> Result<(), ScenarioError> {
        ping_pong(engine, lanes, ops);
        engine.wait_all()?;
        Ok(())
    })?;
    let mut records = records.unwrap_or_default();
    records.retain(|r| r.name == "ping-pong");
    let mut hops: Vec<f64> = records
        .windows(2)
        .map(|w| w[1].started_ns.saturating_sub(w[0].ended_ns) as f64 * 1e-9)
        .collect();
    hops.sort_by(f64::total_cmp);
    Ok(hops)
}

/// The hand-off figures and their sentence.
fn derive_handoffs(run: &mut RunRecord, n: u64, hops: &[f64]) {
    if hops.is_empty() {
        return;
    }
    let (p50, p99) = (quantile(hops, 0.5), quantile(hops, 0.99));
    let lower = Figure::new(Unit::Seconds, Better::Lower);
    run.derive_as("handoff_p50_s", p50, lower);
    run.derive_as("handoff_p99_s", p99, lower);
    let ping_pong = per_op(run, "ping-pong", n);
    run.derive_as("ping_pong_per_op_s", ping_pong, lower);
    run.explanation.push(format!(
        "ping-pong: {n} dependent ops alternating between two CPU lanes took {} per op; from \
         one lane's op ending to the next starting on the other lane took {} (median hop) and \
         {} at the 99th percentile, in a traced chain of {} ops: what a multi-device step pays \
         each time it crosses devices.",
        human_time(ping_pong),
        human_time(p50),
        human_time(p99),
        hops.len() + 1
    ));
}

/// Time `ops` synchronous iterations op by op from engine timestamps.
fn measure_phases(engine: &Engine, x: &Tensor, ops: u64) -> Result<Phases, ScenarioError> {
    engine.set_tracing(true);
    let _ = engine.take_trace();
    let mut issued = Vec::with_capacity(ops as usize);
    let mut returned = Vec::with_capacity(ops as usize);
    for _ in 0..ops {
        let a = engine.now_ns();
        let y = x.add_scalar(1.0);
        y.wait_to_read()?;
        let c = engine.now_ns();
        issued.push(a);
        returned.push(c);
    }
    engine.set_tracing(false);
    let mut trace = engine.take_trace();
    trace.retain(|r| r.name == "add_scalar");
    trace.sort_by_key(|r| r.started_ns);
    let (mut t1, mut t2, mut t3) = (Vec::new(), Vec::new(), Vec::new());
    for ((a, c), r) in issued.iter().zip(&returned).zip(&trace) {
        t1.push(r.started_ns.saturating_sub(*a) as f64 * 1e-9);
        t2.push(r.duration_ns() as f64 * 1e-9);
        t3.push(c.saturating_sub(r.ended_ns) as f64 * 1e-9);
    }
    let m = |v: &[f64]| median(v).unwrap_or(f64::NAN);
    Ok(Phases {
        t1: m(&t1),
        t2: m(&t2),
        t3: m(&t3),
    })
}

fn derive(run: &mut RunRecord, mode: Mode, n: u64, p: &Phases) {
    let nf = n as f64;
    let wobble = |v: &str| run.median_uncertainty(v).unwrap_or(f64::NAN);
    let f = Medians {
        sync: run.median("sync").unwrap_or(f64::NAN),
        asyn: run.median("async").unwrap_or(f64::NAN),
        push: run.median("push-only").unwrap_or(f64::NAN),
        async_uncertainty: wobble("async"),
        push_uncertainty: wobble("push-only"),
    };
    let (sync, asyn, push) = (f.sync, f.asyn, f.push);
    let speedup = sync / asyn;
    let pred_sync = nf * (p.t1 + p.t2 + p.t3);
    let pred_async = p.t1 + nf * p.t2 + p.t3;
    run.record(ASYNC_SPEEDUP, speedup);
    run.record(SYNC_PER_OP_S, sync / nf);
    run.record(ASYNC_PER_OP_S, asyn / nf);
    run.record(PUSH_PER_OP_S, push / nf);
    run.record(T1_S, p.t1);
    run.record(T2_S, p.t2);
    run.record(T3_S, p.t3);
    run.record(PREDICTED_SYNC_S, pred_sync);
    run.record(PREDICTED_ASYNC_S, pred_async);
    run.record(MEASURED_OVER_PREDICTED_SYNC_RATIO, sync / pred_sync);
    run.record(MEASURED_OVER_PREDICTED_ASYNC_RATIO, asyn / pred_async);

    run.notes.push(format!("engine: {}", mode.as_str()));
    explain(mode, n, &f, p).record(run);
}

/// The medians the explanation quotes, and how far the 95% interval of two of them reaches
/// ([`RunRecord::median_uncertainty`]), as plain numbers.
struct Medians {
    sync: f64,
    asyn: f64,
    push: f64,
    async_uncertainty: f64,
    push_uncertainty: f64,
}

/// What the figures show, and the figures outside their physical range: `push-only` slower
/// than `async`, which makes the same pushes and then waits. Only beyond both medians'
/// intervals: in naive mode, or for ops cheaper than their push, the two are equal up to
/// noise, and that is a normal result.
fn explain(mode: Mode, n: u64, f: &Medians, p: &Phases) -> super::support::Explained {
    let nf = n as f64;
    let (sync, asyn, push) = (f.sync, f.asyn, f.push);
    let speedup = sync / asyn;
    let pred_sync = nf * (p.t1 + p.t2 + p.t3);
    let pred_async = p.t1 + nf * p.t2 + p.t3;
    let mut out = super::support::Explained::default();
    let e = &mut out.sentences;
    match mode {
        Mode::Threaded => e.push(format!(
            "async is {} than sync: the front end keeps pushing while the worker computes, \
             instead of paying a full round trip per op ({} per op in sync, {} in async).",
            crate::units::faster_or_slower(speedup),
            crate::units::human_time(sync / nf),
            crate::units::human_time(asyn / nf),
        )),
        Mode::Naive => e.push(format!(
            "engine naive completes every op before push returns, so waiting once or after every op costs the same \
             (speed-up {speedup:.2}×): asynchrony is what the threaded engine buys."
        )),
    }
    e.push(format!(
        "push-only ({}) stops the clock before the work is done: it measures pushing, not computing.",
        crate::units::human_time(push)
    ));
    e.push(format!(
        "book model with t1 = {}, t2 = {}, t3 = {}: sync ≈ N(t1+t2+t3) = {} (measured {}), \
         async ≈ t1 + N·t2 + t3 = {} (measured {}).",
        crate::units::human_time(p.t1),
        crate::units::human_time(p.t2),
        crate::units::human_time(p.t3),
        crate::units::human_time(pred_sync),
        crate::units::human_time(sync),
        crate::units::human_time(pred_async),
        crate::units::human_time(asyn),
    ));
    if mode == Mode::Threaded && asyn > 1.5 * pred_async {
        e.push(
            "async is slower than t1 + N·t2 + t3: for an op this small the pipeline runs at the pace of \
             its slowest stage, the per-op cost of pushing and of the engine's bookkeeping, not of t2."
                .into(),
        );
    }
    if push * (1.0 - f.push_uncertainty) > asyn * (1.0 + f.async_uncertainty) {
        out.warnings.push(format!(
            "push-only ({}) took longer than async ({}), beyond both medians' 95% intervals, though async makes \
             the same pushes and then waits: {}.",
            crate::units::human_time(push),
            crate::units::human_time(asyn),
            super::support::BETWEEN_ROUNDS,
        ));
    }
    out
}

/// How far the products' push-only clock reads below their true time, next to the same gap
/// for `y = x + 1`: the pitfall is large where computing dominates pushing.
fn derive_pitfall(run: &mut RunRecord, products: u64, size: usize) {
    let m = |v: &str| run.median(v).unwrap_or(f64::NAN);
    let (true_time, pushed) = (m("products"), m("products-push-only"));
    let (tiny_true, tiny_pushed) = (m("async"), m("push-only"));
    let ratio = true_time / pushed;
    run.derive_as(
        "products_over_push_only_ratio",
        ratio,
        Figure::new(Unit::Ratio, Better::Neither),
    );
    run.explanation.push(format!(
        "the pitfall on the book's workload: pushing {products} products of {size}×{size} took {} \
         (products-push-only), computing them took {} (products): a clock stopped without waiting \
         reads {ratio:.0}× too little. For y = x + 1 pushing is most of the work, so push-only ({}) \
         is {:.2}× async ({}) and the same mistake goes unnoticed.",
        human_time(pushed),
        human_time(true_time),
        human_time(tiny_pushed),
        tiny_pushed / tiny_true,
        human_time(tiny_true),
    ));
}

/// The dependent chain against independent ops, and what the phases mean on a GPU.
fn derive_gpu(run: &mut RunRecord, device: &Device, n: u64) {
    let chain = run.median("chain").unwrap_or(f64::NAN);
    let asyn = run.median("async").unwrap_or(f64::NAN);
    let ratio = chain / asyn;
    run.record(CHAIN_PER_OP_S, chain / n as f64);
    run.derive_as(
        "chain_over_async_ratio",
        ratio,
        Figure::RATIO_LOWER_IS_BETTER,
    );
    let e = &mut run.explanation;
    e.push(format!(
        "a chain of {n} dependent ops (each reads the previous y) took {} per op, {ratio:.2}× the independent \
         async ops: {}.",
        human_time(chain / n as f64),
        match device.gpu_order() {
            Some(GpuOrder::Stream) => {
                "on the GPU a dependent kernel is enqueued right behind its producer and the stream keeps \
                 them in order (--gpu-order stream), so the order costs no host round trip"
            }
            Some(GpuOrder::Host) => {
                "the engine waits for the GPU to finish each producer before the next op is enqueued \
                 (--gpu-order host): a host round trip per op"
            }
            None => "each op can only start once its producer has finished, so the engine hands the chain from op to op",
        }
    ));
    if device.gpu_order() == Some(GpuOrder::Stream) {
        e.push(
            "on the GPU in stream order, t2 is the time to enqueue the kernel on the compute lane; the GPU's own work and \
             the event that reports it fall into t3."
                .into(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::RuntimeOptions;

    /// 1000 ops; t1 = 1 µs, t2 = 2 µs, t3 = 3 µs: sync ≈ 6 ms, async ≈ 2.004 ms.
    fn explained(mode: Mode, sync: f64, asyn: f64, push: f64) -> super::super::support::Explained {
        let f = Medians {
            sync,
            asyn,
            push,
            async_uncertainty: 0.02,
            push_uncertainty: 0.02,
        };
        let p = Phases {
            t1: 1e-6,
            t2: 2e-6,
            t3: 3e-6,
        };
        explain(mode, 1000, &f, &p)
    }

    #[test]
    fn the_explanation_quotes_its_own_arithmetic() {
        let e = explained(Mode::Threaded, 6e-3, 2.5e-3, 1e-3);
        let all = e.sentences.join("\n");
        assert!(all.contains("async is 2.40× faster than sync"), "{all}");
        assert!(
            all.contains("(6.000 µs per op in sync, 2.500 µs in async)"),
            "{all}"
        );
        assert!(all.contains("push-only (1.000 ms)"), "{all}");
        assert!(
            all.contains("sync ≈ N(t1+t2+t3) = 6.000 ms (measured 6.000 ms)")
                && all.contains("async ≈ t1 + N·t2 + t3 = 2.004 ms (measured 2.500 ms)"),
            "{all}"
        );
        // 2.5 ms is not above 1.5 × 2.004 ms.
        assert!(!all.contains("slowest stage"), "{all}");
        assert!(e.warnings.is_empty(), "{:?}", e.warnings);
        // An async loop slower than sync says so.
        let all = explained(Mode::Threaded, 2e-3, 2.5e-3, 1e-3)
            .sentences
            .join("\n");
        assert!(all.contains("async is 1.25× slower than sync"), "{all}");
        let all = explained(Mode::Threaded, 6e-3, 3.1e-3, 1e-3)
            .sentences
            .join("\n");
        assert!(all.contains("slowest stage"), "{all}");
    }

    #[test]
    fn push_only_beyond_async_is_a_warning_only_outside_the_noise() {
        // Within both medians' intervals (±2%): equal up to noise, a normal result.
        assert!(explained(Mode::Naive, 2e-3, 2e-3, 2.03e-3)
            .warnings
            .is_empty());
        let e = explained(Mode::Threaded, 6e-3, 2e-3, 2.2e-3);
        assert_eq!(e.warnings.len(), 1, "{:?}", e.warnings);
        let w = &e.warnings[0];
        assert!(
            w.contains("push-only (2.200 ms) took longer than async (2.000 ms)"),
            "{w}"
        );
        assert!(w.contains("--min-samples"), "{w}");
    }

    /// A run whose async variant took 1 ms for 1000 ops (1 µs per op).
    fn run_with_async() -> RunRecord {
        let mut run = RunRecord::new("async", serde_json::Map::new(), vec![]);
        let one_ms = crate::harness::Summary::from_samples(&[1e-3; 5]).expect("samples");
        run.add_variants(vec!["async".into()], vec![one_ms], [None]);
        run
    }

    fn probes(before: Vec<f64>, each_round: Vec<f64>, after: Vec<f64>) -> Option<LineProbes> {
        Some(LineProbes {
            before,
            each_round,
            after,
        })
    }

    #[test]
    fn the_line_latency_is_quoted_beside_async_and_a_shift_is_flagged() {
        let figure = |run: &RunRecord, k: &str| run.derived[k].as_f64().expect(k);
        // Steady enough (250 ns before, 200 ns after and between rounds): the figure is the
        // median of every probe, 200 ns, and async's 1 µs per op is 5 lines.
        let mut run = run_with_async();
        derive_line(
            &mut run,
            1000,
            probes(vec![250e-9; 3], vec![200e-9; 5], vec![200e-9; 5]),
        );
        assert!((figure(&run, "cross_core_line_s") - 200e-9).abs() < 1e-15);
        assert!((figure(&run, "async_over_line_ratio") - 5.0).abs() < 1e-9);
        assert!(run.notes.is_empty(), "{:?}", run.notes);
        assert_eq!(
            run.derived["cross_core_line_each_round_s"]
                .as_array()
                .unwrap()
                .len(),
            5
        );
        // The latency describes the host; only the engine's multiple of it is a score.
        assert_eq!(run.figure("cross_core_line_s").better, Better::Neither);
        assert_eq!(run.figure("async_over_line_ratio").better, Better::Lower);
        let text = run.explanation.join(" ");
        assert!(text.contains("1.000 µs per op is 5.0× that"), "{text}");
        // The host moved the vCPUs between the two measurements: flagged, and no figure
        // between the two regimes is quoted as the latency.
        let mut run = run_with_async();
        derive_line(
            &mut run,
            1000,
            probes(vec![50e-9; 5], vec![50e-9; 5], vec![240e-9; 5]),
        );
        assert!((figure(&run, "cross_core_line_before_s") - 50e-9).abs() < 1e-15);
        assert!((figure(&run, "cross_core_line_after_s") - 240e-9).abs() < 1e-15);
        assert!(
            run.notes.iter().any(|n| n.contains("changed 4.8×")),
            "{:?}",
            run.notes
        );
        assert!(!run.derived.contains_key("cross_core_line_s"));
        assert!(!run.derived.contains_key("async_over_line_ratio"));
        let text = run.explanation.join(" ");
        assert!(
            text.contains("50.00 ns to move one way") && text.contains("not quoted"),
            "{text}"
        );
        // A probe with no usable figure: the run is not called steady.
        let mut run = run_with_async();
        derive_line(
            &mut run,
            1000,
            probes(vec![50e-9; 5], vec![f64::NAN], vec![50e-9; 5]),
        );
        assert!(!run.derived.contains_key("cross_core_line_s"));
        assert!(
            run.notes.iter().any(|n| n.contains("1 of the 3 probes")),
            "{:?}",
            run.notes
        );
        // One CPU: no figure, and a note that says why.
        let mut run = run_with_async();
        derive_line(&mut run, 1000, None);
        assert!(!run.derived.contains_key("cross_core_line_s"));
        assert!(run.notes[0].contains("one CPU"), "{:?}", run.notes);
    }

    #[test]
    fn a_shift_between_rounds_is_flagged_and_each_regime_quoted_apart() {
        let figure = |run: &RunRecord, k: &str| run.derived[k].as_f64().expect(k);
        // Before and after agree (40 ns), but the host was slow (200 ns) around rounds 3 and
        // 4 of six: the before/after pair alone would call this run steady.
        let mut run = RunRecord::new("async", serde_json::Map::new(), vec![]);
        let samples = [0.3e-3, 0.3e-3, 0.6e-3, 0.6e-3, 0.3e-3, 0.3e-3];
        let summary = crate::harness::Summary::from_samples(&samples).expect("samples");
        run.add_variants(vec!["async".into()], vec![summary], [None]);
        // Probes: before, after rounds 1..6, after. Round i lies between probes i and i + 1:
        // rounds 1, 2 and 6 see 40 ns on both sides, round 4 200 ns on both, rounds 3 and 5
        // a probe on each side of the change.
        let each_round = vec![40e-9, 40e-9, 200e-9, 200e-9, 40e-9, 40e-9];
        derive_line(
            &mut run,
            1000,
            probes(vec![40e-9; 5], each_round, vec![40e-9; 5]),
        );
        assert!(
            run.notes.iter().any(|n| n.contains("changed 5.0×")),
            "{:?}",
            run.notes
        );
        assert!(!run.derived.contains_key("cross_core_line_s"));
        // Rounds 1, 2 and 6 are low (0.3 µs per op), round 4 high (0.6 µs); 3 and 5 straddle.
        assert!((figure(&run, "async_per_op_low_line_s") - 0.3e-6).abs() < 1e-15);
        assert!((figure(&run, "async_per_op_high_line_s") - 0.6e-6).abs() < 1e-15);
        let text = run.explanation.join(" ");
        assert!(
            text.contains("3 of the 6 rounds ran wholly at the lower latency")
                && text.contains("1 of the 6 rounds ran wholly at the higher latency")
                && text.contains("2 straddled the change"),
            "{text}"
        );
    }

    #[test]
    fn the_chain_adds_one_per_op_in_order() {
        let rt = Runtime::cpu(&RuntimeOptions::default(), &[2]).unwrap();
        let x = Tensor::ones(&rt.engine, &rt.devices[0], &[1, 3]);
        let got = add_chain(&x, 5000).to_vec().unwrap();
        assert_eq!(all_equal(&got, 5001.0), (true, 0.0));
    }

    #[test]
    fn the_value_check_fails_on_wrong_values() {
        assert!(all_equal(&[3.0, 3.0], 3.0).0);
        assert!(!all_equal(&[3.0, 2.0], 3.0).0);
        assert!(!all_equal(&[f32::NAN], 3.0).0);
        assert!(!all_equal(&[], 3.0).0);
        // x + 1 computed from the same x N times (the old check) is not a chain's 1 + N.
        assert!(!all_equal(&[2.0, 2.0], 1.0 + 1000.0).0);
    }
}
