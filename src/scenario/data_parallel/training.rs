//! What a training run leaves and how it is read: the loss log and its curve, the time to a
//! target loss, the shard of a batch each device takes, the buckets the overlapped variants
//! all-reduce the gradients in, whether two runs' parameters agree, and communication's share
//! of a traced run.

use std::ops::Range;
use std::sync::Mutex;
use std::time::Instant;

use super::mlp::Layers;
use crate::engine::trace::TraceRecord;
use crate::harness::Summary;

/// One loss measurement: the summed loss of `rows` rows at update `update`, `seconds` after
/// the run started.
#[derive(Clone, Debug, PartialEq)]
pub struct LossEntry {
    pub update: u64,
    pub loss_sum: f64,
    pub rows: usize,
    pub seconds: f64,
}

impl LossEntry {
    /// The loss of `rows` rows at `update`, measured now: `seconds` since `start`.
    pub fn since(start: Instant, update: u64, loss_sum: f64, rows: usize) -> LossEntry {
        LossEntry {
            update,
            loss_sum,
            rows,
            seconds: start.elapsed().as_secs_f64(),
        }
    }
}

/// What one training run left: the final parameters, its loss log and (asynchronous runs) how
/// many updates old each gradient's parameters were.
#[derive(Clone, Debug, Default)]
pub struct Trained {
    pub weights: Vec<f32>,
    /// MPI runs: the share of rank 0's run spent in its all-reduce calls (waits included).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub communication: Option<f64>,
    pub log: Vec<LossEntry>,
    pub staleness: Vec<u64>,
}

/// Shard `s` of `k` of the global batch at `step`: (start row, rows).
pub fn shard(step: u64, batch: usize, k: usize, s: usize) -> (usize, usize) {
    let per = batch / k + usize::from(s < batch % k);
    let before: usize = (0..s).map(|t| batch / k + usize::from(t < batch % k)).sum();
    (step as usize * batch + before, per)
}

/// Gradients all-reduced together: a run of whole layers, in the order the backward pass
/// computes them (last layer first).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bucket {
    /// Its layers, last first.
    pub layers: Vec<usize>,
    /// Its part of the flat parameter vector.
    pub range: Range<usize>,
}

/// The layers' gradients in buckets as PyTorch's DDP makes them: in the backward order, a
/// layer never split, a bucket closed once it holds `cap_bytes` or more (so every layer is
/// alone in its bucket at a cap of 0, and the whole model is one bucket at a cap above it).
pub fn buckets(layers: &Layers, cap_bytes: f64) -> Vec<Bucket> {
    let mut done = Vec::new();
    let mut open: Option<Bucket> = None;
    for l in (0..layers.count()).rev() {
        let range = layers.range(l);
        let b = open.get_or_insert_with(|| Bucket {
            layers: Vec::new(),
            range: range.clone(),
        });
        b.layers.push(l);
        b.range.start = range.start;
        if 4.0 * b.range.len() as f64 >= cap_bytes {
            done.extend(open.take());
        }
    }
    done.extend(open);
    done
}

/// Parameters equal within float32 summation-order tolerance: the norm of the difference
/// relative to the norm of the reference. Shards summed in another order round differently and
/// ReLU's kinks let that grow over steps. Measured on the default model (1.9 M parameters,
/// batch 512, lr 0.1; `calibrate_agreement` below): 2 and 4 devices differ from one by 2.3e-8
/// after 20 steps and at most 8.1e-7 after 100; one device's gradient dropped from the last of
/// 100 steps gives 4.0e-5 (3.6e-4 of 20), a learning rate 1% off 1.4e-4.
pub fn agrees(reference: &[f32], got: &[f32]) -> (bool, f64) {
    let mut diff = 0f64;
    let mut norm = 0f64;
    for (a, b) in reference.iter().zip(got) {
        diff += f64::from(a - b).powi(2);
        norm += f64::from(*a).powi(2);
    }
    let relative = diff.sqrt() / norm.sqrt().max(1e-30);
    // NaN compares false: a diverged parameter fails.
    let ok = reference.len() == got.len() && relative <= AGREEMENT;
    // A NaN difference is reported as infinite (`min` returns the operand that is a number).
    (ok, relative.min(f64::INFINITY))
}

/// The largest relative difference [`agrees`] accepts.
pub const AGREEMENT: f64 = 2e-5;

