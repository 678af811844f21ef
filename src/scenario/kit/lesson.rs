//! How a scenario states its lesson and decides whether it held: a claim declared once beside
//! the scenario ([`LessonSpec`]) and the run's [`Finding`]s, one per criterion, from which the
//! verdict, its evidence and the deciding figure are all rendered — so figures that cannot
//! tell the sides apart never read as a yes, and no surface words a criterion its own way.

use crate::report::finding::{self, Finding, Role};
use crate::report::{BookFigure, Lesson, RunRecord, Source};

/// A scenario's lesson: the source text's section and the claim with its criterion.
#[derive(Debug, Clone, PartialEq)]
pub struct LessonSpec {
    /// The edition and section that teach it, as the source text names them.
    pub source: Source,
    /// The claim, worded so that its criterion is plain.
    pub claim: &'static str,
}

/// What a run found for its lesson.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The lesson's criteria, each one judgment; the lesson holds when all do.
    pub findings: Vec<Finding>,
    /// The reader's figure in a few words.
    pub here: String,
    /// The book's comparable figure in a few words, with what differs.
    pub book: Option<String>,
    /// The evidence when no criterion could be measured (one device: nothing to compare).
    pub unmeasured: &'static str,
}

impl Verdict {
    pub fn new(findings: Vec<Finding>, here: String) -> Verdict {
        Verdict {
            findings,
            here,
            book: None,
            unmeasured: "",
        }
    }

    /// No criterion measured on one device, and why that leaves nothing to compare.
    pub fn one_device(why: &'static str) -> Verdict {
        Verdict {
            unmeasured: why,
            ..Verdict::new(vec![], "one device only".into())
        }
    }

    /// The same, with the book's comparable figure beside the reader's.
    pub fn beside(self, book: String) -> Verdict {
        Verdict {
            book: Some(book),
            ..self
        }
    }
}

impl LessonSpec {
    /// Record the lesson's verdict, decided from its findings, and the book's figures on the
    /// run; a book figure that no device could have produced gets its sentence in the
    /// explanation. The findings join the run's, where every surface reads them.
    pub fn conclude(&self, run: &mut RunRecord, book: &[BookFigure], verdict: Verdict) {
        run.book = book.to_vec();
        run.explanation
            .extend(book.iter().filter_map(BookFigure::doubt));
        let Verdict {
            findings,
            here,
            book,
            unmeasured,
        } = verdict;
        run.findings.extend(findings.iter().cloned());
        let held = run.held_from_findings();
        let evidence = if findings.iter().any(|f| f.role == Role::Criterion) {
            finding::evidence(&findings)
        } else {
            unmeasured.to_string()
        };
        // The figure behind the verdict: the first bounded criterion that reads as the
        // lesson does (a no decided by failed checks alone has none).
        let decided = findings
            .iter()
            .filter(|f| f.role == Role::Criterion && f.held() == held)
            .find_map(Finding::decided);
        run.lesson = Some(Lesson {
            section: self.source.cite(),
            claim: self.claim.into(),
            held,
            evidence,
            here,
            book,
            decided,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::evidence::Ratio;
    use crate::report::finding::Want;
    use crate::report::Held;
    use serde_json::Map;

    const SPEC: LessonSpec = LessonSpec {
        source: crate::scenario::book::TF2_ASYNC,
        claim: "a / b wholly above 1",
    };

    /// A run concluded with `verdict`.
    fn concluded(verdict: Verdict) -> RunRecord {
        let mut run = RunRecord::new("x", Map::new(), vec![]);
        SPEC.conclude(&mut run, &[], verdict);
        run
    }

    /// A run whose checks passed or not, and whose a / b lies in `lo`–`hi`, concluded.
    fn verdict(lo: f64, hi: f64, checks: bool) -> RunRecord {
        let r = Ratio {
            value: (lo + hi) / 2.0,
            lo,
            hi,
        };
        concluded(Verdict::new(
            vec![
                Finding::checks("checks", checks),
                Finding::criterion("a / b", r, 1.0, Want::Above),
            ],
            "here".into(),
        ))
    }

    #[test]
    fn the_verdict_evidence_and_deciding_figure_come_from_the_findings() {
        let run = verdict(1.1, 1.3, true);
        let lesson = run.lesson.clone().expect("lesson");
        assert_eq!(lesson.held, Held::Yes);
        assert_eq!(
            lesson.evidence,
            "checks passed; a / b = 1.20×, 95% interval 1.10–1.30×: wholly above 1."
        );
        assert_eq!(lesson.decided.map(|d| d.bound), Some(1.0));
        assert_eq!(run.findings.len(), 2);

        let held = verdict(0.9, 1.3, true).lesson.map(|l| l.held);
        assert_eq!(held, Some(Held::Inconclusive));

        // Failed checks decide a no with no figure behind it.
        let lesson = verdict(1.1, 1.3, false).lesson.expect("lesson");
        assert_eq!(lesson.held, Held::No);
        assert_eq!(lesson.decided, None);
        assert_eq!(
            lesson.evidence,
            "checks FAILED; a / b = 1.20×, 95% interval 1.10–1.30×: wholly above 1."
        );
        // No criterion measured is inconclusive, with the reason.
        let run = concluded(Verdict::one_device("one device: nothing to compare."));
        let lesson = run.lesson.expect("lesson");
        assert_eq!(lesson.held, Held::Inconclusive);
        assert_eq!(lesson.here, "one device only");
        assert_eq!(lesson.evidence, "one device: nothing to compare.");
    }
}
