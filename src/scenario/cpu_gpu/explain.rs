//! What `cpu-gpu`'s figures show, in sentences, from the medians and their intervals. A
//! comparison is a verdict only where the interval its medians' intervals allow lies wholly on
//! one side; otherwise the sentence says the two are indistinguishable here. The lesson of
//! §8.3.1 (the pair takes about max(a, b), not a + b) and the book's figures beside the run's.

use crate::report::evidence::{Estimate, Ratio, Side};
use crate::report::finding::{Finding, Want};
use crate::report::{BookFigure, RunRecord};
use crate::scenario::book::{A_GPU, TF2_CPU_GPU, TF2_CPU_PRODUCTS as CPU};
use crate::scenario::kit::explained::compared;
use crate::scenario::kit::{warnings, Explained, LessonSpec, Verdict, BETWEEN_ROUNDS};
use crate::units::human_time;

/// The medians the explanation quotes, with their 95% intervals.
#[derive(Debug, Clone, Copy)]
pub(super) struct DeviceTimes {
    pub(super) a: Estimate,
    pub(super) b: Estimate,
    pub(super) par: Estimate,
    pub(super) one: Estimate,
    /// The overlap efficiency of the same products on two plain threads, without the engine
    /// (the CPU fallback only): a reference measured beside the run, not a bound.
    pub(super) bare_threads: Option<f64>,
    /// The one device has A's and B's cores together (the CPU fallback), so one-device against
    /// parallel is one device against two at the same cores.
    pub(super) same_cores: bool,
}

impl DeviceTimes {
    /// a + b, one workload after the other on their own devices.
    pub(super) fn sequential(&self) -> Estimate {
        Estimate::combined(self.a, self.b, |a, b| a + b)
    }

    /// (a + b) / parallel.
    pub(super) fn speedup(&self) -> Ratio {
        Ratio::of(self.sequential(), self.par)
    }

    /// max(a, b) / parallel: 1.0 is perfect overlap.
    pub(super) fn overlap(&self) -> Ratio {
        Ratio::of(Estimate::combined(self.a, self.b, f64::max), self.par)
    }

    /// one-device / parallel: what splitting the same cores into two devices gained.
    pub(super) fn parallelism(&self) -> Ratio {
        Ratio::of(self.one, self.par)
    }
}

warnings! {
    pub(super) enum Warning {
        /// max(a, b) / parallel above 1: both workloads finished before the slower one alone.
        OverlapAboveOne { overlap: f64, speedup: f64 } => (
            "overlap efficiency max(a, b)/parallel = {overlap:.2} is above 1.0 (parallel speed-up {speedup:.2}×): \
             two devices cannot finish both workloads before the slower one alone; {BETWEEN_ROUNDS}."
        ),
    }
}

/// "About max(a, b)": the pair takes at most a quarter longer than the slower half alone.
const ABOUT_MAX: f64 = 0.8;

