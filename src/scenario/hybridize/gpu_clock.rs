//! The GPU's clock around `hybridize`'s samples on a GPU: each variant's GPU time per sample,
//! and the hybridized variant's host time over it: how much the host adds around the replayed
//! graphs (launch, the engine op, waking up when they are done).

use super::Timed;
use crate::report::{Better, FigureSpec};
use crate::scenario::gpu_clocks::HostAndGpu;
use crate::scenario::gpu_time::gpu_seconds;

pub(super) const IMPERATIVE_GPU_S: FigureSpec = gpu_seconds("imperative_gpu_s");
pub(super) const HYBRIDIZED_GPU_S: FigureSpec = gpu_seconds("hybridized_gpu_s");
/// The hybridized variant's host median over its GPU median: 1 when the host adds nothing
/// around the replays.
pub(super) const HYBRIDIZED_HOST_OVER_GPU_RATIO: FigureSpec =
    crate::scenario::kit::ratio("hybridized_host_over_gpu_ratio", Better::Lower).detail();

/// The variants timed on the GPU's clock, with their figures.
pub(super) fn timed() -> [(&'static str, FigureSpec); 2] {
    [
        (Timed::Imperative.name(), IMPERATIVE_GPU_S),
        (Timed::Hybridized.name(), HYBRIDIZED_GPU_S),
    ]
}

/// host / GPU of the hybridized variant, from what the clocks recorded (`None` without it).
pub(super) fn hybridized_host_over_gpu(recorded: &[HostAndGpu]) -> Option<f64> {
    recorded
        .iter()
        .find(|r| r.variant == Timed::Hybridized.name())
        .map(|r| r.host_s / r.gpu_s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::gpu_time::gpu_key;

    #[test]
    fn gpu_figures_are_named_after_their_variants() {
        for (name, spec) in timed() {
            assert_eq!(spec.key, gpu_key(name));
            assert!(spec.figure.detail);
        }
    }

    #[test]
    fn the_ratio_is_the_hybridized_host_over_its_gpu() {
        let r = |variant, host_s, gpu_s| HostAndGpu {
            variant,
            host_s,
            gpu_s,
        };
        let recorded = [r("imperative", 9.0, 1.0), r("hybridized", 2.2, 2.0)];
        let ratio = hybridized_host_over_gpu(&recorded).expect("recorded");
        assert!((ratio - 1.1).abs() < 1e-12, "{ratio}");
        assert_eq!(hybridized_host_over_gpu(&recorded[..1]), None);
    }

    /// `hybridize --device cuda` with tiny sizes records both variants' GPU times and the
    /// hybridized variant's host / GPU.
    #[test]
    #[ignore = "needs a GPU"]
    fn gpu_hybridize_records_the_gpu_times() {
        use crate::scenario::gpu_clocks::{assert_recorded, few_samples, params_of};
        use crate::scenario::Scenario;
        let scenario = super::super::Hybridize;
        let params = params_of(
            &scenario,
            &[
                ("layers", "2"),
                ("width", "8"),
                ("batch", "4"),
                ("passes", "10"),
                ("device", "cuda"),
            ],
        );
        let run = scenario.run(&params, &few_samples()).expect("runs");
        assert_recorded(
            &run,
            &[
                "imperative_gpu_s",
                "hybridized_gpu_s",
                "hybridized_host_over_gpu_ratio",
            ],
        );
        let ratio = run.derived["hybridized_host_over_gpu_ratio"]
            .as_f64()
            .expect("recorded");
        // The replays' span lies within the sample (up to the start event, recorded just
        // before the host's clock starts).
        assert!(ratio > 0.5, "{ratio}");
    }
}
