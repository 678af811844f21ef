//! `memory`: the memory cost of an over-full asynchronous queue (the book: "excessively filling
//! the task queue can lead to excessive memory consumption; synchronize per minibatch").
//!
//! A training-like loop: for every minibatch the front end produces its input (as a data
//! loader would: allocated on the spot) and pushes `h = x · W`, `y = h / n`. Pushing every
//! minibatch and waiting once lets the loader run ahead of the compute, so inputs pile up;
//! waiting after each minibatch keeps one; bounding the ops in flight (`--inflight` minibatches)
//! keeps a few. Live bytes are counted exactly by the device's tracker; one more, untimed epoch
//! of each variant records them over time (`<variant>_live_bytes`), so a chart shows the
//! over-full queue's growth against the bounded one's plateau.
//!
//! With `--device cuda` the device is the GPU: each input is uploaded by an op (a third op
//! per minibatch) and the tracker counts GPU buffers. The GPU runs in host order there: an op
//! completes when the GPU has finished it, so a bound on the ops in flight bounds the GPU's
//! work and its memory, not just what the front end has handed over.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use super::kit::{check_elements, check_matrices, chosen_device, host_ordered, ChosenDevice};
use super::{
    Choice, DeviceChoice, ParamError, ParamKind, ParamSpec, Params, RunContext, Scenario,
    ScenarioError,
};
use crate::device::memory::MemTracker;
use crate::device::{available_cores, Runtime, RuntimeOptions};
use crate::engine::{Engine, Var};
use crate::harness::{SamplerConfig, Variant};
use crate::report::{Better, Figure, FigureSpec, RunRecord, Unit};
use crate::tensor::Tensor;
use crate::units::human_bytes;

/// The derived figures this scenario records, each with its unit and direction.
/// `<variant>_peak_bytes`: each variant's peak of live bytes.
const PEAK_BYTES: Figure = Figure::new(Unit::Bytes, Better::Neither);
const MINIBATCH_BYTES: FigureSpec =
    FigureSpec::new("minibatch_bytes", Unit::Bytes, Better::Neither);
/// The GPU memory pool's high-water marks per variant (`<variant>_gpu_reserved_bytes`,
/// `<variant>_gpu_used_bytes`): what the driver mapped for parbench vs what its live buffers
/// took at most.
const GPU_POOL_BYTES: Figure = Figure::new(Unit::Bytes, Better::Neither);
const MEMORY_RATIO: FigureSpec = FigureSpec::new("memory_ratio", Unit::Ratio, Better::Neither);
const BOUNDED_TIME_RATIO: FigureSpec =
    FigureSpec::new("bounded_time_ratio", Unit::Ratio, Better::Neither);

super::variant::variants! {
    /// What `memory` times, and whose peak live bytes it records.
    enum Timed {
        /// Every minibatch pushed, one wait.
        Unbounded = "unbounded",
        /// Half the minibatches pushed, one wait.
        UnboundedHalf = "unbounded-half",
        /// A wait after every minibatch.
        SyncPerBatch = "sync-per-batch",
        /// At most --inflight minibatches in flight.
        Bounded = "bounded",
        /// Half the minibatches, at most --inflight in flight.
        BoundedHalf = "bounded-half",
    }
}

/// The `memory` scenario.
pub struct Memory;

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "batches",
        help: "minibatches per epoch",
        kind: ParamKind::Int {
            min: 2,
            max: 100_000,
        },
        default: "200",
    },
    ParamSpec {
        name: "batch",
        help: "rows per minibatch",
        kind: ParamKind::Int {
            min: 1,
            max: 100_000,
        },
        default: "256",
    },
    ParamSpec {
        name: "features",
        help: "columns of a minibatch and size of the square weight W",
        kind: ParamKind::Int {
            min: 1,
            max: 20_000,
        },
        default: "256",
    },
    ParamSpec {
        name: "inflight",
        help: "minibatches allowed in flight in the bounded variant",
        kind: ParamKind::Int {
            min: 1,
            max: 10_000,
        },
        default: "4",
    },
    ParamSpec {
        name: "device",
        help: "cpu, or cuda: count GPU memory (an error without a usable GPU, unless --fallback)",
        kind: ParamKind::Choice(DeviceChoice::WORDS),
        default: "cpu",
    },
];

