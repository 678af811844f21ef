//! What `run-copy`'s figures show, and the figures outside their physical range, each judged
//! within the interval its medians' intervals allow; the lesson of §8.3.2 and its book figures.

use crate::report::evidence::{Estimate, Ratio, Side};
use crate::report::finding::{Finding, Want};
use crate::report::{BookFigure, RunRecord};
use crate::scenario::book::{A_GPU, TF2_RUN_COPY};
use crate::scenario::kit::{warnings, Explained, LessonSpec, Verdict, BETWEEN_ROUNDS};
use crate::units::human_time;

/// The medians with their intervals (and the trace's figures) the explanation quotes.
#[derive(Debug, Clone, Copy)]
pub(super) struct CopyOverlap {
    pub(super) ops: u64,
    pub(super) run: Estimate,
    pub(super) copy: Estimate,
    /// `run-then-copy`: all products, a wait, then all copies.
    pub(super) seq: Estimate,
    pub(super) overlapped: Estimate,
    /// The busier lane's time in each traced overlapped sample (median), and how many times
    /// it the samples took (median of each sample's own ratio).
    pub(super) bound: f64,
    pub(super) bound_ratio: f64,
}

impl CopyOverlap {
    /// Perfect overlap: the longer of run and copy, plus the last copy, which cannot overlap;
    /// its interval from run's and copy's.
    pub(super) fn ideal(&self) -> Estimate {
        let at = |r: f64, c: f64| r.max(c) + c / self.ops as f64;
        Estimate::combined(self.run, self.copy, at)
    }

    /// overlapped / perfect overlap: at least 1 but for noise.
    pub(super) fn vs_ideal(&self) -> Ratio {
        Ratio::of(self.overlapped, self.ideal())
    }

    /// run-then-copy / overlapped: at most the two lanes.
    pub(super) fn speedup(&self) -> Ratio {
        Ratio::of(self.seq, self.overlapped)
    }

    /// (run + copy) / overlapped: its ceiling is (run + copy) / ideal, not 1.
    pub(super) fn efficiency(&self) -> f64 {
        (self.run.median + self.copy.median) / self.overlapped.median
    }
}

warnings! {
    pub(super) enum Warning {
        /// Overlapped below max(run, copy) + one copy.
        OverlappedBelowIdeal { overlapped_s: f64, ideal_s: f64, efficiency: f64, perfect: f64 } => (
            "overlapped ({}) is below max(run, copy) + one copy ({}), {:.2}× it, so the overlap \
             efficiency {efficiency:.2} is above the {perfect:.2} that perfect overlap allows; {BETWEEN_ROUNDS}.",
            human_time(overlapped_s),
            human_time(ideal_s),
            overlapped_s / ideal_s,
        ),
        /// Run-then-copy / overlapped above the lanes that share the work.
        SpeedupAboveLanes { speedup: f64, lanes: f64 } => (
            "run-then-copy / overlapped = {speedup:.2} is above {lanes}: two lanes can at most halve the time of \
             the same work done one after the other; {BETWEEN_ROUNDS}."
        ),
        /// Samples shorter than their own busier lane's busy time, in the same trace.
        BelowOwnBusyLane { ratio: f64 } => (
            "the overlapped samples took {ratio:.2}× the busy time of their own busier lane, below 1: \
             bound and time come from the same sample, so this is not noise but a clock or trace that \
             disagree (a bug to report)."
        ),
    }
}

/// Two lanes (compute and copy) can at most halve the time of the same work done one after
/// the other.
const LANES: f64 = 2.0;

