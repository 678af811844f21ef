//! The book's model of one iteration: t1 (the front end hands the op to the backend), t2
//! (the backend executes it) and t3 (the result returns to the front end), which predicts
//! sync ≈ N(t1+t2+t3) and async ≈ t1 + N·t2 + t3. An instrumented extra run measures the
//! three from engine timestamps, set against the measured medians.

use super::figures::*;
use super::{median_of, Timed};
use crate::engine::{Engine, Mode};
use crate::harness::stats::median;
use crate::report::RunRecord;
use crate::scenario::support::Explained;
use crate::scenario::ScenarioError;
use crate::scenario::Warning;
use crate::tensor::Tensor;
use crate::units::{faster_or_slower, human_time};

/// The display name of the op the loops push (`Tensor::add_scalar`): the traced run keeps
/// only these.
const ADD_SCALAR_OP: &str = "add_scalar";

/// LoopMedians of the book's three phases, in seconds.
pub(super) struct Phases {
    pub(super) t1: f64,
    pub(super) t2: f64,
    pub(super) t3: f64,
}

/// Time `ops` synchronous iterations op by op from engine timestamps.
pub(super) fn measure_phases(
    engine: &Engine,
    x: &Tensor,
    ops: u64,
) -> Result<Phases, ScenarioError> {
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
    trace.retain(|r| r.name == ADD_SCALAR_OP);
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

pub(super) fn derive(run: &mut RunRecord, mode: Mode, n: u64, p: &Phases) {
    let nf = n as f64;
    let uncertainty = |v: Timed| run.median_uncertainty(v.name()).unwrap_or(f64::NAN);
    let f = LoopMedians {
        sync: median_of(run, Timed::Sync),
        asyn: median_of(run, Timed::Async),
        push: median_of(run, Timed::PushOnly),
        async_uncertainty: uncertainty(Timed::Async),
        push_uncertainty: uncertainty(Timed::PushOnly),
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
struct LoopMedians {
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
fn explain(mode: Mode, n: u64, f: &LoopMedians, p: &Phases) -> Explained {
    let nf = n as f64;
    let (sync, asyn, push) = (f.sync, f.asyn, f.push);
    let speedup = sync / asyn;
    let pred_sync = nf * (p.t1 + p.t2 + p.t3);
    let pred_async = p.t1 + nf * p.t2 + p.t3;
    let mut out = Explained::default();
    let e = &mut out.sentences;
    match mode {
        Mode::Threaded => e.push(format!(
            "async is {} than sync: the front end keeps pushing while the worker computes, \
             instead of paying a full round trip per op ({} per op in sync, {} in async).",
            faster_or_slower(speedup),
            human_time(sync / nf),
            human_time(asyn / nf),
        )),
        Mode::Naive => e.push(format!(
            "engine naive completes every op before push returns, so waiting once or after every op costs the same \
             (speed-up {speedup:.2}×): asynchrony is what the threaded engine buys."
        )),
    }
    e.push(format!(
        "push-only ({}) stops the clock before the work is done: it measures pushing, not computing.",
        human_time(push)
    ));
    e.push(format!(
        "book model with t1 = {}, t2 = {}, t3 = {}: sync ≈ N(t1+t2+t3) = {} (measured {}), \
         async ≈ t1 + N·t2 + t3 = {} (measured {}).",
        human_time(p.t1),
        human_time(p.t2),
        human_time(p.t3),
        human_time(pred_sync),
        human_time(sync),
        human_time(pred_async),
        human_time(asyn),
    ));
    if mode == Mode::Threaded && asyn > 1.5 * pred_async {
        e.push(
            "async is slower than t1 + N·t2 + t3: for an op this small the pipeline runs at the pace of \
             its slowest stage, the per-op cost of pushing and of the engine's bookkeeping, not of t2."
                .into(),
        );
    }
    if push * (1.0 - f.push_uncertainty) > asyn * (1.0 + f.async_uncertainty) {
        out.warnings.push(Warning::PushOnlyAboveAsync {
            push_s: push,
            async_s: asyn,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1000 ops; t1 = 1 µs, t2 = 2 µs, t3 = 3 µs: sync ≈ 6 ms, async ≈ 2.004 ms.
    fn explained(mode: Mode, sync: f64, asyn: f64, push: f64) -> Explained {
        let f = LoopMedians {
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
        let w = e.warnings[0].to_string();
        assert!(
            w.contains("push-only (2.200 ms) took longer than async (2.000 ms)"),
            "{w}"
        );
        assert!(w.contains("--min-samples"), "{w}");
    }
}