/// Engine ops per minibatch: the product and the scaling (and on a GPU the upload).
const OPS_PER_BATCH: usize = 2;

/// Most points a variant's live-bytes series keeps: enough for a chart's width, few enough
/// that the report stays small however many minibatches ran.
const LIVE_POINTS: usize = 240;

/// Live bytes over one epoch as the front end sees them: `[seconds since the epoch started,
/// bytes live above what was live before it]`.
struct LiveBytes<'a> {
    tracker: &'a MemTracker,
    base: u64,
    start: Instant,
    points: Vec<[f64; 2]>,
}

impl<'a> LiveBytes<'a> {
    fn start(tracker: &'a MemTracker) -> LiveBytes<'a> {
        LiveBytes {
            tracker,
            base: tracker.live(),
            start: Instant::now(),
            points: Vec::new(),
        }
    }

    fn sample(&mut self) {
        let live = self.tracker.live().saturating_sub(self.base);
        self.points
            .push([self.start.elapsed().as_secs_f64(), live as f64]);
    }
}

/// One epoch; `sync_each` waits after every minibatch. The input is produced by the front end.
/// With `live`, the epoch also samples live bytes as each minibatch is pushed and as each
/// completes (it then waits for the minibatches one by one, in order, before the final wait),
/// and once after the final wait; a timed epoch passes `None` and pays nothing for it.
fn epoch(
    engine: &Engine,
    rt: &Runtime,
    w: &Tensor,
    p: &Shape,
    batches: usize,
    sync_each: bool,
    mut live: Option<&mut LiveBytes>,
) -> Result<(), ScenarioError> {
    let device = &rt.devices[0];
    // The outputs' vars, not the tensors: holding a tensor would keep its buffer live.
    let mut pushed: Vec<Var> = Vec::new();
    for b in 0..batches {
        let x = Tensor::from_host(
            engine,
            device,
            crate::device::cpu::uniform(&[p.batch, p.features], b as u64),
        );
        let y = x.matmul(w)?.scale(1.0 / p.features as f32);
        if let Some(l) = live.as_deref_mut() {
            l.sample();
            if !sync_each {
                pushed.push(y.var().clone());
            }
        }
        if sync_each {
            y.wait_to_read()?;
            if let Some(l) = live.as_deref_mut() {
                l.sample();
            }
        }
    }
    for var in &pushed {
        engine.wait_to_read(var)?;
        if let Some(l) = live.as_deref_mut() {
            l.sample();
        }
    }
    engine.wait_all()?;
    if let Some(l) = live {
        l.sample();
    }
    Ok(())
}

/// `points` thinned to at most `max` (at least 3): per run of consecutive points, the lowest
/// and the highest in time order, so peaks and troughs survive, and always the last point
/// (what was live once the epoch ended).
fn thin(points: Vec<[f64; 2]>, max: usize) -> Vec<[f64; 2]> {
    if points.len() <= max {
        return points;
    }
    let Some(&last) = points.last() else {
        return points;
    };
    let body = &points[..points.len() - 1];
    let buckets = (max.max(3) - 1) / 2;
    let mut out = Vec::with_capacity(max);
    for b in 0..buckets {
        let chunk = &body[b * body.len() / buckets..(b + 1) * body.len() / buckets];
        let by_bytes = |a: &&[f64; 2], b: &&[f64; 2]| a[1].total_cmp(&b[1]);
        let lo = chunk.iter().enumerate().min_by(|a, b| by_bytes(&a.1, &b.1));
        let hi = chunk.iter().enumerate().max_by(|a, b| by_bytes(&a.1, &b.1));
        if let (Some((i, &l)), Some((j, &h))) = (lo, hi) {
            match i.cmp(&j) {
                std::cmp::Ordering::Less => out.extend([l, h]),
                std::cmp::Ordering::Greater => out.extend([h, l]),
                std::cmp::Ordering::Equal => out.push(l),
            }
        }
    }
    out.push(last);
    out
}

struct Shape {
    batch: usize,
    features: usize,
}

/// The parameters, read once.
struct Config {
    batches: usize,
    inflight: usize,
    shape: Shape,
    device: DeviceChoice,
}

impl Config {
    fn of(params: &Params) -> Result<Config, ParamError> {
        Ok(Config {
            batches: params.count("batches")?,
            inflight: params.count("inflight")?,
            shape: Shape {
                batch: params.count("batch")?,
                features: params.count("features")?,
            },
            device: params.choice("device")?,
        })
    }
}

/// The lesson of §8.2.4; the texts print no figures for it.
const LESSON: super::LessonSpec = super::LessonSpec {
    source: super::book::TF2_ASYNC_MEMORY,
    claim: "a bounded queue holds far less memory for about the same time: unbounded peak / \
            bounded peak above 2, and bounded / unbounded time wholly below 1.25",
};

/// "Far less memory": under half the unbounded peak.
const FAR_LESS: f64 = 2.0;
/// "About the same time": at most a quarter slower.
const ABOUT_SAME: f64 = 1.25;

/// Decide the lesson from the exact peaks and the medians.
fn conclude(run: &mut RunRecord, memory_ratio: f64) {
    use super::kit::Verdict;
    use crate::report::evidence::{Estimate, Ratio};
    use crate::report::finding::{Finding, Want};
    let time = Ratio::of(
        Estimate::of(run, Timed::Bounded.name()),
        Estimate::of(run, Timed::Unbounded.name()),
    );
    // The peaks are exact counts of the tracker, not samples: no interval to reach across.
    let verdict = Verdict {
        findings: vec![
            Finding::exact(
                "unbounded / bounded peak",
                memory_ratio,
                FAR_LESS,
                Want::Above,
            ),
            Finding::criterion("bounded / unbounded time", time, ABOUT_SAME, Want::Below),
        ],
        here: format!(
            "{memory_ratio:.1}× less memory, {:.2}× the time",
            time.value
        ),
        book: None,
    };
    LESSON.conclude(run, &[], verdict);
}

/// What `memory` declares.
static SPEC: super::Spec = super::Spec {
    name: "memory",
    about: "peak memory of an over-full async queue: push all vs sync per minibatch vs bounded in flight",
    params: PARAMS,
    lesson: LESSON,
    book: &[],
    sampling: SamplerConfig {
            warmup: 1,
            min_samples: crate::harness::stats::SAMPLES_FOR_95,
            max_samples: 30,
            min_time: Duration::from_secs(2),
            max_time: Duration::from_secs(30),
        },
};

impl Scenario for Memory {
    fn spec(&self) -> &'static super::Spec {
        &SPEC
    }

