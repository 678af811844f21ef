//! `data-parallel`: synchronous vs asynchronous parameter updates across k devices.
//!
//! A seeded linear-regression problem trained by minibatch SGD on k CPU devices.
//! - synchronous: every step each device computes the gradient of its shard of the global
//!   batch (an op on its lane, reading the parameters' var), then one op sums the gradients
//!   (the all-reduce) and updates the parameters (writing the var): the engine orders it all;
//! - asynchronous: each device runs its own chain of steps, reading whatever the parameters
//!   are when its op starts and applying its update at once, without waiting for the others
//!   (stale reads allowed, as a parameter server or Hogwild!); the staleness is counted.
//!
//! Both record the full-data loss as they go (the loss curve, in the JSON).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::support::check_elements;
use super::{ParamKind, ParamSpec, Params, RunContext, Scenario, ScenarioError};
use crate::device::Runtime;
use crate::engine::{OpError, Var};
use crate::harness::{synced, SamplerConfig, Variant};
use crate::report::{Figure, RunRecord};
use crate::units::{human_time, significant};

/// The `data-parallel` scenario.
pub struct DataParallel;

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "devices",
        help: "CPU devices training together",
        kind: ParamKind::Int { min: 1, max: 64 },
        default: "2",
    },
    ParamSpec {
        name: "batch",
        help: "global minibatch size (split between the devices)",
        kind: ParamKind::Int {
            min: 1,
            max: 1_000_000,
        },
        default: "2048",
    },
    ParamSpec {
        name: "steps",
        help: "SGD steps (synchronous); each device makes as many updates when asynchronous",
        kind: ParamKind::Int {
            min: 1,
            max: 1_000_000,
        },
        default: "100",
    },
    ParamSpec {
        name: "lr",
        help: "learning rate",
        kind: ParamKind::Float {
            min: 0.0,
            max: 10.0,
        },
        default: "0.05",
    },
    ParamSpec {
        name: "features",
        help: "features of the regression",
        kind: ParamKind::Int { min: 1, max: 4096 },
        default: "32",
    },
    ParamSpec {
        name: "samples",
        help: "training samples",
        kind: ParamKind::Int {
            min: 1,
            max: 10_000_000,
        },
        default: "8192",
    },
];

/// The training data, row-major.
struct Data {
    x: Vec<f32>,
    y: Vec<f32>,
    d: usize,
}

impl Data {
    fn new(n: usize, d: usize) -> Data {
        let x = crate::device::cpu::uniform(&[n, d], 11)
            .iter()
            .map(|v| v - 0.5)
            .collect::<Vec<f32>>();
        let w_true: Vec<f32> = (0..d).map(|j| ((j % 7) as f32 - 3.0) / 3.0).collect();
        let noise = crate::device::cpu::uniform(&[n], 12);
        let y = (0..n)
            .map(|i| dot(&x[i * d..(i + 1) * d], &w_true) + 0.01 * (noise[i] - 0.5))
            .collect();
        Data { x, y, d }
    }

    fn rows(&self) -> usize {
        self.y.len()
    }

    /// Gradient of the mean squared error over rows `start..start+len` (wrapping), scaled by
    /// `1 / scale` (the global batch size, so shard gradients sum to the batch gradient).
    fn gradient(&self, w: &[f32], start: usize, len: usize, scale: f32) -> Vec<f32> {
        let mut g = vec![0f32; self.d];
        for k in 0..len {
            let i = (start + k) % self.rows();
            let row = &self.x[i * self.d..(i + 1) * self.d];
            let err = dot(row, w) - self.y[i];
            for (gj, xj) in g.iter_mut().zip(row) {
                *gj += 2.0 * err * xj / scale;
            }
        }
        g
    }

    fn loss(&self, w: &[f32]) -> f64 {
        let n = self.rows();
        (0..n)
            .map(|i| f64::from(dot(&self.x[i * self.d..(i + 1) * self.d], w) - self.y[i]).powi(2))
            .sum::<f64>()
            / n as f64
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(p, q)| p * q).sum()
}

