//! `cpu-gpu`: automatic parallelism across devices (book §13.3.1).
//!
//! `run(x)` is `ops` products `x · x`. Device A is a CPU device, device B the GPU or, without
//! one, a second CPU device. Pushing `run(x_a)` and `run(x_b)` back to back with no wait
//! between lets the engine run them at once: the total approaches max(a, b) rather than a + b.
//! Pushing both workloads to one device gains nothing: its lane runs them one after the other.

use std::cell::RefCell;

use super::support::{
    accelerator, check_matrices, gflops, host_ordered, matmul_error, matmul_tolerance, run_matmuls,
    traced, Explained, SECONDS_PER_ROUND,
};
use super::{
    ParamError, ParamKind, ParamSpec, Params, RunContext, Scenario, ScenarioError, Warning,
};
use crate::device::{available_cores, split_cores, Device, DeviceRequest, Runtime};
use crate::engine::TraceRecord;
use crate::harness::{synced, SamplerConfig, Variant};
use crate::report::{Better, FigureSpec, RunRecord, Unit};
use crate::tensor::Tensor;
use crate::units::{faster_or_slower, human_time};

/// The derived figures this scenario records, each with its unit and direction.
const SEQUENTIAL_S: FigureSpec = FigureSpec::new("sequential_s", Unit::Seconds, Better::Neither);
const PARALLEL_SPEEDUP: FigureSpec =
    FigureSpec::new("parallel_speedup", Unit::Ratio, Better::Higher);
const OVERLAP_EFFICIENCY: FigureSpec =
    FigureSpec::new("overlap_efficiency", Unit::Number, Better::Higher);
const ONE_DEVICE_SPEEDUP: FigureSpec =
    FigureSpec::new("one_device_speedup", Unit::Ratio, Better::Higher);
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

impl Scenario for CpuGpu {
    fn name(&self) -> &'static str {
        "cpu-gpu"
    }

    fn about(&self) -> &'static str {
        "matmuls on two devices, alone and pushed together: does the total approach max(a, b)?"
    }

    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }

    fn sampling(&self) -> SamplerConfig {
        SECONDS_PER_ROUND
    }

    fn validate(&self, params: &Params) -> Result<(), ScenarioError> {
        let cfg = Config::of(params)?;
        // Host, on the CPU fallback: x_a, x_b and x_a on B, the outputs of both runs, and the
        // check's host copies of an input and an output.
        check_matrices(
            "cpu-gpu with this --cpu-size",
            cfg.cpu_size as u64,
            cfg.ops.saturating_mul(2).saturating_add(5),
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
        // Host order: the traced overlap reads each GPU op's span as its GPU time.
        let rt = Runtime::new(
            &host_ordered(&ctx.runtime),
            &[DeviceRequest::Cpu { threads: a_threads }, acc.request],
        )?;
        let engine = &rt.engine;
        let (dev_a, dev_b) = (&rt.devices[0], &rt.devices[1]);
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
        // A's workload again, on device B, for the one-device variant.
        let x_a_on_b = Tensor::uniform(engine, dev_b, &[cpu_size, cpu_size], 1);
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
                Timed::OneDevice => {
                    Variant::new(v.name(), || synced(engine, || both(&x_a_on_b, &x_b)))
                }
            })
            .collect();
        let summaries = ctx.sample(self, engine, &mut variants)?;
        drop(variants);

        let mut devices = rt.describe_devices();
        acc.mark_fallback(&mut devices, 1);
        let mut run = RunRecord::new(self.name(), params.to_json(), devices);
        run.notes.extend(acc.fallback_note);
        let (da, db) = (dev_a.describe(), dev_b.describe());
        let label = |v: Timed| match v {
            Timed::AAlone => format!("run(x) on {da}: {ops} × {cpu_size}²"),
            Timed::BAlone => format!("run(x) on {db}: {ops} × {b_size}²"),
            Timed::Parallel => "both pushed back to back, no wait between".to_string(),
            Timed::OneDevice => format!("both workloads on {db} alone"),
        };
        run.add_variants(
            Timed::names(),
            summaries,
            Timed::ALL.iter().map(|&v| Some(label(v))),
        );
        let m = |v: Timed| run.median(v.name()).unwrap_or(f64::NAN);
        let (a, b, par, one) = (
            m(Timed::AAlone),
            m(Timed::BAlone),
            m(Timed::Parallel),
            m(Timed::OneDevice),
        );
        let overlap = a.max(b) / par;
        run.record(SEQUENTIAL_S, a + b);
        run.record(PARALLEL_SPEEDUP, (a + b) / par);
        run.record(OVERLAP_EFFICIENCY, overlap);
        run.record(ONE_DEVICE_SPEEDUP, (a + b) / one);
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
        // What the machine allows, without the engine: on the CPU fallback, the same products
        // on two plain threads, alone and at once.
        let ceiling = if dev_b.is_gpu() {
            None
        } else {
            let threads = (a_threads, dev_b.threads);
            let c = bare_threads_ceiling(&x_a.to_vec()?, &x_b.to_vec()?, cpu_size, threads, ops)?;
            run.record(BARE_THREADS_OVERLAP_EFFICIENCY, c);
            Some(c)
        };
        // A ratio of two medians is only as firm as they are.
        let uncertainty = |v: Timed| run.median_uncertainty(v.name()).unwrap_or(f64::NAN);
        let f = Medians {
            a,
            b,
            par,
            one,
            a_uncertainty: uncertainty(Timed::AAlone),
            b_uncertainty: uncertainty(Timed::BAlone),
            par_uncertainty: uncertainty(Timed::Parallel),
            ceiling,
        };
        explain(&f, &db).record(&mut run);
        Ok(run)
    }
}

