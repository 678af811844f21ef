//! `cpu-gpu`: automatic parallelism across devices (book §13.3.1).
//!
//! `run(x)` is `ops` products `x · x`. Device A is a CPU device, device B the GPU or, without
//! one, a second CPU device. Pushing `run(x_a)` and `run(x_b)` back to back with no wait
//! between lets the engine run them at once: the total approaches max(a, b) rather than a + b.
//! Pushing both workloads to one device gains nothing: its lane runs them one after the other.

mod bare_threads;
mod checks;
mod explain;
mod lesson;

use std::cell::RefCell;

use bare_threads::bare_threads_overlap;
use checks::{check_placement, check_products};
use explain::{explain, DeviceTimes};

use crate::report::evidence::Estimate;

use super::kit::{
    accelerator, check_matrices, gflops, host_ordered, run_matmuls, traced, SECONDS_PER_ROUND,
};
use super::{ParamError, ParamKind, ParamSpec, Params, RunContext, Scenario, ScenarioError};
use crate::device::{available_cores, split_cores, Device, DeviceRequest, Runtime};
use crate::engine::TraceRecord;
use crate::harness::{synced, Variant};
use crate::report::{Better, FigureSpec, RunRecord, Unit};
use crate::tensor::Tensor;

/// The derived figures this scenario records, each with its unit and direction.
const SEQUENTIAL_S: FigureSpec = FigureSpec::new("sequential_s", Unit::Seconds, Better::Neither);
const PARALLEL_SPEEDUP: FigureSpec =
    FigureSpec::new("parallel_speedup", Unit::Ratio, Better::Higher);
const OVERLAP_EFFICIENCY: FigureSpec =
    FigureSpec::new("overlap_efficiency", Unit::Number, Better::Higher);
const ONE_DEVICE_SPEEDUP: FigureSpec =
    FigureSpec::new("one_device_speedup", Unit::Ratio, Better::Higher);
const PARALLELISM_SPEEDUP: FigureSpec =
    FigureSpec::new("parallelism_speedup", Unit::Ratio, Better::Higher);
const A_GFLOPS: FigureSpec = FigureSpec::new("a_gflops", Unit::Gflops, Better::Higher);
const B_GFLOPS: FigureSpec = FigureSpec::new("b_gflops", Unit::Gflops, Better::Higher);
const TRACED_PARALLEL_S: FigureSpec =
    FigureSpec::new("traced_parallel_s", Unit::Seconds, Better::Neither);
const TRACED_OVERLAP_S: FigureSpec =
    FigureSpec::new("traced_overlap_s", Unit::Seconds, Better::Neither);
const BARE_THREADS_OVERLAP_EFFICIENCY: FigureSpec = FigureSpec::new(
    "bare_threads_overlap_efficiency",
    Unit::Number,
    Better::Higher,
);

/// The `cpu-gpu` scenario.
pub struct CpuGpu;

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "ops",
        help: "products per run(x)",
        kind: ParamKind::Int { min: 1, max: 1000 },
        default: "10",
    },
    ParamSpec {
        name: "cpu_size",
        help: "matrix size on the CPU device A (and on the CPU fallback for B)",
        kind: ParamKind::Int {
            min: 1,
            max: 50_000,
        },
        default: "2000",
    },
    ParamSpec {
        name: "gpu_size",
        help: "matrix size on the GPU (device B when a GPU is present)",
        kind: ParamKind::Int {
            min: 1,
            max: 100_000,
        },
        default: "6000",
    },
];

/// The parameters, read once.
struct Config {
    ops: u64,
    cpu_size: usize,
    gpu_size: usize,
}

impl Config {
    fn of(params: &Params) -> Result<Config, ParamError> {
        Ok(Config {
            ops: params.int("ops")?,
            cpu_size: params.count("cpu_size")?,
            gpu_size: params.count("gpu_size")?,
        })
    }
}

super::variant::variants! {
    /// What `cpu-gpu` times.
    enum Timed {
        /// `run(x)` on device A (the CPU) alone.
        AAlone = "a-alone",
        /// `run(x)` on device B (the GPU, or a second CPU device) alone.
        BAlone = "b-alone",
        /// Both pushed back to back, no wait between.
        Parallel = "parallel",
        /// Both workloads on device B alone.
        OneDevice = "one-device",
    }
}

