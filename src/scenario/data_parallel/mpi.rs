//! `data-parallel --backend mpi`: one rank per device, started by `mpirun`.
//!
//! Every rank builds the same seeded data and parameters and runs the same variants in the
//! same order, for the same number of rounds (the sampler's time-based stopping would let
//! ranks disagree on when to stop, and a rank left alone in a collective waits forever):
//! - `one-device`: rank 0 trains on whole batches alone while the others wait (the baseline);
//! - `allreduce`: each rank's shard gradient summed by `MPI_Allreduce`, then the same update
//!   on every rank;
//! - `ring`: the same sum by the ring of point-to-point messages the chapter describes;
//! - `async`: rank 0 is a parameter server; each other rank pulls the parameters, sends its
//!   shard's gradient, and the server applies it at once (stale reads; needs 2 ranks).
//!
//! The batch loss travels with the gradient (one more value in the reduced buffer), so rank 0
//! logs the global loss at no extra message. Rank 0 gathers every rank's timings and host and
//! returns the report; the other ranks print and write nothing.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::explain::{record_run, Communication};
use super::mlp::{forward, gradient, sgd};
use super::training::{buckets, shard, Bucket, LossEntry, Runs, Trained};
use super::{Config, DataParallel, Setup, Timed};
use crate::device::record::{Described, DeviceRecord, Kind};
use crate::distributed::{self, Comm};
use crate::harness::{Summary, Variant};
use crate::report::RunRecord;
use crate::scenario::collective;
use crate::scenario::{Params, RunContext, Scenario, ScenarioError};

const TAG_PARAMS: i32 = 1;
const TAG_GRADIENT: i32 = 2;
/// Rank 0 training alone tells the others after each step that it is alive, so their waits
/// stay bounded by a step, not by its whole run.
const TAG_ALIVE: i32 = 3;

/// Fault tests: `RANK:stall` makes that rank hang before its first wait on the others (past
/// `--timeout`), `RANK:exit` makes it exit there without a word, as a crash would.
pub const FAULT_ENV: &str = "PARBENCH_MPI_FAULT";

/// Act out the fault `FAULT_ENV` asks of this rank, if any.
fn inject_fault(rank: usize, timeout: Duration) {
    let Ok(spec) = std::env::var(FAULT_ENV) else {
        return;
    };
    match spec.split_once(':') {
        Some((r, "stall")) if r.parse() == Ok(rank) => {
            std::thread::sleep(timeout + Duration::from_secs(30))
        }
        Some((r, "exit")) if r.parse() == Ok(rank) => std::process::exit(3),
        _ => {}
    }
}

/// One rank's buffers, reused by every run.
struct Buffers {
    weights: Vec<f32>,
    /// The shard's gradient and, last, its summed loss.
    gradient: Vec<f32>,
    reduced: Vec<f32>,
    tmp: Vec<f32>,
}

struct Rank<'a> {
    comm: &'a Comm,
    setup: &'a Setup,
    /// The rank's compute threads: its products run there, its MPI calls on the caller.
    pool: &'a rayon::ThreadPool,
}

