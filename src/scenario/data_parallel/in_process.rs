//! Data-parallel training inside one process: k CPU devices of one engine, every step's
//! gradients, all-reduce and updates pushed as engine ops, ordered by the vars they read and
//! write (as MXNet's KVStore orders them on its engine).
//!
//! - `one-device`: the whole global batch on device 0, a step per op (the baseline);
//! - `parameter-server`: each device's shard gradient, then a `reduce` onto device 0, one
//!   `update` there, and a `broadcast` of the new parameters to every other device;
//! - `ring`: the gradient buffer cut into k chunks; `reduce-scatter` (k − 1 steps, each device
//!   adding the chunk its left neighbour sent into its own), then `all-gather` (k − 1 steps
//!   passing the reduced chunks on), then every device updates its own replica;
//! - `async`: each device pulls the parameters, computes its shard's gradient and pushes its
//!   update on its own (a parameter server without a barrier); staleness counted.
//!
//! Each chunk of each device's gradient buffer is a var of its own, so the ring's steps on
//! different chunks run at once on different devices, as on real links.

use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use super::mlp::{gradient, sgd, Dataset, Layers};
use super::{shard, LossEntry, Trained};
use crate::device::Runtime;
use crate::engine::{OpError, Var};

/// The in-process synchronization schemes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    OneDevice,
    ParameterServer,
    Ring,
    Async,
}

/// What every variant trains with.
pub struct Setup {
    pub layers: Layers,
    pub data: Arc<Dataset>,
    pub initial: Arc<Vec<f32>>,
    pub devices: usize,
    pub batch: usize,
    pub steps: u64,
    pub lr: f32,
}

/// A buffer that engine ops share, ordered by its var: an op locks it only while the engine
/// lets it run, so the lock is never contended.
#[derive(Clone)]
struct Shared {
    var: Var,
    data: Arc<Mutex<Vec<f32>>>,
}

impl Shared {
    fn new(data: Vec<f32>) -> Shared {
        Shared {
            var: Var::new(),
            data: Arc::new(Mutex::new(data)),
        }
    }

    fn lock(&self) -> Result<MutexGuard<'_, Vec<f32>>, OpError> {
        self.data
            .lock()
            .map_err(|_| OpError::msg("a training buffer was poisoned by a failed op"))
    }
}

/// Chunk `c` of `k` of `n` parameters.
pub fn chunk(n: usize, k: usize, c: usize) -> Range<usize> {
    c * n / k..(c + 1) * n / k
}

/// One device's state in a synchronous run: its parameter replica and its gradient buffer,
/// cut into the chunks the all-reduce moves.
struct Replica {
    params: Shared,
    grads: Vec<Shared>,
}

/// A pushed training run; read it after the engine has finished it.
pub struct Pending {
    params: Arc<Mutex<Vec<f32>>>,
    log: Arc<Mutex<Vec<LossEntry>>>,
    staleness: Arc<Mutex<Vec<u64>>>,
}

impl Pending {
    /// The trained parameters, loss log and staleness (call after `wait_all`).
    pub fn take(&self) -> Trained {
        let get = |m: &Mutex<Vec<f32>>| m.lock().unwrap_or_else(|e| e.into_inner()).clone();
        Trained {
            params: get(&self.params),
            log: self.log.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            staleness: self
                .staleness
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }
}

/// Per-device gradient scratch, reused by every run (a fresh multi-megabyte buffer would page
/// fault on every step); only one op of a device uses it at a time, and its lock says so.
pub struct Scratch(Vec<Arc<Mutex<Vec<f32>>>>);

impl Scratch {
    pub fn new(devices: usize, parameters: usize) -> Scratch {
        Scratch(
            (0..devices)
                .map(|_| Arc::new(Mutex::new(vec![0f32; parameters])))
                .collect(),
        )
    }
}

fn poisoned() -> OpError {
    OpError::msg("a training buffer was poisoned by a failed op")
}

impl Setup {
    /// Push one training run of `scheme` onto `rt`'s devices.
    pub fn push(&self, rt: &Runtime, scheme: Scheme, scratch: &Scratch) -> Pending {
        let log = Arc::new(Mutex::new(Vec::new()));
        let staleness = Arc::new(Mutex::new(Vec::new()));
        let start = Instant::now();
        let params = match scheme {
            Scheme::OneDevice => self.push_one_device(rt, scratch, &log, start),
            Scheme::ParameterServer | Scheme::Ring => {
                self.push_synchronous(rt, scheme, scratch, &log, start)
            }
            Scheme::Async => self.push_async(rt, scratch, &log, &staleness, start),
        };
        Pending {
            params,
            log,
            staleness,
        }
    }

