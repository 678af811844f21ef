//! The crossover of the two algorithms, and the lesson, worded within the intervals.

use super::measure::size_label;
use crate::report::evidence::{Estimate, Ratio, Side};
use crate::report::finding::{Finding, Want};
use crate::report::RunRecord;
use crate::scenario::backend::Backend;
use crate::scenario::kit::Explained;
use crate::scenario::kit::{LessonSpec, Verdict};

pub(super) const LESSON: LessonSpec = LessonSpec {
    source: crate::scenario::book::TF1_DATA_PARALLEL,
    claim: "a ring all-reduce spreads the work over every device where a parameter server \
            makes one device do it all: at the largest size, parameter-server / ring wholly \
            above 1, and every device's result equals the float64 sum",
};

/// One size's times, ring and parameter server.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SizeTimes {
    pub bytes: u64,
    pub ring: Estimate,
    pub parameter_server: Estimate,
}

impl SizeTimes {
    /// ring / parameter server: below 1 where the ring is faster.
    pub fn ring_over_ps(&self) -> Ratio {
        Ratio::of(self.ring, self.parameter_server)
    }
}

/// The smallest size (of `sizes`, in increasing order) whose ring time is below the parameter
/// server's beyond the intervals, with that ratio.
pub fn crossover(sizes: &[SizeTimes]) -> Option<(u64, Ratio)> {
    sizes
        .iter()
        .map(|s| (s.bytes, s.ring_over_ps()))
        .find(|(_, r)| r.against(1.0) == Side::Below)
}

/// The smallest size from which the ring's time is below the parameter server's beyond the
/// intervals at every larger size measured too.
pub fn ring_faster_from(sizes: &[SizeTimes]) -> Option<u64> {
    let below = |s: &SizeTimes| s.ring_over_ps().against(1.0) == Side::Below;
    let tail = sizes.iter().rev().take_while(|s| below(s)).count();
    (tail > 0).then(|| sizes[sizes.len() - tail].bytes)
}

/// What the run shows: where the ring overtakes the parameter server, and how close the
/// largest size's bus bandwidth comes to the machine's copy bandwidth.
pub fn explain(
    sizes: &[SizeTimes],
    devices: usize,
    backend: Backend,
    largest_busbw: Option<(f64, f64)>,
) -> Explained {
    let mut out = Explained::default();
    let (Some(first), Some(last)) = (sizes.first(), sizes.last()) else {
        return out;
    };
    let range = format!("{} to {}", size_label(first.bytes), size_label(last.bytes));
    match crossover(sizes) {
        Some((bytes, r)) => {
            let later = sizes.iter().filter(|s| s.bytes > bytes);
            let (larger, not_below) = later.fold((0, 0), |(n, m), s| {
                (
                    n + 1,
                    m + usize::from(s.ring_over_ps().against(1.0) != Side::Below),
                )
            });
            let rest = match (larger, not_below) {
                (0, _) => "the largest size measured".to_string(),
                (_, 0) => "and at every larger size measured".to_string(),
                (n, m) => format!(
                    "but not at {m} of the {n} larger sizes measured, where the intervals \
                     reach across 1 or the ring is slower"
                ),
            };
            out.sentences.push(format!(
                "The smallest size at which the ring's time is below the parameter server's \
                 beyond the intervals is {}: ring / parameter server = {r}; {rest}.",
                size_label(bytes)
            ));
            match ring_faster_from(sizes).filter(|&f| f != bytes) {
                Some(from) if from == last.bytes => out.sentences.push(format!(
                    "At {}, the largest size, it is below again.",
                    size_label(from)
                )),
                Some(from) => out.sentences.push(format!(
                    "From {} to {} it is below at every size.",
                    size_label(from),
                    size_label(last.bytes)
                )),
                None => {}
            }
        }
        None => out.sentences.push(format!(
            "At no size from {range} is the ring's time below the parameter server's beyond \
             the intervals (at {}: ring / parameter server = {}).",
            size_label(last.bytes),
            last.ring_over_ps()
        )),
    }
    let smallest = first.ring_over_ps();
    if smallest.against(1.0) == Side::Above && devices > 1 {
        let why = match backend {
            Backend::Engine => format!(
                "it pushes 2k(k − 1) = {} ops, one per step and device, to the parameter \
                 server's k = {devices}, a fixed cost per op",
                2 * (devices - 1) * devices
            ),
            Backend::Mpi => format!(
                "each rank sends and receives 2(k − 1) = {} messages one after another where \
                 a worker of the parameter server sends one and receives one, a fixed latency \
                 per message",
                2 * (devices - 1)
            ),
        };
        out.sentences.push(format!(
            "At {} the ring is slower ({smallest}): {why} that a small message does not \
             amortize.",
            size_label(first.bytes),
        ));
    }
    if let Some((busbw, copy)) = largest_busbw {
        out.sentences.push(format!(
            "At {} the ring's bus bandwidth is {} ({} of the machine's all-thread STREAM copy \
             bandwidth, {}).",
            size_label(last.bytes),
            crate::units::human_gbytes_per_s(busbw),
            crate::units::human_percent(busbw / copy),
            crate::units::human_gbytes_per_s(copy)
        ));
    }
    out
}

