//! The lesson of §8.4–8.5 (and the TF 1 text's §9.2 on synchronous and asynchronous updates):
//! k devices train faster than one, less what communication costs, and synchronous training
//! ends where one device ends. The texts print no timings for it: no book figures.

use super::Timed;
use crate::report::{Held, RunRecord};
use crate::scenario::evidence::{Estimate, Ratio, Side};
use crate::scenario::lesson::{all, decided, held, ratio_words, side_words, LessonSpec, Verdict};

pub(super) const LESSON: LessonSpec = LessonSpec {
    section: "§8.4–8.5",
    claim: "k devices train faster than one: one-device / the fastest synchronous scheme wholly \
            above 1, and every synchronous scheme ends where one device ends (its agreement \
            checks pass)",
};

/// Decide the lesson from the medians and the agreement checks.
pub(super) fn conclude(run: &mut RunRecord, trained: &[Timed], devices: usize) {
    let base = Estimate::of(run, Timed::OneDevice.name());
    let fastest = trained
        .iter()
        .filter(|v| v.is_synchronous() && **v != Timed::OneDevice)
        .map(|v| (*v, Ratio::of(base, Estimate::of(run, v.name()))))
        .filter(|(_, r)| r.value.is_finite())
        .max_by(|a, b| a.1.value.total_cmp(&b.1.value));
    let agree = run.checks.iter().all(|c| c.passed);
    let agreement = if agree { Held::Yes } else { Held::No };
    let verdict = match fastest {
        Some((v, r)) => {
            let side = r.against(1.0);
            Verdict {
                held: all(&[held(side, Side::Above), agreement]),
                evidence: format!(
                    "one-device / {} = {}, {}; agreement checks {}.",
                    v.name(),
                    ratio_words(&r),
                    side_words(side, 1.0),
                    if agree { "passed" } else { "FAILED" }
                ),
                here: format!(
                    "{} on {devices} devices: {:.2}× one device",
                    v.name(),
                    r.value
                ),
                book: None,
                decided: decided(&r, 1.0),
            }
        }
        None => Verdict {
            held: Held::Inconclusive,
            evidence: "no synchronous scheme on more than one device was timed.".into(),
            here: "one device only".into(),
            book: None,
            decided: None,
        },
    };
    LESSON.conclude(run, &[], verdict);
}
