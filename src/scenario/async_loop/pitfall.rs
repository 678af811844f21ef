//! The "timing without synchronization" pitfall where it misleads most, as the book shows it:
//! a few large matrix products, where computing dominates pushing. Each sentence is chosen by
//! the lesson's own finding ([`reads_too_little`]): whether a clock stopped without waiting
//! reads far too little here, on the products and on `y = x + 1`, is what the figures say.

use super::figures::*;
use super::lesson::reads_too_little;
use super::Timed;
use crate::report::evidence::{Estimate, Side};
use crate::report::RunRecord;
use crate::units::{human_percent, human_time, significant};

/// How far the products' push-only clock reads below their true time, next to the same gap
/// for `y = x + 1`: the pitfall is large where computing dominates pushing.
pub(super) fn derive_pitfall(run: &mut RunRecord, products: u64, size: usize) {
    let e = |v: Timed| Estimate::of(run, v.name());
    let (true_time, pushed) = (e(Timed::Products), e(Timed::ProductsPushOnly));
    let (tiny_true, tiny_pushed) = (e(Timed::Async), e(Timed::PushOnly));
    let big = reads_too_little("products / products-push-only", true_time, pushed);
    let tiny = reads_too_little("async / push-only", tiny_true, tiny_pushed);
    let ratio = true_time.median / pushed.median;
    run.record(PRODUCTS_OVER_PUSH_ONLY_RATIO, ratio);
    let lead = format!(
        "the pitfall on the book's workload: pushing {products} products of {size}×{size} took {} \
         (products-push-only), computing them took {} (products)",
        human_time(pushed.median),
        human_time(true_time.median),
    );
    let products_said = match big.side() {
        Side::Above => {
            format!(
                "{lead}: a clock stopped without waiting reads {}× too little.",
                significant(ratio)
            )
        }
        Side::Below => format!(
            "{lead}: a clock stopped without waiting read {} of the true time here, not far \
             too little: each push returned only once its product was done (an engine that runs \
             each op as it is pushed, or a device that blocks).",
            human_percent(1.0 / ratio)
        ),
        Side::Within | Side::Unknown => format!(
            "{lead} ({}): whether the clock reads far too little is not decided here.",
            big.evidence()
        ),
    };
    // async / push-only: how many times too little the push-only clock reads.
    let tiny_ratio = tiny_true.median / tiny_pushed.median;
    let tiny_said = match tiny.side() {
        Side::Below => format!(
            "For y = x + 1 push-only ({}) reads {} of async's time ({}), not far too little, \
             so the same mistake goes unnoticed there.",
            human_time(tiny_pushed.median),
            human_percent(1.0 / tiny_ratio),
            human_time(tiny_true.median),
        ),
        Side::Above => format!(
            "At this --shape computing dominates y = x + 1 too: push-only ({}) reads {}× too \
             little against async ({}), the same mistake as on the products.",
            human_time(tiny_pushed.median),
            significant(tiny_ratio),
            human_time(tiny_true.median),
        ),
        Side::Within | Side::Unknown => format!(
            "For y = x + 1, push-only ({}) against async ({}): {}.",
            human_time(tiny_pushed.median),
            human_time(tiny_true.median),
            tiny.evidence()
        ),
    };
    run.explanation.push(format!("{products_said} {tiny_said}"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::stats::Summary;
    use serde_json::Map;

    fn run_with(medians: &[(Timed, f64)]) -> RunRecord {
        let mut run = RunRecord::new("async", Map::new(), vec![]);
        for (v, m) in medians {
            let s = Summary::from_samples(&[*m * 0.99, *m, *m * 1.01, *m, *m]).expect("samples");
            run.add_variants(vec![v.name().to_string()], vec![s], [None]);
        }
        run
    }

    fn said(medians: &[(Timed, f64)]) -> String {
        let mut run = run_with(medians);
        derive_pitfall(&mut run, 10, 1000);
        run.explanation.join(" ")
    }

    /// Each sentence says what its own figures show, word for word (golden): the defaults'
    /// "goes unnoticed"; `--shape 1000x1000`, where push-only reads far too little on
    /// y = x + 1 as well (once "0.00× async"); and the naive engine, where each push waits for
    /// its op (once "reads 1× too little").
    #[test]
    fn the_pitfall_sentence_is_chosen_by_its_figures() {
        let defaults = [
            (Timed::Products, 0.2),
            (Timed::ProductsPushOnly, 1e-4),
            (Timed::Async, 300e-6),
            (Timed::PushOnly, 250e-6),
        ];
        assert_eq!(said(&defaults), "the pitfall on the book's workload: pushing 10 products of 1000×1000 took 100.0 µs (products-push-only), computing them took 200.0 ms (products): a clock stopped without waiting reads 2,000× too little. For y = x + 1 push-only (250.0 µs) reads 83% of async's time (300.0 µs), not far too little, so the same mistake goes unnoticed there.");
        let big_shape = [
            (Timed::Products, 0.2),
            (Timed::ProductsPushOnly, 1e-4),
            (Timed::Async, 294.8e-3),
            (Timed::PushOnly, 217.0e-6),
        ];
        assert_eq!(said(&big_shape), "the pitfall on the book's workload: pushing 10 products of 1000×1000 took 100.0 µs (products-push-only), computing them took 200.0 ms (products): a clock stopped without waiting reads 2,000× too little. At this --shape computing dominates y = x + 1 too: push-only (217.0 µs) reads 1,359× too little against async (294.8 ms), the same mistake as on the products.");
        let naive = [
            (Timed::Products, 100.9e-3),
            (Timed::ProductsPushOnly, 100.4e-3),
            (Timed::Async, 875.4e-6),
            (Timed::PushOnly, 862.8e-6),
        ];
        assert_eq!(said(&naive), "the pitfall on the book's workload: pushing 10 products of 1000×1000 took 100.4 ms (products-push-only), computing them took 100.9 ms (products): a clock stopped without waiting read 100% of the true time here, not far too little: each push returned only once its product was done (an engine that runs each op as it is pushed, or a device that blocks). For y = x + 1 push-only (862.8 µs) reads 99% of async's time (875.4 µs), not far too little, so the same mistake goes unnoticed there.");
    }
}