/// Above this relative reach of a median's 95% interval, the overlap efficiency is called uncertain.
const UNCERTAIN_MEDIAN: f64 = 0.05;

/// The medians the explanation quotes, and how far each one's 95% interval reaches
/// ([`RunRecord::median_uncertainty`]), as plain numbers.
#[derive(Debug, Clone, Copy)]
struct Medians {
    a: f64,
    b: f64,
    par: f64,
    one: f64,
    a_uncertainty: f64,
    b_uncertainty: f64,
    par_uncertainty: f64,
    /// The same overlap efficiency for the same products on two plain threads, no engine (the
    /// CPU fallback only): what this machine allows.
    ceiling: Option<f64>,
}

/// What the figures show, and the figures outside their physical range: an overlap
/// efficiency max(a, b) / parallel above 1 (and with it a parallel speed-up above 2 devices).
fn explain(f: &Medians, device_b: &str) -> Explained {
    let (a, b, par) = (f.a, f.b, f.par);
    let overlap = a.max(b) / par;
    let mut out = Explained::default();
    out.sentences.push(format!(
        "pushed together, A ({}) and B ({}) took {} instead of a + b = {} one after the other: \
         {}, overlap efficiency max(a, b)/parallel = {overlap:.2} (1.0 is perfect overlap).",
        human_time(a),
        human_time(b),
        human_time(par),
        human_time(a + b),
        faster_or_slower((a + b) / par)
    ));
    let (slower, slower_uncertainty) = if a >= b {
        ("a-alone", f.a_uncertainty)
    } else {
        ("b-alone", f.b_uncertainty)
    };
    let spread = slower_uncertainty.max(f.par_uncertainty);
    if spread > UNCERTAIN_MEDIAN {
        out.sentences.push(format!(
            "the overlap efficiency is uncertain by about ±{:.0}%: the 95% confidence interval of the \
             {slower} or parallel median reaches that far; take more samples (--min-samples) for a firmer figure.",
            spread * 100.0
        ));
    }
    if overlap > 1.0 {
        out.sentences.push(format!(
            "an overlap efficiency above 1.0 ({overlap:.2}) does not beat perfect overlap: A and B alone were \
             measured in other rounds and ran slower there than inside the parallel variant (noise between rounds)."
        ));
        out.warnings.push(Warning::OverlapAboveOne {
            overlap,
            speedup: (a + b) / par,
        });
    }
    if let Some(c) = f.ceiling {
        out.sentences.push(format!(
            "the machine's own ceiling: the same products on two plain threads, without the \
             engine, overlap with an efficiency of {c:.2}; the engine's {overlap:.2} is {:.2} of it.",
            overlap / c
        ));
    }
    out.sentences
        .push(one_device_sentence(f.one, a + b, device_b));
    out
}

/// Rounds of the bare-threads measurement (alone, alone, together each), and the products of
/// each workload in it: enough for a median, a few seconds at the defaults.
const CEILING_ROUNDS: usize = 3;
const CEILING_OPS: u64 = 3;

