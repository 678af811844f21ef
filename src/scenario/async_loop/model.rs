//! The book's model of one iteration: t1 (the front end hands the op to the backend), t2
//! (the backend executes it) and t3 (the result returns to the front end), which predicts
//! sync ≈ N(t1+t2+t3) and async ≈ t1 + N·t2 + t3. An instrumented extra run measures the
//! three from engine timestamps, set against the measured medians.

use super::{
    Timed, ASYNC_PER_OP_S, ASYNC_SPEEDUP, MEASURED_OVER_PREDICTED_ASYNC_RATIO,
    MEASURED_OVER_PREDICTED_SYNC_RATIO, PREDICTED_ASYNC_S, PREDICTED_SYNC_S, PUSH_PER_OP_S,
    SYNC_PER_OP_S, T1_S, T2_S, T3_S,
};
use crate::engine::{Engine, Mode};
use crate::harness::stats::median;
use crate::report::evidence::{Estimate, Ratio, Side};
use crate::report::RunRecord;
use crate::scenario::kit::{warnings, Explained, BETWEEN_ROUNDS};
use crate::scenario::ScenarioError;
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
    // When each op was issued and when its result returned.
    let mut issued_returned = Vec::with_capacity(ops as usize);
    for _ in 0..ops {
        let a = engine.now_ns();
        let y = x.add_scalar(1.0);
        y.wait_to_read()?;
        issued_returned.push((a, engine.now_ns()));
    }
    engine.set_tracing(false);
    let mut trace = engine.take_trace();
    trace.retain(|r| r.name == ADD_SCALAR_OP);
    trace.sort_by_key(|r| r.started_ns);
    let (mut t1, mut t2, mut t3) = (Vec::new(), Vec::new(), Vec::new());
    for ((a, c), r) in issued_returned.iter().zip(&trace) {
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
    let f = LoopMedians {
        sync: Estimate::of(run, Timed::Sync.name()),
        async_time: Estimate::of(run, Timed::Async.name()),
        push: Estimate::of(run, Timed::PushOnly.name()),
    };
    let (sync, async_time, push) = (f.sync.median, f.async_time.median, f.push.median);
    let speedup = sync / async_time;
    let pred_sync = nf * (p.t1 + p.t2 + p.t3);
    let pred_async = p.t1 + nf * p.t2 + p.t3;
    run.record(ASYNC_SPEEDUP, speedup);
    run.record(SYNC_PER_OP_S, sync / nf);
    run.record(ASYNC_PER_OP_S, async_time / nf);
    run.record(PUSH_PER_OP_S, push / nf);
    run.record(T1_S, p.t1);
    run.record(T2_S, p.t2);
    run.record(T3_S, p.t3);
    run.record(PREDICTED_SYNC_S, pred_sync);
    run.record(PREDICTED_ASYNC_S, pred_async);
    run.record(MEASURED_OVER_PREDICTED_SYNC_RATIO, sync / pred_sync);
    run.record(MEASURED_OVER_PREDICTED_ASYNC_RATIO, async_time / pred_async);

    run.notes.push(format!("engine: {}", mode.as_str()));
    explain(mode, n, &f, p).record(run);
}

/// The medians the explanation quotes, with their 95% intervals.
struct LoopMedians {
    sync: Estimate,
    async_time: Estimate,
    push: Estimate,
}

warnings! {
    enum Warning {
        /// Push-only took longer than async beyond both medians' intervals, though async makes
        /// the same pushes and then waits.
        PushOnlyAboveAsync { push_s: f64, async_s: f64 } => (
            "push-only ({}) took longer than async ({}), beyond both medians' 95% intervals, though async makes \
             the same pushes and then waits: {BETWEEN_ROUNDS}.",
            human_time(push_s),
            human_time(async_s),
        ),
    }
}

