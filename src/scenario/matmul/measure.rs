//! The timed products of `matmul`: the device, its inputs, `--ops` products pushed with one
//! wait, the figures of their median, and the check against a float64 reference.

use super::explain::explain_run;
use super::{Config, Matmul, Timed, GFLOPS, GFLOPS_PER_THREAD, THREADS};
use crate::device::cpu::{kernel_for, matmul_kernel_choice, MatmulKernel, AVX2_MIN_MULTIPLY_ADDS};
use crate::device::Runtime;
use crate::harness::{synced, Variant};
use crate::report::RunRecord;
use crate::scenario::kit::{check_matrices, chosen_device, gflops, matmul_error, matmul_tolerance};
use crate::scenario::{Params, RunContext, Scenario, ScenarioError};
use crate::tensor::Tensor;

pub(super) fn products(
    scenario: &Matmul,
    params: &Params,
    ctx: &RunContext,
    cfg: &Config,
) -> Result<RunRecord, ScenarioError> {
    // The machine's FMA peak, measured once per process: before the device's threads
    // exist, so the probe has the cores to itself (the CLI has measured it already).
    let fma = &crate::machine::limits().fma;
    let ((m, k, n), ops) = (cfg.dims(), cfg.ops);
    let threads = cfg.threads(ctx);
    let chosen = chosen_device(cfg.device, threads, ctx.gpu_fallback)?;
    let rt = Runtime::new(&ctx.runtime, &[chosen.request])?;
    let (engine, device) = (&rt.engine, &rt.devices[0]);
    if let Some(free) = device.free_memory() {
        check_matrices(
            "matmul on the GPU",
            m.max(k).max(n) as u64,
            2 + ops,
            Some(free),
        )?;
    }
    let a = Tensor::uniform(engine, device, &[m, k], 1);
    let b = Tensor::uniform(engine, device, &[k, n], 2);
    engine.wait_all()?;

    let mut variants = vec![Variant::new(Timed::Matmul.name(), || {
        synced(engine, || {
            let ys: Result<Vec<Tensor>, _> = (0..ops).map(|_| a.matmul(&b)).collect();
            Ok::<_, ScenarioError>(ys?)
        })
    })];
    let summaries = ctx.sample(scenario, engine, &mut variants)?;
    drop(variants);

    let mut run = RunRecord::new(
        scenario.name(),
        scenario.resolved_params(params, ctx),
        rt.describe_devices(),
    );
    run.notes.extend(chosen.fallback_note);
    if !device.is_gpu() {
        let choice = matmul_kernel_choice();
        let used = kernel_for(choice.kernel, m, n, k);
        let note = match choice.kernel {
            MatmulKernel::Avx2 if used == MatmulKernel::Gemm => format!(
                "CPU products ran on the gemm kernel: the avx2 kernel ({}) runs products of \
                 {} multiply-adds or more",
                choice.why,
                crate::units::grouped(AVX2_MIN_MULTIPLY_ADDS as u64)
            ),
            _ => format!(
                "CPU products ran on the {} kernel ({})",
                used.as_str(),
                choice.why
            ),
        };
        run.notes.push(note);
    }
    let label = format!("{ops} × ({m}×{k} · {k}×{n}) on {}", device.describe());
    run.add_variants(Timed::names(), summaries, [Some(label)]);
    let median = run.median(Timed::Matmul.name()).unwrap_or(f64::NAN);
    let rate = gflops(ops, (m, k, n), median);
    run.record(GFLOPS, rate);
    if device.is_gpu() {
        run.unmeasured(GFLOPS_PER_THREAD, "a GPU has no threads to share it");
    } else {
        run.record(GFLOPS_PER_THREAD, rate / device.threads as f64);
    }
    run.record(THREADS, device.threads as f64);

    let c = a.matmul(&b)?;
    let err = matmul_error(&a.to_vec()?, &b.to_vec()?, &c.to_vec()?, (m, k, n), 32);
    let tol = matmul_tolerance(k);
    run.check(
        "matches float64 reference",
        err <= tol,
        format!("32 entries, max relative error {err:.2e} (tolerance {tol:.1e})"),
    );
    let cpu_threads = (!device.is_gpu()).then_some(device.threads);
    let described = device.describe();
    explain_run(
        &mut run,
        &described,
        median,
        ops,
        (m, k, n),
        cpu_threads,
        fma,
    );
    Ok(run)
}
