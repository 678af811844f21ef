//! `allreduce --backend mpi`: one rank per device, started by `mpirun`.
//!
//! Every rank runs the same sizes, algorithms and rounds (a rank left alone in a collective
//! waits until its deadline), so the sampler's time-based stopping is off: `--min-samples`
//! rounds, each algorithm once per round. A round starts at a barrier, then times a batch of
//! back-to-back all-reduces: one of 8 B takes microseconds, so a batch runs until about
//! [`SAMPLE_TARGET`] has passed (nccl-tests likewise averages `-n` iterations per timing).
//! Rank 0's first, checked run of each algorithm sets the batch, broadcast to every rank.
//!
//! Each rank checks its own result against the float64 sum of every rank's seeded input,
//! computed locally ([`check_seeded`]), and rank 0 gathers every rank's checks, medians and
//! host: the report carries per-rank min/avg/max of the median time (nccl-tests' `-a`), so a
//! straggler shows. The other ranks print and write nothing.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::explain::library_against_ring;
use super::measure::{check_seeded, copy_bandwidth, detail, input, Checked, Tally};
use super::size_label;
use super::{Algorithm, Allreduce, Config};
use crate::device::record::{DeviceRecord, Kind};
use crate::distributed::{self, Comm};
use crate::harness::Variant;
use crate::report::evidence::Estimate;
use crate::report::{Better, Figure, RunRecord, Unit};
use crate::scenario::backend::Backend;
use crate::scenario::collective;
use crate::scenario::{Params, RunContext, Scenario, ScenarioError};

/// The least time one timed sample takes: shorter all-reduces are timed in batches.
const SAMPLE_TARGET: Duration = Duration::from_millis(2);
const MAX_BATCH: usize = 10_000;
/// Per-rank medians this far apart are named in a note.
const STRAGGLER: f64 = 1.2;

const PER_RANK: Figure = detail(Unit::Seconds, Better::Lower);

/// One rank's buffers of one size.
struct Buffers {
    send: Vec<f32>,
    recv: Vec<f32>,
    tmp: Vec<f32>,
}

impl Algorithm {
    /// One all-reduce of `b.send` into `b.recv` across the ranks.
    fn reduce(self, comm: &Comm, b: &mut Buffers, what: &str) {
        match self {
            Algorithm::Ring => {
                comm.ring_all_reduce_sum_into(&b.send, &mut b.recv, &mut b.tmp, what)
            }
            Algorithm::ParameterServer => {
                comm.parameter_server_sum_into(&b.send, &mut b.recv, &mut b.tmp, what)
            }
            Algorithm::MpiAllreduce => comm.all_reduce_sum(&b.send, &mut b.recv, what),
            // Not among MPI's algorithms (`Algorithm::of`).
            Algorithm::Tree => {}
        }
    }
}

/// All-reduces per timed sample for one that took `seconds` alone.
fn batch(seconds: f64) -> usize {
    if !(seconds.is_finite() && seconds > 0.0) {
        return 1;
    }
    ((SAMPLE_TARGET.as_secs_f64() / seconds).ceil() as usize).clamp(1, MAX_BATCH)
}

/// Every rank's checks of one algorithm as one: the wrong and checked elements summed, the
/// largest error; a rank whose summary is missing counts as wrong.
fn merged(ranks: &[Value], i: usize) -> Checked {
    ranks.iter().fold(Checked::default(), |mut all, r| {
        let c = &r["checked"][i];
        match (c[0].as_u64(), c[1].as_u64(), c[2].as_f64()) {
            (Some(wrong), Some(checked), Some(max_error)) => {
                all.wrong += wrong;
                all.checked += checked;
                all.max_error = all.max_error.max(max_error);
            }
            _ => all.wrong += 1,
        }
        all
    })
}

