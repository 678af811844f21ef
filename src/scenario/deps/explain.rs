//! What `deps`' figures show, each effect credited within its interval, and the op counts every
//! sentence and label quotes; the lesson of §8.3's exercise.

use super::program::{Kind, Node};
use crate::report::evidence::{Estimate, Ratio};
use crate::report::finding::{Finding, Want};
use crate::report::RunRecord;
use crate::scenario::book;
use crate::scenario::kit::explained::compared;
use crate::scenario::kit::{Explained, LessonSpec, Verdict};
use crate::units::human_time;

/// How many ops a run pushes, counted once from the program: every sentence and label quotes
/// these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct OpCounts {
    pub(super) products: usize,
    pub(super) mixes: usize,
    pub(super) updates: usize,
    /// The copies of the inputs each run starts from.
    pub(super) copies: usize,
}

impl OpCounts {
    pub(super) fn of(nodes: &[Node], width: usize) -> OpCounts {
        let count = |k: Kind| nodes.iter().filter(|x| x.kind == k).count();
        OpCounts {
            products: count(Kind::Product),
            mixes: count(Kind::Mix),
            updates: count(Kind::Update),
            copies: width,
        }
    }

    /// Every op a run pushes: the DAG's and the copies.
    pub(super) fn total(&self) -> usize {
        self.products + self.mixes + self.updates + self.copies
    }
}

impl std::fmt::Display for OpCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ops ({} copies of the inputs, then {} products, {} mixes and {} in-place updates)",
            self.total(),
            self.copies,
            self.products,
            self.mixes,
            self.updates
        )
    }
}

/// The medians with their intervals (and the traced bounds) the explanation quotes.
#[derive(Debug, Clone, Copy)]
pub(super) struct Schedules {
    pub(super) op_by_op: Estimate,
    pub(super) one_device: Estimate,
    pub(super) parallel: Estimate,
    /// Over the traced parallel samples: the ops' run time in all, along the critical path,
    /// the bound max(path, work / devices), and time / bound (median and lowest).
    pub(super) work: f64,
    pub(super) path: f64,
    pub(super) bound: f64,
    pub(super) ratio: f64,
    pub(super) lowest: f64,
    pub(super) ops: OpCounts,
    pub(super) devices: usize,
    /// The cores of the one device, which the split devices share between them.
    pub(super) cores: usize,
}

impl Schedules {
    /// Op by op over pushed at once, on the one device.
    pub(super) fn asynchrony(&self) -> Ratio {
        Ratio::of(self.op_by_op, self.one_device)
    }

    /// One device over the split devices, both pushed at once.
    pub(super) fn parallelism(&self) -> Ratio {
        Ratio::of(self.one_device, self.parallel)
    }
}

/// Asynchrony alone, on `on` (one device or one stream): op by op against pushed at once,
/// worded `faster` or `same`, or where it lost (pushed at once slower than op by op) as such.
fn asynchrony(f: &Schedules, on: &str, [faster, same]: [&str; 2]) -> String {
    let r = f.asynchrony();
    let lead = format!(
        "asynchrony alone: on {on}, the {} ops pushed at once took {} against {} op by op ({r})",
        f.ops.total(),
        human_time(f.one_device.median),
        human_time(f.op_by_op.median),
    );
    compared(
        &lead,
        r,
        [faster, same, "{} here, beyond both medians' intervals"],
    )
}

/// What the figures show, each effect credited within its interval: asynchrony alone (one
/// device, op by op against pushed at once) and inter-op parallelism on top (the same cores
/// split into devices, both pushed at once), then the traced samples against their own bound.
pub(super) fn explain(f: &Schedules) -> Explained {
    let mut out = Explained::default();
    out.sentences.push(asynchrony(
        f,
        &format!("one device with all {} cores", f.cores),
        [
            "{} — no op waited for the front end's round trip before the next was pushed",
            "indistinguishable here — each op already uses every core of its device, so letting \
             them queue saves only the round trips, which these ops dwarf",
        ],
    ));
    let parallelism = f.parallelism();
    if f.devices == 1 {
        out.sentences.push(
            "inter-op parallelism: with --devices 1 the cores are not split, so there is none to \
             add (--devices 2 or more splits them)."
                .into(),
        );
    } else {
        let lead = format!(
            "inter-op parallelism on top: the same {} cores split into {} devices took {} pushed at \
             once, against {} on one device ({})",
            f.cores,
            f.devices,
            human_time(f.parallel.median),
            human_time(f.one_device.median),
            parallelism,
        );
        let same = format!(
            "indistinguishable here — {} lanes of fewer threads match one lane of all of them: \
             what side-by-side ops gain, the hand-offs and copies between devices cost",
            f.devices
        );
        out.sentences.push(compared(
            &lead,
            parallelism,
            [
                "{} — independent ops of the DAG ran side by side, each on fewer cores, and \
                 finished sooner than one after the other on all of them",
                &same,
                "{} — an op that reads a slot another device wrote waits for a hand-off and a \
                 copy of it to its own device, and each op has fewer cores",
            ],
        ));
    }
    out.sentences.push(format!(
        "each parallel sample is traced: its ops ran for {} in all, {} along the longest chain of \
         dependencies, so no schedule of them could finish before max(critical path, work / {} \
         devices) = {} (medians over samples); each sample took {:.2}× its own bound at the median \
         (at least {:.2}×): the rest is hand-offs, pushing and lanes left idle.",
        human_time(f.work),
        human_time(f.path),
        f.devices,
        human_time(f.bound),
        f.ratio,
        f.lowest,
    ));
    out
}

