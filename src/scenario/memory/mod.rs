//! `memory`: the memory cost of an over-full asynchronous queue (the book: "excessively filling
//! the task queue can lead to excessive memory consumption; synchronize per minibatch").
//!
//! A training-like loop: for every minibatch the front end produces its input (as a data
//! loader would: allocated on the spot) and pushes `h = x · W`, `y = h / n`. Pushing every
//! minibatch and waiting once lets the loader run ahead of the compute, so inputs pile up;
//! waiting after each minibatch keeps one; bounding the ops in flight (`--inflight` minibatches)
//! keeps a few. Live bytes are counted exactly by the device's tracker; one more, untimed epoch
//! of each variant records them over time (`<variant>_live_bytes`), so a chart shows the
//! over-full queue's growth against the bounded one's plateau.
//!
//! With `--device cuda` the device is the GPU: each input is uploaded by an op (a third op
//! per minibatch) and the tracker counts GPU buffers. The GPU runs in host order there: an op
//! completes when the GPU has finished it, so a bound on the ops in flight bounds the GPU's
//! work and its memory, not just what the front end has handed over.

mod explain;
mod measure;

use self::explain::LESSON;
use super::kit::{check_elements, check_matrices, ratio, sampling_to_95};
use super::{Choice, DeviceChoice, Params, RunContext, Scenario, ScenarioError};
use crate::report::{Better, Figure, FigureSpec, RunRecord, Unit};

/// `<variant>_peak_bytes`: each variant's peak of live bytes.
const PEAK_BYTES: Figure = Figure::new(Unit::Bytes, Better::Neither);
const MINIBATCH_BYTES: FigureSpec =
    FigureSpec::new("minibatch_bytes", Unit::Bytes, Better::Neither);
/// The GPU memory pool's high-water marks per variant (`<variant>_gpu_reserved_bytes`,
/// `<variant>_gpu_used_bytes`): what the driver mapped for parbench vs what its live buffers
/// took at most.
const GPU_POOL_BYTES: Figure = Figure::new(Unit::Bytes, Better::Neither);
const MEMORY_RATIO: FigureSpec = ratio("memory_ratio", Better::Neither);
const BOUNDED_TIME_RATIO: FigureSpec = ratio("bounded_time_ratio", Better::Neither);

super::variant::variants! {
    /// What `memory` times, and whose peak live bytes it records.
    enum Timed {
        /// Every minibatch pushed, one wait.
        Unbounded = "unbounded",
        /// Half the minibatches pushed, one wait.
        UnboundedHalf = "unbounded-half",
        /// A wait after every minibatch.
        SyncPerBatch = "sync-per-batch",
        /// At most --inflight minibatches in flight.
        Bounded = "bounded",
        /// Half the minibatches, at most --inflight in flight.
        BoundedHalf = "bounded-half",
    }
}

pub struct Memory;

super::params::params! {
    struct Config {
        /// minibatches per epoch
        batches: usize = Int { min: 2, max: 100_000 }, "200";
        /// rows per minibatch
        batch: usize = Int { min: 1, max: 100_000 }, "256";
        /// columns of a minibatch and size of the square weight W
        features: usize = Int { min: 1, max: 20_000 }, "256";
        /// minibatches allowed in flight in the bounded variant
        inflight: usize = Int { min: 1, max: 10_000 }, "4";
        /// cpu, or cuda: count GPU memory (an error without a usable GPU, unless --fallback)
        device: DeviceChoice = Choice(DeviceChoice::WORDS), "cpu";
    }
}

static SPEC: super::Spec = super::Spec {
    name: "memory",
    about: "peak memory of an over-full async queue: push all vs sync per minibatch vs bounded in flight",
    params: PARAMS,
    lesson: Some(LESSON),
    book: &[],
    sampling: sampling_to_95(30, 2),
};

impl Scenario for Memory {
    fn spec(&self) -> &'static super::Spec {
        &SPEC
    }

    fn validate(&self, params: &Params) -> Result<(), ScenarioError> {
        let Config {
            batches,
            batch,
            features,
            ..
        } = Config::of(params)?;
        // Worst case, unbounded: every minibatch input and output at once, plus W.
        let rows = (batch as u64)
            .saturating_mul(batches as u64)
            .saturating_mul(3);
        let features = features as u64;
        check_elements("memory with these sizes", rows.checked_mul(features))?;
        check_matrices("memory with this --features", features, 1, None)
    }

    fn run(&self, params: &Params, ctx: &RunContext) -> Result<RunRecord, ScenarioError> {
        measure::epochs(self, params, ctx, Config::of(params)?)
    }
}

#[cfg(test)]
mod tests {
    use super::measure::LIVE_POINTS;
    use super::*;

    #[test]
    fn each_variant_records_a_bounded_live_bytes_series_that_ends_with_the_run() {
        use crate::scenario::gpu_clocks::{few_samples, params_of};
        let given = [
            ("batches", "700"),
            ("batch", "2"),
            ("features", "4"),
            ("inflight", "2"),
        ];
        let ctx = RunContext {
            cpu_threads: Some(1),
            ..few_samples()
        };
        let params = params_of(&Memory, &given);
        let run = Memory.run(&params, &ctx).expect("runs");
        let batch_bytes = 2.0 * 4.0 * 4.0;
        for &v in Timed::ALL {
            let key = format!("{}_live_bytes", v.name().replace('-', "_"));
            assert_eq!(run.figure(&key).unit, Unit::Series, "{key}");
            let points: Vec<[f64; 2]> =
                serde_json::from_value(run.derived[&key].clone()).expect("[[s, bytes], ...]");
            assert!(
                points.len() >= 3 && points.len() <= LIVE_POINTS,
                "{key}: {}",
                points.len()
            );
            assert!(
                points.windows(2).all(|w| w[0][0] <= w[1][0]),
                "{key}: time order"
            );
            // The last point is the epoch's end: the latest, and nothing of it left live.
            let last = points[points.len() - 1];
            assert_eq!(last[1], 0.0, "{key}: {last:?}");
            assert!(points.iter().any(|p| p[1] > 0.0), "{key}: saw the inputs");
            if matches!(v, Timed::Bounded | Timed::BoundedHalf) {
                // Within what the run's check allows a bounded epoch.
                let limit = (2.0 + 1.0) * 3.0 * batch_bytes;
                assert!(points.iter().all(|p| p[1] <= limit), "{key}: {points:?}");
            }
        }
    }
}