    fn validate(&self, params: &Params) -> Result<(), ScenarioError> {
        let Config {
            batches, shape: p, ..
        } = Config::of(params)?;
        // Worst case, unbounded: every minibatch input and output at once, plus W.
        let rows = (p.batch as u64)
            .saturating_mul(batches as u64)
            .saturating_mul(3);
        let features = p.features as u64;
        check_elements("memory with these sizes", rows.checked_mul(features))?;
        check_matrices("memory with this --features", features, 1, None)
    }

    fn run(&self, params: &Params, ctx: &RunContext) -> Result<RunRecord, ScenarioError> {
        let Config {
            batches,
            inflight,
            shape: p,
            device,
        } = Config::of(params)?;
        // One device: the loader (front end) and the compute lane run side by side.
        let threads = ctx
            .cpu_threads
            .unwrap_or_else(|| available_cores().saturating_sub(1).max(1));
        let ChosenDevice {
            request,
            fallback_note: notes,
        } = chosen_device(device, threads, ctx.gpu_fallback)?;
        let options = host_ordered(&ctx.runtime);
        let free = Runtime::new(&options, &[request])?;
        // On a GPU the upload of each input is an op of its own.
        let ops_per_batch = OPS_PER_BATCH + usize::from(free.devices[0].is_gpu());
        let bounded_options = RuntimeOptions {
            max_inflight: Some(inflight * ops_per_batch),
            ..options
        };
        let bounded = Runtime::new(&bounded_options, &[request])?;
        let weights = |rt: &Runtime| {
            Tensor::uniform(&rt.engine, &rt.devices[0], &[p.features, p.features], 7)
        };
        let (w_free, w_bounded) = (weights(&free), weights(&bounded));
        free.engine.wait_all()?;
        bounded.engine.wait_all()?;

        let half = batches / 2;
        // Each variant's peaks, in the order of `Timed::ALL`.
        let peaks: RefCell<Vec<Vec<u64>>> = RefCell::new(vec![Vec::new(); Timed::ALL.len()]);
        // On a GPU, each variant's highest (reserved, used) bytes of parbench's memory pool.
        let pool_highs: RefCell<Vec<(u64, u64)>> = RefCell::new(vec![(0, 0); Timed::ALL.len()]);
        let measured = |v: Timed, rt: &Runtime, w: &Tensor, n: usize, sync_each: bool| {
            // Drain first: leftovers would be billed to this sample's time and memory.
            rt.engine.wait_all()?;
            let mem = &rt.devices[0].memory;
            let base = mem.live();
            mem.reset_peak();
            pool_reset(&rt.devices[0]);
            let t = Instant::now();
            epoch(&rt.engine, rt, w, &p, n, sync_each, None)?;
            let elapsed = t.elapsed();
            peaks.borrow_mut()[v as usize].push(mem.peak() - base);
            if let Some(u) = pool_high_water(&rt.devices[0]) {
                let mut highs = pool_highs.borrow_mut();
                let h = &mut highs[v as usize];
                *h = (h.0.max(u.0), h.1.max(u.1));
            }
            Ok::<_, ScenarioError>(elapsed)
        };
        let (free_rt, bounded_rt, w_free, w_bounded) = (&free, &bounded, &w_free, &w_bounded);
        let measured = &measured;
        let setup = |v: Timed| match v {
            Timed::Unbounded => (free_rt, w_free, batches, false),
            Timed::UnboundedHalf => (free_rt, w_free, half, false),
            Timed::SyncPerBatch => (free_rt, w_free, batches, true),
            Timed::Bounded => (bounded_rt, w_bounded, batches, false),
            Timed::BoundedHalf => (bounded_rt, w_bounded, half, false),
        };
        let mut variants: Vec<Variant<ScenarioError>> = Timed::ALL
            .iter()
            .map(|&v| {
                let (rt, w, n, sync_each) = setup(v);
                Variant::new(v.name(), move || measured(v, rt, w, n, sync_each))
            })
            .collect();
        let summaries = ctx.sample(self, &free.engine, &mut variants)?;
        drop(variants);
        let peaks = peaks.into_inner();
        // One more epoch of each variant, untimed, samples live bytes over time: sampling
        // (and waiting for each minibatch in turn) would cost a timed epoch its speed.
        let mut series: Vec<Vec<[f64; 2]>> = Vec::with_capacity(Timed::ALL.len());
        for &v in Timed::ALL {
            let (rt, w, n, sync_each) = setup(v);
            rt.engine.wait_all()?;
            let mut live = LiveBytes::start(&rt.devices[0].memory);
            epoch(&rt.engine, rt, w, &p, n, sync_each, Some(&mut live))?;
            series.push(thin(live.points, LIVE_POINTS));
        }

        let mut run = RunRecord::new(self.name(), params.to_json(), free.describe_devices());
        run.notes.extend(notes);
        let label = |v: Timed| match v {
            Timed::Unbounded => format!("{batches} minibatches pushed, one wait"),
            Timed::UnboundedHalf => format!("{half} minibatches pushed, one wait"),
            Timed::SyncPerBatch => "a wait after every minibatch".to_string(),
            Timed::Bounded => format!("at most {inflight} minibatches in flight"),
            Timed::BoundedHalf => format!("{half} minibatches, at most {inflight} in flight"),
        };
        run.add_variants(
            Timed::names(),
            summaries,
            Timed::ALL.iter().map(|&v| Some(label(v))),
        );
        let batch_bytes = (p.batch * p.features * 4) as u64;
        let peak = |v: Timed| peaks[v as usize].iter().copied().max().unwrap_or(0);
        for &v in Timed::ALL {
            run.derive_as(
                &format!("{}_peak_bytes", v.name().replace('-', "_")),
                peak(v) as f64,
                PEAK_BYTES,
            );
        }
        for (&v, points) in Timed::ALL.iter().zip(series) {
            run.derive_series(
                &format!("{}_live_bytes", v.name().replace('-', "_")),
                serde_json::json!(points),
            );
        }
        let gpu = free.devices[0].is_gpu();
        if gpu {
            let highs = pool_highs.take();
            for (&v, &(reserved, used)) in Timed::ALL.iter().zip(&highs) {
                let name = v.name().replace('-', "_");
                run.derive_as(
                    &format!("{name}_gpu_reserved_bytes"),
                    reserved as f64,
                    GPU_POOL_BYTES,
                );
                run.derive_as(
                    &format!("{name}_gpu_used_bytes"),
                    used as f64,
                    GPU_POOL_BYTES,
                );
            }
            let (r, u) = (
                highs[Timed::Unbounded as usize],
                highs[Timed::Bounded as usize],
            );
            run.explanation.push(pool_sentence(r, u));
        }
        run.record(MINIBATCH_BYTES, batch_bytes as f64);
        run.record(
            MEMORY_RATIO,
            peak(Timed::Unbounded) as f64 / peak(Timed::Bounded).max(1) as f64,
        );
        let m = |v: Timed| run.median(v.name()).unwrap_or(f64::NAN);
        let time_ratio = m(Timed::Bounded) / m(Timed::Unbounded);
        run.record(BOUNDED_TIME_RATIO, time_ratio);

        // A minibatch in flight holds its input and, while its product runs, the product and
        // the scaled output: three minibatches' bytes at most.
        let limit = (inflight as u64 + 1) * 3 * batch_bytes;
        let worst = peaks[Timed::Bounded as usize]
            .iter()
            .chain(&peaks[Timed::BoundedHalf as usize])
            .copied()
            .max()
            .unwrap_or(0);
        run.check(
            "bounded stays within its minibatches' bytes",
            worst <= limit,
            format!(
                "worst peak {} against {} = ({inflight} + 1) minibatches × input, product and output",
                human_bytes(worst),
                human_bytes(limit)
            ),
        );
        let peaks = [
            Timed::Unbounded,
            Timed::UnboundedHalf,
            Timed::SyncPerBatch,
            Timed::Bounded,
            Timed::BoundedHalf,
        ]
        .map(peak);
        run.explanation.push(explain(&peaks, inflight, time_ratio));
        let memory_ratio = run.derived.get(MEMORY_RATIO.key).and_then(|v| v.as_f64());
        conclude(&mut run, memory_ratio.unwrap_or(f64::NAN));
        Ok(run)
    }
}

