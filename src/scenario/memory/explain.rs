//! What a `memory` run showed: the peaks of each variant in words, the GPU pool's marks, and
//! the lesson of §8.2.4 (a bounded queue holds far less memory for about the same time).

use super::{Timed, MEMORY_RATIO};
use crate::report::evidence::{Estimate, Ratio};
use crate::report::finding::{Finding, Want};
use crate::report::RunRecord;
use crate::scenario::book;
use crate::scenario::kit::{LessonSpec, Verdict};
use crate::units::human_bytes;

/// The explanation of a measured run (the GPU pool's marks first, then the peaks) and its
/// lesson, from its peak live bytes of each variant in order (unbounded, unbounded-half,
/// sync-per-batch, bounded, bounded-half), bounded / unbounded median time and, on a GPU, the
/// pool's (reserved, used) high-water marks unbounded and bounded.
pub(super) fn explain_run(
    run: &mut RunRecord,
    peaks: &[u64; 5],
    inflight: usize,
    time_ratio: f64,
    pool: Option<((u64, u64), (u64, u64))>,
) {
    if let Some((r, u)) = pool {
        run.explanation.push(pool_sentence(r, u));
    }
    run.explanation.push(explain(peaks, inflight, time_ratio));
    let memory_ratio = run.derived.get(MEMORY_RATIO.key).and_then(|v| v.as_f64());
    conclude(run, memory_ratio.unwrap_or(f64::NAN));
}

/// The lesson of §8.2.4; the texts print no figures for it.
pub(super) const LESSON: LessonSpec = LessonSpec {
    source: book::TF2_ASYNC_MEMORY,
    claim: "a bounded queue holds far less memory for about the same time: unbounded peak / \
            bounded peak above 2, and bounded / unbounded time wholly below 1.25",
};

/// "Far less memory": under half the unbounded peak.
const FAR_LESS: f64 = 2.0;
/// "About the same time": at most a quarter slower.
const ABOUT_SAME: f64 = 1.25;

/// Decide the lesson from the exact peaks and the medians.
fn conclude(run: &mut RunRecord, memory_ratio: f64) {
    let time = Ratio::of(
        Estimate::of(run, Timed::Bounded.name()),
        Estimate::of(run, Timed::Unbounded.name()),
    );
    // The peaks are exact counts of the tracker, not samples: no interval to reach across.
    let findings = vec![
        Finding::exact(
            "unbounded / bounded peak",
            memory_ratio,
            FAR_LESS,
            Want::Above,
        ),
        Finding::criterion("bounded / unbounded time", time, ABOUT_SAME, Want::Below),
    ];
    let here = format!(
        "{memory_ratio:.1}× less memory, {:.2}× the time",
        time.value
    );
    LESSON.conclude(run, &[], Verdict::new(findings, here));
}

/// What the peaks show, from the peak live bytes of each variant in order (unbounded,
/// unbounded-half, sync-per-batch, bounded, bounded-half) and bounded / unbounded time.
/// Nothing here is flagged as out of range: the peaks are exact counts, not sampled medians,
/// and the one hard limit (bounded within its minibatches' bytes) is a check.
fn explain(peaks: &[u64; 5], inflight: usize, time_ratio: f64) -> String {
    let [unbounded, unbounded_half, sync_each, bounded, bounded_half] = *peaks;
    // Flat: half the minibatches within a tenth of the full run's peak.
    let flat = (bounded_half as f64 - bounded as f64).abs() <= 0.1 * bounded as f64;
    let less = unbounded as f64 / bounded.max(1) as f64;
    format!(
        "pushing every minibatch and waiting once peaked at {} ({} for half as many): {}. A wait \
         per minibatch peaked at {}; a bound of {inflight} minibatches at {} ({} for half as \
         many{}), {}, for {:.2}× the time.",
        human_bytes(unbounded),
        human_bytes(unbounded_half),
        // Inputs piled up ahead of the work only if pushing everything held more than a wait
        // per minibatch did, by more than a tenth.
        if unbounded as f64 > 1.1 * sync_each as f64 {
            "the loader ran ahead and inputs piled up"
        } else {
            "no more than with a wait per minibatch, so nothing piled up here"
        },
        human_bytes(sync_each),
        human_bytes(bounded),
        human_bytes(bounded_half),
        if flat { ": flat" } else { "" },
        if (less - 1.0).abs() < SAME_PEAK {
            "about as much as unbounded".to_string()
        } else if less > 1.0 {
            format!("{less:.1}× less than unbounded")
        } else {
            format!("{:.1}× more than unbounded", 1.0 / less)
        },
        time_ratio
    )
}

