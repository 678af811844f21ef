//! The engine backend (`--backend engine`): data-parallel training inside one process, k CPU
//! devices of one engine, every step's gradients, all-reduce and updates pushed as engine ops,
//! ordered by the vars they read and write (as MXNet's KVStore orders them on its engine).
//! [`measure`](super::measure) times these runs.
//!
//! - `one-device`: the whole global batch on device 0, a step per op (the baseline);
//! - `parameter-server`: each device's shard gradient, then a `reduce` onto device 0, one
//!   `update` there, and a `broadcast` of the new parameters to every other device;
//! - `ring`: the gradient buffer cut into k chunks; `reduce-scatter` (k − 1 steps, each device
//!   adding the chunk its left neighbour sent into its own), then `all-gather` (k − 1 steps
//!   passing the reduced chunks on), then every device updates its own replica;
//! - `ring-overlapped` (as PyTorch's DistributedDataParallel): the gradient computed as a
//!   `forward` op and a `backward` op per layer, last layer first, into buckets of whole layers
//!   ([`buckets`]); each bucket's ring is pushed as soon as its layers' ops are, on the
//!   devices' copy lanes, so it runs while the compute lanes go on with the layers below;
//! - `async`: each device pulls the parameters, computes its shard's gradient and pushes its
//!   update on its own (a parameter server without a barrier); staleness counted.
//!
//! Each chunk of each device's gradient is a var of its own ([`Chunked`]), so the ring's steps
//! on different chunks run at once on different devices, as on real links. Buffers live in a
//! [`Workspace`] per scheme, reused by every run: fresh multi-megabyte buffers would page
//! fault on every run.

use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use super::mlp::{forward, gradient, sgd, Forward};
use super::training::{buckets, shard, Bucket, LossEntry, Trained};
use super::{CollectiveLane, Setup, Timed};
use crate::device::Runtime;
use crate::engine::{LaneId, OpError, Var};
use crate::scenario::collective::{self, Chunked, Replica};

fn poisoned() -> OpError {
    OpError::msg("a training buffer was poisoned by a failed op")
}

/// One device's buffers: its parameter replica (for `async`, its pulled copy) and its gradient
/// in the workspace's buckets (one but for `ring-overlapped`), each in the all-reduce's chunks,
/// a var each; `ring-overlapped` keeps its forward pass between the ops of the backward pass
/// in `pass`.
struct DeviceBuffers {
    /// The model's weights (its parameters) that engine ops share, ordered by `weights_var`.
    /// Readers (a gradient and a broadcast of the same replica) run at once, so the lock is a
    /// read-write one.
    weights: Arc<RwLock<Vec<f32>>>,
    weights_var: Var,
    buckets: Vec<Replica>,
    pass: Arc<Mutex<Option<Forward>>>,
    pass_var: Var,
}

/// A scheme's buffers on every device, reused by each of its runs.
pub struct Workspace {
    scheme: Timed,
    devices: Vec<DeviceBuffers>,
    /// The gradient's buckets, in the backward order: the whole model in one but for
    /// `ring-overlapped`.
    plan: Vec<Bucket>,
    /// A planted bug for the tests: each bucket's all-reduce pushed before its gradient.
    reduce_early: bool,
    /// `async`: the server's parameters, and the log of every update's staleness, whose length
    /// is the server's update count (both only touched with the parameters locked).
    server: Arc<Mutex<Vec<f32>>>,
    server_var: Var,
    staleness: Arc<Mutex<Vec<u64>>>,
    log: Arc<Mutex<Vec<LossEntry>>>,
}

impl Workspace {
    /// The loss log of the last run (call after `wait_all`, before the next run).
    pub fn log(&self) -> Vec<LossEntry> {
        cloned(&self.log)
    }

    /// The last run's parameters, loss log and staleness (as [`log`](Self::log)).
    pub fn trained(&self) -> Trained {
        let weights = match self.scheme {
            Timed::Async => cloned(&self.server),
            _ => {
                let weights = self.devices[0].weights.read();
                weights.unwrap_or_else(|e| e.into_inner()).clone()
            }
        };
        Trained {
            weights,
            communication: None,
            log: self.log(),
            staleness: cloned(&self.staleness),
        }
    }
}

