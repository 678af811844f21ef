//! What `hybridize`'s figures show, within their intervals, and a speed-up above the ops per
//! pass that replaying saves.

use crate::report::evidence::{Estimate, Ratio, Side};
use crate::report::finding::{Finding, Want};
use crate::report::RunRecord;
use crate::scenario::book;
use crate::scenario::kit::{warnings, Explained, LessonSpec, Verdict, BETWEEN_ROUNDS};
use crate::units::{faster_or_slower, human_time};

/// The medians the explanation quotes, with their intervals, and the workload they ran.
#[derive(Debug, Clone, Copy)]
pub(super) struct Passes {
    pub(super) imp: Estimate,
    pub(super) hyb: Estimate,
    pub(super) passes: u64,
    pub(super) ops_per_pass: usize,
    pub(super) gpu: bool,
}

impl Passes {
    /// The time saved per engine op that replaying saves: all but one op of each pass.
    pub(super) fn overhead_per_op(&self) -> f64 {
        let saved_ops = (self.passes as f64) * (self.ops_per_pass as f64 - 1.0);
        (self.imp.median - self.hyb.median) / saved_ops
    }

    /// imperative / hybridized.
    pub(super) fn speedup(&self) -> Ratio {
        Ratio::of(self.imp, self.hyb)
    }

    /// The lesson's criterion: replaying beats op by op.
    pub(super) fn replay_wins(&self) -> Finding {
        Finding::faster("imperative / hybridized", self.speedup())
    }
}

warnings! {
    pub(super) enum Warning {
        /// A speed-up above the ops per pass that replaying saves.
        AboveOpsPerPass { speedup: f64, ops_per_pass: usize } => (
            "hybridize_speedup {speedup:.2}× is above the {ops_per_pass} ops per pass that replaying saves: one \
             replayed pass, all its kernels in one engine op, would have cost less than one imperative op; \
             {BETWEEN_ROUNDS}."
        ),
    }
}

/// What the figures show, and the figures outside their physical range: a speed-up above
/// the ops per pass. Both variants run the same kernels; the imperative one pays
/// `ops_per_pass` engine ops per pass where the replay pays one, so it can be at most that
/// many times slower, unless a replayed pass (all its kernels in one op) cost less than one
/// imperative op.
pub(super) fn explain(f: &Passes) -> Explained<Warning> {
    let ops_per_pass = f.ops_per_pass;
    let speedup = f.speedup();
    let mut out = Explained::default();
    if f.gpu {
        out.sentences.push(format!(
            "on the GPU each imperative op is an engine op and a kernel launch (cuBLAS for the product); \
             the hybridized pass is one engine op and one CUDA graph launch of the same {ops_per_pass} kernels."
        ));
    }
    let shown = speedup.to_string();
    out.sentences.push(match f.replay_wins().side() {
        Side::Above => format!(
            "replaying the captured graph ran {} ({shown}): {} of {ops_per_pass} engine ops per pass \
             were saved, about {} each (push, dependency resolution, hand-off, an intermediate tensor).",
            faster_or_slower(speedup.value),
            ops_per_pass - 1,
            human_time(f.overhead_per_op())
        ),
        Side::Within | Side::Unknown => format!(
            "replaying the captured graph and running op by op are indistinguishable here \
             ({shown}): saving {} of {ops_per_pass} engine ops per pass bought nothing measurable \
             (the per-op overhead is lost in the noise of these samples).",
            ops_per_pass - 1,
        ),
        Side::Below => format!(
            "replaying the captured graph ran {} here ({shown}), beyond both medians' intervals: \
             saving {} of {ops_per_pass} engine ops per pass bought nothing measurable.",
            faster_or_slower(speedup.value),
            ops_per_pass - 1,
        ),
    });
    let limit = Finding::limit(
        "imperative / hybridized, against the ops per pass",
        speedup,
        ops_per_pass as f64,
        Want::Below,
    );
    out.limit(limit, || Warning::AboveOpsPerPass {
        speedup: speedup.value,
        ops_per_pass,
    });
    out
}

