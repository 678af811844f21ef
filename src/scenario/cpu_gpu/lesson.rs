//! The lesson of §8.3.1 and the book's figures beside the run's: work pushed to two devices
//! together overlaps, so the pair takes about max(a, b), not a + b.

use super::explain::DeviceTimes;
use crate::report::{BookFigure, RunRecord};
use crate::scenario::book::{A_CPU, A_GPU, TF2_CPU_GPU};
use crate::scenario::evidence::Side;
use crate::scenario::lesson::{all, decided, held, ratio_words, side_words, LessonSpec, Verdict};
use crate::units::human_time;

pub(super) const LESSON: LessonSpec = LessonSpec {
    section: "§8.3.1",
    claim: "two devices pushed together finish in about max(a, b): (a + b) / parallel wholly \
            above 1, and max(a, b) / parallel wholly above 0.8 (parallel within 1.25 × max)",
};

/// "About max(a, b)": the pair takes at most a quarter longer than the slower half alone.
const ABOUT_MAX: f64 = 0.8;

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
    let (speedup, overlap) = (f.speedup(), f.overlap());
    let (s, o) = (speedup.against(1.0), overlap.against(ABOUT_MAX));
    let verdict =
        Verdict {
            held: all(&[held(s, Side::Above), held(o, Side::Above)]),
            evidence: format!(
                "(a + b) / parallel = {}, {}; max(a, b) / parallel = {}, {}.",
                ratio_words(&speedup),
                side_words(s, 1.0),
                ratio_words(&overlap),
                side_words(o, ABOUT_MAX),
            ),
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
            decided: decided(&overlap, ABOUT_MAX),
        };
    LESSON.conclude(run, BOOK, verdict);
}