/// Run the scenario as this rank of an MPI job.
pub(super) fn run(
    scenario: &Allreduce,
    params: &Params,
    cfg: &Config,
    ctx: &RunContext,
) -> Result<RunRecord, ScenarioError> {
    let comm = distributed::world(cfg.timeout).map_err(|e| ScenarioError::Input(e.to_string()))?;
    let place = comm.place();
    let (k, rank) = (place.size, place.rank);
    // Rank 0 measures the copy bandwidth while the others wait at the first barrier.
    let copy = if rank == 0 { copy_bandwidth() } else { None };
    let algorithms = Algorithm::of(Backend::Mpi);
    let parameters = collective::rank_parameters(params, k);
    let mut run = RunRecord::new(scenario.name(), parameters, Vec::new());
    let mut tally = Tally::new(Backend::Mpi, k, copy);
    let mut hosts: Vec<String> = Vec::new();
    let mut stragglers = Vec::new();
    for &bytes in &cfg.sizes {
        let n = (bytes / 4) as usize;
        let size = size_label(bytes);
        let mut b = Buffers {
            send: (0..n).map(|i| input(rank, i)).collect(),
            recv: vec![0.0; n],
            tmp: Vec::new(),
        };
        // Each algorithm once on results filled with NaN, checked here, and timed for its
        // batch.
        let mut checked = Vec::new();
        let mut once = vec![0f64; algorithms.len()];
        for (i, &a) in algorithms.iter().enumerate() {
            b.recv.fill(f32::NAN);
            let what = format!("{} (checked run)", a.variant(bytes));
            comm.barrier(&what);
            let start = Instant::now();
            a.reduce(&comm, &mut b, &what);
            once[i] = start.elapsed().as_secs_f64();
            checked.push(check_seeded(k, &b.recv));
        }
        comm.broadcast(&mut once, &format!("the batch sizes of {size}"));
        let batches: Vec<usize> = once.iter().map(|&t| batch(t)).collect();
        let buffers = RefCell::new(b);
        let mut variants: Vec<Variant<ScenarioError>> = algorithms
            .iter()
            .zip(&batches)
            .map(|(&a, &reps)| {
                let (comm, buffers) = (&comm, &buffers);
                let what = a.variant(bytes);
                Variant::new(a.variant(bytes), move || {
                    let mut b = buffers.borrow_mut();
                    comm.barrier(&what);
                    let start = Instant::now();
                    for _ in 0..reps {
                        a.reduce(comm, &mut b, &what);
                    }
                    Ok(start.elapsed() / reps as u32)
                })
            })
            .collect();
        let summaries = collective::sample_ranks(scenario, ctx, rank, &mut variants)?;
        drop(variants);
        drop(buffers);
        // What this rank tells rank 0 about the size.
        let mine = json!({
            "host": comm.host(),
            "median_s": summaries.iter().map(|s| s.median_s).collect::<Vec<_>>(),
            "checked": checked
                .iter()
                .map(|c| json!([c.wrong, c.checked, c.max_error]))
                .collect::<Vec<_>>(),
        });
        let Some(ranks) = collective::gather_json(&comm, &mine) else {
            continue;
        };
        if hosts.is_empty() {
            hosts = ranks
                .iter()
                .map(|r| r["host"].as_str().unwrap_or("?").to_string())
                .collect();
        }
        let label = |a: Algorithm, reps: usize| {
            let how = match a {
                Algorithm::Ring => {
                    format!("reduce-scatter + all-gather in {k} chunks over point-to-point")
                }
                Algorithm::ParameterServer => {
                    "rank 0 receives and adds every rank's, sends the sum back".to_string()
                }
                _ => "MPI_Allreduce, the library's own algorithm".to_string(),
            };
            let batch = (reps > 1).then(|| format!(", timed in batches of {reps}"));
            format!("{size} on {k} ranks: {how}{}", batch.unwrap_or_default())
        };
        let labels = algorithms.iter().zip(&batches);
        let labels = labels.map(|(&a, &reps)| label(a, reps)).collect();
        let checks: Vec<Checked> = (0..algorithms.len()).map(|i| merged(&ranks, i)).collect();
        tally.size(&mut run, bytes, summaries, labels, &checks);
        for (i, &a) in algorithms.iter().enumerate() {
            let per_rank: Vec<f64> = ranks
                .iter()
                .filter_map(|r| r["median_s"][i].as_f64())
                .collect();
            let (stem, spread) = (a.key(bytes), Spread::of(&per_rank));
            let ends = spread.as_ref().map(|s| [s.min, s.avg, s.max]);
            for (i, end) in ["min", "avg", "max"].into_iter().enumerate() {
                let key = format!("{stem}_rank_{end}_s");
                match ends {
                    Some(values) => run.derive_as(&key, values[i], PER_RANK),
                    None => run.unmeasured_as(&key, PER_RANK, "no rank's median came back"),
                }
            }
            if let Some(s) = spread.filter(|s| s.max > STRAGGLER * s.min) {
                stragglers.push(format!(
                    "{}: rank {} {} to rank {} {}",
                    a.variant(bytes),
                    s.slowest,
                    crate::units::human_time(s.max),
                    s.fastest,
                    crate::units::human_time(s.min)
                ));
            }
        }
    }
    if rank != 0 {
        // The report is rank 0's to write.
        return Ok(run);
    }
    // Each rank adds and copies on its own thread.
    let rank = DeviceRecord {
        kind: Kind::Rank,
        threads: 1,
        standing_in: false,
    };
    run.device_records = vec![rank; hosts.len()];
    run.devices = hosts
        .iter()
        .enumerate()
        .map(|(r, host)| format!("rank {r} ({host})"))
        .collect();
    collective::note_unlaunched(&mut run, place.launched);
    if !stragglers.is_empty() {
        run.notes.push(format!(
            "the ranks' medians differ by more than {STRAGGLER}× (a straggler, or ranks \
             sharing cores with other work): {}",
            stragglers.join("; ")
        ));
    }
    let largest = cfg.sizes.last().copied();
    tally.finish(&mut run);
    if let Some(bytes) = largest.filter(|_| k > 1) {
        let library = Estimate::of(&run, &Algorithm::MpiAllreduce.variant(bytes));
        let ring = Estimate::of(&run, &Algorithm::Ring.variant(bytes));
        run.explanation
            .push(library_against_ring(bytes, library, ring));
    }
    Ok(run)
}