/// Under MPI, the library's own all-reduce beside the ring over point-to-point at `bytes`
/// (the largest size), worded within the intervals.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub fn library_against_ring(bytes: u64, library: Estimate, ring: Estimate) -> String {
    let r = Ratio::of(library, ring);
    let verdict = match r.against(1.0) {
        Side::Below => "MPI_Allreduce is faster, beyond the intervals",
        Side::Above => "MPI_Allreduce is slower, beyond the intervals",
        Side::Within => "the two are indistinguishable here",
        Side::Unknown => "one of them was not measured",
    };
    format!(
        "At {}, MPI_Allreduce / the ring over point-to-point = {r}: {verdict}.",
        size_label(bytes)
    )
}

/// Decide the lesson from the largest size's times and the checks.
pub(super) fn conclude(run: &mut RunRecord, sizes: &[SizeTimes], devices: usize) {
    let agree = run.checks.iter().all(|c| c.passed);
    let (findings, here) = match sizes.last() {
        Some(last) if devices > 1 => {
            let r = Ratio::of(last.parameter_server, last.ring);
            let figure = format!("at {}, parameter-server / ring", size_label(last.bytes));
            (
                vec![
                    Finding::criterion(&figure, r, 1.0, Want::Above),
                    Finding::checks("checks", agree),
                ],
                format!(
                    "ring {:.2}× the parameter server at {} on {devices} devices",
                    r.value,
                    size_label(last.bytes)
                ),
            )
        }
        _ => (vec![], "one device only".into()),
    };
    let verdict = Verdict {
        findings,
        here,
        book: None,
    };
    LESSON.conclude_or(
        run,
        &[],
        verdict,
        "an all-reduce on one device moves nothing: no comparison.",
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est(median: f64, reach: f64) -> Estimate {
        Estimate {
            median,
            lo: median * (1.0 - reach),
            hi: median * (1.0 + reach),
        }
    }

    fn size(bytes: u64, ring: f64, ps: f64) -> SizeTimes {
        SizeTimes {
            bytes,
            ring: est(ring, 0.05),
            parameter_server: est(ps, 0.05),
        }
    }

    #[test]
    fn the_library_is_compared_with_the_ring_within_the_intervals() {
        let faster = library_against_ring(1 << 20, est(0.5, 0.05), est(1.0, 0.05));
        assert!(faster.contains("is faster, beyond"), "{faster}");
        let slower = library_against_ring(1 << 20, est(2.0, 0.05), est(1.0, 0.05));
        assert!(slower.contains("is slower, beyond"), "{slower}");
        let same = library_against_ring(1 << 20, est(1.02, 0.1), est(1.0, 0.1));
        assert!(same.contains("indistinguishable"), "{same}");
        assert!(same.starts_with("At 1MiB"), "{same}");
    }

    #[test]
    fn the_crossover_is_the_first_size_below_beyond_the_intervals() {
        let sizes = [
            size(8, 2.0, 1.0),
            size(1024, 1.02, 1.0), // within the intervals
            size(1 << 20, 0.5, 1.0),
            size(1 << 30, 0.6, 1.0),
        ];
        let (bytes, r) = crossover(&sizes).expect("a crossover");
        assert_eq!(bytes, 1 << 20);
        assert!(r.hi < 1.0);
        let e = explain(&sizes, 2, Backend::Engine, Some((3.0, 6.0)));
        let text = e.sentences.join(" ");
        assert!(text.contains("is 1MiB"), "{text}");
        assert!(text.contains("every larger size"), "{text}");
        assert!(text.contains("At 8B the ring is slower"), "{text}");
        assert!(text.contains("50.0%") || text.contains("50%"), "{text}");
        assert_eq!(ring_faster_from(&sizes), Some(1 << 20));
        let mut noisy = sizes;
        noisy[0] = size(8, 0.5, 1.0);
        let text = explain(&noisy, 2, Backend::Engine, None)
            .sentences
            .join(" ");
        assert!(
            text.contains("is 8B") && text.contains("not at 1 of the 3"),
            "{text}"
        );
        assert!(
            text.contains("From 1MiB to 1GiB it is below at every size"),
            "{text}"
        );
        let mut last_only = noisy;
        last_only[2] = size(1 << 20, 1.0, 1.0);
        let text = explain(&last_only, 2, Backend::Engine, None)
            .sentences
            .join(" ");
        assert!(
            text.contains("At 1GiB, the largest size, it is below again."),
            "{text}"
        );
        let none = explain(&sizes[..2], 2, Backend::Engine, None)
            .sentences
            .join(" ");
        assert!(none.contains("At no size from 8B to 1KiB"), "{none}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1000))]

        /// Whatever the intervals, the explanation names a crossover exactly when some size's
        /// ring interval lies wholly below the parameter server's, and names the first.
        #[test]
        fn the_explanation_never_claims_more_than_its_intervals(
            times in proptest::collection::vec(
                ((0.5f64..2.0, 0.0f64..0.5), (0.5f64..2.0, 0.0f64..0.5)), 1..8),
        ) {
            let sizes: Vec<SizeTimes> = times
                .iter()
                .enumerate()
                .map(|(i, &((r, rr), (p, pr)))| SizeTimes {
                    bytes: 8 << i,
                    ring: est(r, rr),
                    parameter_server: est(p, pr),
                })
                .collect();
            let text = explain(&sizes, 2, Backend::Engine, None).sentences.join(" ");
            let first = sizes.iter().find(|s| s.ring.hi < s.parameter_server.lo);
            match first {
                Some(s) => proptest::prop_assert!(
                    text.contains(&format!("beyond the intervals is {}:", size_label(s.bytes))),
                    "{}", text
                ),
                None => proptest::prop_assert!(text.contains("At no size"), "{}", text),
            }
        }
    }
}
