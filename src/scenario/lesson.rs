//! How a scenario states its lesson and decides whether it held: a claim declared once beside
//! the scenario ([`LessonSpec`]), and a verdict computed from the run's figures within their
//! intervals ([`held`]), so that figures which cannot tell the sides apart never read as a yes.

use crate::report::{BookFigure, Decided, Held, Lesson, RunRecord};
use crate::scenario::evidence::{Ratio, Side};

/// A scenario's lesson: the book's section and the claim with its criterion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LessonSpec {
    /// The section of the chapter (`§8.2`).
    pub section: &'static str,
    /// The claim, worded so that its criterion is plain.
    pub claim: &'static str,
}

/// What a run found for its lesson.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub held: Held,
    /// The figures and intervals that decided it.
    pub evidence: String,
    /// The reader's figure in a few words.
    pub here: String,
    /// The book's comparable figure in a few words, with what differs.
    pub book: Option<String>,
    pub decided: Option<Decided>,
}

impl LessonSpec {
    /// Record the lesson's verdict and the book's figures on the run; a book figure that no
    /// device could have produced gets its sentence in the explanation.
    pub fn conclude(&self, run: &mut RunRecord, book: &[BookFigure], verdict: Verdict) {
        run.book = book.to_vec();
        run.explanation
            .extend(book.iter().filter_map(BookFigure::doubt));
        let Verdict {
            held,
            evidence,
            here,
            book,
            decided,
        } = verdict;
        run.lesson = Some(Lesson {
            section: self.section.into(),
            claim: self.claim.into(),
            held,
            evidence,
            here,
            book,
            decided,
        });
    }
}

/// Whether a claim held from where its figure lies against the criterion's bound: on the side
/// the claim wants, yes; on the other side, no; across the bound or not measured,
/// inconclusive.
pub fn held(side: Side, want: Side) -> Held {
    match side {
        Side::Within | Side::Unknown => Held::Inconclusive,
        s if s == want => Held::Yes,
        _ => Held::No,
    }
}

/// Several criteria that must all hold: a no if any is a no, a yes only if all are.
pub fn all(verdicts: &[Held]) -> Held {
    if verdicts.contains(&Held::No) {
        Held::No
    } else if verdicts.iter().all(|h| *h == Held::Yes) {
        Held::Yes
    } else {
        Held::Inconclusive
    }
}

/// A ratio with its interval: `5.60× (95% interval 5.10–6.02×)`.
pub fn ratio_words(r: &Ratio) -> String {
    format!("{:.2}× (95% interval {:.2}–{:.2}×)", r.value, r.lo, r.hi)
}

/// The figure that decided a claim, for the JSON.
pub fn decided(r: &Ratio, bound: f64) -> Option<Decided> {
    [r.value, r.lo, r.hi]
        .iter()
        .all(|v| v.is_finite())
        .then_some(Decided {
            value: r.value,
            ci95: [r.lo, r.hi],
            bound,
        })
}

/// How a side reads in evidence: `above 1`, `below 1.25`, `across 1`.
pub fn side_words(side: Side, bound: f64) -> String {
    match side {
        Side::Above => format!("wholly above {bound}"),
        Side::Below => format!("wholly below {bound}"),
        Side::Within => format!("reaching across {bound}: indistinguishable"),
        Side::Unknown => "not measured".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::evidence::Estimate;
    use proptest::prelude::*;

    #[test]
    fn a_verdict_needs_the_whole_interval_on_the_claimed_side() {
        assert_eq!(held(Side::Above, Side::Above), Held::Yes);
        assert_eq!(held(Side::Below, Side::Above), Held::No);
        assert_eq!(held(Side::Within, Side::Above), Held::Inconclusive);
        assert_eq!(held(Side::Unknown, Side::Below), Held::Inconclusive);
        assert_eq!(all(&[Held::Yes, Held::Yes]), Held::Yes);
        assert_eq!(all(&[Held::Yes, Held::Inconclusive]), Held::Inconclusive);
        assert_eq!(all(&[Held::Inconclusive, Held::No]), Held::No);
    }

    proptest! {
        /// Two overlapping intervals never give a yes for "a is faster than b".
        #[test]
        fn overlapping_intervals_are_never_a_yes(
            m in 0.5f64..2.0, spread_a in 0.0f64..0.5, spread_b in 0.0f64..0.5,
        ) {
            let a = Estimate { median: m, lo: m * (1.0 - spread_a), hi: m * (1.0 + spread_a) };
            let b = Estimate { median: 1.0, lo: 1.0 - spread_b, hi: 1.0 + spread_b };
            let overlap = a.lo <= b.hi && b.lo <= a.hi;
            let h = held(Ratio::of(a, b).against(1.0), Side::Above);
            if overlap {
                prop_assert_ne!(h, Held::Yes);
            }
        }
    }
}