    fn push_one_device(
        &self,
        rt: &Runtime,
        scratch: &Scratch,
        log: &Arc<Mutex<Vec<LossEntry>>>,
        start: Instant,
    ) -> Arc<Mutex<Vec<f32>>> {
        let params = Shared::new(self.initial.to_vec());
        for step in 0..self.steps {
            let (p, g, log) = (params.clone(), scratch.0[0].clone(), log.clone());
            let (layers, data) = (self.layers.clone(), self.data.clone());
            let (batch, lr) = (self.batch, self.lr);
            rt.engine.push(
                "step",
                rt.devices[0].compute,
                &[],
                &[&params.var],
                move || {
                    let mut p = p.lock()?;
                    let mut g = g.lock().map_err(|_| poisoned())?;
                    let rows = (step as usize * batch, batch);
                    let loss = gradient(&layers, &p, &data, rows, batch as f32, &mut g);
                    sgd(&mut p, &g, lr);
                    record(&log, step, loss * batch as f64, batch, start)
                },
            );
        }
        params.data
    }

    fn push_synchronous(
        &self,
        rt: &Runtime,
        scheme: Scheme,
        scratch: &Scratch,
        log: &Arc<Mutex<Vec<LossEntry>>>,
        start: Instant,
    ) -> Arc<Mutex<Vec<f32>>> {
        let (k, n) = (self.devices, self.initial.len());
        let replicas: Vec<Replica> = (0..k)
            .map(|_| Replica {
                params: Shared::new(self.initial.to_vec()),
                grads: (0..k)
                    .map(|c| Shared::new(vec![0f32; chunk(n, k, c).len()]))
                    .collect(),
            })
            .collect();
        let lane = |d: usize| rt.devices[d].compute;
        for step in 0..self.steps {
            for (d, r) in replicas.iter().enumerate() {
                self.push_gradient(rt, step, d, r, &scratch.0[d], log, start);
            }
            match scheme {
                Scheme::Ring => {
                    // Reduce-scatter: at step t device i sends chunk (i - t) mod k to i + 1,
                    // which adds it to its own; after k - 1 steps device i holds the sum of
                    // chunk (i + 1) mod k. All-gather: device i passes chunk (i + 1 - t) mod k
                    // on, and the receiver keeps it.
                    for (name, add, shift) in
                        [("reduce-scatter", true, 0), ("all-gather", false, 1)]
                    {
                        for t in 0..k.saturating_sub(1) {
                            for i in 0..k {
                                let to = (i + 1) % k;
                                let c = (i + shift + k - t) % k;
                                let (src, dst) =
                                    (replicas[i].grads[c].clone(), replicas[to].grads[c].clone());
                                rt.engine.push(
                                    name,
                                    lane(to),
                                    &[&replicas[i].grads[c].var],
                                    &[&replicas[to].grads[c].var],
                                    move || {
                                        let (s, mut d) = (src.lock()?, dst.lock()?);
                                        if add {
                                            d.iter_mut().zip(s.iter()).for_each(|(d, s)| *d += s);
                                        } else {
                                            d.copy_from_slice(&s);
                                        }
                                        Ok(())
                                    },
                                );
                            }
                        }
                    }
                    for (d, r) in replicas.iter().enumerate() {
                        self.push_update(rt, lane(d), r);
                    }
                }
                _ => {
                    // Reduce every device's gradient onto device 0, update there, broadcast.
                    let all: Vec<Shared> = replicas.iter().flat_map(|r| r.grads.clone()).collect();
                    let reads: Vec<&Var> = replicas[1..]
                        .iter()
                        .flat_map(|r| r.grads.iter().map(|g| &g.var))
                        .collect();
                    let writes: Vec<&Var> = replicas[0].grads.iter().map(|g| &g.var).collect();
                    rt.engine.push("reduce", lane(0), &reads, &writes, move || {
                        for c in 0..k {
                            let mut sum = all[c].lock()?;
                            for d in 1..k {
                                let g = all[d * k + c].lock()?;
                                sum.iter_mut().zip(g.iter()).for_each(|(s, g)| *s += g);
                            }
                        }
                        Ok(())
                    });
                    self.push_update(rt, lane(0), &replicas[0]);
                    for (d, r) in replicas.iter().enumerate().skip(1) {
                        let (src, dst) = (replicas[0].params.clone(), r.params.clone());
                        rt.engine.push(
                            "broadcast",
                            lane(d),
                            &[&replicas[0].params.var],
                            &[&r.params.var],
                            move || {
                                dst.lock()?.copy_from_slice(&src.lock()?);
                                Ok(())
                            },
                        );
                    }
                }
            }
        }
        replicas[0].params.data.clone()
    }

