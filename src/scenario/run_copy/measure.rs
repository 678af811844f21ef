//! The timed runs of `run-copy` (results to the host): the products, the copies, the two
//! pushed one after the other and overlapped (traced, for the lanes' lower bound), their
//! figures, and the check that every host copy equals the device's values.

use std::cell::RefCell;

use super::explain::{conclude, explain, CopyOverlap};
use super::{
    Config, RunCopy, Timed, COPY_GBYTES_PER_S, IDEAL_S, LOWER_BOUND_S, OVERLAPPED_OVER_BOUND_RATIO,
    OVERLAPPED_OVER_IDEAL_RATIO, OVERLAP_EFFICIENCY, SEQUENTIAL_OVER_OVERLAPPED_SPEEDUP,
};
use crate::device::{available_cores, Runtime};
use crate::engine::{trace, LaneId};
use crate::harness::stats::median;
use crate::harness::{synced, Variant};
use crate::report::evidence::Estimate;
use crate::report::RunRecord;
use crate::scenario::kit::{
    accelerator, check_matrices, host_ordered, matmul_error, matmul_tolerance, run_matmuls, traced,
    ChosenDevice,
};
use crate::scenario::{Params, RunContext, Scenario, ScenarioError};
use crate::tensor::Tensor;

/// The accelerator `run-copy` runs on: on the CPU fallback the copy lane is a thread of its
/// own, so leave it a core.
pub(super) fn accelerator_for(ctx: &RunContext) -> ChosenDevice {
    let fallback_threads = ctx
        .cpu_threads
        .unwrap_or_else(|| available_cores().saturating_sub(1).max(1));
    accelerator(
        "cpu:0 (its copy lane moves results into separate host buffers)",
        fallback_threads,
    )
}

