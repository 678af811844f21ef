//! `matmul`: GFLOP/s of one device, the building block that sweeps vary (sizes, threads).

use std::time::Duration;

use super::kit::{
    check_elements, check_matrices, chosen_device, gflops, matmul_error, matmul_tolerance,
    ChosenDevice,
};
use super::{
    Choice, DeviceChoice, ParamError, ParamKind, ParamSpec, Params, RunContext, Scenario,
    ScenarioError,
};
use crate::device::cpu::{kernel_for, matmul_kernel_choice, MatmulKernel, AVX2_MIN_MULTIPLY_ADDS};
use crate::device::{available_cores, Runtime};
use crate::harness::{synced, SamplerConfig, Variant};
use crate::machine::{limits, FmaPeak, Probe};
use crate::report::{Better, BookFigure, FigureSpec, RunRecord, Unit};
use crate::tensor::Tensor;
use serde_json::{Map, Value};

super::variant::variants! {
    /// What `matmul` times.
    enum Timed {
        /// --ops products, pushed, one wait.
        Matmul = "matmul",
    }
}

/// The `matmul` scenario.
pub struct Matmul;

const DIM: ParamKind = ParamKind::Int {
    min: 0,
    max: 100_000,
};

/// The derived figures this scenario records, each with its unit and direction.
const GFLOPS: FigureSpec = FigureSpec::new("gflops", Unit::Gflops, Better::Higher);
const GFLOPS_PER_THREAD: FigureSpec =
    FigureSpec::new("gflops_per_thread", Unit::Gflops, Better::Higher);
const THREADS: FigureSpec = FigureSpec::new("threads", Unit::Number, Better::Neither);
/// GFLOP/s over the machine's f32 FMA peak for the device's threads (CPU devices only).
const FRACTION_OF_PEAK: FigureSpec =
    FigureSpec::new("fraction_of_peak", Unit::Number, Better::Higher);

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "size",
        help: "square size N of the N×N matrices",
        kind: ParamKind::Int {
            min: 1,
            max: 100_000,
        },
        default: "2000",
    },
    ParamSpec {
        name: "m",
        help: "rows of A and C (0: --size)",
        kind: DIM,
        default: "0",
    },
    ParamSpec {
        name: "k",
        help: "columns of A, rows of B (0: --size)",
        kind: DIM,
        default: "0",
    },
    ParamSpec {
        name: "n",
        help: "columns of B and C (0: --size)",
        kind: DIM,
        default: "0",
    },
    ParamSpec {
        name: "ops",
        help: "products pushed per sample",
        kind: ParamKind::Int {
            min: 1,
            max: 10_000,
        },
        default: "10",
    },
    ParamSpec {
        name: "device",
        help: "cpu, or cuda (an error without a usable GPU, unless --fallback)",
        kind: ParamKind::Choice(DeviceChoice::WORDS),
        default: "cpu",
    },
    ParamSpec {
        name: "threads",
        help: "threads of the CPU device (0: all cores, or --cpu-threads)",
        kind: ParamKind::Int { min: 0, max: 4096 },
        default: "0",
    },
];

/// The parameters, read once.
struct Config {
    /// m, k, n with the 0s resolved to `--size`.
    dims: (usize, usize, usize),
    ops: u64,
    device: DeviceChoice,
    /// `--threads`; `None` for 0 (`--cpu-threads`, or all cores).
    threads: Option<usize>,
}

impl Config {
    fn of(params: &Params) -> Result<Config, ParamError> {
        let size = params.count("size")?;
        let pick = |name: &str| -> Result<usize, ParamError> {
            Ok(match params.count(name)? {
                0 => size,
                v => v,
            })
        };
        Ok(Config {
            dims: (pick("m")?, pick("k")?, pick("n")?),
            ops: params.int("ops")?,
            device: params.choice("device")?,
            threads: Some(params.count("threads")?).filter(|&t| t > 0),
        })
    }

    /// Threads of the CPU device: `--threads`, or with 0 `--cpu-threads`, or all cores.
    fn threads(&self, ctx: &RunContext) -> usize {
        self.threads
            .unwrap_or_else(|| ctx.cpu_threads.unwrap_or_else(available_cores))
    }
}

/// What the run showed: the rate of `ops` products of m×k · k×n taking `median` seconds in all,
/// and the time of one product, both from that one median.
fn explain(device: &str, median: f64, ops: u64, (m, k, n): (usize, usize, usize)) -> String {
    format!(
        "{device} reaches {:.1} GFLOP/s on {m}×{k} · {k}×{n} ({} per product).",
        gflops(ops, (m, k, n), median),
        crate::units::human_time(median / ops as f64)
    )
}

/// The lesson: the chapter's workload measured alone, the yardstick of the other scenarios.
const LESSON: super::LessonSpec = super::LessonSpec {
    source: super::book::TF2_CPU_GPU,
    claim: "the yardstick holds: the product matches a float64 reference and its rate is \
            steady (the median's 95% interval within ±10%)",
};