/// A loss curve from a run's log: a point per update that closes a global batch's worth of
/// rows, `[update, mean loss over the latest batch rows, seconds]` (a synchronous step's
/// shards, or an asynchronous run's last k updates).
pub fn curve(log: &[LossEntry], batch: usize) -> Vec<[f64; 3]> {
    let mut entries = log.to_vec();
    entries.sort_by(|a, b| {
        a.update
            .cmp(&b.update)
            .then(a.seconds.total_cmp(&b.seconds))
    });
    let (mut points, mut end) = (Vec::new(), 0);
    for group in entries.chunk_by(|a, b| a.update == b.update) {
        end += group.len();
        let u = group[0].update;
        let seconds = group.iter().fold(0f64, |s, e| s.max(e.seconds));
        // The latest entries that cover a batch (at least this update's own).
        let (mut loss, mut rows) = (0.0, 0usize);
        for e in entries[..end].iter().rev() {
            if rows >= batch && e.update != u {
                break;
            }
            loss += e.loss_sum;
            rows += e.rows;
        }
        if rows >= batch || end == entries.len() {
            points.push([u as f64, loss / rows.max(1) as f64, seconds]);
        }
    }
    points
}

/// Each variant's runs while it is sampled: what its last run left, and every run's seconds
/// and loss log, so that a curve comes from the run nearest the median, not from whichever ran
/// last.
pub struct Runs<T> {
    last: Vec<Mutex<Option<T>>>,
    logs: Vec<Mutex<Vec<Logged>>>,
}

/// A run's seconds and its loss log.
type Logged = (f64, Vec<LossEntry>);

impl<T> Runs<T> {
    pub fn new(variants: usize) -> Runs<T> {
        Runs {
            last: (0..variants).map(|_| Mutex::new(None)).collect(),
            logs: (0..variants).map(|_| Mutex::new(Vec::new())).collect(),
        }
    }

    /// A run of variant `i`: it took `seconds`, logged `log` and left `last`.
    pub fn keep(&self, i: usize, seconds: f64, log: Vec<LossEntry>, last: T) {
        let logs = &mut self.logs[i].lock().unwrap_or_else(|e| e.into_inner());
        logs.push((seconds, log));
        *self.last[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(last);
    }

    /// What each variant's last run left, made [`Trained`] by `take`, with the loss log of
    /// its run nearest its median (`summaries`: one a variant, in order).
    pub fn trained(self, summaries: &[Summary], take: impl Fn(T) -> Trained) -> Vec<Trained> {
        fn inner<U>(m: Mutex<U>) -> U {
            m.into_inner().unwrap_or_else(|e| e.into_inner())
        }
        let runs = self.last.into_iter().zip(self.logs).zip(summaries);
        runs.map(|((last, logs), summary)| {
            let mut t = inner(last).map(&take).unwrap_or_default();
            if let Some(log) = nearest_to(summary.median_s, inner(logs)) {
                t.log = log;
            }
            t
        })
        .collect()
    }
}

/// Of `runs` (each a run's seconds and what it left), what the run nearest `median` seconds
/// left: the run a figure drawn from one run is read from, so it is the median run's, not an
/// outlier's. `None` when there is no run.
pub fn nearest_to<T>(median: f64, runs: Vec<(f64, T)>) -> Option<T> {
    runs.into_iter()
        .min_by(|a, b| (a.0 - median).abs().total_cmp(&(b.0 - median).abs()))
        .map(|(_, t)| t)
}

/// Seconds until the curve first reaches `target`, if it does.
pub fn time_to_target(curve: &[[f64; 3]], target: f64) -> Option<f64> {
    curve.iter().find(|p| p[1] <= target).map(|p| p[2])
}

/// At most `n` points of a curve, evenly spread, the last one kept.
pub(super) fn thin(curve: Vec<[f64; 3]>, n: usize) -> Vec<[f64; 3]> {
    if curve.len() <= n {
        return curve;
    }
    let stride = curve.len().div_ceil(n);
    let last = curve.len() - 1;
    curve
        .into_iter()
        .enumerate()
        .filter(|(i, _)| (last - i).is_multiple_of(stride))
        .map(|(_, p)| p)
        .collect()
}

/// A collective's op (everything else a traced training run runs is computation).
fn is_communication(r: &TraceRecord) -> bool {
    matches!(
        r.name.as_str(),
        "reduce" | "broadcast" | "reduce-scatter" | "all-gather"
    )
}

/// The share of the lanes' busy time that communication ops took in a traced run.
pub fn communication_share(records: &[TraceRecord]) -> f64 {
    let busy = |comm: bool| -> u64 {
        records
            .iter()
            .filter(|r| is_communication(r) == comm)
            .map(TraceRecord::duration_ns)
            .sum()
    };
    let (comm, compute) = (busy(true), busy(false));
    comm as f64 / (comm + compute).max(1) as f64
}

/// How a traced run's communication lay against its computation, in wall-clock time over all
/// lanes: `exposed_ns` while some collective ran and no computation did, `covered_ns` while
/// both did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Overlap {
    pub exposed_ns: u64,
    pub covered_ns: u64,
}