/// A copy of what `m` holds, poisoned or not (read once the ops are done).
fn cloned<T: Clone>(m: &Mutex<T>) -> T {
    m.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

impl Setup {
    pub fn workspace(&self, scheme: Timed) -> Workspace {
        let (n, k) = (self.initial.len(), self.devices);
        let used = if scheme == Timed::OneDevice { 1 } else { k };
        let cap = match scheme {
            Timed::RingOverlapped => self.bucket_bytes,
            _ => f64::INFINITY,
        };
        let plan = buckets(&self.layers, cap);
        let device = |_| DeviceBuffers {
            weights: Arc::new(RwLock::new(vec![0.0; n])),
            weights_var: Var::new(),
            buckets: plan
                .iter()
                .map(|b| Replica::zeros(b.range.len(), k))
                .collect(),
            pass: Arc::default(),
            pass_var: Var::new(),
        };
        let server = if scheme == Timed::Async { n } else { 0 };
        Workspace {
            scheme,
            devices: (0..used).map(device).collect(),
            plan,
            reduce_early: false,
            server: Arc::new(Mutex::new(vec![0.0; server])),
            server_var: Var::new(),
            staleness: Arc::default(),
            log: Arc::default(),
        }
    }

    /// Push one training run of the workspace's scheme onto `rt`'s devices; read it from the
    /// workspace once it has run.
    pub fn push(&self, rt: &Runtime, ws: &Workspace) {
        let start = Instant::now();
        let lane = |d: usize| rt.devices[d].compute;
        // Start from the initial parameters, logs empty: ops of their own, after whatever
        // the previous run left in flight.
        for (d, dev) in ws.devices.iter().enumerate() {
            let (p, init) = (dev.weights.clone(), self.initial.clone());
            let (log, staleness, server) =
                (ws.log.clone(), ws.staleness.clone(), ws.server.clone());
            // Device 0's load empties the logs (writing the server's var); the others' loads
            // read that var, so no op of this run logs before the logs are emptied.
            let first = d == 0;
            let (reads, writes): (Vec<&Var>, Vec<&Var>) = if first {
                (vec![], vec![&dev.weights_var, &ws.server_var])
            } else {
                (vec![&ws.server_var], vec![&dev.weights_var])
            };
            rt.engine.push("load", lane(d), &reads, &writes, move || {
                p.write().map_err(|_| poisoned())?.copy_from_slice(&init);
                if first {
                    log.lock().map_err(|_| poisoned())?.clear();
                    staleness.lock().map_err(|_| poisoned())?.clear();
                    let mut s = server.lock().map_err(|_| poisoned())?;
                    if !s.is_empty() {
                        s.copy_from_slice(&init);
                    }
                }
                Ok(())
            });
        }
        match ws.scheme {
            Timed::OneDevice => self.push_one_device(rt, ws, start),
            Timed::ParameterServer | Timed::Ring => self.push_synchronous(rt, ws, start),
            Timed::RingOverlapped => self.push_overlapped(rt, ws, start),
            Timed::Async => self.push_async(rt, ws, start),
            // Not among the engine's variants (`measure`'s list).
            _ => {}
        }
    }

    fn push_one_device(&self, rt: &Runtime, ws: &Workspace, start: Instant) {
        let engine = &rt.engine;
        let (dev, lane) = (&ws.devices[0], rt.devices[0].compute);
        for step in 0..self.steps {
            let (p, log) = (dev.weights.clone(), ws.log.clone());
            let (layers, data) = (self.layers.clone(), self.data.clone());
            let (batch, lr, g) = (self.batch, self.lr, dev.buckets[0].recv.clone());
            let writes = [&dev.weights_var];
            engine.push("step", lane, &[], &writes, move || {
                let mut p = p.write().map_err(|_| poisoned())?;
                let mut g = g.write_all()?;
                let rows = (step as usize * batch, batch);
                let loss = gradient(&layers, &p, &data, rows, batch as f32, &mut g);
                sgd(&mut p, &g, lr);
                let entry = LossEntry::since(start, step, loss * batch as f64, batch);
                record(&log, entry)
            });
        }
    }

    /// `parameter-server` and `ring`: per step, each device's shard gradient, written in place
    /// into its chunked buffer, then the all-reduce and the update(s).
    fn push_synchronous(&self, rt: &Runtime, ws: &Workspace, start: Instant) {
        let engine = &rt.engine;
        let (k, batch) = (self.devices, self.batch);
        let devs = &ws.devices;
        let lane = |d: usize| rt.devices[d].compute;
        let lanes: Vec<LaneId> = (0..k).map(lane).collect();
        for step in 0..self.steps {
            for (d, dev) in devs.iter().enumerate() {
                let (p, g) = (dev.weights.clone(), dev.buckets[0].recv.clone());
                let (layers, data, log) = (self.layers.clone(), self.data.clone(), ws.log.clone());
                let rows = shard(step, batch, k, d);
                let writes: Vec<&Var> = dev.buckets[0].vars.iter().collect();
                let reads = [&dev.weights_var];
                engine.push("gradient", lane(d), &reads, &writes, move || {
                    let p = p.read().map_err(|_| poisoned())?;
                    let mut g = g.write_all()?;
                    let loss = gradient(&layers, &p, &data, rows, batch as f32, &mut g);
                    let entry = LossEntry::since(start, step, loss * batch as f64, rows.1);
                    record(&log, entry)
                });
            }
            let replicas: Vec<Replica> = devs.iter().map(|d| d.buckets[0].clone()).collect();
            if ws.scheme == Timed::Ring {
                collective::push_ring(engine, &lanes, &replicas);
                for (d, dev) in devs.iter().enumerate() {
                    self.push_update(rt, lane(d), ws, dev);
                }
            } else {
                // Reduce every device's gradient onto device 0, update there, broadcast.
                collective::push_reduce(engine, lane(0), &replicas);
                self.push_update(rt, lane(0), ws, &devs[0]);
                for (d, dev) in devs.iter().enumerate().skip(1) {
                    let (src, dst) = (devs[0].weights.clone(), dev.weights.clone());
                    let (reads, writes) = ([&devs[0].weights_var], [&dev.weights_var]);
                    engine.push("broadcast", lane(d), &reads, &writes, move || {
                        let src = src.read().map_err(|_| poisoned())?;
                        dst.write().map_err(|_| poisoned())?.copy_from_slice(&src);
                        Ok(())
                    });
                }
            }
        }
    }

    /// `ring-overlapped`: per step, each device's forward op (its pass kept for the backward
    /// ops), then bucket by bucket (in the backward order) every device's backward ops of the
    /// bucket's layers, each written into its part of the bucket, followed at once by the
    /// bucket's ring on the copy lanes (or the compute lanes, `--collective-lane`), then each
    /// device's update. The engine runs a bucket's ring as soon as its layers' gradients are
    /// written, while the compute lanes go on with the next bucket's layers.
    fn push_overlapped(&self, rt: &Runtime, ws: &Workspace, start: Instant) {
        let engine = &rt.engine;
        let (k, batch) = (self.devices, self.batch);
        let lane = |d: usize| rt.devices[d].compute;
        let lanes: Vec<LaneId> = rt.devices[..k]
            .iter()
            .map(|d| match self.collective_lane {
                CollectiveLane::Copy => d.copy,
                CollectiveLane::Compute => d.compute,
            })
            .collect();
        let ring = |b: usize| {
            let replicas: Vec<Replica> = ws.devices.iter().map(|d| d.buckets[b].clone()).collect();
            collective::push_ring(engine, &lanes, &replicas);
        };
        for step in 0..self.steps {
            for (d, dev) in ws.devices.iter().enumerate() {
                let (p, pass) = (dev.weights.clone(), dev.pass.clone());
                let (layers, data, log) = (self.layers.clone(), self.data.clone(), ws.log.clone());
                let rows = shard(step, batch, k, d);
                let (reads, writes) = ([&dev.weights_var], [&dev.pass_var]);
                engine.push("forward", lane(d), &reads, &writes, move || {
                    let p = p.read().map_err(|_| poisoned())?;
                    let f = forward(&layers, &p, &data, rows, batch as f32);
                    let loss = f.loss * batch as f64;
                    *pass.lock().map_err(|_| poisoned())? = Some(f);
                    record(&log, LossEntry::since(start, step, loss, rows.1))
                });
            }
            if ws.reduce_early {
                (0..ws.plan.len()).for_each(ring);
            }
            for (b, bucket) in ws.plan.iter().enumerate() {
                for (d, dev) in ws.devices.iter().enumerate() {
                    for &l in &bucket.layers {
                        let (p, pass) = (dev.weights.clone(), dev.pass.clone());
                        let (g, layers) = (dev.buckets[b].recv.clone(), self.layers.clone());
                        let at = self.layers.range(l);
                        let at = at.start - bucket.range.start..at.end - bucket.range.start;
                        let mut writes: Vec<&Var> = vec![&dev.pass_var];
                        writes.extend(&dev.buckets[b].vars);
                        let reads = [&dev.weights_var];
                        engine.push("backward", lane(d), &reads, &writes, move || {
                            let p = p.read().map_err(|_| poisoned())?;
                            let mut pass = pass.lock().map_err(|_| poisoned())?;
                            let Some(f) = pass.as_mut().filter(|f| f.next_layer() == Some(l))
                            else {
                                return Err(OpError::msg(format!(
                                    "backward step on layer {l} out of order: the ops' vars do \
                                     not order them"
                                )));
                            };
                            let mut g = g.write_all()?;
                            f.backward(&layers, &p, l, &mut g[at.clone()]);
                            if f.next_layer().is_none() {
                                // Freed now, as `gradient` frees its pass, so the next step's
                                // forward reuses the memory rather than fault in fresh pages.
                                *pass = None;
                            }
                            Ok(())
                        });
                    }
                }
                if !ws.reduce_early {
                    ring(b);
                }
            }
            for (d, dev) in ws.devices.iter().enumerate() {
                self.push_update(rt, lane(d), ws, dev);
            }
        }
    }

    /// `weights -= lr · reduced gradient` on one replica, bucket by bucket (one but for
    /// `ring-overlapped`), each at its offset in the parameters.
    fn push_update(&self, rt: &Runtime, lane: LaneId, ws: &Workspace, dev: &DeviceBuffers) {
        let engine = &rt.engine;
        let (p, lr) = (dev.weights.clone(), self.lr);
        let parts = ws.plan.iter().zip(&dev.buckets);
        let parts: Vec<(usize, Arc<Chunked>)> = parts
            .map(|(b, r)| (b.range.start, r.recv.clone()))
            .collect();
        let reads: Vec<&Var> = dev.buckets.iter().flat_map(|r| &r.vars).collect();
        let writes = [&dev.weights_var];
        engine.push("update", lane, &reads, &writes, move || {
            let mut p = p.write().map_err(|_| poisoned())?;
            for (at, g) in &parts {
                for c in 0..g.chunks() {
                    let r = g.range(c);
                    sgd(&mut p[at + r.start..at + r.end], &g.read(c)?, lr);
                }
            }
            Ok(())
        });
    }

    fn push_async(&self, rt: &Runtime, ws: &Workspace, start: Instant) {
        let engine = &rt.engine;
        let k = self.devices;
        for (d, dev) in ws.devices.iter().enumerate() {
            let lane = rt.devices[d].compute;
            for step in 0..self.steps {
                let (server, local) = (ws.server.clone(), dev.weights.clone());
                let g = dev.buckets[0].recv.clone();
                let (layers, data) = (self.layers.clone(), self.data.clone());
                let (log, staleness) = (ws.log.clone(), ws.staleness.clone());
                let (batch, lr) = (self.batch, self.lr);
                let rows = shard(step, batch, k, d);
                // Each device's steps in order (its replica's var); all after the load.
                let (reads, writes) = ([&ws.server_var], [&dev.weights_var]);
                engine.push("async step", lane, &reads, &writes, move || {
                    let mut local = local.write().map_err(|_| poisoned())?;
                    // Pull: whatever the server holds now.
                    let seen = {
                        let s = server.lock().map_err(|_| poisoned())?;
                        local.copy_from_slice(&s);
                        staleness.lock().map_err(|_| poisoned())?.len()
                    };
                    let mut g = g.write_all()?;
                    let loss = gradient(&layers, &local, &data, rows, batch as f32, &mut g);
                    // Push: the server applies it at once, whatever happened meanwhile.
                    // The entry is timed under the server's lock, so a later update
                    // never carries an earlier time than the one before it.
                    let entry = {
                        let mut s = server.lock().map_err(|_| poisoned())?;
                        sgd(&mut s, &g, lr);
                        let mut log = staleness.lock().map_err(|_| poisoned())?;
                        let stale = (log.len() - seen) as u64;
                        log.push(stale);
                        let update = log.len() as u64 - 1;
                        LossEntry::since(start, update, loss * batch as f64, rows.1)
                    };
                    record(&log, entry)
                });
            }
        }
    }
}

/// Append a loss entry.
fn record(log: &Mutex<Vec<LossEntry>>, entry: LossEntry) -> Result<(), OpError> {
    log.lock().map_err(|_| poisoned())?.push(entry);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::mlp::{Dataset, Layers};
    use super::super::training::{agrees, curve};
    use super::*;
    use crate::device::RuntimeOptions;

    fn setup(devices: usize, steps: u64) -> Setup {
        let layers = Layers(vec![12, 16, 8, 4]);
        Setup {
            data: Arc::new(Dataset::new(96, 12, 4, 5)),
            initial: Arc::new(layers.initial_parameters(5)),
            layers,
            devices,
            batch: 24,
            steps,
            lr: 0.2,
            // Two buckets: the last two layers (688 bytes), then the first (832).
            bucket_bytes: 600.0,
            collective_lane: CollectiveLane::Copy,
        }
    }

    /// Sequential SGD on the sum of the shards' gradients: what every synchronous scheme must
    /// compute, whatever order the engine runs its ops in.
    fn reference(s: &Setup) -> Vec<f32> {
        let mut p = s.initial.to_vec();
        let (mut g, mut sum) = (vec![0f32; p.len()], vec![0f32; p.len()]);
        for step in 0..s.steps {
            sum.fill(0.0);
            for d in 0..s.devices {
                let rows = shard(step, s.batch, s.devices, d);
                gradient(&s.layers, &p, &s.data, rows, s.batch as f32, &mut g);
                sum.iter_mut().zip(&g).for_each(|(a, b)| *a += b);
            }
            sgd(&mut p, &sum, s.lr);
        }
        p
    }

    fn train(s: &Setup, ws: Workspace) -> Trained {
        let rt = Runtime::cpu(&RuntimeOptions::default(), &vec![1; s.devices]).expect("devices");
        // Twice on one workspace: the second run starts afresh.
        s.push(&rt, &ws);
        s.push(&rt, &ws);
        rt.engine.wait_all().expect("training runs");
        ws.trained()
    }

    #[test]
    fn every_synchronous_scheme_equals_sequential_sgd_on_any_number_of_devices() {
        for devices in [1, 2, 3, 5] {
            let mut s = setup(devices, 6);
            let want = reference(&s);
            let (copy, compute) = (CollectiveLane::Copy, CollectiveLane::Compute);
            for (scheme, cap, lane) in [
                (Timed::ParameterServer, 0.0, copy),
                (Timed::Ring, 0.0, copy),
                // A bucket per layer, two buckets, and the whole model in one, with the
                // collectives on either lane.
                (Timed::RingOverlapped, 0.0, copy),
                (Timed::RingOverlapped, 600.0, copy),
                (Timed::RingOverlapped, 1e9, copy),
                (Timed::RingOverlapped, 0.0, compute),
                (Timed::RingOverlapped, 600.0, compute),
            ] {
                (s.bucket_bytes, s.collective_lane) = (cap, lane);
                let got = train(&s, s.workspace(scheme));
                let (ok, rel) = agrees(&want, &got.weights);
                assert!(
                    ok,
                    "{scheme:?} (cap {cap}, {lane:?}) on {devices} devices: {rel:e}"
                );
                // A point per step, each the loss of the step's whole batch.
                let c = curve(&got.log, s.batch);
                assert_eq!(c.len(), 6, "{scheme:?} on {devices}");
                assert!(c.iter().all(|p| p[1].is_finite() && p[1] > 0.0));
            }
        }
        // One device on whole batches is the same SGD.
        let s = setup(3, 6);
        let one = train(&s, s.workspace(Timed::OneDevice));
        assert!(agrees(&reference(&s), &one.weights).0);
    }

    #[test]
    fn a_wrong_schedule_fails_the_check() {
        // The planted bug: each bucket's ring reduces the buffer before the backward pass
        // writes it, so every device updates with its own shard's gradient alone.
        let s = setup(2, 6);
        let mut ws = s.workspace(Timed::RingOverlapped);
        ws.reduce_early = true;
        let got = train(&s, ws);
        let (ok, rel) = agrees(&reference(&s), &got.weights);
        assert!(!ok, "{rel:e}");
        // It would catch a ring that lost a device's shard: training without it is far from
        // the reference.
        let s = setup(3, 6);
        let mut fewer = setup(3, 6);
        fewer.batch = 16;
        assert!(!agrees(&reference(&s), &reference(&fewer)).0);
    }

    #[test]
    fn asynchronous_training_counts_every_update_and_its_staleness() {
        let s = setup(3, 5);
        let t = train(&s, s.workspace(Timed::Async));
        assert_eq!(t.staleness.len(), 15);
        assert_eq!(t.log.len(), 15);
        // No update can be older than the other devices' updates since its pull.
        assert!(t.staleness.iter().all(|&v| v < 15));
        let mut updates: Vec<u64> = t.log.iter().map(|e| e.update).collect();
        updates.sort_unstable();
        assert_eq!(updates, (0..15).collect::<Vec<_>>());
        // A later update is never timed before an earlier one (the loss curve's time axis).
        let mut log = t.log.clone();
        log.sort_by_key(|e| e.update);
        assert!(log.windows(2).all(|w| w[0].seconds <= w[1].seconds));
        assert!(t.weights.iter().all(|v| v.is_finite()));
        assert_ne!(t.weights, *s.initial);
    }
}