impl Rank<'_> {
    fn n(&self) -> usize {
        self.setup.initial.len()
    }

    /// The gradient of `rows` at `weights` into `out` (its summed loss last), on the rank's
    /// threads.
    fn gradient(&self, weights: &[f32], rows: (usize, usize), out: &mut [f32]) {
        let (s, n) = (self.setup, self.n());
        let scale = s.batch as f32;
        let loss = self
            .pool
            .install(|| gradient(&s.layers, weights, &s.data, rows, scale, &mut out[..n]));
        out[n] = (loss * s.batch as f64) as f32;
    }

    fn one_device(&self, b: &mut Buffers) -> Trained {
        let s = self.setup;
        let (n, mut log) = (self.n(), Vec::new());
        b.weights.copy_from_slice(&s.initial);
        let start = Instant::now();
        if self.comm.rank() == 0 {
            for step in 0..s.steps {
                let rows = (step as usize * s.batch, s.batch);
                self.gradient(&b.weights, rows, &mut b.gradient);
                sgd(&mut b.weights, &b.gradient[..n], s.lr);
                let loss = f64::from(b.gradient[n]);
                log.push(LossEntry::since(start, step, loss, s.batch));
                for r in 1..self.comm.size() {
                    self.comm
                        .send(r, TAG_ALIVE, &[step as f32], "one-device's progress");
                }
            }
        } else {
            let mut step = [0f32];
            for _ in 0..s.steps {
                self.comm.receive(
                    Some(0),
                    TAG_ALIVE,
                    &mut step,
                    "its next one-device step (rank 0 trains alone)",
                );
            }
        }
        self.comm.barrier("one-device: rank 0 training alone");
        Trained {
            weights: b.weights.clone(),
            log,
            ..Trained::default()
        }
    }

    /// A synchronous variant: each step `reduce` leaves the sum of the ranks' shard gradients
    /// (their summed loss last) in `b.reduced` and returns the time it spent in MPI calls;
    /// then every rank takes the same update.
    fn synchronous(
        &self,
        b: &mut Buffers,
        mut reduce: impl FnMut(u64, &mut Buffers) -> Duration,
    ) -> Trained {
        let (s, n) = (self.setup, self.n());
        let mut log = Vec::new();
        b.weights.copy_from_slice(&s.initial);
        let start = Instant::now();
        let mut communicating = Duration::ZERO;
        for step in 0..s.steps {
            communicating += reduce(step, b);
            sgd(&mut b.weights, &b.reduced[..n], s.lr);
            if self.comm.rank() == 0 {
                let loss = f64::from(b.reduced[n]);
                log.push(LossEntry::since(start, step, loss, s.batch));
            }
        }
        Trained {
            weights: b.weights.clone(),
            log,
            communication: Some(communicating.as_secs_f64() / start.elapsed().as_secs_f64()),
            ..Trained::default()
        }
    }

    /// `allreduce` (`MPI_Allreduce`) or `ring` (point-to-point messages): each step's shard
    /// gradient, then its sum over the ranks.
    fn whole(&self, b: &mut Buffers, ring: bool) -> Trained {
        let (s, k, rank) = (self.setup, self.comm.size(), self.comm.rank());
        self.synchronous(b, |step, b| {
            self.gradient(&b.weights, shard(step, s.batch, k, rank), &mut b.gradient);
            let reducing = Instant::now();
            if ring {
                let what = format!("ring all-reduce of step {step}");
                let (send, recv, tmp) = (&b.gradient, &mut b.reduced, &mut b.tmp);
                self.comm.ring_all_reduce_sum_into(send, recv, tmp, &what);
            } else {
                let what = format!("MPI_Allreduce of step {step}");
                self.comm.all_reduce_sum(&b.gradient, &mut b.reduced, &what);
            }
            reducing.elapsed()
        })
    }

    /// The gradient by a forward pass and a backward step per layer, last first, its buckets
    /// of layers ([`buckets`]) each all-reduced by an `MPI_Iallreduce` posted as soon as the
    /// bucket is written, while the layers below are computed. The summed loss travels in the
    /// first bucket (the last layer's, which ends where the loss slot is). Communication's
    /// share counts only the time spent in MPI calls: what no computation covered.
    fn overlapped(&self, b: &mut Buffers) -> Trained {
        let (s, n) = (self.setup, self.n());
        let (k, rank) = (self.comm.size(), self.comm.rank());
        let plan = buckets(&s.layers, s.bucket_bytes);
        self.synchronous(b, |step, b| {
            let rows = shard(step, s.batch, k, rank);
            let weights = &b.weights;
            let mut pass = self
                .pool
                .install(|| forward(&s.layers, weights, &s.data, rows, s.batch as f32));
            let loss = (pass.loss * s.batch as f64) as f32;
            let sends = bucket_slices(&mut b.gradient, &plan, n);
            let recvs = bucket_slices(&mut b.reduced, &plan, n);
            let what = format!("bucketed MPI_Iallreduce of step {step}");
            self.comm
                .all_reduce_sum_as_ready(sends, recvs, &what, |i, bucket| {
                    let from = plan[i].range.start;
                    for &l in &plan[i].layers {
                        let r = s.layers.range(l);
                        let grad = &mut bucket[r.start - from..r.end - from];
                        self.pool
                            .install(|| pass.backward(&s.layers, weights, l, grad));
                    }
                    if i == 0 {
                        bucket[n - from] = loss;
                    }
                })
        })
    }

    /// Rank 0 serves parameters and applies gradients as they come; ranks 1.. are workers,
    /// each making `steps` updates of its shard (the batch split between the workers).
    fn asynchronous(&self, b: &mut Buffers) -> Trained {
        let s = self.setup;
        let (n, k, rank) = (self.n(), self.comm.size(), self.comm.rank());
        let workers = k - 1;
        let start = Instant::now();
        if rank != 0 {
            for step in 0..s.steps {
                // The pulled parameters, their version last.
                self.comm.receive(
                    Some(0),
                    TAG_PARAMS,
                    &mut b.reduced,
                    "the parameter server's parameters",
                );
                let rows = shard(step, s.batch, workers, rank - 1);
                self.gradient(&b.reduced[..n], rows, &mut b.gradient);
                self.comm
                    .send(0, TAG_GRADIENT, &b.gradient, "the parameter server");
            }
            return Trained::default();
        }
        b.weights.copy_from_slice(&s.initial);
        let (mut log, mut staleness) = (Vec::new(), Vec::new());
        let mut seen = vec![0u64; k];
        let mut left = vec![s.steps; k];
        let mut version = 0u64;
        let push = |b: &mut Buffers, to: usize, version: u64| {
            b.reduced[..n].copy_from_slice(&b.weights);
            b.reduced[n] = version as f32;
            self.comm.send(to, TAG_PARAMS, &b.reduced, "a worker");
        };
        for w in 1..k {
            push(b, w, 0);
        }
        for _ in 0..workers as u64 * s.steps {
            let from =
                self.comm
                    .receive(None, TAG_GRADIENT, &mut b.gradient, "a worker's gradient");
            sgd(&mut b.weights, &b.gradient[..n], s.lr);
            staleness.push(version - seen[from]);
            let rows = shard(s.steps - left[from], s.batch, workers, from - 1).1;
            let loss = f64::from(b.gradient[n]);
            log.push(LossEntry::since(start, version, loss, rows));
            version += 1;
            left[from] -= 1;
            if left[from] > 0 {
                seen[from] = version;
                push(b, from, version);
            }
        }
        Trained {
            weights: b.weights.clone(),
            log,
            staleness,
            ..Trained::default()
        }
    }
}