/// How far the median's interval may reach for the rate to serve as a yardstick.
const STEADY: f64 = 0.10;

const TF2_CPU: BookFigure = BookFigure::seconds(
    "10 products of 2000² on the CPU",
    1.2657,
    super::book::TF2_CPU_GPU,
    super::book::A_CPU,
)
.products(10, 2000);
const NUMPY: BookFigure = BookFigure::seconds(
    "NumPy: 10 × (randn + product) of 1000²",
    0.2660,
    super::book::PYTORCH_ASYNC,
    super::book::A_CPU,
)
.products(10, 1000);

const BOOK: &[BookFigure] = &[TF2_CPU, NUMPY];

/// Decide the lesson from the check and the median's interval.
fn conclude(run: &mut RunRecord, rate: f64, shape: (usize, usize, usize), device: &str) {
    use super::kit::Verdict;
    use crate::report::finding::{Finding, Want};
    let matches = run.checks.iter().all(|c| c.passed);
    let reach = run
        .median_uncertainty(Timed::Matmul.name())
        .unwrap_or(f64::NAN);
    let rate_of = |f: &BookFigure| f.implied_flops().map_or(f64::NAN, |r| r / 1e9);
    let verdict = Verdict {
        findings: vec![
            Finding::checks("reference check", matches),
            Finding::exact(
                "the median's 95% interval's reach",
                reach,
                STEADY,
                Want::Below,
            )
            .in_percent(),
        ],
        here: format!("{rate:.1} GFLOP/s"),
        book: Some(format!(
            "{}: {} for 10 × 2000², {:.0} GFLOP/s; {}: NumPy {}, {:.0} GFLOP/s with its randn \
             (CPUs not named; here {}×{}×{} on {device})",
            super::book::TF2_CPU_GPU.cite(),
            TF2_CPU.printed(),
            rate_of(&TF2_CPU),
            super::book::PYTORCH_ASYNC.cite(),
            NUMPY.printed(),
            rate_of(&NUMPY),
            shape.0,
            shape.1,
            shape.2,
        )),
    };
    LESSON.conclude(run, BOOK, verdict);
}

/// A fraction of the FMA peak above this is outside the physical range: the peak was read
/// low (probes and run alike read within a few percent of each other on a quiet machine).
const ABOVE_PEAK: f64 = 1.05;

/// Why a product can read above the peak.
fn above_peak(fraction: f64) -> String {
    format!(
        "the products ran at {} of the FMA peak measured before the run: the machine was busier \
         while the peak was measured (another process on its cores) than during the run, so \
         the peak, and fraction_of_peak, read wrong; parbench devices --probe on a quiet \
         machine measures it again",
        crate::units::human_percent(fraction)
    )
}

/// How close `rate` GFLOP/s on `threads` threads came to the FMA peak, as a fraction, and in
/// words that quote the very peak it is a fraction of.
fn of_peak(rate: f64, threads: usize, peak: &FmaPeak) -> (f64, String) {
    let against = peak.for_threads(threads);
    let fraction = rate / against;
    let cores = threads.clamp(1, peak.cores);
    let how = if threads >= peak.cores && cores > 1 {
        format!("its {cores} cores at once")
    } else {
        format!(
            "{} per core × {cores}",
            crate::units::human_gflops(peak.per_core_gflops)
        )
    };
    let sentence = format!(
        "{} is {} of this machine's {} FMA peak on {cores} core{}: {} ({how}, measured by \
         parbench before the run).",
        crate::units::human_gflops(rate),
        crate::units::human_percent(fraction),
        peak.unit.as_str(),
        if cores == 1 { "" } else { "s" },
        crate::units::human_gflops(against),
    );
    (fraction, sentence)
}

/// What `matmul` declares.
static SPEC: super::Spec = super::Spec {
    name: "matmul",
    about: "GFLOP/s of one device's matrix product (sizes, threads, device): the sweeps' building block",
    params: PARAMS,
    lesson: LESSON,
    book: BOOK,
    sampling: SamplerConfig {
            warmup: 1,
            min_samples: crate::harness::stats::SAMPLES_FOR_95,
            max_samples: 50,
            min_time: Duration::from_secs(2),
            max_time: Duration::from_secs(30),
        },
};