/// The lesson of §8.1; the texts print no figures for it.
pub(super) const LESSON: LessonSpec = LessonSpec {
    source: book::TF2_HYBRIDIZE,
    claim: "a replayed graph beats op by op: imperative / hybridized wholly above 1",
};

/// Decide the lesson from the medians.
pub(super) fn conclude(run: &mut RunRecord, f: &Passes) {
    let here = format!(
        "{} vs {} per pass, {:.2}×",
        human_time(f.imp.median / f.passes as f64),
        human_time(f.hyb.median / f.passes as f64),
        f.speedup().value
    );
    LESSON.conclude(run, &[], Verdict::new(vec![f.replay_wins()], here));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::kit::explained::testing::{around, spread, worded_within};

    fn medians(imp: f64, hyb: f64) -> Passes {
        Passes {
            imp: around(imp, 0.005),
            hyb: around(hyb, 0.005),
            passes: 100,
            ops_per_pass: 6,
            gpu: false,
        }
    }

    #[test]
    fn the_explanation_quotes_its_own_arithmetic() {
        // (1.0 − 0.5) s over 100 passes × 5 saved ops = 1 ms per op.
        let e = explain(&medians(1.0, 0.5));
        assert_eq!(e.sentences.join("\n"), "replaying the captured graph ran 2.00× faster (2.00×, 95% interval 1.98–2.02×): 5 of 6 engine ops per pass were saved, about 1.000 ms each (push, dependency resolution, hand-off, an intermediate tensor).");
        assert!(e.warnings.is_empty(), "{:?}", e.warnings);
        // Slower: said so, and no saving is claimed.
        assert_eq!(explain(&medians(0.5, 0.6)).sentences.join("\n"), "replaying the captured graph ran 1.20× slower here (0.83×, 95% interval 0.83–0.84×), beyond both medians' intervals: saving 5 of 6 engine ops per pass bought nothing measurable.");
        // 6 ops per pass at most give 6×: 6.5× is flagged, 6× is not.
        let e = explain(&medians(6.5, 1.0));
        assert_eq!(e.warnings.len(), 1, "{:?}", e.warnings);
        assert_eq!(e.warnings[0].to_string(), "hybridize_speedup 6.50× is above the 6 ops per pass that replaying saves: one replayed pass, all its kernels in one engine op, would have cost less than one imperative op; likely noise between rounds: the variants are timed in different rounds, and few samples leave their medians loose; raise --min-samples for firmer medians.");
        assert!(explain(&medians(6.0, 1.0)).warnings.is_empty());
        // Above at the medians, not beyond the intervals: no warning.
        let mut f = medians(6.5, 1.0);
        f.hyb.hi = 1.2;
        assert!(explain(&f).warnings.is_empty());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Random medians with wide intervals around 1× and around the ops per pass: faster or
        /// slower only when the interval from the raw bounds lies wholly on that side of 1, the
        /// warning only when it lies wholly above the ops per pass.
        #[test]
        fn no_sentence_or_warning_claims_more_than_its_intervals(
            imp in 0.5f64..8.0,
            hyb in 0.5f64..2.0,
            reaches in proptest::array::uniform2((0.0f64..0.5, 0.0f64..0.5)),
        ) {
            let mut f = medians(imp, hyb);
            (f.imp, f.hyb) = (spread(imp, reaches[0]), spread(hyb, reaches[1]));
            let e = explain(&f);
            let (lo, hi) = (f.imp.lo / f.hyb.hi, f.imp.hi / f.hyb.lo);
            worded_within(&e.sentences.join(" "), lo, hi)?;
            proptest::prop_assert_eq!(!e.warnings.is_empty(), lo > 6.0);
        }
    }
}