/// Parameters and their update count, shared by the devices.
struct Model {
    w: Vec<f32>,
    version: u64,
    curve: Vec<(u64, f64)>,
    staleness: Vec<u64>,
}

impl Model {
    fn fresh(d: usize) -> Arc<Mutex<Model>> {
        Arc::new(Mutex::new(Model {
            w: vec![0.0; d],
            version: 0,
            curve: Vec::new(),
            staleness: Vec::new(),
        }))
    }
}

/// Loss is recorded every this many updates.
fn eval_every(updates: u64) -> u64 {
    (updates / 20).max(1)
}

/// Shard `s` of `k` of the global batch at `step`: (start row, rows).
fn shard(step: u64, batch: usize, k: usize, s: usize) -> (usize, usize) {
    let per = batch / k + usize::from(s < batch % k);
    let before: usize = (0..s).map(|t| batch / k + usize::from(t < batch % k)).sum();
    (step as usize * batch + before, per)
}

/// Plain SGD on one device over the same global batches: the synchronous run's reference.
fn single_device_sgd(data: &Data, steps: u64, batch: usize, lr: f32) -> Vec<f32> {
    let mut w = vec![0f32; data.d];
    for step in 0..steps {
        let g = data.gradient(&w, step as usize * batch, batch, batch as f32);
        for (wj, gj) in w.iter_mut().zip(&g) {
            *wj -= lr * gj;
        }
    }
    w
}

/// Parameters equal within float32 summation-order tolerance; also the largest difference.
fn agrees(reference: &[f32], got: &[f32]) -> (bool, f32) {
    let max_diff = reference
        .iter()
        .zip(got)
        .map(|(a, b)| (a - b).abs())
        // `f32::max` drops NaN: a diverged (NaN) parameter must fail, not vanish.
        .fold(
            0f32,
            |m, d| if d.is_nan() { f32::INFINITY } else { m.max(d) },
        );
    let scale = reference.iter().map(|v| v.abs()).fold(1e-6f32, f32::max);
    (
        reference.len() == got.len() && max_diff <= 1e-4 * scale.max(1.0),
        max_diff,
    )
}

/// One training configuration: what both variants push.
struct Training {
    devices: usize,
    batch: usize,
    steps: u64,
    lr: f32,
    data: Arc<Data>,
}

impl Training {
    /// Push synchronous data-parallel SGD: per step, a gradient of each device's shard, then an
    /// all-reduce and one update that waits for all of them.
    fn push_sync(&self, rt: &Runtime) -> Arc<Mutex<Model>> {
        let (engine, data, lr) = (&rt.engine, &self.data, self.lr);
        let (k, batch, steps) = (self.devices, self.batch, self.steps);
        let model = Model::fresh(self.data.d);
        let w_var = Var::new();
        let grads: Vec<(Var, Arc<Mutex<Vec<f32>>>)> = (0..k)
            .map(|_| (Var::new(), Arc::new(Mutex::new(Vec::new()))))
            .collect();
        let every = eval_every(steps);
        for step in 0..steps {
            for (s, (g_var, g)) in grads.iter().enumerate() {
                let (model, g, data) = (model.clone(), g.clone(), data.clone());
                let (start, len) = shard(step, batch, k, s);
                engine.push(
                    "gradient",
                    rt.devices[s].compute,
                    &[&w_var],
                    &[g_var],
                    move || {
                        let w = model
                            .lock()
                            .map_err(|_| OpError::msg("model poisoned"))?
                            .w
                            .clone();
                        *g.lock().map_err(|_| OpError::msg("gradient poisoned"))? =
                            data.gradient(&w, start, len, batch as f32);
                        Ok(())
                    },
                );
            }
            let reads: Vec<&Var> = grads.iter().map(|(v, _)| v).collect();
            let (model, gs, data) = (
                model.clone(),
                grads.iter().map(|(_, g)| g.clone()).collect::<Vec<_>>(),
                data.clone(),
            );
            engine.push(
                "all-reduce + update",
                rt.devices[0].compute,
                &reads,
                &[&w_var],
                move || {
                    let mut m = model.lock().map_err(|_| OpError::msg("model poisoned"))?;
                    for g in &gs {
                        let g = g.lock().map_err(|_| OpError::msg("gradient poisoned"))?;
                        for (wj, gj) in m.w.iter_mut().zip(g.iter()) {
                            *wj -= lr * gj;
                        }
                    }
                    m.version += 1;
                    if m.version % every == 0 || m.version == steps {
                        let (v, loss) = (m.version, data.loss(&m.w));
                        m.curve.push((v, loss));
                    }
                    Ok(())
                },
            );
        }
        model
    }