/// What the figures show, and the figures outside their physical range: an overlap
/// efficiency max(a, b) / parallel above 1 beyond its interval.
pub(super) fn explain(f: &DeviceTimes, one_device: &str) -> Explained<Warning> {
    let (speedup, overlap) = (f.speedup(), f.overlap());
    let mut out = Explained::default();
    let lead = format!(
        "pushed together, A ({}) and B ({}) took {} against a + b = {} one after the other ({})",
        human_time(f.a.median),
        human_time(f.b.median),
        human_time(f.par.median),
        human_time(f.sequential().median),
        speedup,
    );
    let tail = format!(
        "; overlap efficiency max(a, b)/parallel = {:.2} (1.0 is perfect overlap)",
        overlap.value
    );
    let verdict = format!("{{}}{tail}");
    let same = format!("indistinguishable from one after the other here{tail}");
    out.sentences
        .push(compared(&lead, speedup, [&verdict, &same, &verdict]));
    // The physical limit: two devices cannot finish both before the slower one alone.
    let limit = Finding::limit("max(a, b) / parallel", overlap, 1.0, Want::Below);
    let side = limit.side();
    if out.limit(limit.clone(), || Warning::OverlapAboveOne {
        overlap: overlap.value,
        speedup: speedup.value,
    }) {
        out.sentences.push(format!(
            "{}. That does not beat perfect overlap (1.0): A and B alone were measured in other \
             rounds and ran slower there than inside the parallel variant (noise between rounds).",
            limit.evidence()
        ));
    } else if side == Side::Within {
        out.sentences.push(format!(
            "the overlap efficiency's 95% interval ({:.2}–{:.2}) reaches 1.0: indistinguishable from \
             perfect overlap here.",
            overlap.lo, overlap.hi
        ));
    }
    if let Some(c) = f.bare_threads {
        out.sentences.push(format!(
            "for reference, the same products on two plain threads, without the engine, overlapped \
             with an efficiency of {c:.2} (median of a few rounds, measured beside the run, not a \
             bound); the engine's {:.2} is {:.2}× that.",
            overlap.value,
            overlap.value / c
        ));
    }
    out.sentences.push(one_device_sentence(f, one_device));
    if f.same_cores {
        // One device with all the cores against the two devices that split them, both
        // workloads pushed together: inter-op parallelism alone.
        let r = f.parallelism();
        let lead = format!(
            "at the same cores, both workloads on the two devices took {} against {} on \
             {one_device}, one device with all of them ({})",
            human_time(f.par.median),
            human_time(f.one.median),
            r,
        );
        out.sentences.push(compared(
            &lead,
            r,
            [
                "the two devices were {} — their products ran side by side, each on fewer cores",
                "indistinguishable here — each product already uses every core of its device, so \
                 splitting the cores into two devices gains nothing on a CPU; a GPU beside the \
                 CPU is what the book's two devices are",
                "the two devices were {} — each product ran on fewer cores than the one device \
                 gives it",
            ],
        ));
    }
    out
}

/// What running both workloads on one device showed, against a + b measured on their own
/// devices, within the intervals.
fn one_device_sentence(f: &DeviceTimes, device: &str) -> String {
    let ratio = Ratio::of(f.sequential(), f.one);
    let lead = format!(
        "both workloads on {device} alone took {} against a + b = {} ({})",
        human_time(f.one.median),
        human_time(f.sequential().median),
        ratio,
    );
    let faster = format!(
        "{{}} than a + b, beyond both intervals: back to back on one device cost less than the \
         two apart added up, so {device} ran at least one of them faster than its own device did \
         alone"
    );
    compared(
        &lead,
        ratio,
        [
            &faster,
            "indistinguishable from a + b here: one device runs its lane's ops one after the \
             other, so it gains nothing over running them apart",
            "{} than a + b: one device runs its lane's ops one after the other, and here it also \
             ran them slower than the two devices did",
        ],
    )
}

pub(super) const LESSON: LessonSpec = LessonSpec {
    source: TF2_CPU_GPU,
    claim: "two devices pushed together finish in about max(a, b): (a + b) / parallel wholly \
            above 1, and max(a, b) / parallel wholly above 0.8 (parallel within 1.25 × max)",
};

const GPU: BookFigure = BookFigure::seconds(
    "10 products of 6000² on the GPU, not synchronized",
    0.0005,
    TF2_CPU_GPU,
    A_GPU,
)
.products(10, 6000);
const BOTH: BookFigure = BookFigure::seconds(
    "both, CPU's and GPU's products pushed together",
    1.2364,
    TF2_CPU_GPU,
    None,
);

pub(super) const BOOK: &[BookFigure] = &[CPU, GPU, BOTH];