/// What `cpu-gpu` declares.
static SPEC: super::Spec = super::Spec {
    name: "cpu-gpu",
    about: "matmuls on two devices, alone and pushed together: does the total approach max(a, b)?",
    params: PARAMS,
    lesson: lesson::LESSON,
    book: lesson::BOOK,
    sampling: SECONDS_PER_ROUND,
};

impl Scenario for CpuGpu {
    fn spec(&self) -> &'static super::Spec {
        &SPEC
    }

    /// The GPU whenever one is usable (a CPU device stands in without one).
    fn may_use_gpu(&self, _params: &Params) -> bool {
        true
    }
    fn validate(&self, params: &Params) -> Result<(), ScenarioError> {
        let cfg = Config::of(params)?;
        // Host, on the CPU fallback: x_a and x_b, their copies on the one device, the outputs
        // of both runs, and the check's host copies of an input and an output.
        check_matrices(
            "cpu-gpu with this --cpu-size",
            cfg.cpu_size as u64,
            cfg.ops.saturating_mul(2).saturating_add(6),
            None,
        )
    }

    fn run(&self, params: &Params, ctx: &RunContext) -> Result<RunRecord, ScenarioError> {
        let Config {
            ops,
            cpu_size,
            gpu_size,
        } = Config::of(params)?;
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
        let (x_a_on_one, x_b_on_one) = if one_device.is_gpu() {
            (
                Tensor::uniform(engine, one_device, &[cpu_size, cpu_size], 1),
                x_b.clone(),
            )
        } else {
            (
                Tensor::uniform(engine, one_device, &[cpu_size, cpu_size], 1),
                Tensor::uniform(engine, one_device, &[b_size, b_size], 2),
            )
        };
        engine.wait_all()?;

        // The trace of the last timed `parallel` sample: where its ops really ran.
        let timed_trace: RefCell<Option<(f64, Vec<TraceRecord>)>> = RefCell::new(None);
        let both = |first: &Tensor, second: &Tensor| -> Result<Vec<Tensor>, ScenarioError> {
            let mut ys = run_matmuls(first, ops)?;
            ys.extend(run_matmuls(second, ops)?);
            Ok(ys)
        };
        let mut variants: Vec<Variant<ScenarioError>> = Timed::ALL
            .iter()
            .map(|&v| match v {
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
            })
            .collect();
        let summaries = ctx.sample(self, engine, &mut variants)?;
        drop(variants);

        let devices = acc.describe_devices(&rt, 1);
        let mut run = RunRecord::new(self.name(), params.to_json(), devices);
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
        run.add_variants(
            Timed::names(),
            summaries,
            Timed::ALL.iter().map(|&v| Some(label(v))),
        );
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
        }
        run.record(A_GFLOPS, gflops(ops, (cpu_size, cpu_size, cpu_size), a));
        run.record(B_GFLOPS, gflops(ops, (b_size, b_size, b_size), b));

        check_products(&x_a, &x_b, ops, &mut run, (cpu_size, b_size))?;
        let (traced_s, records) = timed_trace.into_inner().unwrap_or_default();
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
        run.record(TRACED_PARALLEL_S, traced_s);
        run.record(TRACED_OVERLAP_S, both_busy_s(&records, dev_a, dev_b));
        // A reference measured beside the run, without the engine: on the CPU fallback, the
        // same products on two plain threads, alone and at once.
        if !dev_b.is_gpu() {
            let threads = (a_threads, dev_b.threads);
            let c = bare_threads_overlap(&x_a.to_vec()?, &x_b.to_vec()?, cpu_size, threads, ops)?;
            run.record(BARE_THREADS_OVERLAP_EFFICIENCY, c);
            f.bare_threads = Some(c);
        }
        explain(&f, &one_device.name).record(&mut run);
        lesson::conclude(&mut run, &f, dev_b.is_gpu(), (cpu_size, b_size));
        Ok(run)
    }
}

/// Seconds during which both devices' compute lanes were busy in a traced run.
fn both_busy_s(records: &[TraceRecord], dev_a: &Device, dev_b: &Device) -> f64 {
    let busy = |lane: usize| {
        let rs: Vec<_> = records.iter().filter(|r| r.lane == lane).collect();
        let start = rs.iter().map(|r| r.started_ns).min().unwrap_or(0);
        let end = rs.iter().map(|r| r.ended_ns).max().unwrap_or(0);
        (start, end)
    };
    let ((sa, ea), (sb, eb)) = (busy(dev_a.compute.index()), busy(dev_b.compute.index()));
    ea.min(eb).saturating_sub(sa.max(sb)) as f64 * 1e-9
}
