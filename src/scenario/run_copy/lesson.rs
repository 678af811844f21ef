//! The lesson of §8.3.2 and the book's figures for it.

use super::explain::CopyOverlap;
use crate::report::{BookFigure, RunRecord};
use crate::scenario::book::{A_GPU, TF2_RUN_COPY};
use crate::scenario::kit::{LessonSpec, Verdict};
use crate::units::human_time;

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
    let verdict = Verdict {
        findings: vec![f.copies_overlap()],
        here: format!(
            "run {}, copy {}, overlapped {}",
            human_time(f.run.median),
            human_time(f.copy.median),
            human_time(f.overlapped.median)
        ),
        book: Some(format!(
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
        )),
    };
    LESSON.conclude(run, BOOK, verdict);
}