/// `buffer` (the parameters' gradient and the loss slot after it) cut into `plan`'s buckets,
/// in the plan's (backward) order; the first bucket, the last layer's, takes the loss slot.
fn bucket_slices<'a>(buffer: &'a mut [f32], plan: &[Bucket], n: usize) -> Vec<&'a mut [f32]> {
    let mut rest = &mut buffer[..n + 1];
    let mut slices = Vec::with_capacity(plan.len());
    for bucket in plan {
        let (head, tail) = std::mem::take(&mut rest).split_at_mut(bucket.range.start);
        slices.push(tail);
        rest = head;
    }
    slices
}

/// Run the scenario as this rank of an MPI job.
pub(super) fn run(
    scenario: &DataParallel,
    params: &Params,
    cfg: &Config,
    ctx: &RunContext,
) -> Result<RunRecord, ScenarioError> {
    let comm = distributed::world(cfg.timeout).map_err(|e| ScenarioError::Input(e.to_string()))?;
    let place = comm.place();
    let k = place.size;
    if cfg.batch < k {
        return Err(ScenarioError::Input(format!(
            "data-parallel: --batch ({}) must be at least the number of ranks ({k})",
            cfg.batch
        )));
    }
    let threads = ctx.cpu_threads.unwrap_or_else(|| comm.cores());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(move |i| format!("rank {} worker {i}", place.rank))
        .build()
        .map_err(|e| ScenarioError::Input(format!("cannot start the rank's threads: {e}")))?;
    let setup = cfg.setup(k);
    let n = setup.initial.len();
    let buffers = Mutex::new(Buffers {
        weights: vec![0.0; n],
        gradient: vec![0.0; n + 1],
        reduced: vec![0.0; n + 1],
        tmp: Vec::new(),
    });
    let rank = Rank {
        comm: &comm,
        setup: &setup,
        pool: &pool,
    };
    inject_fault(place.rank, cfg.timeout);

    let (steps, batch) = (cfg.steps, cfg.batch);
    let bucketed = crate::units::count(buckets(&cfg.layers, cfg.bucket_bytes).len(), "bucket");
    let label = |v: Timed| match v {
        Timed::OneDevice => format!("{steps} steps of {batch} rows on rank 0 alone"),
        Timed::Allreduce => format!("{k} shard gradients summed by MPI_Allreduce, {k} updates"),
        Timed::Ring => format!(
            "{k} shard gradients, ring reduce-scatter + all-gather over point-to-point messages"
        ),
        Timed::AllreduceOverlapped => format!(
            "{k} shard gradients, an MPI_Iallreduce per bucket of layers ({bucketed}) posted as \
             the backward pass writes it"
        ),
        // Async: MPI times no other variant.
        _ => format!(
            "rank 0 serves, {} workers × {steps} updates of their shard, stale reads allowed",
            k - 1
        ),
    };
    // Async needs a server rank and a worker.
    use Timed::{Allreduce, AllreduceOverlapped, Async, OneDevice, Ring};
    let names = [OneDevice, Allreduce, Ring, AllreduceOverlapped, Async].into_iter();
    let names = names.filter(|&v| k > 1 || v != Async);
    let names: Vec<(Timed, String)> = names.map(|v| (v, label(v))).collect();
    let runs = Runs::new(names.len());
    let train = |i: usize| {
        let (rank, buffers, runs, name) = (&rank, &buffers, &runs, names[i].0);
        move || -> Result<Duration, ScenarioError> {
            let mut b = buffers.lock().unwrap_or_else(|e| e.into_inner());
            rank.comm.barrier(&format!("the start of {}", name.name()));
            let start = Instant::now();
            let trained = match name {
                Timed::OneDevice => rank.one_device(&mut b),
                Timed::Allreduce => rank.whole(&mut b, false),
                Timed::Ring => rank.whole(&mut b, true),
                Timed::AllreduceOverlapped => rank.overlapped(&mut b),
                Timed::Async => rank.asynchronous(&mut b),
                // Not among MPI's variants (`names`).
                _ => Trained::default(),
            };
            let took = start.elapsed();
            runs.keep(i, took.as_secs_f64(), trained.log.clone(), trained);
            Ok(took)
        }
    };
    let mut variants: Vec<Variant<ScenarioError>> = (0..names.len())
        .map(|i| Variant::new(names[i].0.name(), train(i)))
        .collect();
    let summaries = collective::sample_ranks(scenario, ctx, place.rank, &mut variants)?;
    drop(variants);

    // Every rank's timings and host, on rank 0.
    let per_variant = |figure: fn(&Summary) -> Value| {
        let each = names.iter().zip(&summaries);
        each.map(|(n, s)| (n.0.name().to_string(), figure(s)))
            .collect::<serde_json::Map<_, _>>()
    };
    let mine = json!({
        "rank": place.rank,
        "host": comm.host(),
        "pid": std::process::id(),
        "threads": threads,
        "median_s": per_variant(|s| json!(s.median_s)),
        "samples_s": per_variant(|s| json!(s.samples_s)),
    });
    let parameters = collective::rank_parameters(params, k);
    let Some(ranks) = collective::gather_json(&comm, &mine) else {
        // Not rank 0: the report is rank 0's to write.
        return Ok(RunRecord::new(scenario.name(), parameters, Vec::new()));
    };
    let devices = Described::of(ranks.iter().map(|r| {
        let threads = r["threads"].as_u64().unwrap_or(0) as usize;
        let label = format!(
            "rank {} ({}, {})",
            r["rank"],
            crate::units::count(threads, "thread"),
            r["host"].as_str().unwrap_or("?")
        );
        let record = DeviceRecord {
            kind: Kind::Rank,
            threads,
            standing_in: false,
        };
        (label, record)
    }));
    let mut run = RunRecord::new(scenario.name(), parameters, devices);
    collective::note_unlaunched(&mut run, place.launched);
    if k == 1 {
        run.notes
            .push("async needs a server rank and a worker: run with 2 ranks or more".into());
    }
    run.derive_series("ranks", Value::Array(ranks));
    let trained = runs.trained(&summaries, |t| t);
    let shares: Vec<(Timed, f64)> = names
        .iter()
        .zip(&trained)
        .filter_map(|((v, _), t)| Some((*v, t.communication?)))
        .collect();
    let communication = Communication {
        shares: &shares,
        overlaps: &[],
        threads: &[],
        untraced: "the engine's trace does not reach across MPI ranks",
    };
    record_run(
        &mut run,
        cfg,
        &setup,
        &names,
        summaries,
        trained,
        &communication,
    );
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::data_parallel::mlp::Layers;

    /// The buckets' slices cover the gradient and the loss slot once each, in the plan's
    /// (backward) order, the loss slot with the last layer's bucket.
    #[test]
    fn bucket_slices_cut_the_gradient_as_the_plan_does() {
        let layers = Layers(vec![12, 16, 8, 4]);
        let n = layers.parameters();
        for cap in [0.0, 600.0, 1e9] {
            let plan = buckets(&layers, cap);
            let mut buffer: Vec<f32> = (0..=n).map(|i| i as f32).collect();
            let slices = bucket_slices(&mut buffer, &plan, n);
            assert_eq!(slices.len(), plan.len());
            for (i, (s, b)) in slices.iter().zip(&plan).enumerate() {
                let end = if i == 0 { n + 1 } else { b.range.end };
                let want: Vec<f32> = (b.range.start..end).map(|i| i as f32).collect();
                assert_eq!(&s[..], &want[..], "cap {cap}, bucket {i}");
            }
        }
    }
}