    /// Device `d`'s shard gradient at `step`, packed into its chunks (as Horovod packs
    /// gradients into one fusion buffer before the all-reduce).
    #[allow(clippy::too_many_arguments)]
    fn push_gradient(
        &self,
        rt: &Runtime,
        step: u64,
        d: usize,
        r: &Replica,
        scratch: &Arc<Mutex<Vec<f32>>>,
        log: &Arc<Mutex<Vec<LossEntry>>>,
        start: Instant,
    ) {
        let (k, n, batch) = (self.devices, self.initial.len(), self.batch);
        let (p, grads, g) = (r.params.clone(), r.grads.clone(), scratch.clone());
        let (layers, data, log) = (self.layers.clone(), self.data.clone(), log.clone());
        let rows = shard(step, batch, k, d);
        let writes: Vec<&Var> = r.grads.iter().map(|g| &g.var).collect();
        rt.engine.push(
            "gradient",
            rt.devices[d].compute,
            &[&r.params.var],
            &writes,
            move || {
                let mut g = g.lock().map_err(|_| poisoned())?;
                let loss = gradient(&layers, &p.lock()?, &data, rows, batch as f32, &mut g);
                for (c, chunk_buf) in grads.iter().enumerate() {
                    chunk_buf.lock()?.copy_from_slice(&g[chunk(n, k, c)]);
                }
                record(&log, step, loss * batch as f64, rows.1, start)
            },
        );
    }

    /// `params -= lr · reduced gradient` on one replica.
    fn push_update(&self, rt: &Runtime, lane: crate::engine::LaneId, r: &Replica) {
        let (k, n, lr) = (self.devices, self.initial.len(), self.lr);
        let (p, grads) = (r.params.clone(), r.grads.clone());
        let reads: Vec<&Var> = r.grads.iter().map(|g| &g.var).collect();
        rt.engine
            .push("update", lane, &reads, &[&r.params.var], move || {
                let mut p = p.lock()?;
                for (c, g) in grads.iter().enumerate() {
                    sgd(&mut p[chunk(n, k, c)], &g.lock()?, lr);
                }
                Ok(())
            });
    }

