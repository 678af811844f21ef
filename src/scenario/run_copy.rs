//! `run-copy`: overlapping computation with communication (book §13.3.2).
//!
//! `ops` products on the accelerator, each result then copied to host memory. The copies run on
//! the device's copy lane (its own stream on a GPU), so when pushed together the copy of y[i]
//! overlaps the computation of y[i+1] and the total approaches max(run, copy) plus one copy.

use std::cell::RefCell;

use super::book::{A_GPU, TF2_RUN_COPY};
use super::evidence::{Estimate, Ratio, Side};
use super::lesson::{decided, held, ratio_words, side_words, LessonSpec, Verdict};
use super::support::{
    accelerator, check_matrices, host_ordered, matmul_error, matmul_tolerance, run_matmuls, traced,
    Explained, SECONDS_PER_ROUND,
};
use super::{
    ParamError, ParamKind, ParamSpec, Params, RunContext, Scenario, ScenarioError, Warning,
};
use crate::device::{available_cores, Runtime};
use crate::engine::{trace, LaneId};
use crate::harness::stats::median;
use crate::harness::{synced, SamplerConfig, Variant};
use crate::report::{Better, BookFigure, FigureSpec, RunRecord, Unit};
use crate::tensor::Tensor;
use crate::units::human_time;

/// The derived figures this scenario records, each with its unit and direction.
const LOWER_BOUND_S: FigureSpec = FigureSpec::new("lower_bound_s", Unit::Seconds, Better::Neither);
const IDEAL_S: FigureSpec = FigureSpec::new("ideal_s", Unit::Seconds, Better::Neither);
const OVERLAP_EFFICIENCY: FigureSpec =
    FigureSpec::new("overlap_efficiency", Unit::Number, Better::Higher);
const SEQUENTIAL_OVER_OVERLAPPED_SPEEDUP: FigureSpec = FigureSpec::new(
    "sequential_over_overlapped_speedup",
    Unit::Ratio,
    Better::Higher,
);
const COPY_GBYTES_PER_S: FigureSpec =
    FigureSpec::new("copy_gbytes_per_s", Unit::GbytesPerSecond, Better::Higher);
const OVERLAPPED_OVER_BOUND_RATIO: FigureSpec =
    FigureSpec::new("overlapped_over_bound_ratio", Unit::Ratio, Better::Lower);
const OVERLAPPED_OVER_IDEAL_RATIO: FigureSpec =
    FigureSpec::new("overlapped_over_ideal_ratio", Unit::Ratio, Better::Lower);

super::variant::variants! {
    /// What `run-copy` times.
    enum Timed {
        /// The products alone.
        Run = "run",
        /// The copies alone, of products computed before.
        Copy = "copy",
        /// All products, a wait, then all copies.
        RunThenCopy = "run-then-copy",
        /// Product i+1 and the copy of y[i] pushed together.
        Overlapped = "overlapped",
    }
}

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

/// The parameters, read once.
struct Config {
    ops: u64,
    size: usize,
}

impl Config {
    fn of(params: &Params) -> Result<Config, ParamError> {
        Ok(Config {
            ops: params.int("ops")?,
            size: params.count("size")?,
        })
    }
}

impl Scenario for RunCopy {
    fn lesson(&self) -> &'static super::LessonSpec {
        &LESSON
    }

    fn book(&self) -> &'static [BookFigure] {
        BOOK
    }

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
        let Config { ops, size } = Config::of(params)?;
        // x, the products kept for the copy variant, the products of the running variant, and
        // their host copies.
        check_matrices(
            "run-copy with this --size",
            size as u64,
            ops.saturating_mul(3).saturating_add(1),
            None,
        )
    }

    fn run(&self, params: &Params, ctx: &RunContext) -> Result<RunRecord, ScenarioError> {
        let Config { ops, size } = Config::of(params)?;
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
        let (x, kept, bounds, copy_all) = (&x, &kept, &bounds, &copy_all);
        let mut variants: Vec<Variant<ScenarioError>> = Timed::ALL
            .iter()
            .map(|&v| -> Variant<ScenarioError> {
                match v {
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
                }
            })
            .collect();
        let summaries = ctx.sample(self, engine, &mut variants)?;
        drop(variants);

        let devices = acc.describe_devices(&rt, 0);
        let mut run = RunRecord::new(self.name(), params.to_json(), devices);
        run.notes.extend(acc.fallback_note);
        let label = |v: Timed| match v {
            Timed::Run => format!("{ops} products {size}² on {}", device.name),
            Timed::Copy => format!("{ops} copies of {size}² to host on the copy lane"),
            Timed::RunThenCopy => "all products, wait, then all copies".to_string(),
            Timed::Overlapped => "product i+1 and copy of y[i] pushed together".to_string(),
        };
        run.add_variants(
            Timed::names(),
            summaries,
            Timed::ALL.iter().map(|&v| Some(label(v))),
        );
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
}