/// What the figures show, and the figures outside their physical range: `push-only` slower
/// than `async`, which makes the same pushes and then waits. Only beyond both medians'
/// intervals: in naive mode, or for ops cheaper than their push, the two are equal up to
/// noise, and that is a normal result.
fn explain(mode: Mode, n: u64, f: &LoopMedians, p: &Phases) -> Explained<Warning> {
    let nf = n as f64;
    let (sync, async_time, push) = (f.sync.median, f.async_time.median, f.push.median);
    let speedup = Ratio::of(f.sync, f.async_time);
    let pred_sync = nf * (p.t1 + p.t2 + p.t3);
    let pred_async = p.t1 + nf * p.t2 + p.t3;
    let mut out = Explained::default();
    let e = &mut out.sentences;
    match mode {
        Mode::Threaded => {
            let per_op = format!(
                "{} per op in sync, {} in async; {speedup}",
                human_time(sync / nf),
                human_time(async_time / nf),
            );
            e.push(match speedup.against(1.0) {
                Side::Above => format!(
                    "async is {} than sync: the front end keeps pushing while the worker computes, \
                     instead of paying a full round trip per op ({per_op}).",
                    faster_or_slower(speedup.value),
                ),
                Side::Within => format!(
                    "async and sync are indistinguishable here ({per_op}): the round trip a sync \
                     loop pays per op is lost in the noise of these samples."
                ),
                Side::Below => format!(
                    "async is {} than sync here ({per_op}), beyond both medians' intervals.",
                    faster_or_slower(speedup.value),
                ),
                Side::Unknown => format!("async against sync: not measured ({per_op})."),
            });
        }
        Mode::Naive => e.push(format!(
            "engine naive completes every op before push returns, so waiting once or after every op costs the same \
             (speed-up {:.2}×): asynchrony is what the threaded engine buys.",
            speedup.value
        )),
    }
    e.push(match mode {
        Mode::Threaded => format!(
            "push-only ({}) stops the clock before the work is done: it measures pushing, not \
             computing.",
            human_time(push)
        ),
        Mode::Naive => format!(
            "push-only ({}) waits for the work here too: the naive engine returns from each \
             push only once its op ran.",
            human_time(push)
        ),
    });
    out.detail.push(format!(
        "book model with t1 = {}, t2 = {}, t3 = {}: sync ≈ N(t1+t2+t3) = {} (measured {}), \
         async ≈ t1 + N·t2 + t3 = {} (measured {}).",
        human_time(p.t1),
        human_time(p.t2),
        human_time(p.t3),
        human_time(pred_sync),
        human_time(sync),
        human_time(pred_async),
        human_time(async_time),
    ));
    if mode == Mode::Threaded && async_time > 1.5 * pred_async {
        out.detail.push(
            "async is slower than t1 + N·t2 + t3: for an op this small the pipeline runs at the pace of \
             its slowest stage, the per-op cost of pushing and of the engine's bookkeeping, not of t2."
                .into(),
        );
    }
    if f.push.lo > f.async_time.hi {
        out.warnings.push(Warning::PushOnlyAboveAsync {
            push_s: push,
            async_s: async_time,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::kit::explained::testing::{around, spread, worded_within};

    /// 1000 ops; t1 = 1 µs, t2 = 2 µs, t3 = 3 µs: sync ≈ 6 ms, async ≈ 2.004 ms.
    fn explained(mode: Mode, sync: f64, async_time: f64, push: f64) -> Explained<Warning> {
        let f = LoopMedians {
            sync: around(sync, 0.02),
            async_time: around(async_time, 0.02),
            push: around(push, 0.02),
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
        // The model's sentences are detail (`--verbose`): read beside the others.
        // 2.5 ms is not above 1.5 × 2.004 ms: no slowest stage.
        assert_eq!(e.sentences.join("\n"), "async is 2.40× faster than sync: the front end keeps pushing while the worker computes, instead of paying a full round trip per op (6.000 µs per op in sync, 2.500 µs in async; 2.40×, 95% interval 2.31–2.50×).\npush-only (1.000 ms) stops the clock before the work is done: it measures pushing, not computing.");
        assert_eq!(e.detail.join("\n"), "book model with t1 = 1.000 µs, t2 = 2.000 µs, t3 = 3.000 µs: sync ≈ N(t1+t2+t3) = 6.000 ms (measured 6.000 ms), async ≈ t1 + N·t2 + t3 = 2.004 ms (measured 2.500 ms).");
        assert!(e.warnings.is_empty(), "{:?}", e.warnings);
        // An async loop slower than sync says so.
        let e = explained(Mode::Threaded, 2e-3, 2.5e-3, 1e-3);
        assert_eq!(e.sentences[0], "async is 1.25× slower than sync here (2.000 µs per op in sync, 2.500 µs in async; 0.80×, 95% interval 0.77–0.83×), beyond both medians' intervals.");
        // Within each other's intervals: no verdict.
        let e = explained(Mode::Threaded, 2.05e-3, 2e-3, 1e-3);
        assert_eq!(e.sentences[0], "async and sync are indistinguishable here (2.050 µs per op in sync, 2.000 µs in async; 1.03×, 95% interval 0.98–1.07×): the round trip a sync loop pays per op is lost in the noise of these samples.");
        let e = explained(Mode::Threaded, 6e-3, 3.1e-3, 1e-3);
        assert_eq!(e.detail.join("\n"), "book model with t1 = 1.000 µs, t2 = 2.000 µs, t3 = 3.000 µs: sync ≈ N(t1+t2+t3) = 6.000 ms (measured 6.000 ms), async ≈ t1 + N·t2 + t3 = 2.004 ms (measured 3.100 ms).\nasync is slower than t1 + N·t2 + t3: for an op this small the pipeline runs at the pace of its slowest stage, the per-op cost of pushing and of the engine's bookkeeping, not of t2.");
        // Push-only beyond async is a warning only outside the noise.
        // Within both medians' intervals (±2%): equal up to noise, a normal result.
        assert!(explained(Mode::Naive, 2e-3, 2e-3, 2.03e-3)
            .warnings
            .is_empty());
        let e = explained(Mode::Threaded, 6e-3, 2e-3, 2.2e-3);
        assert_eq!(e.warnings.len(), 1, "{:?}", e.warnings);
        assert_eq!(e.warnings[0].to_string(), "push-only (2.200 ms) took longer than async (2.000 ms), beyond both medians' 95% intervals, though async makes the same pushes and then waits: likely noise between rounds: the variants are timed in different rounds, and few samples leave their medians loose; raise --min-samples for firmer medians.");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Random medians with wide intervals on either side of each other: the first sentence
        /// says faster or slower only when sync's and async's intervals allow it (computed here
        /// from the raw bounds), and the push-only warning appears only when push-only's lowest
        /// lies above async's highest.
        #[test]
        fn no_sentence_or_warning_claims_more_than_its_intervals(
            medians in proptest::array::uniform3(0.5e-3f64..2e-3),
            reaches in proptest::array::uniform3((0.0f64..0.5, 0.0f64..0.5)),
        ) {
            let est = |i: usize| spread(medians[i], reaches[i]);
            let f = LoopMedians { sync: est(0), async_time: est(1), push: est(2) };
            let p = Phases { t1: 1e-7, t2: 2e-7, t3: 3e-7 };
            let e = explain(Mode::Threaded, 1000, &f, &p);
            let (lo, hi) = (f.sync.lo / f.async_time.hi, f.sync.hi / f.async_time.lo);
            worded_within(&e.sentences[0], lo, hi)?;
            proptest::prop_assert_eq!(!e.warnings.is_empty(), f.push.lo > f.async_time.hi);
        }
    }
}
