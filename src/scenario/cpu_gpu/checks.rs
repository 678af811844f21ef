//! What the parallel runs computed and where they ran: the products against float64, and
//! each product on a thread of the device it was pushed to, read from the trace.

use crate::device::Device;
use crate::engine::TraceRecord;
use crate::report::RunRecord;
use crate::scenario::kit::{matmul_error, matmul_tolerance, run_matmuls};
use crate::scenario::ScenarioError;
use crate::tensor::Tensor;

/// A separate parallel run: its first and last product of each device against float64.
pub(super) fn check_products(
    x_a: &Tensor,
    x_b: &Tensor,
    ops: u64,
    run: &mut RunRecord,
    (a_size, b_size): (usize, usize),
) -> Result<(), ScenarioError> {
    let ys_a = run_matmuls(x_a, ops)?;
    let ys_b = run_matmuls(x_b, ops)?;
    let mut worst = 0f64;
    for (x, ys, s) in [(x_a, &ys_a, a_size), (x_b, &ys_b, b_size)] {
        let xv = x.to_vec()?;
        // The first and last product of each run, at 16 positions each.
        for y in [ys.first(), ys.last()].into_iter().flatten() {
            worst = worst.max(matmul_error(&xv, &xv, &y.to_vec()?, (s, s, s), 16));
        }
    }
    let tol = matmul_tolerance(a_size.max(b_size));
    run.check(
        "matches float64 reference",
        worst <= tol,
        format!("first and last product of each device, max relative error {worst:.2e} (tolerance {tol:.1e})"),
    );
    Ok(())
}

/// Where a traced parallel sample's products did not run as pushed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum Misplaced {
    #[error("no trace of a timed parallel sample")]
    NoTrace,
    #[error("{found} products of {device}'s input in the trace, expected {expected}")]
    Count {
        device: String,
        found: usize,
        expected: u64,
    },
    #[error("a product of {device}'s input ran on thread '{worker}', not one of {device}")]
    Thread { device: String, worker: String },
}

/// The display name of `Tensor::matmul`'s op, which the trace records.
const MATMUL_OP: &str = "matmul";

/// From a timed run's trace: every product reading `x_a` ran on a thread of device A, every
/// one reading `x_b` on a thread of device B, `ops` of each. Decided by the thread that ran
/// the op, not by the lane it was pushed to.
pub(super) fn check_placement(
    records: &[TraceRecord],
    (x_a, dev_a): (&Tensor, &Device),
    (x_b, dev_b): (&Tensor, &Device),
    ops: u64,
) -> Result<(), Misplaced> {
    if records.is_empty() {
        return Err(Misplaced::NoTrace);
    }
    for (x, dev) in [(x_a, dev_a), (x_b, dev_b)] {
        let id = x.var().id();
        let products: Vec<&TraceRecord> = records
            .iter()
            .filter(|r| r.name == MATMUL_OP && r.reads.contains(&id))
            .collect();
        if products.len() as u64 != ops {
            return Err(Misplaced::Count {
                device: dev.name.clone(),
                found: products.len(),
                expected: ops,
            });
        }
        if let Some(r) = products.iter().find(|r| !dev.owns_thread(&r.worker)) {
            return Err(Misplaced::Thread {
                device: dev.name.clone(),
                worker: r.worker.clone(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{Runtime, RuntimeOptions};
    use crate::scenario::kit::traced;

    #[test]
    fn placement_is_read_from_the_thread_that_ran_each_op() {
        let rt = Runtime::cpu(&RuntimeOptions::default(), &[1, 1]).unwrap();
        let (a, b) = (&rt.devices[0], &rt.devices[1]);
        let x_a = Tensor::uniform(&rt.engine, a, &[8, 8], 1);
        let x_b = Tensor::uniform(&rt.engine, b, &[8, 8], 2);
        let (_, records) = traced(&rt.engine, || {
            let ys = (run_matmuls(&x_a, 3)?, run_matmuls(&x_b, 3)?);
            rt.engine.wait_all()?;
            Ok::<_, ScenarioError>(ys)
        })
        .unwrap();
        let mut records = records.unwrap();
        assert_eq!(check_placement(&records, (&x_a, a), (&x_b, b), 3), Ok(()));
        // A product that ran elsewhere (the front end, another device) is caught...
        let r = records
            .iter_mut()
            .find(|r| r.reads.contains(&x_b.var().id()))
            .unwrap();
        r.worker = "cpu:0 t0".into();
        let e = check_placement(&records, (&x_a, a), (&x_b, b), 3).unwrap_err();
        assert!(
            matches!(&e, Misplaced::Thread { device, .. } if device == "cpu:1"),
            "{e}"
        );
        // ...and so is a missing product, or no trace at all.
        assert!(check_placement(&records[1..], (&x_a, a), (&x_b, b), 3).is_err());
        assert!(check_placement(&[], (&x_a, a), (&x_b, b), 3).is_err());
    }
}