    /// Push asynchronous SGD: each device updates the shared model on its own, reading
    /// whatever version is there (stale reads allowed).
    fn push_async(&self, rt: &Runtime) -> Arc<Mutex<Model>> {
        let (engine, data, lr) = (&rt.engine, &self.data, self.lr);
        let (k, batch, steps) = (self.devices, self.batch, self.steps);
        let model = Model::fresh(self.data.d);
        // The same number of updates in total, each of one device's shard.
        let updates_per_device = steps;
        let every = eval_every(steps * k as u64);
        for s in 0..k {
            let chain = Var::new();
            for step in 0..updates_per_device {
                let (model, data) = (model.clone(), data.clone());
                let (start, len) = shard(step, batch, k, s);
                engine.push(
                    "async step",
                    rt.devices[s].compute,
                    &[],
                    &[&chain],
                    move || {
                        let (w, seen) = {
                            let m = model.lock().map_err(|_| OpError::msg("model poisoned"))?;
                            (m.w.clone(), m.version)
                        };
                        // Scaled like a shard of the synchronous batch, applied on its own.
                        let g = data.gradient(&w, start, len, batch as f32);
                        let mut m = model.lock().map_err(|_| OpError::msg("model poisoned"))?;
                        for (wj, gj) in m.w.iter_mut().zip(&g) {
                            *wj -= lr * gj;
                        }
                        let stale = m.version - seen;
                        m.staleness.push(stale);
                        m.version += 1;
                        if m.version % every == 0 {
                            let (v, loss) = (m.version, data.loss(&m.w));
                            m.curve.push((v, loss));
                        }
                        Ok(())
                    },
                );
            }
        }
        model
    }

    /// The checks, figures and explanation of a run, from the two trained models.
    fn conclude(&self, run: &mut RunRecord, sync_model: &Model, async_model: &Model) {
        let (k, batch, steps) = (self.devices, self.batch, self.steps);
        // Check: k-device synchronous SGD equals single-device SGD on the same global batches.
        let w = single_device_sgd(&self.data, steps, batch, self.lr);
        let (ok, max_diff) = agrees(&w, &sync_model.w);
        run.check(
            "synchronous equals single-device SGD",
            ok,
            format!(
                "{} parameters, max abs difference {max_diff:.2e} after {steps} steps",
                w.len()
            ),
        );

        let m = |v: &str| run.median(v).unwrap_or(f64::NAN);
        let (ts, ta) = (m("sync"), m("async"));
        let samples_sync = steps as f64 * batch as f64 / ts;
        // Each async update processes one shard: batch / k rows.
        let samples_async = (steps * k as u64) as f64 * (batch as f64 / k as f64) / ta;
        let final_loss = |model: &Model| model.curve.last().map_or(f64::NAN, |c| c.1);
        let stale = &async_model.staleness;
        let stale_mean = stale.iter().sum::<u64>() as f64 / stale.len().max(1) as f64;
        run.derive("sync_samples_per_second", samples_sync);
        run.derive("async_samples_per_second", samples_async);
        run.derive("sync_final_loss", final_loss(sync_model));
        run.derive("async_final_loss", final_loss(async_model));
        run.derive("initial_loss", self.data.loss(&vec![0.0; self.data.d]));
        run.derive("async_staleness_mean", stale_mean);
        run.derive(
            "async_staleness_max",
            stale.iter().copied().max().unwrap_or(0) as f64,
        );
        run.derive_series("sync_loss_curve", serde_json::json!(sync_model.curve));
        run.derive_series("async_loss_curve", serde_json::json!(async_model.curve));
        run.explanation.push(explain(&Trained {
            steps,
            sync_s: ts,
            async_s: ta,
            sync_samples_per_second: samples_sync,
            async_samples_per_second: samples_async,
            sync_final_loss: final_loss(sync_model),
            async_final_loss: final_loss(async_model),
            staleness_mean: stale_mean,
        }));
    }
}

