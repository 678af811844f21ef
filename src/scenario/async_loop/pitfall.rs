//! The "timing without synchronization" pitfall where it misleads most, as the book shows it:
//! a few large matrix products, where computing dominates pushing. Each sentence is chosen by
//! the lesson's own finding ([`reads_too_little`]): whether a clock stopped without waiting
//! reads far too little here, on the products and on `y = x + 1`, is what the figures say.

use super::figures::*;
use super::lesson::reads_too_little;
use super::Timed;
use crate::report::evidence::{Estimate, Side};
use crate::report::RunRecord;
use crate::units::human_time;

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
            format!("{lead}: a clock stopped without waiting reads {ratio:.0}× too little.")
        }
        Side::Below => format!(
            "{lead}: a clock stopped without waiting read {ratio:.2}× too little here, not far \
             too little: each push returned only once its product was done (an engine that runs \
             each op as it is pushed, or a device that blocks)."
        ),
        Side::Within | Side::Unknown => format!(
            "{lead} ({}): whether the clock reads far too little is not decided here.",
            big.evidence()
        ),
    };
    let tiny_ratio = tiny_pushed.median / tiny_true.median;
    let tiny_said = match tiny.side() {
        Side::Below => format!(
            "For y = x + 1 pushing is most of the work, so push-only ({}) is {tiny_ratio:.2}× \
             async ({}) and the same mistake goes unnoticed.",
            human_time(tiny_pushed.median),
            human_time(tiny_true.median),
        ),
        Side::Above => format!(
            "At this --shape computing dominates y = x + 1 too: push-only ({}) is \
             {tiny_ratio:.2}× async ({}), the same mistake as on the products.",
            human_time(tiny_pushed.median),
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

    /// Each sentence says what its own figures show: the defaults' "goes unnoticed", and
    /// `--shape 1000x1000`, where push-only reads far too little on y = x + 1 as well.
    #[test]
    fn the_pitfall_sentence_is_chosen_by_its_figures() {
        let defaults = [
            (Timed::Products, 0.2),
            (Timed::ProductsPushOnly, 1e-4),
            (Timed::Async, 300e-6),
            (Timed::PushOnly, 250e-6),
        ];
        let mut run = run_with(&defaults);
        derive_pitfall(&mut run, 10, 1000);
        let said = run.explanation.join(" ");
        assert!(said.contains("reads 2000× too little"), "{said}");
        assert!(
            said.contains("0.83× async") && said.contains("goes unnoticed"),
            "{said}"
        );

        let big_shape = [
            (Timed::Products, 0.2),
            (Timed::ProductsPushOnly, 1e-4),
            (Timed::Async, 294.8e-3),
            (Timed::PushOnly, 217.0e-6),
        ];
        let mut run = run_with(&big_shape);
        derive_pitfall(&mut run, 10, 1000);
        let said = run.explanation.join(" ");
        assert!(!said.contains("goes unnoticed"), "{said}");
        assert!(
            said.contains("the same mistake as on the products"),
            "{said}"
        );

        // An engine that runs each op as it is pushed: push-only reads the full time.
        let naive = [
            (Timed::Products, 0.2),
            (Timed::ProductsPushOnly, 0.2),
            (Timed::Async, 300e-6),
            (Timed::PushOnly, 300e-6),
        ];
        let mut run = run_with(&naive);
        derive_pitfall(&mut run, 10, 1000);
        let said = run.explanation.join(" ");
        assert!(
            said.contains("not far too little") && !said.contains("reads 1×"),
            "{said}"
        );
    }
}
