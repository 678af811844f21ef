//! `run-copy`: overlapping computation with communication (book §13.3.2).
//!
//! `ops` products on the accelerator, each result then copied to host memory. The copies run on
//! the device's copy lane (its own stream on a GPU), so when pushed together the copy of y[i]
//! overlaps the computation of y[i+1] and the total approaches max(run, copy) plus one copy.

use std::cell::RefCell;

use super::support::{
    accelerator, check_matrices, host_ordered, matmul_error, matmul_tolerance, run_matmuls, traced,
    SECONDS_PER_ROUND,
};
use super::{ParamKind, ParamSpec, Params, RunContext, Scenario, ScenarioError};
use crate::device::{available_cores, Runtime};
use crate::engine::{trace, LaneId};
use crate::harness::stats::median;
use crate::harness::{synced, SamplerConfig, Variant};
use crate::report::{Figure, RunRecord};
use crate::tensor::Tensor;
use crate::units::human_time;

/// The `run-copy` scenario.
pub struct RunCopy;

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "ops",
        help: "products, each copied to the host",
        kind: ParamKind::Int { min: 1, max: 1000 },
        default: "10",
    },
    ParamSpec {
        name: "size",
        help: "matrix size N (N×N float32)",
        kind: ParamKind::Int {
            min: 1,
            max: 100_000,
        },
        default: "2000",
    },
];

impl Scenario for RunCopy {
    fn name(&self) -> &'static str {
        "run-copy"
    }

    fn about(&self) -> &'static str {
        "matmuls on the accelerator, each copied to host: copy of y[i] overlaps computing y[i+1]"
    }

    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }

    fn sampling(&self) -> SamplerConfig {
        SECONDS_PER_ROUND
    }

    fn validate(&self, params: &Params) -> Result<(), ScenarioError> {
        // x, the products kept for the copy variant, the products of the running variant, and
        // their host copies.
        check_matrices(
            "run-copy with this --size",
            params.int("size"),
            1 + 3 * params.int("ops"),
            None,
        )
    }

    fn run(&self, params: &Params, ctx: &RunContext) -> Result<RunRecord, ScenarioError> {
        let ops = params.int("ops");
        let size = params.int("size") as usize;
        // On the CPU fallback the copy lane is a thread of its own: leave it a core.
        let fallback_threads = ctx
            .cpu_threads
            .unwrap_or_else(|| available_cores().saturating_sub(1).max(1));
        let acc = accelerator(
            "cpu:0 (its copy lane moves results into separate host buffers)",
            fallback_threads,
        );
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
        let mut variants: Vec<Variant<ScenarioError>> = vec![
            Variant::new("run", || {
                synced(engine, || Ok::<_, ScenarioError>(run_matmuls(&x, ops)?))
            }),
            Variant::new("copy", || {
                synced(engine, || Ok::<_, ScenarioError>(copy_all(&kept)))
            }),
            Variant::new("run-then-copy", || {
                synced(engine, || {
                    let ys = run_matmuls(&x, ops)?;
                    engine.wait_all()?;
                    let mut all = copy_all(&ys);
                    all.extend(ys);
                    Ok(all)
                })
            }),
            Variant::new("overlapped", || {
                let (wall, records) = traced(engine, || {
                    synced(engine, || {
                        let mut all = Vec::new();
                        for _ in 0..ops {
                            let y = x.matmul(&x)?;
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
        ];
        let names: Vec<String> = variants.iter().map(|v| v.name.clone()).collect();
        let summaries = ctx.sample(self, engine, &mut variants)?;
        drop(variants);

        let mut devices = rt.describe_devices();
        acc.mark_fallback(&mut devices, 0);
        let mut run = RunRecord::new(self.name(), params.to_json(), devices);
        run.notes.extend(acc.fallback_note);
        let labels = [
            format!("{ops} products {size}² on {}", device.name),
            format!("{ops} copies of {size}² to host on the copy lane"),
            "all products, wait, then all copies".to_string(),
            "product i+1 and copy of y[i] pushed together".to_string(),
        ];
        run.add_variants(names, summaries, labels.map(Some));
        let m = |v: &str| run.median(v).unwrap_or(f64::NAN);
        let (r, c, seq, ov) = (m("run"), m("copy"), m("run-then-copy"), m("overlapped"));
        let one_copy = c / ops as f64;
        let ideal = r.max(c) + one_copy;
        let bounds = bounds.into_inner();
        let bound = median(&bounds.iter().map(|b| b.1).collect::<Vec<_>>()).unwrap_or(f64::NAN);
        let ratios: Vec<f64> = bounds.iter().map(|(wall, b)| wall / b).collect();
        let ratio = median(&ratios).unwrap_or(f64::NAN);
        run.derive("lower_bound_s", bound);
        run.derive_as(
            "overlapped_over_bound_ratio",
            ratio,
            Figure::RATIO_LOWER_IS_BETTER,
        );
        run.derive("ideal_s", ideal);
        run.derive_as(
            "overlapped_over_ideal_ratio",
            ov / ideal,
            Figure::RATIO_LOWER_IS_BETTER,
        );
        run.derive("overlap_efficiency", (r + c) / ov);
        run.derive("sequential_over_overlapped_speedup", seq / ov);
        let bytes = (size * size * 4) as f64 * ops as f64;
        run.derive("copy_gbytes_per_s", bytes / c / 1e9);

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
        run.explanation.push(format!(
            "run {} and copy {} measured alone (sum {}); all products, a wait, then all copies took {}; \
             overlapped {}: the copy lane works while the compute lane computes (overlap efficiency \
             (run + copy) / overlapped = {:.2}).",
            human_time(r),
            human_time(c),
            human_time(r + c),
            human_time(seq),
            human_time(ov),
            (r + c) / ov
        ));
        run.explanation.push(format!(
            "lower bound: in each overlapped sample's own trace the busier lane was busy for {} (median), \
             and no sample can be shorter than that; the samples took {ratio:.2}× it.",
            human_time(bound),
        ));
        let vs_ideal = ov / ideal;
        run.explanation.push(if vs_ideal >= 1.0 {
            format!(
                "with perfect overlap, the run measured alone plus one copy that cannot overlap would take \
                 max(run, copy) + one copy = {}; overlapped took {vs_ideal:.2}× that.",
                human_time(ideal)
            )
        } else {
            format!(
                "overlapped took {vs_ideal:.2}× max(run, copy) + one copy = {}: the run and copy measured alone \
                 (in other rounds) were slower than the same work inside the overlapped variant, which is noise \
                 between rounds, not better than perfect overlap.",
                human_time(ideal)
            )
        });
        Ok(run)
    }
}

/// The largest relative error of a host copy `h` of `x · x` (n×n) against float64, at 16
/// positions (NaN, a poisoned buffer the copy never filled, is infinitely wrong); a copy of
/// the wrong length too.
fn copy_error(x: &[f32], h: &[f32], n: usize) -> f64 {
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
