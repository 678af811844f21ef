//! The "timing without synchronization" pitfall where it misleads most, as the book shows it:
//! a few large matrix products, where computing dominates pushing.

use super::figures::*;
use super::{median_of, Timed};
use crate::report::RunRecord;
use crate::units::human_time;

/// How far the products' push-only clock reads below their true time, next to the same gap
/// for `y = x + 1`: the pitfall is large where computing dominates pushing.
pub(super) fn derive_pitfall(run: &mut RunRecord, products: u64, size: usize) {
    let m = |v: Timed| median_of(run, v);
    let (true_time, pushed) = (m(Timed::Products), m(Timed::ProductsPushOnly));
    let (tiny_true, tiny_pushed) = (m(Timed::Async), m(Timed::PushOnly));
    let ratio = true_time / pushed;
    run.record(PRODUCTS_OVER_PUSH_ONLY_RATIO, ratio);
    run.explanation.push(format!(
        "the pitfall on the book's workload: pushing {products} products of {size}×{size} took {} \
         (products-push-only), computing them took {} (products): a clock stopped without waiting \
         reads {ratio:.0}× too little. For y = x + 1 pushing is most of the work, so push-only ({}) \
         is {:.2}× async ({}) and the same mistake goes unnoticed.",
        human_time(pushed),
        human_time(true_time),
        human_time(tiny_pushed),
        tiny_pushed / tiny_true,
        human_time(tiny_true),
    ));
}