/// What the figures show, and the figures outside their physical range, each judged within
/// the interval its medians' intervals allow.
pub(super) fn explain(f: &CopyOverlap) -> Explained<Warning> {
    let (r, c, seq, ov) = (
        f.run.median,
        f.copy.median,
        f.seq.median,
        f.overlapped.median,
    );
    let (ideal, eff, ratio) = (f.ideal(), f.efficiency(), f.bound_ratio);
    let mut out = Explained::default();
    out.sentences.push(format!(
        "run {} and copy {} measured alone (sum {}); all products, a wait, then all copies took {}; \
         overlapped {}: the copy lane works while the compute lane computes (overlap efficiency \
         (run + copy) / overlapped = {eff:.2}).",
        human_time(r),
        human_time(c),
        human_time(r + c),
        human_time(seq),
        human_time(ov),
    ));
    out.sentences.push(format!(
        "lower bound: no sample can be shorter than the time its own busier lane was busy ({} at \
         the median of the traced samples); each traced sample took {ratio:.2}× its own at the \
         median.",
        human_time(f.bound),
    ));
    let vs_ideal = f.vs_ideal();
    let shown = vs_ideal.to_string();
    let ideal_limit = Finding::limit(
        "overlapped / (max(run, copy) + one copy)",
        vs_ideal,
        1.0,
        Want::Above,
    );
    out.sentences.push(match ideal_limit.side() {
        Side::Above | Side::Unknown => format!(
            "with perfect overlap, the run measured alone plus one copy that cannot overlap would take \
             max(run, copy) + one copy = {}; overlapped took {shown} that.",
            human_time(ideal.median)
        ),
        Side::Within => format!(
            "overlapped took {shown} max(run, copy) + one copy = {}: indistinguishable from perfect \
             overlap here.",
            human_time(ideal.median)
        ),
        Side::Below => format!(
            "overlapped took {shown} max(run, copy) + one copy = {}: the run and copy measured alone \
             (in other rounds) were slower than the same work inside the overlapped variant, which is noise \
             between rounds, not better than perfect overlap.",
            human_time(ideal.median)
        ),
    });
    out.limit(ideal_limit, || Warning::OverlappedBelowIdeal {
        overlapped_s: ov,
        ideal_s: ideal.median,
        efficiency: eff,
        perfect: (r + c) / ideal.median,
    });
    let speedup = f.speedup();
    let lanes = Finding::limit("run-then-copy / overlapped", speedup, LANES, Want::Below);
    out.limit(lanes, || Warning::SpeedupAboveLanes {
        speedup: speedup.value,
        lanes: LANES,
    });
    // Bound and time come from the same sample: below 1 is never noise.
    let own_lane = Finding::limit(
        "traced sample / its busier lane's busy time",
        Ratio::exact(ratio),
        1.0,
        Want::Above,
    );
    out.limit(own_lane, || Warning::BelowOwnBusyLane { ratio });
    out
}

/// The lesson of §8.3.2: the copy of y[i] runs while y[i+1] is computed.
pub(super) const LESSON: LessonSpec = LessonSpec {
    source: TF2_RUN_COPY,
    claim: "copies overlap compute: run-then-copy / overlapped wholly above 1",
};

const GPU_RUN: BookFigure = BookFigure::seconds(
    "GPU run: 10 products of 6000², not synchronized",
    0.0047,
    TF2_RUN_COPY,
    A_GPU,
)
.products(10, 6000);
const COPY: BookFigure = BookFigure::seconds(
    "then copy the 10 results to the CPU",
    0.0007,
    TF2_RUN_COPY,
    A_GPU,
);
const RUN_AND_COPY: BookFigure =
    BookFigure::seconds("run and copy in parallel", 0.0024, TF2_RUN_COPY, A_GPU);

pub(super) const BOOK: &[BookFigure] = &[GPU_RUN, COPY, RUN_AND_COPY];

