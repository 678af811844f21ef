//! The timed runs of `cpu-gpu`: the devices and their inputs, `run(x)` on each device alone,
//! both pushed together and both on one device, the figures of their medians, the checks, and
//! a reference measured beside the run: the same overlap on two plain threads, without the
//! engine (not a bound: the engine may overlap better or worse than these threads did).

use std::cell::RefCell;

use super::checks::{check_placement, check_products};
use super::explain::{conclude, explain, DeviceTimes};
use super::{
    Config, CpuGpu, Timed, A_GFLOPS, BARE_THREADS_OVERLAP_EFFICIENCY, B_GFLOPS, ONE_DEVICE_SPEEDUP,
    OVERLAP_EFFICIENCY, PARALLELISM_SPEEDUP, PARALLEL_SPEEDUP, SEQUENTIAL_S, TRACED_OVERLAP_S,
    TRACED_PARALLEL_S,
};
use crate::device::{available_cores, split_cores, DeviceRequest, Runtime};
use crate::engine::TraceRecord;
use crate::harness::{synced, Variant};
use crate::report::evidence::Estimate;
use crate::report::RunRecord;
use crate::scenario::kit::{
    accelerator, check_matrices, gflops, host_ordered, run_matmuls, traced, ALREADY_TRACING,
};
use crate::scenario::{Params, RunContext, Scenario, ScenarioError};
use crate::tensor::Tensor;