    fn push_async(
        &self,
        rt: &Runtime,
        scratch: &Scratch,
        log: &Arc<Mutex<Vec<LossEntry>>>,
        staleness: &Arc<Mutex<Vec<u64>>>,
        start: Instant,
    ) -> Arc<Mutex<Vec<f32>>> {
        let k = self.devices;
        // The server's parameters; its update count is the length of the staleness log, which
        // is only touched with the parameters locked (lock order: parameters, then log).
        let server = Arc::new(Mutex::new(self.initial.to_vec()));
        let pulled: Vec<Arc<Mutex<Vec<f32>>>> = (0..k)
            .map(|_| Arc::new(Mutex::new(self.initial.to_vec())))
            .collect();
        for (d, local) in pulled.iter().enumerate() {
            let chain = Var::new();
            for step in 0..self.steps {
                let (server, local, g) = (server.clone(), local.clone(), scratch.0[d].clone());
                let (layers, data) = (self.layers.clone(), self.data.clone());
                let (log, staleness) = (log.clone(), staleness.clone());
                let (batch, lr) = (self.batch, self.lr);
                let rows = shard(step, batch, k, d);
                rt.engine.push(
                    "async step",
                    rt.devices[d].compute,
                    &[],
                    &[&chain],
                    move || {
                        let mut local = local.lock().map_err(|_| poisoned())?;
                        // Pull: whatever the server holds now.
                        let seen = {
                            let s = server.lock().map_err(|_| poisoned())?;
                            local.copy_from_slice(&s);
                            staleness.lock().map_err(|_| poisoned())?.len()
                        };
                        let mut g = g.lock().map_err(|_| poisoned())?;
                        let loss = gradient(&layers, &local, &data, rows, batch as f32, &mut g);
                        // Push: the server applies it at once, whatever happened meanwhile.
                        let update = {
                            let mut s = server.lock().map_err(|_| poisoned())?;
                            sgd(&mut s, &g, lr);
                            let mut log = staleness.lock().map_err(|_| poisoned())?;
                            let stale = (log.len() - seen) as u64;
                            log.push(stale);
                            log.len() as u64 - 1
                        };
                        record(&log, update, loss * batch as f64, rows.1, start)
                    },
                );
            }
        }
        server
    }
}

/// Append a loss entry: `loss_sum` over `rows` rows, at the time since `start`.
fn record(
    log: &Mutex<Vec<LossEntry>>,
    update: u64,
    loss_sum: f64,
    rows: usize,
    start: Instant,
) -> Result<(), OpError> {
    log.lock().map_err(|_| poisoned())?.push(LossEntry {
        update,
        loss_sum,
        rows,
        seconds: start.elapsed().as_secs_f64(),
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::RuntimeOptions;
    use crate::scenario::data_parallel::{agrees, curve};

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

    fn train(s: &Setup, scheme: Scheme) -> Trained {
        let rt = Runtime::cpu(&RuntimeOptions::default(), &vec![1; s.devices]).expect("devices");
        let scratch = Scratch::new(s.devices, s.initial.len());
        let pending = s.push(&rt, scheme, &scratch);
        rt.engine.wait_all().expect("training runs");
        pending.take()
    }

    #[test]
    fn every_synchronous_scheme_equals_sequential_sgd_on_any_number_of_devices() {
        for devices in [1, 2, 3, 5] {
            let s = setup(devices, 6);
            let want = reference(&s);
            for scheme in [Scheme::ParameterServer, Scheme::Ring] {
                let got = train(&s, scheme);
                let (ok, rel) = agrees(&want, &got.params);
                assert!(ok, "{scheme:?} on {devices} devices: {rel:e}");
                // A point per step, each the loss of the step's whole batch.
                let c = curve(&got.log, s.batch);
                assert_eq!(c.len(), 6, "{scheme:?} on {devices}");
                assert!(c.iter().all(|p| p[1].is_finite() && p[1] > 0.0));
            }
        }
        // One device on whole batches is the same SGD.
        let s = setup(3, 6);
        let one = train(&s, Scheme::OneDevice);
        assert!(agrees(&reference(&s), &one.params).0);
    }

    #[test]
    fn the_reference_tells_a_wrong_schedule_apart() {
        // The check above would catch a ring that lost a device's shard: training without it
        // is far from the reference.
        let s = setup(3, 6);
        let mut fewer = setup(3, 6);
        fewer.batch = 16;
        assert!(!agrees(&reference(&s), &reference(&fewer)).0);
    }

    #[test]
    fn asynchronous_training_counts_every_update_and_its_staleness() {
        let s = setup(3, 5);
        let t = train(&s, Scheme::Async);
        assert_eq!(t.staleness.len(), 15);
        assert_eq!(t.log.len(), 15);
        // No update can be older than the other devices' updates since its pull.
        assert!(t.staleness.iter().all(|&v| v < 15));
        let mut updates: Vec<u64> = t.log.iter().map(|e| e.update).collect();
        updates.sort_unstable();
        assert_eq!(updates, (0..15).collect::<Vec<_>>());
        assert!(t.params.iter().all(|v| v.is_finite()));
        assert_ne!(t.params, *s.initial);
    }

    #[test]
    fn ring_chunks_cover_the_parameters() {
        for (n, k) in [(10, 3), (7, 7), (1_863_690, 4)] {
            let total: usize = (0..k).map(|c| chunk(n, k, c).len()).sum();
            assert_eq!(total, n);
            assert_eq!(chunk(n, k, k - 1).end, n);
        }
    }
}