/// Peaks within this fraction of each other are called the same.
const SAME_PEAK: f64 = 0.05;

/// What the pool's marks say for the unbounded and the bounded loop, each as (reserved, used).
fn pool_sentence(unbounded: (u64, u64), bounded: (u64, u64)) -> String {
    format!(
        "on the GPU, parbench's memory pool held at most {} in live buffers unbounded ({} \
         reserved from the driver) and {} bounded ({} reserved): the rest of what is reserved \
         is freed memory the pool keeps cached for reuse, which the driver counts as used.",
        human_bytes(unbounded.1),
        human_bytes(unbounded.0),
        human_bytes(bounded.1),
        human_bytes(bounded.0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn the_pool_sentence_names_used_and_reserved() {
        let s = pool_sentence((3 << 20, 2 << 20), (1 << 20, 1 << 20));
        assert_eq!(s, "on the GPU, parbench's memory pool held at most 2.0 MiB in live buffers unbounded (3.0 MiB reserved from the driver) and 1.0 MiB bounded (1.0 MiB reserved): the rest of what is reserved is freed memory the pool keeps cached for reuse, which the driver counts as used.");
    }

    /// The arithmetic quoted, and a bounded peak above the unbounded one called more.
    #[test]
    fn the_explanation_quotes_its_own_arithmetic() {
        let s = explain(&[64 * MIB, 32 * MIB, 2 * MIB, 8 * MIB, 8 * MIB], 2, 1.05);
        // 64 / 8 = 8× less; half as many at the same peak is flat.
        assert_eq!(s, "pushing every minibatch and waiting once peaked at 64.0 MiB (32.0 MiB for half as many): the loader ran ahead and inputs piled up. A wait per minibatch peaked at 2.0 MiB; a bound of 2 minibatches at 8.0 MiB (8.0 MiB for half as many: flat), 8.0× less than unbounded, for 1.05× the time.");
        let s = explain(&[4 * MIB, 2 * MIB, 2 * MIB, 8 * MIB, 5 * MIB], 2, 0.9);
        assert_eq!(s, "pushing every minibatch and waiting once peaked at 4.0 MiB (2.0 MiB for half as many): the loader ran ahead and inputs piled up. A wait per minibatch peaked at 2.0 MiB; a bound of 2 minibatches at 8.0 MiB (5.0 MiB for half as many), 2.0× more than unbounded, for 0.90× the time.");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Random peaks, on either side of each other: "piled up" only when pushing everything
        /// held more than a wait per minibatch, "less"/"more than unbounded" only on the side
        /// the peaks are on (and neither when they are within 5%), "flat" only when half as
        /// many minibatches peaked within a tenth of the full run, and every figure quoted as
        /// given.
        #[test]
        fn no_sentence_contradicts_its_peaks(
            peaks in proptest::array::uniform5(1u64..(1 << 32)),
            inflight in 1usize..16,
            time_ratio in 0.1f64..10.0,
        ) {
            let s = explain(&peaks, inflight, time_ratio);
            let [unbounded, _, sync_each, bounded, bounded_half] = peaks;
            proptest::prop_assert_eq!(
                s.contains("inputs piled up"),
                unbounded as f64 > 1.1 * sync_each as f64,
                "{}", s
            );
            let ratio = unbounded as f64 / bounded as f64;
            proptest::prop_assert_eq!(s.contains("less than unbounded"), ratio >= 1.05, "{}", s);
            proptest::prop_assert_eq!(s.contains("more than unbounded"), ratio <= 0.95, "{}", s);
            proptest::prop_assert_eq!(
                s.contains(": flat"),
                (bounded_half as f64 - bounded as f64).abs() <= 0.1 * bounded as f64,
                "{}", s
            );
            for p in peaks.iter().filter(|&&p| p != peaks[1] && p != peaks[4]) {
                proptest::prop_assert!(s.contains(&human_bytes(*p)), "{}", s);
            }
            let time = format!("{time_ratio:.2}× the time");
            proptest::prop_assert!(s.contains(&time), "{}", s);
        }
    }
}
