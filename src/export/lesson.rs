//! A run's lesson as every surface shows it — the terminal table, the HTML section, the
//! chapter's summary: its claim, the verdict, and why, line by line from the run's findings
//! (each rendered by [`Finding::evidence`]), with the busy machine's reason where there is
//! one. One view, so no surface can tell the reader something the others do not.

use crate::report::finding::{Finding, Role};
use crate::report::{Held, Lesson, RunRecord};

/// What a reader is told of a run's lesson.
#[derive(Debug, Clone, PartialEq)]
pub struct LessonView<'a> {
    /// The lesson as recorded: its section, claim, the book's figure and the reader's.
    pub lesson: &'a Lesson,
    /// The verdict as every surface shows it ([`RunRecord::lesson_held`]), not as recorded.
    pub held: Held,
    /// Why: each criterion with its own verdict, then each quoted figure (no verdict of its
    /// own); a report from before findings has one line, its recorded evidence, with none.
    pub why: Vec<(Option<Held>, String)>,
    /// Why the machine's load undoes the verdict, where it does.
    pub busy: Option<String>,
    /// For each criterion the run's samples left undecided on a quiet machine, about how many
    /// would decide it.
    pub more: Vec<String>,
}

/// The view of `run`'s lesson; `None` for a report from before lessons.
pub fn view(run: &RunRecord) -> Option<LessonView<'_>> {
    let lesson = run.lesson.as_ref()?;
    let held = run.lesson_held()?;
    let shown: Vec<&Finding> = run
        .findings
        .iter()
        .filter(|f| f.role != Role::Limit)
        .collect();
    let why = if shown.iter().any(|f| f.role == Role::Criterion) {
        shown
            .iter()
            .map(|f| {
                let own = (f.role == Role::Criterion).then(|| f.held());
                (own, f.evidence())
            })
            .collect()
    } else {
        vec![(None, lesson.evidence.clone())]
    };
    let reasons = run.busy_reasons();
    let busy = (!reasons.is_empty()).then(|| {
        let why: Vec<String> = reasons.iter().map(ToString::to_string).collect();
        format!(
            "the machine was busy ({}): these figures do not decide the lesson",
            why.join("; ")
        )
    });
    // The fewest samples any variant took: the intervals are as wide as theirs.
    let n = run.fewest_samples().unwrap_or(0);
    let too_few = (n > 0 && n < crate::harness::stats::SAMPLES_FOR_95).then(|| {
        format!(
            "{n} samples a variant: a median's interval is then [min, max], which covers the \
             median with {:.0}% probability, not 95%, so these figures decide nothing \
             (--min-samples {} reaches 95%)",
            crate::harness::stats::range_coverage(n) * 100.0,
            crate::harness::stats::SAMPLES_FOR_95
        )
    });
    let more = match (busy.as_ref(), too_few) {
        (Some(_), _) => Vec::new(),
        (None, Some(line)) => vec![line],
        (None, None) => shown
            .iter()
            .filter(|f| f.role == Role::Criterion)
            .filter_map(|f| Some((f, f.samples_to_decide(n)?)))
            .map(|(f, needed)| {
                format!(
                    "{} is undecided after {n} samples a variant; with this spread about \
                     {needed} would decide it (--min-samples {needed}), if its median holds",
                    f.figure
                )
            })
            .collect(),
    };
    Some(LessonView {
        lesson,
        held,
        why,
        busy,
        more,
    })
}