/// Decide the lesson from the medians and record it with the book's figures.
pub(super) fn conclude(run: &mut RunRecord, f: &CopyOverlap, gpu: bool, size: usize) {
    // The book's run and copy together below its run alone: neither clock waited.
    let neither_waited = RUN_AND_COPY.value < GPU_RUN.value;
    let here = format!(
        "run {}, copy {}, overlapped {}",
        human_time(f.run.median),
        human_time(f.copy.median),
        human_time(f.overlapped.median)
    );
    let book = format!(
        "{}: run {}, copy {}, run and copy {}{} (a GPU, 6000²; here {}, {size}²)",
        TF2_RUN_COPY.cite(),
        GPU_RUN.printed(),
        COPY.printed(),
        RUN_AND_COPY.printed(),
        if neither_waited {
            ", less than its run alone: its clocks did not wait"
        } else {
            ""
        },
        if gpu {
            "the GPU"
        } else {
            "a CPU device standing in"
        },
    );
    let verdict = Verdict::new(
        vec![Finding::faster("run-then-copy / overlapped", f.speedup())],
        here,
    )
    .beside(book);
    LESSON.conclude(run, BOOK, verdict);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::kit::explained::testing::{around, spread};

    /// run 1 s, copy 0.5 s in 10 copies: perfect overlap is 1 s + 50 ms = 1.05 s.
    fn medians(seq: f64, overlapped: f64, bound_ratio: f64) -> CopyOverlap {
        CopyOverlap {
            ops: 10,
            run: around(1.0, 0.005),
            copy: around(0.5, 0.005),
            seq: around(seq, 0.005),
            overlapped: around(overlapped, 0.005),
            bound: 1.0,
            bound_ratio,
        }
    }

    #[test]
    fn the_explanation_quotes_its_own_arithmetic() {
        let e = explain(&medians(1.5, 1.2, 1.2));
        // The sum is run + copy; the efficiency (run + copy) / overlapped = 1.5 / 1.2; 1.2 /
        // 1.05 = 1.14 of perfect overlap.
        assert_eq!(e.sentences.join("\n"), "run 1.000 s and copy 500.0 ms measured alone (sum 1.500 s); all products, a wait, then all copies took 1.500 s; overlapped 1.200 s: the copy lane works while the compute lane computes (overlap efficiency (run + copy) / overlapped = 1.25).\nlower bound: no sample can be shorter than the time its own busier lane was busy (1.000 s at the median of the traced samples); each traced sample took 1.20× its own at the median.\nwith perfect overlap, the run measured alone plus one copy that cannot overlap would take max(run, copy) + one copy = 1.050 s; overlapped took 1.14×, 95% interval 1.13–1.15× that.");
        // An efficiency above 1 is normal here (its ceiling is 1.5 / 1.05): no warning.
        assert!(e.warnings.is_empty(), "{:?}", e.warnings);
    }

    /// Overlapped below perfect overlap is noise and a warning; so are more than two lanes of
    /// speed-up and a sample below its own bound.
    #[test]
    fn more_than_two_lanes_of_speed_up_and_a_sample_below_its_bound_are_warnings() {
        let e = explain(&medians(1.5, 1.0, 1.1));
        assert_eq!(e.sentences.join("\n"), "run 1.000 s and copy 500.0 ms measured alone (sum 1.500 s); all products, a wait, then all copies took 1.500 s; overlapped 1.000 s: the copy lane works while the compute lane computes (overlap efficiency (run + copy) / overlapped = 1.50).\nlower bound: no sample can be shorter than the time its own busier lane was busy (1.000 s at the median of the traced samples); each traced sample took 1.10× its own at the median.\noverlapped took 0.95×, 95% interval 0.94–0.96× max(run, copy) + one copy = 1.050 s: the run and copy measured alone (in other rounds) were slower than the same work inside the overlapped variant, which is noise between rounds, not better than perfect overlap.");
        assert_eq!(e.warnings.len(), 1, "{:?}", e.warnings);
        // 1.0 / 1.05 = 0.95; efficiency 1.5 / 1.0 = 1.50 above its ceiling 1.5 / 1.05 = 1.43.
        assert_eq!(e.warnings[0].to_string(), "overlapped (1.000 s) is below max(run, copy) + one copy (1.050 s), 0.95× it, so the overlap efficiency 1.50 is above the 1.43 that perfect overlap allows; likely noise between rounds: the variants are timed in different rounds, and few samples leave their medians loose; raise --min-samples for firmer medians.");
        // run-then-copy 2.5 s / overlapped 1.1 s = 2.27: more than two lanes can give.
        let e = explain(&medians(2.5, 1.1, 1.1));
        assert_eq!(e.warnings.len(), 1, "{:?}", e.warnings);
        assert_eq!(e.warnings[0].to_string(), "run-then-copy / overlapped = 2.27 is above 2: two lanes can at most halve the time of the same work done one after the other; likely noise between rounds: the variants are timed in different rounds, and few samples leave their medians loose; raise --min-samples for firmer medians.");
        let e = explain(&medians(1.5, 1.1, 0.9));
        assert_eq!(e.warnings.len(), 1, "{:?}", e.warnings);
        assert_eq!(e.warnings[0].to_string(), "the overlapped samples took 0.90× the busy time of their own busier lane, below 1: bound and time come from the same sample, so this is not noise but a clock or trace that disagree (a bug to report).");
        // Without a trace (NaN) nothing is flagged.
        assert!(explain(&medians(1.5, 1.1, f64::NAN)).warnings.is_empty());
        // Below perfect overlap at the medians but within the intervals: no warning.
        let mut f = medians(1.5, 1.0, 1.1);
        f.overlapped.hi = 1.1;
        let e = explain(&f);
        assert!(e.warnings.is_empty(), "{:?}", e.warnings);
        assert_eq!(e.sentences.join("\n"), "run 1.000 s and copy 500.0 ms measured alone (sum 1.500 s); all products, a wait, then all copies took 1.500 s; overlapped 1.000 s: the copy lane works while the compute lane computes (overlap efficiency (run + copy) / overlapped = 1.50).\nlower bound: no sample can be shorter than the time its own busier lane was busy (1.000 s at the median of the traced samples); each traced sample took 1.10× its own at the median.\noverlapped took 0.95×, 95% interval 0.94–1.05× max(run, copy) + one copy = 1.050 s: indistinguishable from perfect overlap here.");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Random medians with wide intervals on either side of perfect overlap and of two
        /// lanes: the below-perfect-overlap warning and sentence appear only when overlapped's
        /// highest is below the ideal's lowest, "indistinguishable" only when the intervals meet,
        /// and the two-lanes warning only when run-then-copy's lowest exceeds twice
        /// overlapped's highest (computed here from the raw bounds).
        #[test]
        fn no_sentence_or_warning_claims_more_than_its_intervals(
            medians in proptest::array::uniform4(0.3f64..2.0),
            reaches in proptest::array::uniform4((0.0f64..0.5, 0.0f64..0.5)),
        ) {
            let est = |i: usize| spread(medians[i], reaches[i]);
            let f = CopyOverlap {
                ops: 10,
                run: est(0),
                copy: est(1),
                seq: est(2),
                overlapped: est(3),
                bound: 1.0,
                bound_ratio: 1.2,
            };
            let e = explain(&f);
            let ideal = |r: f64, c: f64| r.max(c) + c / 10.0;
            let (ideal_lo, ideal_hi) = (ideal(f.run.lo, f.copy.lo), ideal(f.run.hi, f.copy.hi));
            let below = f.overlapped.hi / ideal_lo < 1.0;
            let within = !below && f.overlapped.lo / ideal_hi <= 1.0;
            let text = e.sentences.join(" ");
            let warned = |w: fn(&Warning) -> bool| e.warnings.iter().any(w);
            proptest::prop_assert_eq!(
                warned(|w| matches!(w, Warning::OverlappedBelowIdeal { .. })),
                below
            );
            proptest::prop_assert_eq!(text.contains("noise"), below, "{}", text);
            proptest::prop_assert_eq!(text.contains("indistinguishable"), within, "{}", text);
            proptest::prop_assert_eq!(
                warned(|w| matches!(w, Warning::SpeedupAboveLanes { .. })),
                f.seq.lo / f.overlapped.hi > 2.0
            );
        }
    }
}