/// max(a, b) / together for `ops` (at most [`CEILING_OPS`]) products `x · x` of each of two
/// n×n inputs, each on a plain thread inside a rayon pool of its device's threads, with no
/// engine: medians of [`CEILING_ROUNDS`] rounds, the order rotated each round.
fn bare_threads_ceiling(
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
    let view = |x| ndarray::ArrayView2::from_shape((n, n), x);
    let (va, vb) = (
        view(a).map_err(|e| ScenarioError::Input(e.to_string()))?,
        view(b).map_err(|e| ScenarioError::Input(e.to_string()))?,
    );
    let ops = ops.min(CEILING_OPS);
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
    for round in 0..CEILING_ROUNDS {
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

/// What running both workloads on one device showed, worded by the figures: `one` against
/// `sequential` = a + b measured on their own devices.
fn one_device_sentence(one: f64, sequential: f64, device: &str) -> String {
    let ratio = sequential / one;
    let verdict = if ratio < 0.95 {
        format!(
            "{} than a + b ({}): one device runs its lane's ops one after the other, and here it \
             also ran them slower than the two devices did",
            faster_or_slower(ratio),
            human_time(sequential)
        )
    } else if ratio <= 1.1 {
        format!(
            "about a + b ({}): one device runs its lane's ops one after the other, so it gains little",
            human_time(sequential)
        )
    } else {
        format!(
            "{} than a + b ({}): the device had capacity to spare when each workload ran on its own device",
            faster_or_slower(ratio),
            human_time(sequential)
        )
    };
    format!(
        "both workloads on {device} alone took {}, {verdict}.",
        human_time(one)
    )
}

/// A separate parallel run: its first and last product of each device against float64.
fn check_products(
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
enum Misplaced {
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
fn check_placement(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::RuntimeOptions;

    #[test]
    fn the_one_device_sentence_follows_its_numbers() {
        let slower = one_device_sentence(2.4, 2.0, "cpu:1");
        assert!(
            slower.contains("took 2.400 s") && slower.contains("1.20× slower than a + b (2.000 s)"),
            "{slower}"
        );
        assert!(!slower.contains("gains little"), "{slower}");
        let same = one_device_sentence(2.0, 2.1, "cpu:1");
        assert!(
            same.contains("about a + b") && same.contains("gains little"),
            "{same}"
        );
        let faster = one_device_sentence(1.0, 2.0, "cuda:0");
        assert!(faster.contains("2.00× faster than a + b"), "{faster}");
    }

    fn medians(a: f64, b: f64, par: f64, one: f64) -> Medians {
        Medians {
            a,
            b,
            par,
            one,
            a_uncertainty: 0.01,
            b_uncertainty: 0.01,
            par_uncertainty: 0.01,
            ceiling: None,
        }
    }

    #[test]
    fn the_explanation_quotes_its_own_arithmetic() {
        let e = explain(&medians(2.0, 1.0, 2.5, 3.6), "cpu:1");
        let all = e.sentences.join("\n");
        // a + b = 3 s; (a + b) / parallel = 1.2; max(a, b) / parallel = 0.8.
        assert!(
            all.contains("A (2.000 s) and B (1.000 s) took 2.500 s instead of a + b = 3.000 s"),
            "{all}"
        );
        assert!(
            all.contains("1.20× faster, overlap efficiency max(a, b)/parallel = 0.80"),
            "{all}"
        );
        // one-device 0.83× of a + b (3 / 3.6): slower, and not "gains little".
        assert!(
            all.contains("took 3.600 s, 1.20× slower than a + b (3.000 s)"),
            "{all}"
        );
        assert!(!all.contains("gains little"), "{all}");
        assert!(!all.contains("uncertain"), "{all}");
        assert!(e.warnings.is_empty(), "{:?}", e.warnings);
        assert!(!all.contains("ceiling"), "{all}");
        // Beside the machine's own ceiling: 0.80 / 0.95 = 0.84 of it.
        let mut f = medians(2.0, 1.0, 2.5, 3.6);
        f.ceiling = Some(0.95);
        let all = explain(&f, "cpu:1").sentences.join("\n");
        assert!(
            all.contains("overlap with an efficiency of 0.95; the engine's 0.80 is 0.84 of it."),
            "{all}"
        );
    }

    #[test]
    fn the_bare_threads_ceiling_is_a_ratio_of_real_timings() {
        let x: Vec<f32> = (0..64 * 64).map(|i| (i % 7) as f32).collect();
        let c = bare_threads_ceiling(&x, &x, 64, (1, 1), 2).unwrap();
        assert!(c.is_finite() && c > 0.0, "{c}");
        // Inputs that do not match the size are an error, not a panic.
        assert!(bare_threads_ceiling(&x[1..], &x, 64, (1, 1), 2).is_err());
    }

    #[test]
    fn an_efficiency_above_one_is_a_warning_with_its_cause() {
        // max(2, 1.9) / 1.87 = 1.07, (2 + 1.9) / 1.87 = 2.09.
        let e = explain(&medians(2.0, 1.9, 1.87, 3.9), "cpu:1");
        assert_eq!(e.warnings.len(), 1, "{:?}", e.warnings);
        let w = e.warnings[0].to_string();
        assert!(
            w.contains("= 1.07 is above 1.0") && w.contains("speed-up 2.09×"),
            "{w}"
        );
        assert!(
            w.contains("noise between rounds") && w.contains("--min-samples"),
            "{w}"
        );
        assert!(e.sentences.join(" ").contains("above 1.0 (1.07)"));
        // Perfect overlap exactly is in range.
        assert!(explain(&medians(2.0, 1.9, 2.0, 3.9), "cpu:1")
            .warnings
            .is_empty());
    }

    #[test]
    fn a_loose_median_is_called_uncertain() {
        let mut f = medians(2.0, 1.0, 2.5, 3.0);
        f.a_uncertainty = 0.12;
        let all = explain(&f, "cpu:1").sentences.join("\n");
        assert!(
            all.contains("uncertain by about ±12%") && all.contains("a-alone"),
            "{all}"
        );
        // The faster device's median does not decide it.
        let mut f = medians(2.0, 1.0, 2.5, 3.0);
        f.b_uncertainty = 0.12;
        assert!(!explain(&f, "cpu:1")
            .sentences
            .join("\n")
            .contains("uncertain"));
    }

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
