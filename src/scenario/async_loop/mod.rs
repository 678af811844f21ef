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
//! The spec and the figures' declarations here; the timed loops, the checks' run and the
//! untimed extra runs in `measure.rs`; the book's model of t1, t2 and t3 (`model.rs`); what
//! the timed loops computed (`checks.rs`); the pitfall on the products, the dependent chain,
//! the hand-offs, async against the machine's limits and the lesson in `explain.rs`.

mod checks;
mod explain;
mod measure;
mod model;

use super::kit::{check_bytes, check_matrices, ratio, sampling_to_95, seconds};
use super::variant::variants;
use super::{Choice, DeviceChoice, Params, RunContext, Scenario, ScenarioError};
use crate::device::memory::f32_bytes;
use crate::harness::SamplerConfig;
use crate::report::{Better, FigureSpec, RunRecord};
use crate::tensor::Tensor;

variants! {
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

/// `y = y + 1`, `n` times from `x`, pushed at once: each op reads the previous one's output.
fn add_chain(x: &Tensor, n: u64) -> Tensor {
    (0..n).fold(x.clone(), |y, _| y.add_scalar(1.0))
}

pub struct AsyncLoop;

// The derived figures `async` records. The engine's internals are detail
// (`FigureSpec::detail`): the default table leaves them to `--verbose`, the JSON keeps them.
// The machine's own figures are not here: they are the process's limits (see above).

// The book's model and the loops it describes.
const ASYNC_SPEEDUP: FigureSpec = ratio("async_speedup", Better::Higher);
const SYNC_PER_OP_S: FigureSpec = seconds("sync_per_op_s", Better::Neither);
const ASYNC_PER_OP_S: FigureSpec = seconds("async_per_op_s", Better::Neither);
const PUSH_PER_OP_S: FigureSpec = seconds("push_per_op_s", Better::Neither);
const T1_S: FigureSpec = seconds("t1_s", Better::Neither).detail();
const T2_S: FigureSpec = seconds("t2_s", Better::Neither).detail();
const T3_S: FigureSpec = seconds("t3_s", Better::Neither).detail();
const PREDICTED_SYNC_S: FigureSpec = seconds("predicted_sync_s", Better::Neither).detail();
const PREDICTED_ASYNC_S: FigureSpec = seconds("predicted_async_s", Better::Neither).detail();
const MEASURED_OVER_PREDICTED_SYNC_RATIO: FigureSpec =
    ratio("measured_over_predicted_sync_ratio", Better::Neither).detail();
const MEASURED_OVER_PREDICTED_ASYNC_RATIO: FigureSpec =
    ratio("measured_over_predicted_async_ratio", Better::Neither).detail();

// The pitfall on the book's matrix products.
const PRODUCTS_OVER_PUSH_ONLY_RATIO: FigureSpec =
    ratio("products_over_push_only_ratio", Better::Neither);

// The dependent chain.
const CHAIN_PER_OP_S: FigureSpec = seconds("chain_per_op_s", Better::Neither);
const CHAIN_OVER_ASYNC_RATIO: FigureSpec = ratio("chain_over_async_ratio", Better::Lower);

// Hand-offs between two lanes.
const HANDOFF_P50_S: FigureSpec = seconds("handoff_p50_s", Better::Lower).detail();
const HANDOFF_P99_S: FigureSpec = seconds("handoff_p99_s", Better::Lower).detail();
const PING_PONG_PER_OP_S: FigureSpec = seconds("ping_pong_per_op_s", Better::Lower).detail();

// The GPU's own clock around each sample of the GPU variants (seconds per sample, as the
// variant's median).
#[cfg(feature = "cuda")]
const SYNC_GPU_S: FigureSpec = crate::scenario::gpu_time::gpu_seconds("sync_gpu_s");
#[cfg(feature = "cuda")]
const ASYNC_GPU_S: FigureSpec = crate::scenario::gpu_time::gpu_seconds("async_gpu_s");
#[cfg(feature = "cuda")]
const CHAIN_GPU_S: FigureSpec = crate::scenario::gpu_time::gpu_seconds("chain_gpu_s");

super::params::params! {
    struct Config {
        /// ops per loop: y = x + 1, N times
        iterations: u64 = Int { min: 1, max: 10_000_000 }, "1000";
        /// shape of x, e.g. 1,2 or 1000x1000
        shape: Vec<usize> = Shape { max_dims: 4 }, "1,2";
        /// matrix products pushed by the products and products-push-only variants (the book's
        /// 10)
        products: u64 = Int { min: 1, max: 1_000 }, "10";
        /// size N of those N×N products (the book's 1000)
        product_size: usize = Int { min: 1, max: 100_000 }, "1000";
        /// cpu, or cuda (an error without a usable GPU, unless --fallback)
        device: DeviceChoice = Choice(DeviceChoice::WORDS), "cpu";
    }
}

/// Ops timed individually for the t1/t2/t3 model (enough for stable medians, bounded cost).
const MODEL_OPS: u64 = 2_000;

static SPEC: super::Spec = super::Spec {
    name: "async",
    about: "sync vs async loop of y = x + 1: wait after every op or once; the push-only pitfall, also on the book's matrix products; t1/t2/t3 model",
    params: PARAMS,
    lesson: Some(explain::LESSON),
    book: explain::BOOK,
    sampling: SamplerConfig {
        warmup: 3,
        min_samples: 15,
        ..sampling_to_95(300, 1)
    },
};

impl Scenario for AsyncLoop {
    fn spec(&self) -> &'static super::Spec {
        &SPEC
    }

    /// Its microsecond figures follow where the OS places the engine's threads: eight back-to-
    /// back reruns of `scenarios/ci.toml` by one binary on a 2-core VM read `chain` from 163 to
    /// 927 µs (×5.7) with no change of code (results/compare-detection.md); a change between
    /// single runs counts past ×6.
    fn drift_between_runs(&self) -> Option<f64> {
        Some(5.0)
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
        measure::loops(self, params, ctx, &Config::of(params)?)
    }
}

#[cfg(all(test, feature = "cuda"))]
mod gpu_tests {
    use super::*;

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