/// What the peaks show, from the peak live bytes of each variant in order (unbounded,
/// unbounded-half, sync-per-batch, bounded, bounded-half) and bounded / unbounded time.
/// Nothing here is flagged as out of range: the peaks are exact counts, not sampled medians,
/// and the one hard limit (bounded within its minibatches' bytes) is a check.
fn explain(peaks: &[u64; 5], inflight: usize, time_ratio: f64) -> String {
    let [unbounded, unbounded_half, sync_each, bounded, bounded_half] = *peaks;
    // Flat: half the minibatches within a tenth of the full run's peak.
    let flat = (bounded_half as f64 - bounded as f64).abs() <= 0.1 * bounded as f64;
    let less = unbounded as f64 / bounded.max(1) as f64;
    format!(
        "pushing every minibatch and waiting once peaked at {} ({} for half as many): {}. A wait \
         per minibatch peaked at {}; a bound of {inflight} minibatches at {} ({} for half as \
         many{}), {}, for {:.2}× the time.",
        human_bytes(unbounded),
        human_bytes(unbounded_half),
        if piled_up(unbounded, sync_each) {
            "the loader ran ahead and inputs piled up"
        } else {
            "no more than with a wait per minibatch, so nothing piled up here"
        },
        human_bytes(sync_each),
        human_bytes(bounded),
        human_bytes(bounded_half),
        if flat { ": flat" } else { "" },
        if (less - 1.0).abs() < SAME_PEAK {
            "about as much as unbounded".to_string()
        } else if less > 1.0 {
            format!("{less:.1}× less than unbounded")
        } else {
            format!("{:.1}× more than unbounded", 1.0 / less)
        },
        time_ratio
    )
}