/// What the figures of a run on one GPU's compute streams show: asynchrony alone (one stream,
/// op by op against pushed at once) and parallelism on top (`streams` streams against one,
/// both pushed at once), each credited within its interval. `waiting` ops of the DAG wait for
/// an event of another stream; `size` is the matrices' N.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(super) fn explain_gpu(f: &Schedules, streams: usize, size: usize, waiting: usize) -> Explained {
    let mut out = Explained::default();
    let same = format!(
        "indistinguishable here — at {size}² the ops' own GPU time dwarfs the round trip op by \
         op adds"
    );
    out.sentences.push(asynchrony(
        f,
        "one stream of the GPU",
        [
            "{} — the GPU ran the queued ops back to back instead of idling through a host round \
             trip after each",
            &same,
        ],
    ));
    if streams == 1 {
        out.sentences.push(
            "parallelism: with --streams 1 every op runs on one stream, so there is none to add \
             (--streams 2 or more spreads the ops over compute streams of the one GPU)."
                .into(),
        );
        return out;
    }
    let parallelism = f.parallelism();
    let lead = format!(
        "parallelism on top: spread over {streams} compute streams of the same GPU, the DAG took \
         {} pushed at once, against {} on one stream ({}); {waiting} of its ops waited for an \
         event of another stream",
        human_time(f.parallel.median),
        human_time(f.one_device.median),
        parallelism,
    );
    let faster = format!(
        "{{}} — independent ops ran side by side on the GPU, each too small at {size}² to fill it \
         alone"
    );
    let same = format!(
        "indistinguishable here — an op of {size}² keeps the GPU busy on its own, so a second \
         stream finds little to fill (the chapter: automatic parallelism rarely helps big ops)"
    );
    out.sentences.push(compared(
        &lead,
        parallelism,
        [
            &faster,
            &same,
            "{} — the events between streams and ops competing for the GPU cost more than \
             running side by side gained",
        ],
    ));
    out
}

/// The lesson of §8.3's exercise; the texts print no figures for it.
pub(super) const LESSON: LessonSpec = LessonSpec {
    source: book::MXNET_PARALLEL_EXERCISES,
    claim: "a DAG pushed at once gives bit-identical results and finishes sooner than op by \
            op: the bit-identical check passes and op-by-op / parallel is wholly above 1; \
            asynchrony and parallelism each gain what their intervals show",
};