pub(super) fn run_and_copy(
    scenario: &RunCopy,
    params: &Params,
    ctx: &RunContext,
    cfg: &Config,
) -> Result<RunRecord, ScenarioError> {
    let &Config { ops, size, .. } = cfg;
    let acc = accelerator_for(ctx);
    // Host order: the trace-derived bound reads each GPU op's span as its GPU time.
    let rt = Runtime::new(&host_ordered(&ctx.runtime), &[acc.request])?;
    let (engine, device) = (&rt.engine, &rt.devices[0]);
    if let Some(free) = device.free_memory() {
        check_matrices("run-copy on the GPU", size as u64, 1 + 2 * ops, Some(free))?;
    }
    let x = Tensor::uniform(engine, device, &[size, size], 1);
    let kept = run_matmuls(&x, ops)?;
    engine.wait_all()?;

    // Per traced `overlapped` sample: (its time, the busier of its two lanes).
    let bounds: RefCell<Vec<(f64, f64)>> = RefCell::new(Vec::new());
    let copy_all = |ys: &[Tensor]| ys.iter().map(Tensor::copy_to_host).collect::<Vec<_>>();
    let (x, kept, bounds, copy_all) = (&x, &kept, &bounds, &copy_all);
    let mut variants: Vec<Variant<ScenarioError>> = Timed::each(|v| match v {
        Timed::Run => Variant::new(v.name(), move || {
            synced(engine, || Ok::<_, ScenarioError>(run_matmuls(x, ops)?))
        }),
        Timed::Copy => Variant::new(v.name(), move || {
            synced(engine, || Ok::<_, ScenarioError>(copy_all(kept)))
        }),
        Timed::RunThenCopy => Variant::new(v.name(), move || {
            synced(engine, || {
                let ys = run_matmuls(x, ops)?;
                engine.wait_all()?;
                let mut all = copy_all(&ys);
                all.extend(ys);
                Ok(all)
            })
        }),
        Timed::Overlapped => Variant::new(v.name(), move || {
            let (wall, records) = traced(engine, || {
                synced(engine, || {
                    let mut all = Vec::new();
                    for _ in 0..ops {
                        let y = x.matmul(x)?;
                        all.push(y.copy_to_host());
                        all.push(y);
                    }
                    Ok::<_, ScenarioError>(all)
                })
            })?;
            if let Some(records) = records {
                let busy = |lane: LaneId| trace::lane_busy_ns(&records, lane.index());
                let bound = busy(device.compute).max(busy(device.copy)) as f64 * 1e-9;
                bounds.borrow_mut().push((wall.as_secs_f64(), bound));
            }
            Ok(wall)
        }),
    });
    let summaries = ctx.sample(scenario, engine, &mut variants)?;
    drop(variants);

    let devices = acc.describe_devices(&rt, 0);
    let mut run = RunRecord::new(scenario.name(), params.to_json(), devices);
    run.notes.extend(acc.fallback_note);
    let label = |v: Timed| match v {
        Timed::Run => format!("{ops} products {size}² on {}", device.name),
        Timed::Copy => format!("{ops} copies of {size}² to host on the copy lane"),
        Timed::RunThenCopy => "all products, wait, then all copies".to_string(),
        Timed::Overlapped => "product i+1 and copy of y[i] pushed together".to_string(),
    };
    Timed::add_to(&mut run, summaries, |v| Some(label(v)));
    let est = |v: Timed| Estimate::of(&run, v.name());
    let bounds = bounds.take();
    let ratios: Vec<f64> = bounds.iter().map(|(wall, b)| wall / b).collect();
    let f = CopyOverlap {
        ops,
        run: est(Timed::Run),
        copy: est(Timed::Copy),
        seq: est(Timed::RunThenCopy),
        overlapped: est(Timed::Overlapped),
        bound: median(&bounds.iter().map(|b| b.1).collect::<Vec<_>>()).unwrap_or(f64::NAN),
        bound_ratio: median(&ratios).unwrap_or(f64::NAN),
    };
    run.record(LOWER_BOUND_S, f.bound);
    run.record(OVERLAPPED_OVER_BOUND_RATIO, f.bound_ratio);
    run.record(IDEAL_S, f.ideal().median);
    run.record(OVERLAPPED_OVER_IDEAL_RATIO, f.vs_ideal().value);
    run.record(OVERLAP_EFFICIENCY, f.efficiency());
    run.record(SEQUENTIAL_OVER_OVERLAPPED_SPEEDUP, f.speedup().value);
    let bytes = (size * size * 4) as f64 * ops as f64;
    run.record(COPY_GBYTES_PER_S, bytes / f.copy.median / 1e9);

    // Correctness: distinct inputs per product, so a copy that moved nothing (or the
    // wrong buffer) cannot match; reused host buffers are poisoned with NaN before each
    // copy; and each copy is checked against a float64 product of its own input, read
    // back by another path than the copy lane.
    let checked = ops.min(3) as usize;
    device.poison_reused_host_buffers(true);
    let xs: Vec<Tensor> = (0..checked)
        .map(|i| Tensor::uniform(engine, device, &[size, size], 100 + i as u64))
        .collect();
    let ys = xs
        .iter()
        .map(|x| x.matmul(x))
        .collect::<Result<Vec<_>, _>>()?;
    let copies: Vec<Tensor> = ys.iter().map(Tensor::copy_to_host).collect();
    let mut worst = 0f64;
    let mut identical = true;
    for ((x, y), h) in xs.iter().zip(&ys).zip(&copies) {
        let (xv, yv, hv) = (x.to_vec()?, y.to_vec()?, h.to_vec()?);
        identical &= yv == hv;
        worst = worst.max(copy_error(&xv, &hv, size));
    }
    device.poison_reused_host_buffers(false);
    let tol = matmul_tolerance(size);
    run.check(
        "host copies equal the device values",
        identical && worst <= tol,
        format!(
            "{checked} products of distinct inputs, reused host buffers poisoned with NaN first: \
             copies equal the device values element by element, and a float64 product of each \
             input at 16 positions (max relative error {worst:.2e}, tolerance {tol:.1e})"
        ),
    );
    explain(&f).record(&mut run);
    conclude(&mut run, &f, device.is_gpu(), size);
    Ok(run)
}

/// The largest relative error of a host copy `h` of `x · x` (n×n) against float64, at 16
/// positions (NaN, a poisoned buffer the copy never filled, is infinitely wrong); a copy of
/// the wrong length too.
pub(super) fn copy_error(x: &[f32], h: &[f32], n: usize) -> f64 {
    if h.len() != n * n || x.len() != n * n {
        return f64::INFINITY;
    }
    matmul_error(x, x, h, (n, n, n), 16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::RuntimeOptions;

    #[test]
    fn copy_error_rejects_poison_and_another_products_copy() {
        let rt = Runtime::cpu(&RuntimeOptions::default(), &[1]).unwrap();
        let d = &rt.devices[0];
        let n = 12;
        let (x1, x2) = (
            Tensor::uniform(&rt.engine, d, &[n, n], 1),
            Tensor::uniform(&rt.engine, d, &[n, n], 2),
        );
        let h1 = x1.matmul(&x1).unwrap().copy_to_host().to_vec().unwrap();
        let h2 = x2.matmul(&x2).unwrap().copy_to_host().to_vec().unwrap();
        let xv = x1.to_vec().unwrap();
        assert!(copy_error(&xv, &h1, n) <= matmul_tolerance(n));
        // The copy of another product (a stale buffer), NaN poison, a short copy: all fail.
        assert!(copy_error(&xv, &h2, n) > matmul_tolerance(n));
        assert!(copy_error(&xv, &vec![f32::NAN; n * n], n).is_infinite());
        assert!(copy_error(&xv, &h1[1..], n).is_infinite());
    }
}
