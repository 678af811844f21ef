//! The timed epochs of `memory`: a training-like loop whose front end produces each input,
//! timed under each variant with its exact peak of live bytes, then one untimed epoch per
//! variant that samples live bytes over time; the figures, and the check of the bounded peak.

use std::cell::RefCell;
use std::time::Instant;

use super::{
    explain, Config, Memory, Timed, BOUNDED_TIME_RATIO, GPU_POOL_BYTES, MEMORY_RATIO,
    MINIBATCH_BYTES, PEAK_BYTES,
};
use crate::device::memory::MemTracker;
use crate::device::{available_cores, Runtime, RuntimeOptions};
use crate::engine::{Engine, Var};
use crate::harness::Variant;
use crate::report::RunRecord;
use crate::scenario::kit::{chosen_device, host_ordered};
use crate::scenario::{Params, RunContext, Scenario, ScenarioError};
use crate::tensor::Tensor;
use crate::units::human_bytes;

/// Engine ops per minibatch: the product and the scaling (and on a GPU the upload).
const OPS_PER_BATCH: usize = 2;

/// Most points a variant's live-bytes series keeps: enough for a chart's width, few enough
/// that the report stays small however many minibatches ran.
pub(super) const LIVE_POINTS: usize = 240;

pub(super) fn epochs(
    scenario: &Memory,
    params: &Params,
    ctx: &RunContext,
    cfg: Config,
) -> Result<RunRecord, ScenarioError> {
    let Config {
        batches,
        inflight,
        device,
        ..
    } = cfg;
    let p = cfg;
    // One device: the loader (front end) and the compute lane run side by side.
    let threads = ctx
        .cpu_threads
        .unwrap_or_else(|| available_cores().saturating_sub(1).max(1));
    let chosen = chosen_device(device, threads, ctx.gpu_fallback)?;
    let options = host_ordered(&ctx.runtime);
    let free = Runtime::new(&options, &[chosen.request])?;
    // On a GPU the upload of each input is an op of its own.
    let ops_per_batch = OPS_PER_BATCH + usize::from(free.devices[0].is_gpu());
    let bounded_options = RuntimeOptions {
        max_inflight: Some(inflight * ops_per_batch),
        ..options
    };
    let bounded = Runtime::new(&bounded_options, &[chosen.request])?;
    let weights =
        |rt: &Runtime| Tensor::uniform(&rt.engine, &rt.devices[0], &[p.features, p.features], 7);
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
    let mut variants: Vec<Variant<ScenarioError>> = Timed::each(|v| {
        let (rt, w, n, sync_each) = setup(v);
        Variant::new(v.name(), move || measured(v, rt, w, n, sync_each))
    });
    let summaries = ctx.sample(scenario, &free.engine, &mut variants)?;
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

    let mut run = RunRecord::new(scenario.name(), params.to_json(), free.describe_devices());
    run.notes.extend(chosen.fallback_note);
    let label = |v: Timed| match v {
        Timed::Unbounded => format!("{batches} minibatches pushed, one wait"),
        Timed::UnboundedHalf => format!("{half} minibatches pushed, one wait"),
        Timed::SyncPerBatch => "a wait after every minibatch".to_string(),
        Timed::Bounded => format!("at most {inflight} minibatches in flight"),
        Timed::BoundedHalf => format!("{half} minibatches, at most {inflight} in flight"),
    };
    Timed::add_to(&mut run, summaries, |v| Some(label(v)));
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
    let mut pool = None;
    if gpu {
        let highs = pool_highs.take();
        for (&v, &(reserved, used)) in Timed::ALL.iter().zip(&highs) {
            let name = v.name().replace('-', "_");
            for (what, bytes) in [("reserved", reserved), ("used", used)] {
                let key = format!("{name}_gpu_{what}_bytes");
                run.derive_as(&key, bytes as f64, GPU_POOL_BYTES);
            }
        }
        pool = Some((
            highs[Timed::Unbounded as usize],
            highs[Timed::Bounded as usize],
        ));
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
    let peaks = std::array::from_fn(|i| peak(Timed::ALL[i]));
    explain::explain_run(&mut run, &peaks, inflight, time_ratio, pool);
    Ok(run)
}

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
    p: &Config,
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