pub(super) fn devices(
    scenario: &CpuGpu,
    params: &Params,
    ctx: &RunContext,
    cfg: Config,
) -> Result<RunRecord, ScenarioError> {
    let Config {
        ops,
        cpu_size,
        gpu_size,
    } = cfg;
    let cores = available_cores();
    let acc = accelerator("cpu:1", ctx.cpu_threads.unwrap_or(split_cores(cores, 2)[1]));
    let a_threads = match acc.request {
        DeviceRequest::Cuda => ctx.cpu_threads.unwrap_or(cores),
        DeviceRequest::Cpu { .. } => ctx.cpu_threads.unwrap_or(split_cores(cores, 2)[0]),
    };
    // The one-device variant runs both workloads on the GPU; on the CPU fallback, on a
    // third device that has A's and B's cores together, so that it sets one device against
    // two at the same cores.
    let mut requests = vec![DeviceRequest::Cpu { threads: a_threads }, acc.request];
    if let DeviceRequest::Cpu { threads } = acc.request {
        requests.push(DeviceRequest::Cpu {
            threads: a_threads + threads,
        });
    }
    // Host order: the traced overlap reads each GPU op's span as its GPU time.
    let rt = Runtime::new(&host_ordered(&ctx.runtime), &requests)?;
    let engine = &rt.engine;
    let (dev_a, dev_b) = (&rt.devices[0], &rt.devices[1]);
    let one_device = rt.devices.get(2).unwrap_or(dev_b);
    let b_size = if dev_b.is_gpu() { gpu_size } else { cpu_size };
    if let Some(free) = dev_b.free_memory() {
        // The GPU holds x_b, A's input and both runs' outputs (the one-device variant)...
        let largest = b_size.max(cpu_size) as u64;
        check_matrices(
            "cpu-gpu with this --gpu-size",
            largest,
            2 + 2 * ops,
            Some(free),
        )?;
        // ...and the check copies one GPU input and one output to the host.
        check_matrices("cpu-gpu with this --gpu-size", b_size as u64, 2, None)?;
    }
    let x_a = Tensor::uniform(engine, dev_a, &[cpu_size, cpu_size], 1);
    let x_b = Tensor::uniform(engine, dev_b, &[b_size, b_size], 2);
    // Both workloads again, on the one device.
    let x_a_on_one = Tensor::uniform(engine, one_device, &[cpu_size, cpu_size], 1);
    let x_b_on_one = match one_device.is_gpu() {
        true => x_b.clone(),
        false => Tensor::uniform(engine, one_device, &[b_size, b_size], 2),
    };
    engine.wait_all()?;

    // The trace of the last timed `parallel` sample: where its ops really ran.
    let timed_trace: RefCell<Option<(f64, Vec<TraceRecord>)>> = RefCell::new(None);
    let both = |first: &Tensor, second: &Tensor| -> Result<Vec<Tensor>, ScenarioError> {
        let mut ys = run_matmuls(first, ops)?;
        ys.extend(run_matmuls(second, ops)?);
        Ok(ys)
    };
    let mut variants: Vec<Variant<ScenarioError>> = Timed::each(|v| match v {
        Timed::AAlone => Variant::new(v.name(), || {
            synced(engine, || Ok::<_, ScenarioError>(run_matmuls(&x_a, ops)?))
        }),
        Timed::BAlone => Variant::new(v.name(), || {
            synced(engine, || Ok::<_, ScenarioError>(run_matmuls(&x_b, ops)?))
        }),
        Timed::Parallel => Variant::new(v.name(), || {
            let (wall, records) = traced(engine, || synced(engine, || both(&x_a, &x_b)))?;
            if let Some(records) = records {
                *timed_trace.borrow_mut() = Some((wall.as_secs_f64(), records));
            }
            Ok(wall)
        }),
        Timed::OneDevice => Variant::new(v.name(), || {
            synced(engine, || both(&x_a_on_one, &x_b_on_one))
        }),
    });
    let summaries = ctx.sample(scenario, engine, &mut variants)?;
    drop(variants);

    let devices = acc.describe_devices(&rt, 1);
    let mut run = RunRecord::new(scenario.name(), params.to_json(), devices);
    run.notes.extend(acc.fallback_note);
    if !dev_b.is_gpu() {
        run.notes.push(format!(
            "--gpu-size {gpu_size} applies to a GPU only: B ran at --cpu-size {cpu_size}² on \
             its CPU stand-in"
        ));
    }
    let (da, db, d_one) = (dev_a.describe(), dev_b.describe(), one_device.describe());
    let label = |v: Timed| match v {
        Timed::AAlone => format!("run(x) on {da}: {ops} × {cpu_size}²"),
        Timed::BAlone => format!("run(x) on {db}: {ops} × {b_size}²"),
        Timed::Parallel => "both pushed back to back, no wait between".to_string(),
        Timed::OneDevice => format!("both workloads on {d_one} alone"),
    };
    Timed::add_to(&mut run, summaries, |v| Some(label(v)));
    let est = |v: Timed| Estimate::of(&run, v.name());
    let mut f = DeviceTimes {
        a: est(Timed::AAlone),
        b: est(Timed::BAlone),
        par: est(Timed::Parallel),
        one: est(Timed::OneDevice),
        bare_threads: None,
        same_cores: !one_device.is_gpu(),
    };
    let (a, b) = (f.a.median, f.b.median);
    run.record(SEQUENTIAL_S, f.sequential().median);
    run.record(PARALLEL_SPEEDUP, f.speedup().value);
    run.record(OVERLAP_EFFICIENCY, f.overlap().value);
    run.record(ONE_DEVICE_SPEEDUP, f.sequential().median / f.one.median);
    if f.same_cores {
        run.record(PARALLELISM_SPEEDUP, f.parallelism().value);
    } else {
        run.unmeasured(
            PARALLELISM_SPEEDUP,
            "the one-device run is on the GPU, not the cores",
        );
    }
    run.record(A_GFLOPS, gflops(ops, (cpu_size, cpu_size, cpu_size), a));
    run.record(B_GFLOPS, gflops(ops, (b_size, b_size, b_size), b));

    check_products(&x_a, &x_b, ops, &mut run, (cpu_size, b_size))?;
    let trace = timed_trace.into_inner();
    let traced = trace.is_some();
    let (traced_s, records) = trace.unwrap_or_default();
    let placement = check_placement(&records, (&x_a, dev_a), (&x_b, dev_b), ops);
    run.check(
        "ran on the intended devices",
        placement.is_ok(),
        match &placement {
            Ok(()) => format!(
                "the last timed parallel sample's trace: {ops} products read x_a, each on a thread of {}; \
                 {ops} read x_b, each on a thread of {}",
                dev_a.name, dev_b.name
            ),
            Err(e) => e.to_string(),
        },
    );
    // Both from the same (last timed) sample: the overlap can never exceed its time.
    if traced {
        run.record(TRACED_PARALLEL_S, traced_s);
        // Seconds during which both devices' compute lanes were busy.
        let busy = |lane: usize| {
            let rs: Vec<_> = records.iter().filter(|r| r.lane == lane).collect();
            let start = rs.iter().map(|r| r.started_ns).min().unwrap_or(0);
            let end = rs.iter().map(|r| r.ended_ns).max().unwrap_or(0);
            (start, end)
        };
        let ((sa, ea), (sb, eb)) = (busy(dev_a.compute.index()), busy(dev_b.compute.index()));
        run.record(
            TRACED_OVERLAP_S,
            ea.min(eb).saturating_sub(sa.max(sb)) as f64 * 1e-9,
        );
    } else {
        for spec in [TRACED_PARALLEL_S, TRACED_OVERLAP_S] {
            run.unmeasured(spec, ALREADY_TRACING);
        }
    }
    // A reference measured beside the run, without the engine: on the CPU fallback, the
    // same products on two plain threads, alone and at once.
    if !dev_b.is_gpu() {
        let threads = (a_threads, dev_b.threads);
        let c = bare_threads_overlap(&x_a.to_vec()?, &x_b.to_vec()?, cpu_size, threads, ops)?;
        run.record(BARE_THREADS_OVERLAP_EFFICIENCY, c);
        f.bare_threads = Some(c);
    } else {
        run.unmeasured(
            BARE_THREADS_OVERLAP_EFFICIENCY,
            "measured on the CPU fallback only",
        );
    }
    explain(&f, &one_device.name).record(&mut run);
    conclude(&mut run, &f, dev_b.is_gpu(), (cpu_size, b_size));
    Ok(run)
}