/// The per-rank medians of one variant: least, mean, most, and who.
struct Spread {
    min: f64,
    avg: f64,
    max: f64,
    fastest: usize,
    slowest: usize,
}

impl Spread {
    fn of(medians: &[f64]) -> Option<Spread> {
        // The first of equals, either way.
        let ranked = || medians.iter().copied().enumerate();
        let (fastest, min) = ranked().min_by(|a, b| a.1.total_cmp(&b.1))?;
        let (slowest, max) = ranked().min_by(|a, b| b.1.total_cmp(&a.1))?;
        Some(Spread {
            min,
            avg: medians.iter().sum::<f64>() / medians.len() as f64,
            max,
            fastest,
            slowest,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_fill_the_target_within_bounds() {
        assert_eq!(batch(1.0), 1);
        assert_eq!(batch(0.001), 2);
        assert_eq!(batch(1e-5), 200);
        assert_eq!(batch(1e-12), MAX_BATCH);
        assert_eq!(batch(0.0), 1);
        assert_eq!(batch(f64::NAN), 1);
    }

    #[test]
    fn checks_merge_over_ranks_and_a_missing_rank_is_wrong() {
        let ranks = vec![
            json!({"checked": [[0, 10, 1e-7], [1, 10, 0.5]]}),
            json!({"checked": [[0, 10, 2e-7], [0, 10, 1e-8]]}),
        ];
        let ring = merged(&ranks, 0);
        assert_eq!((ring.wrong, ring.checked), (0, 20));
        assert!((ring.max_error - 2e-7).abs() < 1e-12);
        assert_eq!(merged(&ranks, 1).wrong, 1);
        let broken = vec![json!({"checked": [[0, 10, 0.0]]}), Value::Null];
        assert_eq!(merged(&broken, 0).wrong, 1);
    }

    #[test]
    fn the_spread_names_the_fastest_and_slowest_rank() {
        let s = Spread::of(&[2.0, 1.0, 3.0]).expect("three ranks");
        assert_eq!((s.min, s.avg, s.max), (1.0, 2.0, 3.0));
        assert_eq!((s.fastest, s.slowest), (1, 2));
        assert!(Spread::of(&[]).is_none());
    }
}
