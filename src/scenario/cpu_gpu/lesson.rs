//! The lesson of §8.3.1 and the book's figures beside the run's: work pushed to two devices
//! together overlaps, so the pair takes about max(a, b), not a + b.

use super::explain::DeviceTimes;
use crate::report::{BookFigure, RunRecord};
use crate::scenario::book::{A_CPU, A_GPU, TF2_CPU_GPU};
use crate::scenario::kit::{LessonSpec, Verdict};
use crate::units::human_time;

pub(super) const LESSON: LessonSpec = LessonSpec {
    source: TF2_CPU_GPU,
    claim: "two devices pushed together finish in about max(a, b): (a + b) / parallel wholly \
            above 1, and max(a, b) / parallel wholly above 0.8 (parallel within 1.25 × max)",
};

const CPU: BookFigure = BookFigure::seconds(
    "10 products of 2000² on the CPU",
    1.2657,
    TF2_CPU_GPU,
    A_CPU,
)
.products(10, 2000);
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
    let verdict =
        Verdict {
            findings: vec![f.beats_sequential(), f.about_max()],
            here: format!(
                "a {}, b {}, both {}",
                human_time(f.a.median),
                human_time(f.b.median),
                human_time(f.par.median)
            ),
            book: Some(format!(
            "{}: CPU {}, GPU {}, both {} (the book's B a GPU with 6000²; here B is {} with {}², \
             A {}²)",
            TF2_CPU_GPU.cite(),
            CPU.printed(),
            GPU.printed(),
            BOTH.printed(),
            if b_is_gpu { "the GPU" } else { "a second CPU device" },
            sizes.1,
            sizes.0,
        )),
        };
    LESSON.conclude(run, BOOK, verdict);
}

#[cfg(test)]
mod tests {
    use super::super::explain::explain;
    use super::*;
    use crate::report::evidence::Estimate;
    use crate::report::Held;

    fn tight(median: f64) -> Estimate {
        Estimate {
            median,
            lo: median * 0.99,
            hi: median * 1.01,
        }
    }

    /// A run of cpu-gpu from its medians, explained and concluded as `run` does it, and what
    /// every surface shows of it: the table, the HTML page, the chapter's summary.
    fn surfaces(a: f64, b: f64, par: f64) -> (RunRecord, String, String, String) {
        let f = DeviceTimes {
            a: tight(a),
            b: tight(b),
            par: tight(par),
            one: tight(a + b),
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
