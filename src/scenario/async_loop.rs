//! `async`: synchronous vs asynchronous execution of `y = x + 1` (book §13.2).
//!
//! - `sync` waits for `y` after every op: each iteration pays the full round trip;
//! - `async` pushes all N ops and waits once: the front end keeps pushing while the worker
//!   executes, so the loop runs at the pace of the slower of the two;
//! - `push-only` stops the clock before the work is done: the "timing without synchronization"
//!   pitfall, shown so a reader recognizes it, never a cost to quote.
//!
//! The book's model splits one iteration into t1 (front end hands the op to the backend),
//! t2 (backend executes it) and t3 (result returns to the front end) and predicts
//! sync ≈ N(t1+t2+t3), async ≈ t1 + N·t2 + t3. An instrumented extra run measures the three
//! from engine timestamps so the predictions can be set against the measured medians.

use std::time::{Duration, Instant};

use super::{ParamKind, ParamSpec, Params, RunContext, Scenario, ScenarioError};
use crate::device::memory::{available_bytes, check_fits, f32_bytes};
use crate::device::{available_cores, Runtime};
use crate::engine::{Engine, Mode};
use crate::harness::stats::median;
use crate::harness::{synced, SamplerConfig, Variant};
use crate::report::RunRecord;
use crate::tensor::Tensor;

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
];

/// Ops timed individually for the t1/t2/t3 model (enough for stable medians, bounded cost).
const MODEL_OPS: u64 = 2_000;

/// Medians of the book's three phases, in seconds.
struct Phases {
    t1: f64,
    t2: f64,
    t3: f64,
}

impl Scenario for AsyncLoop {
    fn name(&self) -> &'static str {
        "async"
    }

    fn about(&self) -> &'static str {
        "sync vs async loop of y = x + 1: wait after every op or once; push-only pitfall; t1/t2/t3 model"
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
        let elements = params
            .shape("shape")
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d as u64));
        // x, the y being computed, and the y the front end still holds; plus the queued ops
        // themselves (an op and its buffers' bookkeeping, about half a kilobyte each), all of
        // which the async loop may have pending at once.
        let queued = params.int("iterations").checked_mul(512);
        let bytes = elements
            .and_then(|e| f32_bytes(e, 3))
            .and_then(|b| b.checked_add(queued?));
        check_fits("async with this --shape", bytes, available_bytes())
            .map_err(ScenarioError::Input)
    }

    fn run(&self, params: &Params, ctx: &RunContext) -> Result<RunRecord, ScenarioError> {
        self.validate(params)?;
        let n = params.int("iterations");
        let shape = params.shape("shape").to_vec();
        let threads = ctx.cpu_threads.unwrap_or_else(available_cores);
        let rt = Runtime::cpu(&ctx.runtime, &[threads])?;
        let (engine, device) = (&rt.engine, &rt.devices[0]);
        let x = Tensor::ones(engine, device, &shape);
        x.wait_to_read()?;

        let mut variants = vec![
            Variant::new("sync", || {
                let t = Instant::now();
                for _ in 0..n {
                    x.add_scalar(1.0).wait_to_read()?;
                }
                Ok(t.elapsed())
            }),
            Variant::new("async", || {
                synced(engine, || {
                    for _ in 0..n {
                        let _y = x.add_scalar(1.0);
                    }
                    Ok::<_, ScenarioError>(())
                })
            }),
            Variant::new("push-only", || {
                let t = Instant::now();
                for _ in 0..n {
                    let _y = x.add_scalar(1.0);
                }
                let pushed = t.elapsed();
                engine.wait_all()?;
                Ok(pushed)
            }),
        ];
        let names: Vec<String> = variants.iter().map(|v| v.name.clone()).collect();
        let summaries = ctx.sample(self, engine, &mut variants)?;
        drop(variants);

        let mut run = RunRecord::new(self.name(), params.to_json(), rt.describe_devices());
        let labels = names.iter().map(|name| {
            (name == "push-only")
                .then(|| "timing without synchronization: NOT the cost of the work".to_string())
        });
        let labels: Vec<Option<String>> = labels.collect();
        run.add_variants(names, summaries, labels);

        // Correctness: the async loop's last value equals x + 1 computed directly.
        let mut last = x.add_scalar(1.0);
        for _ in 1..n.min(1000) {
            last = x.add_scalar(1.0);
        }
        let got = last.to_vec()?;
        let want = ndarray::ArrayD::<f32>::ones(ndarray::IxDyn(&shape)).mapv(|v| v + 1.0);
        let max_err = got
            .iter()
            .zip(want.iter())
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        let ok = got.len() == want.len() && max_err == 0.0;
        run.check(
            "matches sequential reference",
            ok,
            format!("y = x + 1 on {} elements, max abs err {max_err}", got.len()),
        );

        let phases = measure_phases(engine, &x, n.min(MODEL_OPS))?;
        derive(&mut run, engine.mode(), n, &phases);
        Ok(run)
    }
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
    let sync = run.median("sync").unwrap_or(f64::NAN);
    let asyn = run.median("async").unwrap_or(f64::NAN);
    let push = run.median("push-only").unwrap_or(f64::NAN);
    let speedup = sync / asyn;
    let pred_sync = nf * (p.t1 + p.t2 + p.t3);
    let pred_async = p.t1 + nf * p.t2 + p.t3;
    run.derive("async_speedup", speedup);
    run.derive("sync_per_op_s", sync / nf);
    run.derive("async_per_op_s", asyn / nf);
    run.derive("push_per_op_s", push / nf);
    run.derive("t1_s", p.t1);
    run.derive("t2_s", p.t2);
    run.derive("t3_s", p.t3);
    run.derive("predicted_sync_s", pred_sync);
    run.derive("predicted_async_s", pred_async);
    run.derive("measured_over_predicted_sync_ratio", sync / pred_sync);
    run.derive("measured_over_predicted_async_ratio", asyn / pred_async);

    run.notes.push(format!("engine: {}", mode.as_str()));
    let e = &mut run.explanation;
    match mode {
        Mode::Threaded => e.push(format!(
            "async is {speedup:.2}× faster than sync: the front end keeps pushing while the worker computes, \
             instead of paying a full round trip per op ({} per op in sync, {} in async).",
            crate::report::table::human_time(sync / nf),
            crate::report::table::human_time(asyn / nf),
        )),
        Mode::Naive => e.push(format!(
            "engine naive completes every op before push returns, so waiting once or after every op costs the same \
             (speed-up {speedup:.2}×): asynchrony is what the threaded engine buys."
        )),
    }
    e.push(format!(
        "push-only ({}) stops the clock before the work is done: it measures pushing, not computing.",
        crate::report::table::human_time(push)
    ));
    e.push(format!(
        "book model with t1 = {}, t2 = {}, t3 = {}: sync ≈ N(t1+t2+t3) = {} (measured {}), \
         async ≈ t1 + N·t2 + t3 = {} (measured {}).",
        crate::report::table::human_time(p.t1),
        crate::report::table::human_time(p.t2),
        crate::report::table::human_time(p.t3),
        crate::report::table::human_time(pred_sync),
        crate::report::table::human_time(sync),
        crate::report::table::human_time(pred_async),
        crate::report::table::human_time(asyn),
    ));
    if mode == Mode::Threaded && asyn > 1.5 * pred_async {
        e.push(
            "async is slower than t1 + N·t2 + t3: for an op this small the pipeline runs at the pace of \
             its slowest stage, the per-op cost of pushing and of the engine's bookkeeping, not of t2."
                .into(),
        );
    }
}
