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
//! `async` measures the engine, not the machine. Its explanation sets async's cost per op
//! against the machine's limits (the latency of a cache line between two cores, a closure
//! handed to another thread through a channel), read from the process's limits, measured once
//! at its start: `parbench devices --probe` prints them, with the GPU driver's floor, and every
//! report's environment records them.
//!
//! The book's model splits one iteration into t1 (front end hands the op to the backend),
//! t2 (backend executes it) and t3 (result returns to the front end) and predicts
//! sync ≈ N(t1+t2+t3), async ≈ t1 + N·t2 + t3. An instrumented extra run measures the three
//! from engine timestamps so the predictions can be set against the measured medians.
//!
//! One file a concern: the figures' declarations (`figures.rs`), the book's model
//! (`model.rs`), the pitfall on the products (`pitfall.rs`), the dependent chain
//! (`chain.rs`), the hand-offs (`handoff.rs`), async against the machine's limits
//! (`machine.rs`), what the timed loops computed (`checks.rs`) and the lesson (`lesson.rs`).

mod chain;
mod checks;
mod figures;
mod handoff;
mod lesson;
mod machine;
mod model;
mod pitfall;

use std::time::{Duration, Instant};

use super::gpu_clocks::Clocks;
use super::kit::{check_bytes, check_matrices, chosen_device, ChosenDevice};
use super::variant::variants;
use super::{
    Choice, DeviceChoice, ParamError, ParamKind, ParamSpec, Params, RunContext, Scenario,
    ScenarioError,
};
use crate::device::memory::f32_bytes;
use crate::device::{available_cores, DeviceRequest, Runtime};
use crate::harness::{synced, SamplerConfig, Variant};
use crate::report::RunRecord;
use crate::tensor::Tensor;
use chain::add_chain;

variants! {
    /// What `async` times.
    pub(super) enum Timed {
        /// Wait for y after every op.
        Sync = "sync",
        /// Push all N ops, wait once.
        Async = "async",
        /// The clock stopped before the work is done: the pitfall.
        PushOnly = "push-only",
        /// y = y + 1, N dependent ops, pushed at once.
        Chain = "chain",
        /// N dependent ops alternating between two CPU lanes.
        PingPong = "ping-pong",
        /// The book's matrix products, pushed, one wait.
        Products = "products",
        /// The products' pitfall.
        ProductsPushOnly = "products-push-only",
    }
}

impl Timed {
    /// The label beside the variant's row, where its name alone does not say what it times.
    fn label(self, cfg: &Config) -> Option<String> {
        let (n, size) = (cfg.iterations, cfg.product_size);
        match self {
            Timed::PushOnly | Timed::ProductsPushOnly => {
                Some("timing without synchronization: NOT the cost of the work".to_string())
            }
            Timed::Products => Some(format!(
                "{} products {size}×{size}, pushed, one wait",
                cfg.products
            )),
            Timed::Chain => Some(format!(
                "y = y + 1, {n} dependent ops, pushed at once, one wait"
            )),
            Timed::PingPong => Some(format!(
                "{n} dependent ops alternating between two CPU lanes, one wait"
            )),
            Timed::Sync | Timed::Async => None,
        }
    }
}

/// A variant's median (NaN if it was not measured).
fn median_of(run: &RunRecord, variant: Timed) -> f64 {
    run.median(variant.name()).unwrap_or(f64::NAN)
}

/// A variant's median time per op of its `n` ops (NaN if it was not measured).
fn per_op(run: &RunRecord, variant: Timed, n: u64) -> f64 {
    median_of(run, variant) / n as f64
}

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

/// What `async` declares.
static SPEC: super::Spec = super::Spec {
    name: "async",
    about: "sync vs async loop of y = x + 1: wait after every op or once; the push-only pitfall, also on the book's matrix products; t1/t2/t3 model",
    params: PARAMS,
    lesson: lesson::LESSON,
    book: lesson::BOOK,
    sampling: SamplerConfig {
            warmup: 3,
            min_samples: 15,
            max_samples: 300,
            min_time: Duration::from_secs(1),
            max_time: Duration::from_secs(30),
        },
};