/// Decide the lesson from the medians and record it with the book's figures.
pub(super) fn conclude(
    run: &mut RunRecord,
    f: &DeviceTimes,
    b_is_gpu: bool,
    sizes: (usize, usize),
) {
    let here = format!(
        "a {}, b {}, both {}",
        human_time(f.a.median),
        human_time(f.b.median),
        human_time(f.par.median)
    );
    let book =
        format!(
        "{}: CPU {}, GPU {}, both {} (the book's B a GPU with 6000²; here B is {} with {}², A {}²)",
        TF2_CPU_GPU.cite(),
        CPU.printed(),
        GPU.printed(),
        BOTH.printed(),
        if b_is_gpu { "the GPU" } else { "a second CPU device" },
        sizes.1,
        sizes.0,
    );
    // The pair beats one after the other, and takes about max(a, b).
    let findings = vec![
        Finding::faster("(a + b) / parallel", f.speedup()),
        Finding::criterion("max(a, b) / parallel", f.overlap(), ABOUT_MAX, Want::Above),
    ];
    LESSON.conclude(run, BOOK, Verdict::new(findings, here).beside(book));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Held;
    use crate::scenario::kit::explained::testing::{around, spread, worded_within};

    fn times(a: f64, b: f64, par: f64, one: f64) -> DeviceTimes {
        DeviceTimes {
            a: around(a, 0.005),
            b: around(b, 0.005),
            par: around(par, 0.005),
            one: around(one, 0.005),
            bare_threads: None,
            same_cores: false,
        }
    }

    #[test]
    fn the_explanation_quotes_its_own_arithmetic() {
        let e = explain(&times(2.0, 1.0, 2.5, 3.6), "cpu:1");
        // a + b = 3 s; (a + b) / parallel = 1.2; max(a, b) / parallel = 0.8; one-device 0.83×
        // of a + b (3 / 3.6): slower.
        assert_eq!(e.sentences.join("\n"), "pushed together, A (2.000 s) and B (1.000 s) took 2.500 s against a + b = 3.000 s one after the other (1.20×, 95% interval 1.19–1.21×): 1.20× faster; overlap efficiency max(a, b)/parallel = 0.80 (1.0 is perfect overlap).\nboth workloads on cpu:1 alone took 3.600 s against a + b = 3.000 s (0.83×, 95% interval 0.83–0.84×): 1.20× slower than a + b: one device runs its lane's ops one after the other, and here it also ran them slower than the two devices did.");
        assert!(e.warnings.is_empty(), "{:?}", e.warnings);
        // Beside the bare threads' reference: 0.80 / 0.95 = 0.84 of it.
        let mut f = times(2.0, 1.0, 2.5, 3.6);
        f.bare_threads = Some(0.95);
        assert_eq!(explain(&f, "cpu:1").sentences.join("\n"), "pushed together, A (2.000 s) and B (1.000 s) took 2.500 s against a + b = 3.000 s one after the other (1.20×, 95% interval 1.19–1.21×): 1.20× faster; overlap efficiency max(a, b)/parallel = 0.80 (1.0 is perfect overlap).\nfor reference, the same products on two plain threads, without the engine, overlapped with an efficiency of 0.95 (median of a few rounds, measured beside the run, not a bound); the engine's 0.80 is 0.84× that.\nboth workloads on cpu:1 alone took 3.600 s against a + b = 3.000 s (0.83×, 95% interval 0.83–0.84×): 1.20× slower than a + b: one device runs its lane's ops one after the other, and here it also ran them slower than the two devices did.");
    }

    #[test]
    fn an_efficiency_above_one_beyond_its_interval_is_a_warning() {
        // max(2, 1.9) / 1.87 = 1.07, (2 + 1.9) / 1.87 = 2.09.
        let e = explain(&times(2.0, 1.9, 1.87, 3.9), "cpu:1");
        assert_eq!(e.warnings.len(), 1, "{:?}", e.warnings);
        assert_eq!(e.warnings[0].to_string(), "overlap efficiency max(a, b)/parallel = 1.07 is above 1.0 (parallel speed-up 2.09×): two devices cannot finish both workloads before the slower one alone; likely noise between rounds: the variants are timed in different rounds, and few samples leave their medians loose; raise --min-samples for firmer medians.");
        assert_eq!(e.sentences.join("\n"), "pushed together, A (2.000 s) and B (1.900 s) took 1.870 s against a + b = 3.900 s one after the other (2.09×, 95% interval 2.06–2.11×): 2.09× faster; overlap efficiency max(a, b)/parallel = 1.07 (1.0 is perfect overlap).\nmax(a, b) / parallel = 1.07×, 95% interval 1.06–1.08×: wholly above 1. That does not beat perfect overlap (1.0): A and B alone were measured in other rounds and ran slower there than inside the parallel variant (noise between rounds).\nboth workloads on cpu:1 alone took 3.900 s against a + b = 3.900 s (1.00×, 95% interval 0.99–1.01×): indistinguishable from a + b here: one device runs its lane's ops one after the other, so it gains nothing over running them apart.");
        // Above 1 at the median, but within its interval: indistinguishable, no warning.
        let mut f = times(2.0, 1.9, 1.95, 3.9);
        f.a.lo = 1.8;
        let e = explain(&f, "cpu:1");
        assert!(e.warnings.is_empty(), "{:?}", e.warnings);
        assert_eq!(e.sentences.join("\n"), "pushed together, A (2.000 s) and B (1.900 s) took 1.950 s against a + b = 3.900 s one after the other (2.00×, 95% interval 1.88–2.02×): 2.00× faster; overlap efficiency max(a, b)/parallel = 1.03 (1.0 is perfect overlap).\nthe overlap efficiency's 95% interval (0.96–1.04) reaches 1.0: indistinguishable from perfect overlap here.\nboth workloads on cpu:1 alone took 3.900 s against a + b = 3.900 s (1.00×, 95% interval 0.94–1.01×): indistinguishable from a + b here: one device runs its lane's ops one after the other, so it gains nothing over running them apart.");
    }

    /// The issue's run, word for word (golden): one device back to back took 1.116 s against
    /// 1.046 s and 1.031 s alone — more than either, so no sentence may say it cost less; and
    /// a loose one-device median is no verdict.
    #[test]
    fn the_issues_one_device_run_is_worded_by_its_numbers() {
        let e = explain(&times(1.046, 1.031, 1.085, 1.116), "cpu:2 (2 threads)");
        assert_eq!(e.sentences.join("\n"), "pushed together, A (1.046 s) and B (1.031 s) took 1.085 s against a + b = 2.077 s one after the other (1.91×, 95% interval 1.90–1.93×): 1.91× faster; overlap efficiency max(a, b)/parallel = 0.96 (1.0 is perfect overlap).\nboth workloads on cpu:2 (2 threads) alone took 1.116 s against a + b = 2.077 s (1.86×, 95% interval 1.84–1.88×): 1.86× faster than a + b, beyond both intervals: back to back on one device cost less than the two apart added up, so cpu:2 (2 threads) ran at least one of them faster than its own device did alone.");
        // 3 / 2.7 = 1.11× at the medians, but one-device's interval reaches past a + b.
        let mut f = times(2.0, 1.0, 2.5, 2.7);
        f.one.hi = 3.3;
        assert_eq!(one_device_sentence(&f, "cpu:1"), "both workloads on cpu:1 alone took 2.700 s against a + b = 3.000 s (1.11×, 95% interval 0.90–1.12×): indistinguishable from a + b here: one device runs its lane's ops one after the other, so it gains nothing over running them apart.");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Random medians with wide, overlapping intervals on either side of every bound: the
        /// speed-up and one-device sentences say faster/slower only when the interval computed
        /// here from the raw bounds lies wholly on that side of 1, and the overlap warning
        /// appears only when max(a, b)'s lowest over parallel's highest exceeds 1.
        #[test]
        fn no_sentence_claims_more_than_its_intervals(
            medians in proptest::array::uniform4(0.5f64..2.0),
            reaches in proptest::array::uniform4((0.0f64..0.5, 0.0f64..0.5)),
        ) {
            let est = |i: usize| spread(medians[i], reaches[i]);
            let f = DeviceTimes {
                a: est(0),
                b: est(1),
                par: est(2),
                one: est(3),
                bare_threads: None,
                same_cores: true,
            };
            let e = explain(&f, "cpu:1");
            let (seq_lo, seq_hi) = (f.a.lo + f.b.lo, f.a.hi + f.b.hi);
            worded_within(&e.sentences[0], seq_lo / f.par.hi, seq_hi / f.par.lo)?;
            let n = e.sentences.len();
            worded_within(&e.sentences[n - 2], seq_lo / f.one.hi, seq_hi / f.one.lo)?;
            worded_within(&e.sentences[n - 1], f.one.lo / f.par.hi, f.one.hi / f.par.lo)?;
            let overlap_lo = f.a.lo.max(f.b.lo) / f.par.hi;
            proptest::prop_assert_eq!(!e.warnings.is_empty(), overlap_lo > 1.0);
        }
    }

    /// A run of cpu-gpu from its medians, explained and concluded as `run` does it, and what
    /// every surface shows of it: the table, the HTML page, the chapter's summary.
    fn surfaces(a: f64, b: f64, par: f64) -> (RunRecord, String, String, String) {
        let f = DeviceTimes {
            a: around(a, 0.01),
            b: around(b, 0.01),
            par: around(par, 0.01),
            one: around(a + b, 0.01),
            bare_threads: None,
            same_cores: false,
        };
        let mut run = RunRecord::new("cpu-gpu", serde_json::Map::new(), vec![]);
        explain(&f, "cpu:2").record(&mut run);
        conclude(&mut run, &f, false, (2000, 2000));
        let table = crate::export::table::render_run(&run);
        let report = crate::report::Report::new(
            crate::report::Environment::capture_without_limits(
                crate::engine::Mode::Threaded,
                crate::report::GpuInfo::unavailable("test"),
            ),
            vec![run.clone()],
        );
        let html = crate::export::html::page(&report);
        let summary = crate::export::summary::render(&report);
        (run, table, html, summary)
    }

    /// One finding, planted on either side of its bound: the explanation's sentence, the
    /// lesson's verdict and evidence, the warning, the terminal table, the HTML page and the
    /// chapter's summary all move with it, because all are rendered from it.
    #[test]
    fn a_finding_moved_across_its_bound_moves_every_surface() {
        // max(a, b) / parallel = 2 / 2.2 = 0.91: about max(a, b), under perfect overlap.
        let (run, table, html, summary) = surfaces(2.0, 1.0, 2.2);
        assert_eq!(run.lesson_held(), Some(Held::Yes));
        assert!(run.warnings().next().is_none(), "{:?}", run.notes);
        let about_max = "max(a, b) / parallel = 0.91×, 95% interval 0.89–0.93×: wholly above 0.8";
        assert!(run.lesson.as_ref().unwrap().evidence.contains(about_max));
        assert!(table.contains(&format!("✓ {about_max}")), "{table}");
        assert!(table.contains("held: yes"), "{table}");
        assert!(
            html.contains(about_max) && html.contains("badge pass\">yes"),
            "lesson block"
        );
        assert!(summary.contains("1 held, 0 did not"), "{summary}");
        assert!(!run
            .explanation
            .join(" ")
            .contains("does not beat perfect overlap"));

        // 2 / 3 = 0.67: wholly below the lesson's 0.8.
        let (run, table, html, summary) = surfaces(2.0, 1.0, 3.0);
        assert_eq!(run.lesson_held(), Some(Held::No));
        let below = "max(a, b) / parallel = 0.67×, 95% interval 0.65–0.68×: wholly below 0.8";
        assert!(table.contains(&format!("✗ {below}")), "{table}");
        assert!(
            html.contains(below) && html.contains("badge fail\">no"),
            "lesson block"
        );
        assert!(summary.contains("0 held, 1 did not"), "{summary}");

        // 2 / 1.8 = 1.11: beyond perfect overlap, the limit's warning with it.
        let (run, table, html, _) = surfaces(2.0, 1.9, 1.8);
        let beyond = "max(a, b) / parallel = 1.11×, 95% interval 1.09–1.13×: wholly above 1";
        let sentence = run.explanation.join(" ");
        assert!(
            sentence.contains(&format!("{beyond}. That does not beat")),
            "{sentence}"
        );
        let warning: Vec<&str> = run.warnings().collect();
        assert_eq!(warning.len(), 1, "{warning:?}");
        assert!(warning[0].contains("= 1.11 is above 1.0"), "{warning:?}");
        assert!(table.contains("warning: overlap efficiency"), "{table}");
        assert!(html.contains("badge warn\">warning</span> overlap efficiency"));
        assert!(run.findings.iter().any(|f| f.breaks_limit()));
    }

    /// The busy machine's rule is one: a yes on a busy machine is inconclusive on every
    /// surface, with the reason beside it.
    #[test]
    fn a_busy_machine_makes_a_yes_inconclusive_everywhere() {
        let (mut run, ..) = surfaces(2.0, 1.0, 2.2);
        assert_eq!(run.lesson_held(), Some(Held::Yes));
        run.record_state(crate::machine::RunState {
            other_cpu_fraction: Some(0.48),
            ..crate::machine::RunState::unknown(1.0, 2)
        });
        assert_eq!(run.lesson_held(), Some(Held::Inconclusive));
        assert_eq!(
            run.lesson.as_ref().map(|l| l.held),
            Some(Held::Inconclusive)
        );
        let table = crate::export::table::render_run(&run);
        assert!(table.contains("held: inconclusive"), "{table}");
        assert!(table.contains("! the machine was busy"), "{table}");
    }
}