/// The medians with their intervals (and the trace's figures) the explanation quotes.
#[derive(Debug, Clone, Copy)]
struct CopyOverlap {
    ops: u64,
    run: Estimate,
    copy: Estimate,
    /// `run-then-copy`: all products, a wait, then all copies.
    seq: Estimate,
    overlapped: Estimate,
    /// The busier lane's time in each traced overlapped sample (median), and how many times
    /// it the samples took (median of each sample's own ratio).
    bound: f64,
    bound_ratio: f64,
}

impl CopyOverlap {
    /// Perfect overlap: the longer of run and copy, plus the last copy, which cannot overlap;
    /// its interval from run's and copy's.
    fn ideal(&self) -> Estimate {
        let at = |r: f64, c: f64| r.max(c) + c / self.ops as f64;
        Estimate {
            median: at(self.run.median, self.copy.median),
            lo: at(self.run.lo, self.copy.lo),
            hi: at(self.run.hi, self.copy.hi),
        }
    }

    /// overlapped / perfect overlap: at least 1 but for noise.
    fn vs_ideal(&self) -> Ratio {
        Ratio::of(self.overlapped, self.ideal())
    }

    /// run-then-copy / overlapped: at most the two lanes.
    fn speedup(&self) -> Ratio {
        Ratio::of(self.seq, self.overlapped)
    }

    /// (run + copy) / overlapped: its ceiling is (run + copy) / ideal, not 1.
    fn efficiency(&self) -> f64 {
        (self.run.median + self.copy.median) / self.overlapped.median
    }
}

/// The lesson of §8.3.2: the copy of y[i] runs while y[i+1] is computed.
const LESSON: LessonSpec = LessonSpec {
    section: "§8.3.2",
    claim: "copies overlap compute: run-then-copy / overlapped wholly above 1",
};

const GPU_RUN: BookFigure = BookFigure::seconds(
    "GPU run: 10 products of 6000², not synchronized",
    0.0047,
    TF2_RUN_COPY,
    A_GPU,
)
.products(10, 6000);
const COPY: BookFigure = BookFigure::seconds(
    "then copy the 10 results to the CPU",
    0.0007,
    TF2_RUN_COPY,
    A_GPU,
);
const RUN_AND_COPY: BookFigure =
    BookFigure::seconds("run and copy in parallel", 0.0024, TF2_RUN_COPY, A_GPU);

const BOOK: &[BookFigure] = &[GPU_RUN, COPY, RUN_AND_COPY];

/// Decide the lesson from the medians and record it with the book's figures.
fn conclude(run: &mut RunRecord, f: &CopyOverlap, gpu: bool, size: usize) {
    let speedup = f.speedup();
    let side = speedup.against(1.0);
    // The book's run and copy together below its run alone: neither clock waited.
    let neither_waited = RUN_AND_COPY.value < GPU_RUN.value;
    let verdict = Verdict {
        held: held(side, Side::Above),
        evidence: format!(
            "run-then-copy / overlapped = {}, {}.",
            ratio_words(&speedup),
            side_words(side, 1.0)
        ),
        here: format!(
            "run {}, copy {}, overlapped {}",
            human_time(f.run.median),
            human_time(f.copy.median),
            human_time(f.overlapped.median)
        ),
        book: Some(format!(
            "{}: run {}, copy {}, run and copy {}{} (a GPU, 6000²; here {}, {size}²)",
            TF2_RUN_COPY.cite(),
            GPU_RUN.printed(),
            COPY.printed(),
            RUN_AND_COPY.printed(),
            if neither_waited {
                ", less than its run alone: its clocks did not wait"
            } else {
                ""
            },
            if gpu {
                "the GPU"
            } else {
                "a CPU device standing in"
            },
        )),
        decided: decided(&speedup, 1.0),
    };
    LESSON.conclude(run, BOOK, verdict);
}

/// Two lanes (compute and copy) can at most halve the time of the same work done one after
/// the other.
const LANES: f64 = 2.0;