/// The figures the explanation quotes, as plain numbers (so tests can feed synthetic ones).
struct Trained {
    steps: u64,
    sync_s: f64,
    async_s: f64,
    sync_samples_per_second: f64,
    async_samples_per_second: f64,
    sync_final_loss: f64,
    async_final_loss: f64,
    staleness_mean: f64,
}

/// What a training run showed, worded as the table prints the same figures (samples/s
/// grouped, losses with three significant digits).
fn explain(t: &Trained) -> String {
    let rate = |v: f64| Figure::named("sync_samples_per_second").format(&v.into());
    format!(
        "synchronous: {}, final loss {}; asynchronous: {}, final loss {}, reading parameters {:.1} \
         updates old on average ({} for {} steps sync, {} async).",
        rate(t.sync_samples_per_second),
        significant(t.sync_final_loss),
        rate(t.async_samples_per_second),
        significant(t.async_final_loss),
        t.staleness_mean,
        human_time(t.sync_s),
        t.steps,
        human_time(t.async_s)
    )
}

impl Scenario for DataParallel {
    fn name(&self) -> &'static str {
        "data-parallel"
    }

    fn about(&self) -> &'static str {
        "SGD on k devices: synchronous all-reduce vs asynchronous stale updates; throughput, loss curve, staleness"
    }

    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }

    fn sampling(&self) -> SamplerConfig {
        SamplerConfig {
            warmup: 1,
            min_samples: 5,
            max_samples: 30,
            min_time: Duration::from_secs(1),
            max_time: Duration::from_secs(30),
        }
    }

    fn validate(&self, params: &Params) -> Result<(), ScenarioError> {
        let elements = params
            .int("samples")
            .checked_mul(params.int("features").saturating_add(1));
        check_elements("data-parallel with these sizes", elements)?;
        if params.int("batch") < params.int("devices") {
            return Err(ScenarioError::Input(
                "data-parallel: --batch must be at least --devices (one row per device)".into(),
            ));
        }
        Ok(())
    }

    fn run(&self, params: &Params, ctx: &RunContext) -> Result<RunRecord, ScenarioError> {
        let t = Training {
            devices: params.int("devices") as usize,
            batch: params.int("batch") as usize,
            steps: params.int("steps"),
            lr: params.float("lr") as f32,
            data: Arc::new(Data::new(
                params.int("samples") as usize,
                params.int("features") as usize,
            )),
        };
        let (k, steps) = (t.devices, t.steps);
        let threads = ctx.cpu_split(k);
        let rt = Runtime::cpu(&ctx.runtime, &threads)?;
        let engine = &rt.engine;
        let last_sync: Mutex<Option<Arc<Mutex<Model>>>> = Mutex::new(None);
        let last_async: Mutex<Option<Arc<Mutex<Model>>>> = Mutex::new(None);
        let train_sync = || -> Result<(), ScenarioError> {
            *last_sync.lock().unwrap_or_else(|e| e.into_inner()) = Some(t.push_sync(&rt));
            Ok(())
        };
        let train_async = || -> Result<(), ScenarioError> {
            *last_async.lock().unwrap_or_else(|e| e.into_inner()) = Some(t.push_async(&rt));
            Ok(())
        };

        let mut variants: Vec<Variant<ScenarioError>> = vec![
            Variant::new("sync", || synced(engine, train_sync)),
            Variant::new("async", || synced(engine, train_async)),
        ];
        let names: Vec<String> = variants.iter().map(|v| v.name.clone()).collect();
        let summaries = ctx.sample(self, engine, &mut variants)?;
        drop(variants);

        let mut run = RunRecord::new(self.name(), params.to_json(), rt.describe_devices());
        run.add_variants(
            names,
            summaries,
            [
                Some(format!(
                    "{steps} steps: {k} shard gradients, all-reduce, one update"
                )),
                Some(format!(
                    "{k} devices × {steps} updates, each on its own, stale reads allowed"
                )),
            ],
        );
        let take = |m: &Mutex<Option<Arc<Mutex<Model>>>>| -> Result<Model, ScenarioError> {
            let arc = m
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take()
                .ok_or_else(|| ScenarioError::Input("no training run was recorded".into()))?;
            let model = arc.lock().unwrap_or_else(|e| e.into_inner());
            Ok(Model {
                w: model.w.clone(),
                version: model.version,
                curve: model.curve.clone(),
                staleness: model.staleness.clone(),
            })
        };
        let (sync_model, async_model) = (take(&last_sync)?, take(&last_async)?);

        t.conclude(&mut run, &sync_model, &async_model);
        Ok(run)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_explanation_quotes_the_figures_as_the_table_prints_them() {
        let t = Trained {
            steps: 100,
            sync_s: 8.698e-3,
            async_s: 0.016,
            sync_samples_per_second: 23_546_198.982,
            async_samples_per_second: 12_800_000.4,
            sync_final_loss: 0.2204,
            async_final_loss: 2.2e-5,
            staleness_mean: 0.54,
        };
        let text = explain(&t);
        assert_eq!(
            text,
            "synchronous: 23,546,199 samples/s, final loss 0.220; asynchronous: 12,800,000 samples/s, \
             final loss 2.20e-5, reading parameters 0.5 updates old on average (8.698 ms for 100 steps \
             sync, 16.00 ms async)."
        );
        // The table prints the same figures the same way.
        let table = |key: &str, v: f64| Figure::named(key).format(&v.into());
        assert!(text.contains(&table("sync_samples_per_second", t.sync_samples_per_second)));
        assert!(text.contains(&table("sync_final_loss", t.sync_final_loss)));
    }

    #[test]
    fn the_check_rejects_a_wrong_reference() {
        let data = Data::new(256, 4);
        let right = single_device_sgd(&data, 30, 32, 0.05);
        assert!(agrees(&right, &single_device_sgd(&data, 30, 32, 0.05)).0);
        // A reference trained with another learning rate is not accepted.
        assert!(!agrees(&single_device_sgd(&data, 30, 32, 0.06), &right).0);
        // Diverged parameters (NaN) never agree.
        let mut nan = right.clone();
        nan[0] = f32::NAN;
        assert!(!agrees(&right, &nan).0);
    }

    #[test]
    fn shards_cover_the_batch_exactly() {
        let covered: Vec<(usize, usize)> = (0..3).map(|s| shard(2, 10, 3, s)).collect();
        assert_eq!(covered, vec![(20, 4), (24, 3), (27, 3)]);
    }

    #[test]
    fn shard_gradients_sum_to_the_batch_gradient() {
        let data = Data::new(64, 5);
        let w = vec![0.1f32; 5];
        let full = data.gradient(&w, 0, 12, 12.0);
        let parts: Vec<Vec<f32>> = (0..3)
            .map(|s| {
                let (start, len) = shard(0, 12, 3, s);
                data.gradient(&w, start, len, 12.0)
            })
            .collect();
        for j in 0..5 {
            let sum: f32 = parts.iter().map(|p| p[j]).sum();
            assert!((sum - full[j]).abs() < 1e-5);
        }
    }
}