/// Decide the lesson from the check and the medians.
pub(super) fn conclude(run: &mut RunRecord, f: &Schedules) {
    let identical = run.checks_passed();
    let (asynchrony, parallelism) = (f.asynchrony(), f.parallelism());
    let findings = vec![
        Finding::checks("checks", identical),
        Finding::faster("op-by-op / parallel", Ratio::of(f.op_by_op, f.parallel)),
        Finding::observation("asynchrony_speedup", asynchrony, 1.0, Want::Above),
        Finding::observation("parallelism_speedup", parallelism, 1.0, Want::Above),
    ];
    let here = format!(
        "asynchrony {:.2}×, parallelism {:.2}×",
        asynchrony.value, parallelism.value
    );
    LESSON.conclude(run, &[], Verdict::new(findings, here));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::kit::explained::testing::{around, spread, worded_within};

    const OPS: OpCounts = OpCounts {
        products: 3,
        mixes: 2,
        updates: 1,
        copies: 4,
    };

    /// 2 devices of 1 core; work 4 s along a 1.5 s path: the bound is max(1.5, 4 / 2) = 2 s.
    fn schedules(op_by_op: Estimate, one_device: Estimate, parallel: Estimate) -> Schedules {
        Schedules {
            op_by_op,
            one_device,
            parallel,
            work: 4.0,
            path: 1.5,
            bound: 2.0,
            ratio: 1.25,
            lowest: 1.1,
            ops: OPS,
            devices: 2,
            cores: 2,
        }
    }

    fn tight(median: f64) -> Estimate {
        around(median, 0.01)
    }

    /// Each effect credited with its own figures, and no parallelism where ops fill the machine.
    #[test]
    fn the_explanation_credits_each_effect_with_its_own_figures() {
        let e = explain(&schedules(tight(4.5), tight(3.0), tight(2.0)));
        assert_eq!(e.sentences.join("\n"), "asynchrony alone: on one device with all 2 cores, the 10 ops pushed at once took 3.000 s against 4.500 s op by op (1.50×, 95% interval 1.47–1.53×): 1.50× faster — no op waited for the front end's round trip before the next was pushed.\ninter-op parallelism on top: the same 2 cores split into 2 devices took 2.000 s pushed at once, against 3.000 s on one device (1.50×, 95% interval 1.47–1.53×): 1.50× faster — independent ops of the DAG ran side by side, each on fewer cores, and finished sooner than one after the other on all of them.\neach parallel sample is traced: its ops ran for 4.000 s in all, 1.500 s along the longest chain of dependencies, so no schedule of them could finish before max(critical path, work / 2 devices) = 2.000 s (medians over samples); each sample took 1.25× its own bound at the median (at least 1.10×): the rest is hand-offs, pushing and lanes left idle.");
        assert!(e.warnings.is_empty(), "{:?}", e.warnings);
        assert_eq!(
            OPS.to_string(),
            "10 ops (4 copies of the inputs, then 3 products, 2 mixes and 1 in-place updates)"
        );
        // One device and two split devices within each other's intervals: none credited.
        let loose = Estimate {
            median: 2.1,
            lo: 1.9,
            hi: 2.3,
        };
        let e = explain(&schedules(tight(4.0), tight(2.0), loose));
        assert_eq!(e.sentences[1], "inter-op parallelism on top: the same 2 cores split into 2 devices took 2.100 s pushed at once, against 2.000 s on one device (0.95×, 95% interval 0.86–1.06×): indistinguishable here — 2 lanes of fewer threads match one lane of all of them: what side-by-side ops gain, the hand-offs and copies between devices cost.");
    }

    #[test]
    fn the_gpu_explanation_credits_streams_within_their_intervals() {
        let f = schedules(tight(4.5), tight(3.0), tight(2.0));
        assert_eq!(explain_gpu(&f, 4, 64, 7).sentences.join("\n"), "asynchrony alone: on one stream of the GPU, the 10 ops pushed at once took 3.000 s against 4.500 s op by op (1.50×, 95% interval 1.47–1.53×): 1.50× faster — the GPU ran the queued ops back to back instead of idling through a host round trip after each.\nparallelism on top: spread over 4 compute streams of the same GPU, the DAG took 2.000 s pushed at once, against 3.000 s on one stream (1.50×, 95% interval 1.47–1.53×); 7 of its ops waited for an event of another stream: 1.50× faster — independent ops ran side by side on the GPU, each too small at 64² to fill it alone.");
        let loose = Estimate {
            median: 3.1,
            lo: 2.0,
            hi: 4.0,
        };
        let same = explain_gpu(&schedules(tight(4.5), tight(3.0), loose), 2, 4000, 1);
        assert_eq!(same.sentences[1], "parallelism on top: spread over 2 compute streams of the same GPU, the DAG took 3.100 s pushed at once, against 3.000 s on one stream (0.97×, 95% interval 0.74–1.52×); 1 of its ops waited for an event of another stream: indistinguishable here — an op of 4000² keeps the GPU busy on its own, so a second stream finds little to fill (the chapter: automatic parallelism rarely helps big ops).");
        let one = explain_gpu(&f, 1, 64, 0).sentences;
        assert_eq!(one.len(), 2);
        assert_eq!(one[1], "parallelism: with --streams 1 every op runs on one stream, so there is none to add (--streams 2 or more spreads the ops over compute streams of the one GPU).");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Random medians with wide, overlapping intervals, landing on either side of 1: a
        /// sentence says faster (or slower) only when the whole interval the two medians'
        /// intervals allow lies above (or below) 1, and indistinguishable otherwise. The side is
        /// computed here from the raw bounds, not through `Ratio`.
        #[test]
        fn no_sentence_claims_more_than_its_intervals(
            medians in proptest::array::uniform3(0.5f64..2.0),
            reaches in proptest::array::uniform3((0.0f64..0.6, 0.0f64..0.6)),
        ) {
            let est = |i: usize| spread(medians[i], (reaches[i].0 * 0.9, reaches[i].1));
            let (seq, one, par) = (est(0), est(1), est(2));
            let e = explain(&schedules(seq, one, par));
            for (sentence, (a, b)) in e.sentences[..2].iter().zip([(seq, one), (one, par)]) {
                worded_within(sentence, a.lo / b.hi, a.hi / b.lo)?;
            }
        }
    }
}
