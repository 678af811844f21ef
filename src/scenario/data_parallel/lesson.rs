//! The lesson of the TF 1 text's §9.2–9.3 (data-parallel training, synchronous and
//! asynchronous updates, several GPUs): k devices train faster than one, less what
//! communication costs, and synchronous training ends where one device ends. The texts print
//! no timings for it: no book figures.

use super::Timed;
use crate::report::evidence::{Estimate, Ratio};
use crate::report::finding::{Finding, Want};
use crate::report::RunRecord;
use crate::scenario::kit::{LessonSpec, Verdict};

pub(super) const LESSON: LessonSpec = LessonSpec {
    source: crate::scenario::book::TF1_DATA_PARALLEL,
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
    let (findings, here) = match fastest {
        Some((v, r)) => (
            vec![
                Finding::criterion(&format!("one-device / {}", v.name()), r, 1.0, Want::Above),
                Finding::checks("agreement checks", agree),
            ],
            format!(
                "{} on {devices} devices: {:.2}× one device",
                v.name(),
                r.value
            ),
        ),
        None => (vec![], "one device only".into()),
    };
    let verdict = Verdict {
        findings,
        here,
        book: None,
    };
    LESSON.conclude_or(
        run,
        &[],
        verdict,
        "no synchronous scheme on more than one device was timed.",
    );
}