/// A criterion's own verdict as a mark: `✓`, `✗`, `?`; a quoted figure gets `·`.
pub fn mark(held: Option<Held>) -> &'static str {
    match held {
        Some(Held::Yes) => "✓",
        Some(Held::No) => "✗",
        Some(Held::Inconclusive) => "?",
        None => "·",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::evidence::Ratio;
    use crate::report::finding::Want;
    use serde_json::Map;

    fn ratio(value: f64, lo: f64, hi: f64) -> Ratio {
        Ratio { value, lo, hi }
    }

    fn run_with(findings: Vec<Finding>, recorded: Held) -> RunRecord {
        let mut run = RunRecord::new("x", Map::new(), vec![]);
        run.lesson = Some(Lesson {
            section: "§1".into(),
            claim: "a / b above 1".into(),
            held: recorded,
            evidence: "recorded evidence".into(),
            here: "here".into(),
            book: None,
            decided: None,
        });
        run.findings = findings;
        run
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Findings drawn across and around their bounds, rendered: every line's mark and
        /// words agree with the numbers it cites, and the verdict with the lines, on a quiet
        /// machine and a busy one.
        #[test]
        fn every_rendered_line_agrees_with_its_numbers(
            figures in proptest::collection::vec(
                (0.5f64..2.0, 0.0f64..0.4, 0.0f64..0.4, 0.8f64..1.25, proptest::bool::ANY),
                1..4,
            ),
            busy in proptest::bool::ANY,
        ) {
            let findings: Vec<Finding> = figures
                .iter()
                .map(|&(v, down, up, bound, above)| {
                    let r = Ratio { value: v, lo: v * (1.0 - down), hi: v * (1.0 + up) };
                    let want = if above { Want::Above } else { Want::Below };
                    Finding::criterion("x / y", r, bound, want)
                })
                .collect();
            let mut run = run_with(findings, Held::Inconclusive);
            if busy {
                run.record_state(crate::machine::RunState {
                    other_cpu_fraction: Some(0.5),
                    ..crate::machine::RunState::unknown(1.0, 2)
                });
            }
            let v = view(&run).expect("a lesson");
            let mut any_no = false;
            let mut all_yes = true;
            for (&(value, down, up, bound, above), (mark, line)) in figures.iter().zip(&v.why) {
                let (lo, hi) = (value * (1.0 - down), value * (1.0 + up));
                let wholly_above = lo > bound;
                let wholly_below = hi < bound;
                let yes = if above { wholly_above } else { wholly_below };
                let no = if above { wholly_below } else { wholly_above };
                proptest::prop_assert_eq!(line.contains("wholly above"), wholly_above, "{}", line);
                proptest::prop_assert_eq!(line.contains("wholly below"), wholly_below, "{}", line);
                proptest::prop_assert_eq!(
                    line.contains("indistinguishable"), !wholly_above && !wholly_below, "{}", line
                );
                let expected = if yes { Held::Yes } else if no { Held::No } else { Held::Inconclusive };
                proptest::prop_assert_eq!(*mark, Some(expected), "{}", line);
                any_no |= no;
                all_yes &= yes;
            }
            // A busy machine decides nothing; else one criterion against decides, or all for.
            let verdict = match (busy, any_no, all_yes) {
                (false, true, _) => Held::No,
                (false, false, true) => Held::Yes,
                _ => Held::Inconclusive,
            };
            proptest::prop_assert_eq!(v.held, verdict);
            proptest::prop_assert_eq!(v.busy.is_some(), busy);
        }
    }

    #[test]
    fn the_view_reads_its_verdict_and_reasons_from_the_findings() {
        let r = ratio(1.2, 1.1, 1.3);
        let run = run_with(
            vec![
                Finding::criterion("a / b", r, 1.0, Want::Above),
                Finding::observation("c / d", r, 1.5, Want::Above),
                Finding::limit("e / f", r, 2.0, Want::Below),
            ],
            Held::Yes,
        );
        let v = view(&run).expect("a lesson");
        assert_eq!(v.held, Held::Yes);
        assert_eq!(v.why.len(), 2, "{:?}", v.why);
        assert_eq!(v.why[0].0, Some(Held::Yes));
        assert_eq!(v.why[1].0, None);
        assert!(v.why[1].1.contains("wholly below 1.5"), "{:?}", v.why);
        assert_eq!(v.busy, None);

        assert!(v.more.is_empty(), "{:?}", v.more);
        // Undecided after 5 samples a variant: about how many would decide it.
        let wide = Finding::criterion("a / b", ratio(1.1, 0.9, 1.3), 1.0, Want::Above);
        let mut undecided = run_with(vec![wide], Held::Inconclusive);
        let mut too_few = undecided.clone();
        let s = crate::harness::Summary::from_samples(&[1.0; 6]).expect("samples");
        undecided.add_variants(vec!["a".into()], vec![s], [None]);
        let v = view(&undecided).expect("a lesson");
        assert_eq!(v.more.len(), 1, "{:?}", v.more);
        assert!(v.more[0].contains("after 6 samples a variant; with this spread about 24 would"));
        // Three samples a variant: intervals that cover the median 75% of the time decide
        // nothing, whatever side they lie on.
        let s = crate::harness::Summary::from_samples(&[1.0; 3]).expect("samples");
        too_few.add_variants(vec!["a".into()], vec![s], [None]);
        too_few.findings = vec![Finding::criterion("a / b", r, 1.0, Want::Above)];
        let v = view(&too_few).expect("a lesson");
        assert_eq!(v.held, Held::Inconclusive);
        assert!(
            v.more[0].contains("covers the median with 75% probability"),
            "{:?}",
            v.more
        );
        // A report from before findings shows what it recorded.
        let old = run_with(vec![], Held::No);
        let v = view(&old).expect("a lesson");
        assert_eq!(
            (v.held, v.why[0].1.as_str()),
            (Held::No, "recorded evidence")
        );
    }
}
