//! What the timed work computed, checked after sampling: the last output of every timed
//! variant, the products against float64, a dependent chain against its sequential value and
//! the ping-pong chain's order.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{add_chain, Config, Timed};
use crate::report::RunRecord;
use crate::scenario::kit::{matmul_error, matmul_tolerance};
use crate::scenario::ScenarioError;
use crate::tensor::Tensor;

/// Length of the checked chain: every step adds exactly 1 in float32 (far below 2^24).
const CHAIN_OPS: u64 = 100_000;

/// The last output each timed variant produced, kept by the variant's closure.
#[derive(Default)]
pub(super) struct LastOutputs {
    tensors: RefCell<Vec<(Timed, Tensor)>>,
    ping_pong: RefCell<Option<Arc<AtomicU64>>>,
}

impl LastOutputs {
    /// Keep `variant`'s last output (a variant that produced none keeps its previous one).
    pub(super) fn keep(&self, variant: Timed, y: Option<Tensor>) {
        let Some(y) = y else { return };
        let mut kept = self.tensors.borrow_mut();
        kept.retain(|(v, _)| *v != variant);
        kept.push((variant, y));
    }

    /// Keep the counter the last ping-pong chain advanced.
    pub(super) fn keep_counter(&self, counter: Option<Arc<AtomicU64>>) {
        if counter.is_some() {
            *self.ping_pong.borrow_mut() = counter;
        }
    }

    fn last(&self, variant: Timed) -> Option<Tensor> {
        let kept = self.tensors.borrow();
        kept.iter()
            .find(|(v, _)| *v == variant)
            .map(|(_, y)| y.clone())
    }

    /// Record the checks, in order: the loops' values, the products, a dependent chain, the
    /// ping-pong chain's order.
    pub(super) fn check(
        &self,
        run: &mut RunRecord,
        cfg: &Config,
        x: &Tensor,
        m: &Tensor,
    ) -> Result<(), ScenarioError> {
        let n = cfg.iterations;
        // What the timed loops computed.
        let mut timed_ok = true;
        let mut worst = 0f32;
        for v in [Timed::Sync, Timed::Async, Timed::PushOnly, Timed::Chain] {
            // The chain's last y is 1 + N (exact in float32 up to 2^24, far above the maximum
            // --iterations); every other loop's is x + 1 = 2.
            let want = if v == Timed::Chain {
                1.0 + n as f32
            } else {
                2.0
            };
            match self.last(v) {
                Some(y) => {
                    let (ok, err) = all_equal(&y.to_vec()?, want);
                    timed_ok &= ok && y.shape() == cfg.shape.as_slice();
                    worst = worst.max(err);
                }
                None => timed_ok = false,
            }
        }
        run.check(
            "timed loops computed x + 1",
            timed_ok,
            format!(
                "last y of sync, async and push-only compared with 2 (x is ones), the chain's with {}, max abs err {worst}",
                1 + n
            ),
        );

        // The products the product variants timed, against float64.
        let (a, k) = (m.to_vec()?, cfg.product_size);
        let mut product_err = 0f64;
        let mut products_ok = true;
        for v in [Timed::Products, Timed::ProductsPushOnly] {
            match self.last(v) {
                // A NaN product reads as an infinite error (`matmul_error`).
                Some(y) => {
                    product_err = product_err.max(matmul_error(&a, &a, &y.to_vec()?, (k, k, k), 16))
                }
                None => products_ok = false,
            }
        }
        let tol = matmul_tolerance(k);
        run.check(
            "timed products match float64",
            products_ok && product_err <= tol,
            format!(
                "the last product of products and products-push-only at 16 positions: max relative error \
                 {product_err:.2e} (tolerance {tol:.1e})"
            ),
        );

        // Ordering. A chain y = y + 1 pushed at once, through the same op the timed loops
        // push, must give exactly 1 + N: any op run out of order, twice, or not at all
        // changes the sum.
        let chain = n.min(CHAIN_OPS);
        let got = add_chain(x, chain).to_vec()?;
        let want = 1.0 + chain as f32;
        let (ok, max_err) = all_equal(&got, want);
        run.check(
            "dependent chain matches sequential reference",
            ok && got.len() == x.shape().iter().product::<usize>(),
            format!(
                "y = y + 1, {chain} times from ones, pushed at once: expected {want} in all {} elements, max abs err {max_err}",
                got.len()
            ),
        );

        // The ping-pong chain ran every op once, in order, alternating lanes.
        let counted = self
            .ping_pong
            .borrow()
            .as_ref()
            .map(|c| c.load(Ordering::SeqCst));
        run.check(
            "ping-pong ran its ops in order",
            counted == Some(n),
            format!(
                "the last timed chain counted {} of {n} ops, each checking its turn",
                counted.map_or_else(|| "none".to_string(), |c| c.to_string())
            ),
        );
        Ok(())
    }
}

/// True when every value is exactly `want` (and there is at least one); the largest error.
fn all_equal(values: &[f32], want: f32) -> (bool, f32) {
    let err = values.iter().map(|v| (v - want).abs()).fold(0f32, |a, e| {
        if e.is_nan() {
            f32::INFINITY
        } else {
            a.max(e)
        }
    });
    (!values.is_empty() && err == 0.0, err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{Runtime, RuntimeOptions};

    #[test]
    fn the_chain_adds_one_per_op_in_order() {
        let rt = Runtime::cpu(&RuntimeOptions::default(), &[2]).unwrap();
        let x = Tensor::ones(&rt.engine, &rt.devices[0], &[1, 3]);
        let got = add_chain(&x, 5000).to_vec().unwrap();
        assert_eq!(all_equal(&got, 5001.0), (true, 0.0));
        // The value check fails on wrong values.
        assert!(all_equal(&[3.0, 3.0], 3.0).0);
        assert!(!all_equal(&[3.0, 2.0], 3.0).0);
        assert!(!all_equal(&[f32::NAN], 3.0).0);
        assert!(!all_equal(&[], 3.0).0);
        // x + 1 computed from the same x N times (the old check) is not a chain's 1 + N.
        assert!(!all_equal(&[2.0, 2.0], 1.0 + 1000.0).0);
    }
}