/// Peaks within this fraction of each other are called the same.
const SAME_PEAK: f64 = 0.05;

/// Whether pushing everything held more than a wait per minibatch did (by more than a tenth):
/// only then did inputs pile up ahead of the work.
fn piled_up(unbounded: u64, sync_each: u64) -> bool {
    unbounded as f64 > 1.1 * sync_each as f64
}

/// Start the GPU pool's high-water marks again (nothing on a CPU device).
fn pool_reset(device: &crate::device::Device) {
    #[cfg(feature = "cuda")]
    if let crate::device::DeviceKind::Cuda(d) = &device.kind {
        let _ = d.reset_pool_high_water();
    }
    #[cfg(not(feature = "cuda"))]
    let _ = device;
}

/// The GPU pool's (reserved, used) high-water marks; `None` on a CPU device.
fn pool_high_water(device: &crate::device::Device) -> Option<(u64, u64)> {
    match &device.kind {
        #[cfg(feature = "cuda")]
        crate::device::DeviceKind::Cuda(d) => {
            d.pool_usage().ok().map(|u| (u.reserved_high, u.used_high))
        }
        _ => None,
    }
}

/// What the pool's marks say for the unbounded and the bounded loop, each as (reserved, used).
fn pool_sentence(unbounded: (u64, u64), bounded: (u64, u64)) -> String {
    format!(
        "on the GPU, parbench's memory pool held at most {} in live buffers unbounded ({} \
         reserved from the driver) and {} bounded ({} reserved): the rest of what is reserved \
         is freed memory the pool keeps cached for reuse, which the driver counts as used.",
        human_bytes(unbounded.1),
        human_bytes(unbounded.0),
        human_bytes(bounded.1),
        human_bytes(bounded.0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn thinning_keeps_the_peak_and_the_last_point_within_the_bound() {
        let points: Vec<[f64; 2]> = (0..1001)
            .map(|i| [i as f64, if i == 377 { 1e9 } else { (i % 7) as f64 }])
            .collect();
        let thinned = thin(points.clone(), LIVE_POINTS);
        assert!(thinned.len() <= LIVE_POINTS, "{}", thinned.len());
        assert_eq!(thinned.last(), points.last());
        assert!(thinned.contains(&[377.0, 1e9]));
        assert!(thinned.windows(2).all(|w| w[0][0] < w[1][0]), "time order");
        assert_eq!(
            thin(points[..10].to_vec(), LIVE_POINTS),
            points[..10].to_vec()
        );
    }

    #[test]
    fn each_variant_records_a_bounded_live_bytes_series_that_ends_with_the_run() {
        let given: Vec<(String, String)> = [
            ("batches", "700"),
            ("batch", "2"),
            ("features", "4"),
            ("inflight", "2"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let params = Params::parse("memory", PARAMS, &given).expect("parameters");
        let ctx = RunContext {
            sampling: crate::scenario::SamplingOverrides {
                warmup: Some(0),
                min_samples: Some(3),
                max_samples: Some(3),
                min_time: Some(Duration::ZERO),
                max_time: Some(Duration::from_secs(5)),
            },
            cpu_threads: Some(1),
            ..RunContext::default()
        };
        let run = Memory.run(&params, &ctx).expect("runs");
        let batch_bytes = 2.0 * 4.0 * 4.0;
        for &v in Timed::ALL {
            let key = format!("{}_live_bytes", v.name().replace('-', "_"));
            assert_eq!(run.figure(&key).unit, Unit::Series, "{key}");
            let points: Vec<[f64; 2]> =
                serde_json::from_value(run.derived[&key].clone()).expect("[[s, bytes], ...]");
            assert!(
                points.len() >= 3 && points.len() <= LIVE_POINTS,
                "{key}: {}",
                points.len()
            );
            assert!(
                points.windows(2).all(|w| w[0][0] <= w[1][0]),
                "{key}: time order"
            );
            // The last point is the epoch's end: the latest, and nothing of it left live.
            let last = points[points.len() - 1];
            assert_eq!(last[1], 0.0, "{key}: {last:?}");
            assert!(points.iter().any(|p| p[1] > 0.0), "{key}: saw the inputs");
            if matches!(v, Timed::Bounded | Timed::BoundedHalf) {
                // Within what the run's check allows a bounded epoch.
                let limit = (2.0 + 1.0) * 3.0 * batch_bytes;
                assert!(points.iter().all(|p| p[1] <= limit), "{key}: {points:?}");
            }
        }
    }

    #[test]
    fn the_pool_sentence_names_used_and_reserved() {
        let s = pool_sentence((3 << 20, 2 << 20), (1 << 20, 1 << 20));
        assert!(
            s.contains("2.0 MiB in live buffers unbounded (3.0 MiB reserved"),
            "{s}"
        );
        assert!(s.contains("1.0 MiB bounded (1.0 MiB reserved)"), "{s}");
    }

    #[test]
    fn the_explanation_quotes_its_own_arithmetic() {
        let s = explain(&[64 * MIB, 32 * MIB, 2 * MIB, 8 * MIB, 8 * MIB], 2, 1.05);
        assert!(
            s.contains("peaked at 64.0 MiB (32.0 MiB for half as many)"),
            "{s}"
        );
        assert!(s.contains("A wait per minibatch peaked at 2.0 MiB"), "{s}");
        // 64 / 8 = 8× less; half as many at the same peak is flat.
        assert!(
            s.contains("a bound of 2 minibatches at 8.0 MiB (8.0 MiB for half as many: flat), 8.0× less than unbounded, for 1.05× the time"),
            "{s}"
        );
    }

    #[test]
    fn a_bounded_peak_above_the_unbounded_one_is_called_more() {
        let s = explain(&[4 * MIB, 2 * MIB, 2 * MIB, 8 * MIB, 5 * MIB], 2, 0.9);
        assert!(
            s.contains("2.0× more than unbounded") && !s.contains("less"),
            "{s}"
        );
        assert!(
            s.contains("(5.0 MiB for half as many)") && !s.contains("flat"),
            "{s}"
        );
        assert!(s.contains("for 0.90× the time"), "{s}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Random peaks, on either side of each other: "piled up" only when pushing everything
        /// held more than a wait per minibatch, "less"/"more than unbounded" only on the side
        /// the peaks are on (and neither when they are within 5%), "flat" only when half as
        /// many minibatches peaked within a tenth of the full run, and every figure quoted as
        /// given.
        #[test]
        fn no_sentence_contradicts_its_peaks(
            peaks in proptest::array::uniform5(1u64..(1 << 32)),
            inflight in 1usize..16,
            time_ratio in 0.1f64..10.0,
        ) {
            let s = explain(&peaks, inflight, time_ratio);
            let [unbounded, _, sync_each, bounded, bounded_half] = peaks;
            proptest::prop_assert_eq!(
                s.contains("inputs piled up"),
                unbounded as f64 > 1.1 * sync_each as f64,
                "{}", s
            );
            let ratio = unbounded as f64 / bounded as f64;
            proptest::prop_assert_eq!(s.contains("less than unbounded"), ratio >= 1.05, "{}", s);
            proptest::prop_assert_eq!(s.contains("more than unbounded"), ratio <= 0.95, "{}", s);
            proptest::prop_assert_eq!(
                s.contains(": flat"),
                (bounded_half as f64 - bounded as f64).abs() <= 0.1 * bounded as f64,
                "{}", s
            );
            for p in peaks.iter().filter(|&&p| p != peaks[1] && p != peaks[4]) {
                proptest::prop_assert!(s.contains(&human_bytes(*p)), "{}", s);
            }
            let time = format!("{time_ratio:.2}× the time");
            proptest::prop_assert!(s.contains(&time), "{}", s);
        }
    }
}