/// Rounds of the bare-threads measurement (alone, alone, together each), and the products of
/// each workload in it: enough for a median, a few seconds at the defaults.
const BARE_THREADS_ROUNDS: usize = 3;
const BARE_THREADS_OPS: u64 = 3;

/// max(a, b) / together for `ops` (at most [`BARE_THREADS_OPS`]) products `x · x` of each of two
/// n×n inputs, each on a plain thread inside a rayon pool of its device's threads, with no
/// engine: medians of [`BARE_THREADS_ROUNDS`] rounds, the order rotated each round.
pub(super) fn bare_threads_overlap(
    a: &[f32],
    b: &[f32],
    n: usize,
    (threads_a, threads_b): (usize, usize),
    ops: u64,
) -> Result<f64, ScenarioError> {
    let pool = |t: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(t.max(1))
            .build()
            .map_err(|e| ScenarioError::Input(format!("cannot start a thread pool: {e}")))
    };
    let (pool_a, pool_b) = (pool(threads_a)?, pool(threads_b)?);
    let view = |x| {
        ndarray::ArrayView2::from_shape((n, n), x).map_err(|e| ScenarioError::Input(e.to_string()))
    };
    let (va, vb) = (view(a)?, view(b)?);
    let ops = ops.min(BARE_THREADS_OPS);
    let work = |p: &rayon::ThreadPool, x: ndarray::ArrayView2<'_, f32>| {
        p.install(|| {
            for _ in 0..ops {
                std::hint::black_box(crate::device::cpu::matmul(x, x));
            }
        })
    };
    let time = |f: &dyn Fn()| {
        let t = std::time::Instant::now();
        f();
        t.elapsed().as_secs_f64()
    };
    let (mut alone_a, mut alone_b, mut together) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..BARE_THREADS_ROUNDS {
        for k in 0..3 {
            match (round + k) % 3 {
                0 => alone_a.push(time(&|| work(&pool_a, va))),
                1 => alone_b.push(time(&|| work(&pool_b, vb))),
                _ => together.push(time(&|| {
                    std::thread::scope(|s| {
                        s.spawn(|| work(&pool_a, va));
                        work(&pool_b, vb);
                    })
                })),
            }
        }
    }
    let m = |v: &[f64]| crate::harness::stats::median(v).unwrap_or(f64::NAN);
    Ok(m(&alone_a).max(m(&alone_b)) / m(&together))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bare_threads_overlap_is_a_ratio_of_real_timings() {
        let x: Vec<f32> = (0..64 * 64).map(|i| (i % 7) as f32).collect();
        let c = bare_threads_overlap(&x, &x, 64, (1, 1), 2).unwrap();
        assert!(c.is_finite() && c > 0.0, "{c}");
        // Inputs that do not match the size are an error, not a panic.
        assert!(bare_threads_overlap(&x[1..], &x, 64, (1, 1), 2).is_err());
    }
}