/// What the figures show, and the figures outside their physical range, each judged within
/// the interval its medians' intervals allow.
fn explain(f: &CopyOverlap) -> Explained {
    let (r, c, seq, ov) = (
        f.run.median,
        f.copy.median,
        f.seq.median,
        f.overlapped.median,
    );
    let (ideal, eff, ratio) = (f.ideal(), f.efficiency(), f.bound_ratio);
    let mut out = Explained::default();
    out.sentences.push(format!(
        "run {} and copy {} measured alone (sum {}); all products, a wait, then all copies took {}; \
         overlapped {}: the copy lane works while the compute lane computes (overlap efficiency \
         (run + copy) / overlapped = {eff:.2}).",
        human_time(r),
        human_time(c),
        human_time(r + c),
        human_time(seq),
        human_time(ov),
    ));
    out.sentences.push(format!(
        "lower bound: no sample can be shorter than the time its own busier lane was busy ({} at \
         the median of the traced samples); each traced sample took {ratio:.2}× its own at the \
         median.",
        human_time(f.bound),
    ));
    let vs_ideal = f.vs_ideal();
    let shown = format!(
        "{:.2}×, 95% interval {:.2}–{:.2}×",
        vs_ideal.value, vs_ideal.lo, vs_ideal.hi
    );
    out.sentences.push(match vs_ideal.against(1.0) {
        Side::Above | Side::Unknown => format!(
            "with perfect overlap, the run measured alone plus one copy that cannot overlap would take \
             max(run, copy) + one copy = {}; overlapped took {shown} that.",
            human_time(ideal.median)
        ),
        Side::Within => format!(
            "overlapped took {shown} max(run, copy) + one copy = {}: indistinguishable from perfect \
             overlap here.",
            human_time(ideal.median)
        ),
        Side::Below => format!(
            "overlapped took {shown} max(run, copy) + one copy = {}: the run and copy measured alone \
             (in other rounds) were slower than the same work inside the overlapped variant, which is noise \
             between rounds, not better than perfect overlap.",
            human_time(ideal.median)
        ),
    });
    if vs_ideal.against(1.0) == Side::Below {
        out.warnings.push(Warning::OverlappedBelowIdeal {
            overlapped_s: ov,
            ideal_s: ideal.median,
            efficiency: eff,
            perfect: (r + c) / ideal.median,
        });
    }
    if f.speedup().against(LANES) == Side::Above {
        out.warnings.push(Warning::SpeedupAboveLanes {
            speedup: f.speedup().value,
            lanes: LANES,
        });
    }
    // Bound and time come from the same sample: below 1 is never noise.
    if ratio < 1.0 {
        out.warnings.push(Warning::BelowOwnBusyLane { ratio });
    }
    out
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

    fn tight(median: f64) -> Estimate {
        Estimate {
            median,
            lo: median * 0.995,
            hi: median * 1.005,
        }
    }

    /// run 1 s, copy 0.5 s in 10 copies: perfect overlap is 1 s + 50 ms = 1.05 s.
    fn medians(seq: f64, overlapped: f64, bound_ratio: f64) -> CopyOverlap {
        CopyOverlap {
            ops: 10,
            run: tight(1.0),
            copy: tight(0.5),
            seq: tight(seq),
            overlapped: tight(overlapped),
            bound: 1.0,
            bound_ratio,
        }
    }

    #[test]
    fn the_explanation_quotes_its_own_arithmetic() {
        let e = explain(&medians(1.5, 1.2, 1.2));
        let all = e.sentences.join("\n");
        // The sum is run + copy; the efficiency (run + copy) / overlapped = 1.5 / 1.2.
        assert!(
            all.contains("run 1.000 s and copy 500.0 ms measured alone (sum 1.500 s)"),
            "{all}"
        );
        assert!(all.contains("then all copies took 1.500 s"), "{all}");
        assert!(all.contains("(run + copy) / overlapped = 1.25)"), "{all}");
        assert!(
            all.contains("each traced sample took 1.20× its own"),
            "{all}"
        );
        // 1.2 / 1.05 = 1.14.
        assert!(
            all.contains(
                "max(run, copy) + one copy = 1.050 s; overlapped took 1.14×, 95% interval"
            ),
            "{all}"
        );
        // An efficiency above 1 is normal here (its ceiling is 1.5 / 1.05): no warning.
        assert!(e.warnings.is_empty(), "{:?}", e.warnings);
    }

    #[test]
    fn overlapped_below_perfect_overlap_is_noise_and_a_warning() {
        let e = explain(&medians(1.5, 1.0, 1.1));
        let all = e.sentences.join("\n");
        assert!(all.contains("overlapped took 0.95×, 95% interval"), "{all}");
        assert!(all.contains("noise between rounds"), "{all}");
        assert_eq!(e.warnings.len(), 1, "{:?}", e.warnings);
        let w = e.warnings[0].to_string();
        // 1.0 / 1.05 = 0.95; efficiency 1.5 / 1.0 = 1.50 above its ceiling 1.5 / 1.05 = 1.43.
        assert!(
            w.contains("0.95×") && w.contains("efficiency 1.50 is above the 1.43"),
            "{w}"
        );
        assert!(
            w.contains("noise between rounds") && w.contains("--min-samples"),
            "{w}"
        );
    }

    #[test]
    fn more_than_two_lanes_of_speed_up_and_a_sample_below_its_bound_are_warnings() {
        // run-then-copy 2.5 s / overlapped 1.1 s = 2.27: more than two lanes can give.
        let e = explain(&medians(2.5, 1.1, 1.1));
        assert_eq!(e.warnings.len(), 1, "{:?}", e.warnings);
        assert!(
            e.warnings[0].to_string().contains("= 2.27 is above 2"),
            "{}",
            e.warnings[0]
        );
        let e = explain(&medians(1.5, 1.1, 0.9));
        assert_eq!(e.warnings.len(), 1, "{:?}", e.warnings);
        assert!(
            e.warnings[0]
                .to_string()
                .contains("took 0.90× the busy time"),
            "{}",
            e.warnings[0]
        );
        // Without a trace (NaN) nothing is flagged.
        assert!(explain(&medians(1.5, 1.1, f64::NAN)).warnings.is_empty());
        // Below perfect overlap at the medians but within the intervals: no warning.
        let mut f = medians(1.5, 1.0, 1.1);
        f.overlapped.hi = 1.1;
        let e = explain(&f);
        assert!(e.warnings.is_empty(), "{:?}", e.warnings);
        assert!(
            e.sentences
                .join(" ")
                .contains("indistinguishable from perfect overlap here"),
            "{:?}",
            e.sentences
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Random medians with wide intervals on either side of perfect overlap and of two
        /// lanes: the below-perfect-overlap warning and sentence appear only when overlapped's
        /// highest is below the ideal's lowest, "indistinguishable" only when the intervals meet,
        /// and the two-lanes warning only when run-then-copy's lowest exceeds twice
        /// overlapped's highest (computed here from the raw bounds).
        #[test]
        fn no_sentence_or_warning_claims_more_than_its_intervals(
            medians in proptest::array::uniform4(0.3f64..2.0),
            reaches in proptest::array::uniform4((0.0f64..0.5, 0.0f64..0.5)),
        ) {
            let est = |i: usize| Estimate {
                median: medians[i],
                lo: medians[i] * (1.0 - reaches[i].0),
                hi: medians[i] * (1.0 + reaches[i].1),
            };
            let f = CopyOverlap {
                ops: 10,
                run: est(0),
                copy: est(1),
                seq: est(2),
                overlapped: est(3),
                bound: 1.0,
                bound_ratio: 1.2,
            };
            let e = explain(&f);
            let ideal = |r: f64, c: f64| r.max(c) + c / 10.0;
            let (ideal_lo, ideal_hi) = (ideal(f.run.lo, f.copy.lo), ideal(f.run.hi, f.copy.hi));
            let below = f.overlapped.hi / ideal_lo < 1.0;
            let within = !below && f.overlapped.lo / ideal_hi <= 1.0;
            let text = e.sentences.join(" ");
            let warned = |w: fn(&Warning) -> bool| e.warnings.iter().any(w);
            proptest::prop_assert_eq!(
                warned(|w| matches!(w, Warning::OverlappedBelowIdeal { .. })),
                below
            );
            proptest::prop_assert_eq!(text.contains("noise"), below, "{}", text);
            proptest::prop_assert_eq!(text.contains("indistinguishable"), within, "{}", text);
            proptest::prop_assert_eq!(
                warned(|w| matches!(w, Warning::SpeedupAboveLanes { .. })),
                f.seq.lo / f.overlapped.hi > 2.0
            );
        }
    }

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