impl Scenario for Matmul {
    fn spec(&self) -> &'static super::Spec {
        &SPEC
    }

    fn validate(&self, params: &Params) -> Result<(), ScenarioError> {
        let Config {
            dims: (m, k, n),
            ops,
            ..
        } = Config::of(params)?;
        // A, B and `ops` outputs alive at once; the check then holds A, B, C and host copies
        // of all three: 2(A + B) + (ops + 2) C at most.
        let (m, k, n) = (m as u64, k as u64, n as u64);
        let elements = m
            .checked_mul(k)
            .and_then(|ak| ak.checked_add(k.checked_mul(n)?))
            .and_then(|ab| ab.checked_mul(2))
            .and_then(|ab| ab.checked_add(m.checked_mul(n)?.checked_mul(ops.checked_add(2)?)?));
        check_elements(
            &format!("matmul {m}×{k} · {k}×{n} with {ops} outputs"),
            elements,
        )
    }

    fn resolved_params(&self, params: &Params, ctx: &RunContext) -> Map<String, Value> {
        let mut out = params.to_json();
        // Parameters that `validate` refused never get here; unread ones stay as given.
        let Ok(cfg) = Config::of(params) else {
            return out;
        };
        let (m, k, n) = cfg.dims;
        for (name, v) in [("m", m), ("k", k), ("n", n), ("threads", cfg.threads(ctx))] {
            out.insert(name.into(), v.into());
        }
        out
    }

    fn run(&self, params: &Params, ctx: &RunContext) -> Result<RunRecord, ScenarioError> {
        let cfg = Config::of(params)?;
        let ((m, k, n), ops) = (cfg.dims, cfg.ops);
        let threads = cfg.threads(ctx);
        // The machine's FMA peak, measured once per process: before the device's threads
        // exist, so the probe has the cores to itself (the CLI has measured it already).
        let fma = &limits().fma;
        let ChosenDevice {
            request,
            fallback_note: notes,
        } = chosen_device(cfg.device, threads, ctx.gpu_fallback)?;
        let rt = Runtime::new(&ctx.runtime, &[request])?;
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
        let summaries = ctx.sample(self, engine, &mut variants)?;
        drop(variants);

        let mut run = RunRecord::new(
            self.name(),
            self.resolved_params(params, ctx),
            rt.describe_devices(),
        );
        run.notes.extend(notes);
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
        if !device.is_gpu() {
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
        run.explanation
            .push(explain(&device.describe(), median, ops, (m, k, n)));
        if !device.is_gpu() {
            match fma {
                Probe::Measured(peak) => {
                    let (fraction, sentence) = of_peak(rate, device.threads, peak);
                    run.record(FRACTION_OF_PEAK, fraction);
                    run.explanation.push(sentence);
                    if fraction > ABOVE_PEAK {
                        run.warn(above_peak(fraction));
                    }
                }
                Probe::NotMeasured(why) => run.explanation.push(format!(
                    "No fraction of the machine's FMA peak: the peak was not measured ({why})."
                )),
            }
        }
        conclude(&mut run, rate, (m, k, n), &device.describe());
        Ok(run)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_explanation_quotes_one_median_two_ways() {
        // 10 products of 1000³ (2 GFLOP each) in 0.1 s: 200 GFLOP/s, 10 ms a product.
        assert_eq!(
            explain("cpu:0 (2 threads)", 0.1, 10, (1000, 1000, 1000)),
            "cpu:0 (2 threads) reaches 200.0 GFLOP/s on 1000×1000 · 1000×1000 (10.00 ms per product)."
        );
        // Non-square: 2·m·k·n per product.
        assert_eq!(
            explain("cpu:0", 2e-3, 1, (100, 200, 50)),
            "cpu:0 reaches 1.0 GFLOP/s on 100×200 · 200×50 (2.000 ms per product)."
        );
    }

    #[test]
    fn the_fraction_of_peak_is_over_the_peak_for_the_threads() {
        // All cores at once read less than twice one core (as a VM's host often gives).
        let peak = FmaPeak {
            unit: crate::machine::VectorUnit::Avx512,
            per_core_gflops: 199.2,
            all_cores_gflops: 354.6,
            cores: 2,
            pinned: true,
            method: String::new(),
        };
        let (fraction, sentence) = of_peak(354.6, 2, &peak);
        assert_eq!(fraction, 1.0);
        assert_eq!(
            sentence,
            "354.6 GFLOP/s is 100% of this machine's AVX-512 FMA peak on 2 cores: 354.6 GFLOP/s \
             (its 2 cores at once, measured by parbench before the run)."
        );
        let (fraction, sentence) = of_peak(99.6, 1, &peak);
        assert_eq!(fraction, 0.5);
        assert_eq!(sentence, "99.6 GFLOP/s is 50% of this machine's AVX-512 FMA peak on 1 core: 199.2 GFLOP/s (199.2 GFLOP/s per core × 1, measured by parbench before the run).");
        // The issue's run: 177.3 GFLOP/s per core, all cores at once 199.2 — the
        // sentence quotes the peak it divides by (once "139% … (177.3 GFLOP/s per core)").
        let issue = FmaPeak {
            per_core_gflops: 177.3,
            all_cores_gflops: 199.2,
            ..peak.clone()
        };
        assert_eq!(of_peak(277.0, 2, &issue).1, "277.0 GFLOP/s is 139% of this machine's AVX-512 FMA peak on 2 cores: 199.2 GFLOP/s (its 2 cores at once, measured by parbench before the run).");
        // More threads than cores: the peak of all cores.
        assert_eq!(of_peak(354.6, 8, &peak).0, 1.0);
        assert!(above_peak(1.17).starts_with("the products ran at 117% of the FMA peak"));
    }
}