impl Overlap {
    /// The share of communication's wall-clock time that computation ran beside (0 when no
    /// communication ran).
    pub fn share(&self) -> f64 {
        self.covered_ns as f64 / (self.exposed_ns + self.covered_ns).max(1) as f64
    }
}

/// Sweep a traced run's ops in time: where communication ran alone and where computation ran
/// beside it. "Beside" is in the trace's time, not on the cores: two threads that share one
/// core both show as running.
pub fn communication_overlap(records: &[TraceRecord]) -> Overlap {
    // (time, +1 start / -1 end, communication?); ends before starts at the same instant.
    let mut events: Vec<(u64, i32, bool)> = records
        .iter()
        .filter(|r| r.duration_ns() > 0)
        .flat_map(|r| {
            let comm = is_communication(r);
            [(r.started_ns, 1, comm), (r.ended_ns, -1, comm)]
        })
        .collect();
    events.sort_unstable();
    let (mut comm, mut compute) = (0i32, 0i32);
    let mut out = Overlap::default();
    let mut last = events.first().map_or(0, |e| e.0);
    for (t, delta, is_comm) in events {
        let span = t - last;
        if comm > 0 {
            if compute > 0 {
                out.covered_ns += span;
            } else {
                out.exposed_ns += span;
            }
        }
        if is_comm {
            comm += delta;
        } else {
            compute += delta;
        }
        last = t;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::mlp::{self, Dataset, Layers};
    use super::super::SEED;
    use super::*;

    #[test]
    fn shards_cover_the_batch_exactly() {
        let covered: Vec<(usize, usize)> = (0..3).map(|s| shard(2, 10, 3, s)).collect();
        assert_eq!(covered, vec![(20, 4), (24, 3), (27, 3)]);
    }

    #[test]
    fn the_check_rejects_a_wrong_result() {
        let right = vec![0.5f32, -1.0, 0.25];
        assert!(agrees(&right, &right).0);
        assert!(agrees(&right, &[0.500_01, -1.0, 0.25]).0);
        assert!(!agrees(&right, &[0.5001, -1.0, 0.25]).0);
        // Diverged parameters (NaN) and a missing parameter never agree.
        assert!(!agrees(&right, &[f32::NAN, -1.0, 0.25]).0);
        assert!(!agrees(&right, &[0.5, -1.0]).0);
    }

    fn entry(update: u64, loss_sum: f64, rows: usize, seconds: f64) -> LossEntry {
        LossEntry {
            update,
            loss_sum,
            rows,
            seconds,
        }
    }

    #[test]
    fn a_curve_has_a_point_per_batch_of_updates() {
        // Two devices, batch 4: each step's two shards make its point.
        let log = vec![
            entry(0, 4.0, 2, 0.1),
            entry(0, 2.0, 2, 0.2),
            entry(1, 1.0, 2, 0.4),
            entry(1, 1.0, 2, 0.3),
        ];
        assert_eq!(curve(&log, 4), vec![[0.0, 1.5, 0.2], [1.0, 0.5, 0.4]]);
        assert_eq!(time_to_target(&curve(&log, 4), 1.0), Some(0.4));
        assert_eq!(time_to_target(&curve(&log, 4), 0.1), None);
        // The run nearest the median, an outlier beside it.
        let runs = vec![
            (0.40, "a"),
            (0.39, "median"),
            (0.90, "outlier"),
            (0.41, "b"),
        ];
        assert_eq!(nearest_to(0.392, runs), Some("median"));
        assert_eq!(nearest_to::<()>(1.0, vec![]), None);
        // Asynchronous, batch 4 in shards of 2: each point is the mean over the last two
        // updates.
        let log = vec![
            entry(0, 4.0, 2, 0.1),
            entry(1, 2.0, 2, 0.2),
            entry(2, 0.0, 2, 0.3),
        ];
        assert_eq!(curve(&log, 4), vec![[1.0, 1.5, 0.2], [2.0, 0.5, 0.3]]);
    }

    #[test]
    fn thinning_keeps_the_last_point() {
        let c: Vec<[f64; 3]> = (0..10).map(|i| [i as f64, 0.0, 0.0]).collect();
        let t = thin(c, 4);
        assert!(t.len() <= 4 && t.last() == Some(&[9.0, 0.0, 0.0]), "{t:?}");
    }

    fn span(name: &str, lane: usize, started_ns: u64, ended_ns: u64) -> TraceRecord {
        let mut op = crate::report::timeline::traced_op(lane, started_ns, ended_ns);
        op.name = name.into();
        op
    }

    #[test]
    fn overlap_counts_communication_alone_and_beside_computation() {
        // cpu:0 computes 0–100 and 150–200; the ring runs 80–120 and 140–190 on two lanes
        // at once (120–140 nothing runs): 20 + 10 ns alone, 20 + 40 beside.
        let records = vec![
            span("forward", 0, 0, 60),
            span("backward", 0, 60, 100),
            span("reduce-scatter", 1, 80, 120),
            span("all-gather", 2, 90, 110),
            span("backward", 0, 150, 200),
            span("reduce-scatter", 1, 140, 190),
        ];
        let o = communication_overlap(&records);
        assert_eq!((o.exposed_ns, o.covered_ns), (30, 60));
        assert!((o.share() - 60.0 / 90.0).abs() < 1e-12);
        // Communication after all computation is all exposed; none at all is no overlap.
        let serial = vec![span("backward", 0, 0, 10), span("all-gather", 0, 10, 25)];
        assert_eq!(communication_overlap(&serial).exposed_ns, 15);
        assert_eq!(communication_overlap(&serial).share(), 0.0);
        assert_eq!(communication_overlap(&[]).share(), 0.0);
    }

    #[test]
    fn communication_share_counts_the_collectives_only() {
        let records = vec![
            span("gradient", 0, 0, 70),
            span("update", 0, 0, 10),
            span("reduce-scatter", 0, 0, 10),
            span("all-gather", 0, 0, 10),
        ];
        assert_eq!(communication_share(&records), 0.2);
        assert_eq!(communication_share(&[]), 0.0);
    }

    /// How `agrees`' tolerance was chosen: how far correct runs and slightly wrong ones land
    /// from one-device SGD on the default model (a minute of a release build):
    /// `cargo test --release --lib calibrate_agreement -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn calibrate_agreement() {
        let layers = Layers(vec![784, 1024, 1024, 10]);
        let data = Dataset::new(8192, 784, 10, SEED);
        let init = layers.initial_parameters(SEED);
        let batch = 512;
        let train = |k: usize, lr: f32, drop: Option<u64>, steps: u64| {
            let (mut p, mut g, mut sum) =
                (init.clone(), vec![0f32; init.len()], vec![0f32; init.len()]);
            for step in 0..steps {
                sum.fill(0.0);
                for s in (0..k).filter(|&s| drop != Some(step) || s != 1) {
                    let rows = shard(step, batch, k, s);
                    mlp::gradient(&layers, &p, &data, rows, batch as f32, &mut g);
                    sum.iter_mut().zip(&g).for_each(|(a, b)| *a += b);
                }
                mlp::sgd(&mut p, &sum, lr);
            }
            p
        };
        for steps in [20, 100] {
            let one = train(1, 0.1, None, steps);
            for (what, p) in [
                ("2 devices", train(2, 0.1, None, steps)),
                ("4 devices", train(4, 0.1, None, steps)),
                (
                    "one gradient dropped, last step",
                    train(2, 0.1, Some(steps - 1), steps),
                ),
                ("learning rate 1% off", train(1, 0.101, None, steps)),
            ] {
                println!("{steps} steps, {what}: {:.2e}", agrees(&one, &p).1);
            }
        }
    }

    #[test]
    fn buckets_hold_whole_layers_in_the_backward_order_and_close_at_the_cap() {
        let layers = Layers(vec![12, 16, 8, 4]);
        let (l0, l1, l2) = (layers.range(0), layers.range(1), layers.range(2));
        let b = |layers: &[usize], range: Range<usize>| Bucket {
            layers: layers.to_vec(),
            range,
        };
        assert_eq!(
            buckets(&layers, 0.0),
            [
                b(&[2], l2.clone()),
                b(&[1], l1.clone()),
                b(&[0], l0.clone())
            ]
        );
        // 144 bytes, then 688 ≥ 600 closes the first bucket.
        assert_eq!(
            buckets(&layers, 600.0),
            [b(&[2, 1], l1.start..l2.end), b(&[0], l0.clone())]
        );
        assert_eq!(buckets(&layers, 1e9), [b(&[2, 1, 0], 0..l2.end)]);
        // The default model at PyTorch's 25 MB: 7.1 MiB of gradients, one bucket; at 1 MB
        // the last two layers close the first.
        let default = Layers(vec![784, 1024, 1024, 10]);
        assert_eq!(buckets(&default, 25.0 * 1048576.0).len(), 1);
        let small = buckets(&default, 1048576.0);
        assert_eq!(
            small.iter().map(|b| b.layers.clone()).collect::<Vec<_>>(),
            [vec![2, 1], vec![0]]
        );
    }
}