impl Scenario for AsyncLoop {
    fn spec(&self) -> &'static super::Spec {
        &SPEC
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
        let cfg = Config::of(params)?;
        let n = cfg.iterations;
        let threads = ctx.cpu_threads.unwrap_or_else(available_cores);
        // The machine's limits, measured once per process: before the devices' threads exist,
        // so the probes have the cores to themselves (the CLI has measured them already).
        let limits = crate::machine::limits();
        let ChosenDevice {
            request,
            fallback_note: notes,
        } = chosen_device(cfg.device, threads, ctx.gpu_fallback)?;
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
                (Timed::Sync.name(), figures::SYNC_GPU_S),
                (Timed::Async.name(), figures::ASYNC_GPU_S),
                (Timed::Chain.name(), figures::CHAIN_GPU_S),
            ],
        );
        #[cfg(not(feature = "cuda"))]
        let clocks = Clocks::default();
        let clocks = &clocks;
        // The last output of every timed variant, checked after sampling: the timed work itself
        // must have computed what it was asked to, not only the checks' own loops.
        let last = checks::LastOutputs::default();
        let push_products = || -> Result<Option<Tensor>, ScenarioError> {
            let mut y = None;
            for _ in 0..cfg.products {
                y = Some(m.matmul(&m)?);
            }
            Ok(y)
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
            let mut y = None;
            for _ in 0..n {
                y = Some(x.add_scalar(1.0));
            }
            Ok(y)
        };
        let (x, last, add_one, push_products) = (&x, &last, &add_one, &push_products);
        let (waited, pushed_only) = (&waited, &pushed_only);
        let mut variants: Vec<Variant<ScenarioError>> = Timed::ALL
            .iter()
            .map(|&v| -> Variant<ScenarioError> {
                match v {
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
                    Timed::Chain => {
                        Variant::new(v.name(), move || waited(v, &|| Ok(Some(add_chain(x, n)))))
                    }
                    Timed::PingPong => Variant::new(v.name(), move || {
                        let mut counter = None;
                        let elapsed = synced(engine, || {
                            counter = Some(handoff::ping_pong(engine, ping_pong_lanes, n));
                            Ok::<_, ScenarioError>(())
                        })?;
                        last.keep_counter(counter);
                        Ok(elapsed)
                    }),
                    Timed::Products => Variant::new(v.name(), move || waited(v, push_products)),
                    Timed::ProductsPushOnly => {
                        Variant::new(v.name(), move || pushed_only(v, push_products))
                    }
                }
            })
            .collect();
        let summaries = ctx.sample(self, engine, &mut variants)?;
        drop(variants);

        let mut run = RunRecord::new(self.name(), params.to_json(), rt.describe_devices());
        run.notes.extend(notes);
        let labels: Vec<Option<String>> = Timed::ALL.iter().map(|v| v.label(&cfg)).collect();
        run.add_variants(Timed::names(), summaries, labels);

        last.check(&mut run, &cfg, x, &m)?;
        clocks.derive(&mut run, usize::from(ctx.traces.is_some()));

        let phases = model::measure_phases(engine, x, n.min(MODEL_OPS))?;
        model::derive(&mut run, engine.mode(), n, &phases);
        let hops = handoff::handoffs(engine, ping_pong_lanes, n.min(MODEL_OPS))?;
        handoff::derive_handoffs(&mut run, n, &hops);
        chain::derive_chain(&mut run, device, n);
        if is_cpu {
            machine::derive_against_limits(&mut run, n, limits);
        }
        pitfall::derive_pitfall(&mut run, cfg.products, cfg.product_size);
        lesson::conclude(&mut run, n, cfg.products, cfg.product_size);
        Ok(run)
    }
}

#[cfg(all(test, feature = "cuda"))]
mod gpu_tests {
    use super::figures::*;
    use super::Timed;

    #[test]
    fn gpu_figures_are_named_after_their_variants() {
        use crate::scenario::gpu_time::gpu_key;
        for (v, spec) in [
            (Timed::Sync, SYNC_GPU_S),
            (Timed::Async, ASYNC_GPU_S),
            (Timed::Chain, CHAIN_GPU_S),
        ] {
            assert_eq!(spec.key, gpu_key(v.name()));
            assert!(spec.figure.detail, "{}", spec.key);
        }
    }

    /// `async --device cuda` with tiny sizes records each GPU variant's GPU time, and that
    /// time lies within its host time; the driver's floor is the GPU's limits', not async's.
    #[test]
    #[ignore = "needs a GPU"]
    fn gpu_async_records_the_gpu_times() {
        use crate::scenario::gpu_clocks::{assert_recorded, few_samples, params_of};
        use crate::scenario::Scenario;
        let scenario = super::AsyncLoop;
        let params = params_of(
            &scenario,
            &[
                ("iterations", "50"),
                ("products", "2"),
                ("product_size", "64"),
                ("device", "cuda"),
            ],
        );
        let run = scenario.run(&params, &few_samples()).expect("runs");
        assert_recorded(&run, &["sync_gpu_s", "async_gpu_s", "chain_gpu_s"]);
        for v in [Timed::Sync, Timed::Async, Timed::Chain] {
            let key = crate::scenario::gpu_time::gpu_key(v.name());
            let gpu = run.derived[&key].as_f64().expect("recorded");
            let host = run.median(v.name()).expect("sampled");
            // The GPU's span lies within the sample, up to the start event recorded just
            // before the host's clock starts.
            assert!(
                gpu <= host * 1.5 + 50e-6,
                "{key}: GPU {gpu} s, host {host} s"
            );
        }
        for key in [
            "push_only_gpu_s",
            "ping_pong_gpu_s",
            "products_gpu_s",
            "driver_launch_s",
            "async_over_driver_launch_ratio",
        ] {
            assert!(!run.derived.contains_key(key), "{key}");
        }
        let text = run.explanation.join(" ");
        assert!(
            text.contains("async: ") && text.contains("host / GPU"),
            "{text}"
        );
    }
}
