//! The GPU driver alone, beside the loops: what a launch of the loop's kernel costs without
//! any engine, in tiers that add one by one what an engine op on the GPU does (the launch, its
//! output's allocation and the previous output's free, a ready event), a launch followed by
//! a wait, and the GPU's own time per kernel from a replayed CUDA graph. async's cost per op
//! is split among the tiers, the remainder being the engine's.

use super::figures::*;
use super::{per_op, Timed};
use crate::device::cuda::{CudaDevice, DriverFloor};
use crate::report::RunRecord;
use crate::units::human_time;

/// Launches per round of each tier (a few milliseconds a round), and kernels in the graph.
const FLOOR_LAUNCHES: u32 = 2_000;
/// Rounds of each tier; the median is quoted.
const FLOOR_ROUNDS: usize = 7;

/// Measure the driver's floor on `gpu` and record its tiers beside the loops' costs per op.
pub(super) fn derive_driver_floor(
    run: &mut RunRecord,
    gpu: &CudaDevice,
    n: u64,
) -> Result<(), crate::scenario::ScenarioError> {
    let floor = gpu
        .driver_floor(FLOOR_LAUNCHES, FLOOR_ROUNDS)
        .map_err(|e| crate::device::DeviceError::Gpu(format!("timing the driver alone: {e}")))?;
    run.record(DRIVER_LAUNCH_S, floor.launch_s);
    run.record(DRIVER_LAUNCH_ALLOC_FREE_S, floor.launch_alloc_free_s);
    run.record(
        DRIVER_LAUNCH_ALLOC_FREE_EVENT_S,
        floor.launch_alloc_free_event_s,
    );
    run.record(DRIVER_LAUNCH_AND_WAIT_S, floor.launch_and_wait_s);
    run.record(DRIVER_GRAPH_PER_KERNEL_S, floor.graph_per_kernel_s);
    let (sync, async_time) = (per_op(run, Timed::Sync, n), per_op(run, Timed::Async, n));
    run.record(ASYNC_OVER_DRIVER_LAUNCH_RATIO, async_time / floor.launch_s);
    run.explanation_detail
        .extend(driver_words(&floor, async_time, sync));
    Ok(())
}

/// Whether each tier costs at least the one before it, up to async's cost per op: only then
/// is the difference between two tiers what the later one adds.
fn monotone(steps: &[f64]) -> bool {
    steps.iter().all(|s| s.is_finite() && *s > 0.0) && steps.windows(2).all(|w| w[0] <= w[1])
}

