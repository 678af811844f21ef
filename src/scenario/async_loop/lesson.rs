//! The lesson of §8.2 and the book's figures beside the run's: asynchronous execution beats
//! waiting after every op, and a clock that does not wait reads far too little on real work.

use super::Timed;
use crate::report::evidence::{Estimate, Ratio};
use crate::report::finding::{Finding, Want};
use crate::report::{BookFigure, RunRecord};
use crate::scenario::book::{A_CPU, A_GPU, PYTORCH_ASYNC, TF2_ASYNC};
use crate::scenario::kit::{LessonSpec, Verdict};
use crate::units::{human_percent, human_time};

pub(super) const LESSON: LessonSpec = LessonSpec {
    source: TF2_ASYNC,
    claim: "async is faster than sync (sync / async wholly above 1), and a clock stopped \
            without waiting reads far too little on real work (products / products-push-only \
            wholly above 2)",
};

/// How many times too little the push-only clock must read on the products to count as "far
/// too little": below half the true time.
const FAR_TOO_LITTLE: f64 = 2.0;

const TF2_SYNC: BookFigure =
    BookFigure::seconds("synchronous: 1000 × y = x + 1", 3.5589, TF2_ASYNC, None).per(1000);
const TF2_ASYNC_LOOP: BookFigure = BookFigure::seconds(
    "asynchronous (tf.function): 1000 × y = x + 1",
    1.0457,
    TF2_ASYNC,
    None,
)
.per(1000);
const NUMPY: BookFigure = BookFigure::seconds(
    "NumPy: 10 × (randn + product) of 1000²",
    0.2660,
    PYTORCH_ASYNC,
    A_CPU,
)
.products(10, 1000);
const TORCH_UNSYNCED: BookFigure = BookFigure::seconds(
    "torch on a GPU: 10 × (randn + product) of 1000², without synchronize",
    0.0010,
    PYTORCH_ASYNC,
    A_GPU,
)
.products(10, 1000);
const TORCH_SYNCED: BookFigure = BookFigure::seconds(
    "torch on a GPU: 10 × (randn + product) of 1000², with torch.cuda.synchronize",
    0.0020,
    PYTORCH_ASYNC,
    A_GPU,
)
.products(10, 1000);

/// The figures §8.2 prints, in both editions that print any.
pub(super) const BOOK: &[BookFigure] = &[
    TF2_SYNC,
    TF2_ASYNC_LOOP,
    NUMPY,
    TORCH_UNSYNCED,
    TORCH_SYNCED,
];

/// The lesson's second criterion, which the pitfall's sentence is chosen by too: how many
/// times too little the push-only clock reads on `true_time`'s work.
pub(super) fn reads_too_little(figure: &str, true_time: Estimate, pushed: Estimate) -> Finding {
    Finding::criterion(
        figure,
        Ratio::of(true_time, pushed),
        FAR_TOO_LITTLE,
        Want::Above,
    )
}

/// Decide the lesson from the run's medians and record it with the book's figures.
pub(super) fn conclude(run: &mut RunRecord, n: u64, products: u64, size: usize) {
    let e = |v: Timed| Estimate::of(run, v.name());
    let speedup = Ratio::of(e(Timed::Sync), e(Timed::Async));
    let products_pitfall = reads_too_little(
        "products / products-push-only",
        e(Timed::Products),
        e(Timed::ProductsPushOnly),
    );
    let too_little = products_pitfall.ratio().unwrap_or(Ratio::exact(f64::NAN));
    let verdict = Verdict {
        findings: vec![
            Finding::criterion("sync / async", speedup, 1.0, Want::Above),
            products_pitfall,
        ],
        here: format!(
            "{} vs {} ({n} ops), {:.1}×; push-only reads {} of the products' time",
            human_time(e(Timed::Sync).median),
            human_time(e(Timed::Async).median),
            speedup.value,
            human_percent(1.0 / too_little.value),
        ),
        book: Some(format!(
            "{}: {} sync vs {} async, {:.1}× (its Python front end; here {n} ops from Rust); {}: \
             {} without sync vs {} with, {:.1}× too little (a GPU; here {products} products of \
             {size}² on this device)",
            TF2_ASYNC.cite(),
            TF2_SYNC.printed(),
            TF2_ASYNC_LOOP.printed(),
            TF2_SYNC.value / TF2_ASYNC_LOOP.value,
            PYTORCH_ASYNC.cite(),
            TORCH_UNSYNCED.printed(),
            TORCH_SYNCED.printed(),
            TORCH_SYNCED.value / TORCH_UNSYNCED.value,
        )),
    };
    LESSON.conclude(run, BOOK, verdict);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::stats::Summary;
    use crate::report::Held;
    use serde_json::Map;

    fn run_with(medians: &[(Timed, f64)]) -> RunRecord {
        let mut run = RunRecord::new("async", Map::new(), vec![]);
        for (v, m) in medians {
            let s =
                Summary::from_samples(&[*m * 0.99, *m, *m * 1.01, *m, *m, *m]).expect("samples");
            run.add_variants(vec![v.name().to_string()], vec![s], [None]);
        }
        run
    }

    #[test]
    fn a_clear_run_holds_and_an_indistinguishable_one_is_inconclusive() {
        let mut clear = run_with(&[
            (Timed::Sync, 1.3e-3),
            (Timed::Async, 2.3e-4),
            (Timed::Products, 0.2),
            (Timed::ProductsPushOnly, 1e-5),
        ]);
        conclude(&mut clear, 1000, 10, 1000);
        let lesson = clear.lesson.as_ref().expect("a lesson");
        assert_eq!(lesson.held, Held::Yes, "{lesson:?}");
        assert!(lesson
            .book
            .as_deref()
            .is_some_and(|b| b.contains("3.5589 s")));
        assert_eq!(clear.book.len(), BOOK.len());

        let mut same = run_with(&[
            (Timed::Sync, 1.0e-3),
            (Timed::Async, 1.0e-3),
            (Timed::Products, 0.2),
            (Timed::ProductsPushOnly, 1e-5),
        ]);
        conclude(&mut same, 1000, 10, 1000);
        assert_eq!(same.lesson.expect("a lesson").held, Held::Inconclusive);
    }
}