/// What the tiers say, beside async's and sync's costs per op (seconds): the tiers, async's
/// cost split among them (when they rise monotonically up to it), and the ceiling they set on
/// sync / async.
pub(super) fn driver_words(f: &DriverFloor, async_per_op: f64, sync_per_op: f64) -> Vec<String> {
    let t = human_time;
    let mut out = vec![format!(
        "the driver alone, without the engine, per launch of this kernel: a bare launch {}, with \
         its output's stream-ordered allocation and the previous output's free {}, with a ready \
         event recorded as well {}, a launch followed by a wait for it {}; the GPU itself runs \
         one such kernel every {} (a CUDA graph of {FLOOR_LAUNCHES} launches, replayed and \
         timed on the GPU's clock), so a bare launch costs the host {:.1}× what the kernel \
         costs the GPU.",
        t(f.launch_s),
        t(f.launch_alloc_free_s),
        t(f.launch_alloc_free_event_s),
        t(f.launch_and_wait_s),
        t(f.graph_per_kernel_s),
        f.launch_s / f.graph_per_kernel_s,
    )];
    let steps = [
        f.launch_s,
        f.launch_alloc_free_s,
        f.launch_alloc_free_event_s,
        async_per_op,
    ];
    if monotone(&steps) {
        let engine = async_per_op - f.launch_alloc_free_event_s;
        out.push(format!(
            "async's {} per op = bare launch {} + allocation and free {} + ready event {} + \
             engine {}: the remainder, {:.0}% of the op, is the engine's own (the push, the \
             dependency tracking, the hand-off to the lane's worker).",
            t(async_per_op),
            t(f.launch_s),
            t(f.launch_alloc_free_s - f.launch_s),
            t(f.launch_alloc_free_event_s - f.launch_alloc_free_s),
            t(engine),
            engine / async_per_op * 100.0,
        ));
    } else {
        out.push(format!(
            "the tiers do not rise one above the other up to async's {} per op (bare launch {}, \
             with allocation and free {}, with a ready event {}): they overlap within noise, so \
             async's cost is not split among them.",
            t(async_per_op),
            t(f.launch_s),
            t(f.launch_alloc_free_s),
            t(f.launch_alloc_free_event_s),
        ));
    }
    let ceiling = f.launch_and_wait_s / f.launch_s;
    let speedup = sync_per_op / async_per_op;
    out.push(format!(
        "async's {} per op is {:.2}× a bare launch, sync's {} is {:.2}× a launch and wait. \
         Waiting after each op costs the driver {ceiling:.2}× a bare launch, so with the same \
         engine cost in both loops sync / async cannot exceed {ceiling:.2}× for this kernel on \
         this host; {}",
        t(async_per_op),
        async_per_op / f.launch_s,
        t(sync_per_op),
        sync_per_op / f.launch_and_wait_s,
        if speedup <= ceiling {
            format!("it is {speedup:.2}× here.")
        } else {
            format!(
                "it is {speedup:.2}× here, above that: the engine costs the sync loop more per op \
                 than the async one."
            )
        },
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn floor(tiers: [f64; 5]) -> DriverFloor {
        DriverFloor {
            launch_s: tiers[0],
            launch_alloc_free_s: tiers[1],
            launch_alloc_free_event_s: tiers[2],
            launch_and_wait_s: tiers[3],
            graph_per_kernel_s: tiers[4],
        }
    }

    #[test]
    fn async_is_split_among_monotone_tiers() {
        // 3.40 + 0.60 + 0.40 + 0.56 = 4.96 µs.
        let f = floor([3.4e-6, 4.0e-6, 4.4e-6, 12e-6, 1.7e-6]);
        let words = driver_words(&f, 4.96e-6, 20e-6).join(" ");
        assert!(
            words.contains(
                "async's 4.960 µs per op = bare launch 3.400 µs + allocation and free 600.0 ns \
                 + ready event 400.0 ns + engine 560.0 ns: the remainder, 11% of the op"
            ),
            "{words}"
        );
        assert!(
            words.contains("costs the host 2.0× what the kernel"),
            "{words}"
        );
        // The ceiling: 12 / 3.4 = 3.53×; sync / async = 20 / 4.96 = 4.03×, above it.
        assert!(
            words.contains("cannot exceed 3.53×") && words.contains("it is 4.03× here, above"),
            "{words}"
        );
        let within = driver_words(&f, 4.96e-6, 15e-6).join(" ");
        assert!(within.contains("it is 3.02× here.") && !within.contains("above that"));
    }

    #[test]
    fn overlapping_tiers_are_not_split() {
        // The allocation tier measured below the bare launch: noise, no split.
        let f = floor([3.4e-6, 3.3e-6, 4.4e-6, 12e-6, 1.7e-6]);
        let words = driver_words(&f, 4.96e-6, 15e-6).join(" ");
        assert!(words.contains("overlap within noise"), "{words}");
        assert!(!words.contains("engine 5"), "{words}");
        // async cheaper than the ready-event tier: no negative engine share.
        let f = floor([3.4e-6, 4.0e-6, 5.0e-6, 12e-6, 1.7e-6]);
        let words = driver_words(&f, 4.96e-6, 15e-6).join(" ");
        assert!(words.contains("overlap within noise"), "{words}");
        // A tier that gave nothing finite is not split either.
        let f = floor([f64::NAN, 4.0e-6, 4.4e-6, 12e-6, 1.7e-6]);
        assert!(driver_words(&f, 4.96e-6, 15e-6)
            .join(" ")
            .contains("overlap within noise"));
    }

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
        for spec in [
            DRIVER_LAUNCH_S,
            DRIVER_LAUNCH_ALLOC_FREE_S,
            DRIVER_LAUNCH_ALLOC_FREE_EVENT_S,
            DRIVER_LAUNCH_AND_WAIT_S,
            DRIVER_GRAPH_PER_KERNEL_S,
        ] {
            assert!(spec.figure.detail, "{}", spec.key);
            assert_eq!(spec.figure.better, crate::report::Better::Neither);
        }
    }

    /// `async --device cuda` with tiny sizes records the driver's tiers and each GPU
    /// variant's GPU time, and that time lies within its host time.
    #[test]
    #[ignore = "needs a GPU"]
    fn gpu_async_records_the_driver_tiers_and_the_gpu_times() {
        use crate::scenario::gpu_clocks::{assert_recorded, few_samples, params_of};
        use crate::scenario::Scenario;
        let scenario = super::super::AsyncLoop;
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
        assert_recorded(
            &run,
            &[
                "sync_gpu_s",
                "async_gpu_s",
                "chain_gpu_s",
                "driver_launch_s",
                "driver_launch_alloc_free_s",
                "driver_launch_alloc_free_event_s",
                "driver_launch_and_wait_s",
                "driver_graph_per_kernel_s",
                "async_over_driver_launch_ratio",
            ],
        );
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
        for key in ["push_only_gpu_s", "ping_pong_gpu_s", "products_gpu_s"] {
            assert!(!run.derived.contains_key(key), "{key}");
        }
        let text = run.explanation.join(" ");
        assert!(
            text.contains("async: ") && text.contains("host / GPU"),
            "{text}"
        );
    }
}
