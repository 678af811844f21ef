//! `data-parallel`: training an MLP classifier on one device and on k, synchronously with two
//! all-reduce algorithms and asynchronously, in one process or across MPI ranks.
//!
//! The chapter's multi-device sections ask how training throughput scales with devices, where
//! communication stops the scaling, and how parameters are kept in sync; this scenario
//! measures exactly that on a model big enough that the all-reduce moves megabytes a step
//! (784 → 1024 → 1024 → 10 by default: 1.9 M parameters, 7.1 MiB of gradients).
//!
//! Every variant trains from the same seeded parameters on the same global batches, so the
//! synchronous variants must end where one-device SGD ends (up to float summation order).
//! - `engine` backend ([`in_process`]): k CPU devices of one engine;
//! - `mpi` backend (`mpi` module, cargo feature `mpi`): one rank per device, started by `mpirun`.

pub mod chunked;
pub mod in_process;
pub mod mlp;
#[cfg(feature = "mpi")]
pub mod mpi;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use self::in_process::{Pending, Scheme, Setup, Workspace};
use self::mlp::{Dataset, Layers};
use super::support::{check_elements, traced, Explained};
use super::{
    Choice, ParamError, ParamKind, ParamSpec, Params, RunContext, Scenario, ScenarioError,
};
use crate::device::Runtime;
use crate::engine::trace::TraceRecord;
use crate::harness::{synced, SamplerConfig, Variant};
use crate::report::{Better, Figure, FigureSpec, RunRecord, Unit};
use crate::units::{human_bytes, human_time, significant};

/// The derived figures this scenario records, each with its unit and direction; a variant's
/// own figures are named `<variant>_samples_per_second` and so on.
const SAMPLES_PER_SECOND: Figure = Figure::new(Unit::SamplesPerSecond, Better::Higher);
const FINAL_LOSS: Figure = Figure::new(Unit::Number, Better::Neither);
const SCALING_EFFICIENCY: Figure = Figure::new(Unit::Number, Better::Higher);
const INITIAL_LOSS: FigureSpec = FigureSpec::new("initial_loss", Unit::Number, Better::Neither);
const ALLREDUCE_BYTES: FigureSpec =
    FigureSpec::new("allreduce_bytes", Unit::Bytes, Better::Neither);
const ASYNC_STALENESS_MAX: FigureSpec =
    FigureSpec::new("async_staleness_max", Unit::Number, Better::Neither);
const ASYNC_STALENESS_MEAN: FigureSpec =
    FigureSpec::new("async_staleness_mean", Unit::Number, Better::Neither);

/// The `data-parallel` scenario.
pub struct DataParallel;

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "devices",
        help: "CPU devices training together (engine backend; under MPI, the ranks)",
        kind: ParamKind::Int { min: 1, max: 64 },
        default: "2",
    },
    ParamSpec {
        name: "layers",
        help: "layer widths of the MLP, inputs first and classes last",
        kind: ParamKind::Shape { max_dims: 8 },
        default: "784x1024x1024x10",
    },
    ParamSpec {
        name: "batch",
        help: "global minibatch size (split between the devices)",
        kind: ParamKind::Int {
            min: 1,
            max: 1_000_000,
        },
        // 256 rows a device at 2: at 128 the products run ~10% slower per row, and the
        // all-reduce and the full update each step weigh twice as much
        // (results/data-parallel-scaling.md).
        default: "512",
    },
    ParamSpec {
        name: "steps",
        help: "SGD steps of each run (asynchronous: each device makes as many updates of its shard)",
        kind: ParamKind::Int {
            min: 1,
            max: 1_000_000,
        },
        default: "20",
    },
    ParamSpec {
        name: "lr",
        help: "learning rate",
        kind: ParamKind::Float {
            min: 0.0,
            max: 10.0,
        },
        default: "0.1",
    },
    ParamSpec {
        name: "samples",
        help: "training samples (the batches walk through them in order)",
        kind: ParamKind::Int {
            min: 1,
            max: 10_000_000,
        },
        default: "8192",
    },
    ParamSpec {
        name: "target_loss",
        help: "loss whose first crossing times each variant (time to target)",
        kind: ParamKind::Float {
            min: 0.0,
            max: 1000.0,
        },
        default: "0.5",
    },
    ParamSpec {
        name: "timeout",
        help: "seconds a rank waits for another before it ends the MPI job (mpi backend)",
        kind: ParamKind::Float {
            min: 0.1,
            max: 86_400.0,
        },
        default: "60",
    },
    ParamSpec {
        name: "backend",
        help: "engine: devices of this process; mpi: one rank per device (cargo feature mpi, started by mpirun)",
        kind: ParamKind::Choice(Backend::WORDS),
        default: "engine",
    },
];

/// Seed of the data and of the initial parameters: every variant and rank starts alike.
const SEED: u64 = 20;

/// Rows the final loss is measured on (the first ones of the training set).
const EVAL_ROWS: usize = 1024;

/// The asynchronous variant's name, in every backend.
const ASYNC: &str = "async";

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
    pub params: Vec<f32>,
    /// MPI runs: the share of rank 0's run spent in its all-reduce calls (waits included).
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
    (
        ok,
        if relative.is_nan() {
            f64::INFINITY
        } else {
            relative
        },
    )
}

/// The largest relative difference [`agrees`] accepts.
pub const AGREEMENT: f64 = 2e-5;

/// A loss curve from a run's log: a point per update that closes a global batch's worth of
/// rows, `[update, mean loss over the latest batch rows, seconds]`. For synchronous runs each
/// step's shards are one batch; for an asynchronous run the last k updates are.
pub fn curve(log: &[LossEntry], batch: usize) -> Vec<[f64; 3]> {
    let mut entries = log.to_vec();
    entries.sort_by(|a, b| {
        a.update
            .cmp(&b.update)
            .then(a.seconds.total_cmp(&b.seconds))
    });
    let mut points = Vec::new();
    let mut i = 0;
    while i < entries.len() {
        let mut j = i;
        while j < entries.len() && entries[j].update == entries[i].update {
            j += 1;
        }
        // The latest entries that cover a batch (at least this update's own).
        let (mut loss, mut rows, mut seconds) = (0.0, 0usize, 0f64);
        for e in entries[..j].iter().rev() {
            if rows >= batch && e.update != entries[i].update {
                break;
            }
            loss += e.loss_sum;
            rows += e.rows;
            if e.update == entries[i].update {
                seconds = seconds.max(e.seconds);
            }
        }
        if rows >= batch || j == entries.len() {
            points.push([entries[i].update as f64, loss / rows.max(1) as f64, seconds]);
        }
        i = j;
    }
    points
}

/// Seconds until the curve first reaches `target`, if it does.
pub fn time_to_target(curve: &[[f64; 3]], target: f64) -> Option<f64> {
    curve.iter().find(|p| p[1] <= target).map(|p| p[2])
}

/// At most `n` points of a curve, evenly spread, the last one kept.
fn thin(curve: Vec<[f64; 3]>, n: usize) -> Vec<[f64; 3]> {
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

/// The share of the lanes' busy time that communication ops took in a traced run.
pub fn communication_share(records: &[TraceRecord]) -> f64 {
    let busy = |comm: bool| -> u64 {
        records
            .iter()
            .filter(|r| {
                let is_comm = matches!(
                    r.name.as_str(),
                    "reduce" | "broadcast" | "reduce-scatter" | "all-gather"
                );
                is_comm == comm
            })
            .map(TraceRecord::duration_ns)
            .sum()
    };
    let (comm, compute) = (busy(true), busy(false));
    comm as f64 / (comm + compute).max(1) as f64
}

/// A variant's name as a figure key prefix (`parameter-server` → `parameter_server`).
fn key(variant: &str) -> String {
    variant.replace('-', "_")
}

/// One variant's figures, as the explanation quotes them.
#[derive(Clone, Debug, PartialEq)]
pub struct VariantFigures {
    pub name: String,
    pub samples_per_second: f64,
    pub final_loss: f64,
    pub time_to_target: Option<f64>,
    /// Synchronous variants on k devices: throughput_k / (k × throughput of one device).
    pub scaling_efficiency: Option<f64>,
    /// From the traced run: communication's share of the lanes' busy time.
    pub communication_share: Option<f64>,
}

/// The figures a run's explanation quotes, as plain numbers (tests feed synthetic ones).
#[derive(Clone, Debug, PartialEq)]
pub struct Figures {
    pub devices: usize,
    pub what: &'static str,
    /// What the communication share is a share of.
    pub share_of: &'static str,
    pub parameters: usize,
    pub target_loss: f64,
    pub variants: Vec<VariantFigures>,
    pub staleness_mean: Option<f64>,
}

/// What a training run showed, each figure worded as the table prints it.
pub fn explain(f: &Figures) -> Explained {
    let rate = |v: f64| Figure::named("samples_per_second").format(&v.into());
    let mut sentences = Vec::new();
    let base = f.variants.first();
    for v in &f.variants[1..] {
        let mut s = format!("{}: {}", v.name, rate(v.samples_per_second));
        if let (Some(e), Some(b)) = (v.scaling_efficiency, base) {
            s += &format!(
                ", a scaling efficiency of {:.2} ({} {} against {} × {} on one)",
                e,
                f.devices,
                f.what,
                f.devices,
                rate(b.samples_per_second)
            );
        }
        if let Some(c) = v.communication_share {
            s += &format!(
                "; communication took {:.1}% of {} (all-reduce of {} a step)",
                100.0 * c,
                f.share_of,
                human_bytes(4 * f.parameters as u64)
            );
        }
        sentences.push(s + ".");
    }
    let reached: Vec<String> = f
        .variants
        .iter()
        .map(|v| match v.time_to_target {
            Some(t) => format!("{} in {}", v.name, human_time(t)),
            None => format!("{} not within its run", v.name),
        })
        .collect();
    sentences.push(format!(
        "Time to a loss of {}: {}; final loss {}.",
        significant(f.target_loss),
        reached.join(", "),
        f.variants
            .iter()
            .map(|v| format!("{} {}", v.name, significant(v.final_loss)))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    if let Some(s) = f.staleness_mean {
        sentences.push(if s > 0.0 {
            format!(
                "Asynchronous updates read parameters {s:.1} updates old on average: no device \
                 waits for another, but a stale gradient is worth less than a fresh one."
            )
        } else {
            "Asynchronous updates were never stale in this run: each gradient was applied \
             before the next parameters were read (as with a single worker)."
                .to_string()
        });
    }
    let mut warnings = Vec::new();
    for v in &f.variants {
        if v.scaling_efficiency.is_some_and(|e| e > 1.1) {
            warnings.push(format!(
                "{}'s scaling efficiency above 1.1: {}",
                v.name,
                super::support::BETWEEN_ROUNDS
            ));
        }
    }
    Explained {
        sentences,
        warnings,
    }
}

/// Parameters of an MLP of these widths, `None` if the count overflows.
fn parameter_count(widths: &[usize]) -> Option<u64> {
    widths.windows(2).try_fold(0u64, |sum, w| {
        (w[0] as u64)
            .checked_mul(w[1] as u64)?
            .checked_add(w[1] as u64)?
            .checked_add(sum)
    })
}

/// The validated parameters of a run.
struct Config {
    devices: usize,
    layers: Layers,
    batch: usize,
    steps: u64,
    lr: f32,
    samples: usize,
    target_loss: f64,
    /// How long a rank waits for another (MPI).
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    timeout: Duration,
    backend: Backend,
}

super::params::choice! {
    /// Where the devices that train together are.
    pub enum Backend {
        /// Engine lanes of this process.
        Engine = "engine",
        /// MPI ranks, one device each.
        Mpi = "mpi",
    }
}

impl Config {
    fn of(params: &Params) -> Result<Config, ParamError> {
        Ok(Config {
            devices: params.count("devices")?,
            layers: Layers(params.shape("layers")?.to_vec()),
            batch: params.count("batch")?,
            steps: params.int("steps")?,
            lr: params.float("lr")? as f32,
            samples: params.count("samples")?,
            target_loss: params.float("target_loss")?,
            timeout: Duration::from_secs_f64(params.float("timeout")?),
            backend: params.choice("backend")?,
        })
    }

    fn setup(&self, devices: usize) -> Setup {
        Setup {
            data: Arc::new(Dataset::new(
                self.samples,
                self.layers.inputs(),
                self.layers.classes(),
                SEED,
            )),
            initial: Arc::new(self.layers.initial_parameters(SEED)),
            layers: self.layers.clone(),
            devices,
            batch: self.batch,
            steps: self.steps,
            lr: self.lr,
        }
    }
}

/// The checks, figures and explanation of a run from its variants' last trained runs.
/// `variants` is in report order, the one-device baseline first and asynchronous last.
fn conclude(
    run: &mut RunRecord,
    cfg: &Config,
    setup: &Setup,
    what: &'static str,
    trained: &[(String, Trained)],
    shares: &[(String, f64)],
) {
    let k = setup.devices;
    let samples = cfg.steps as f64 * cfg.batch as f64;
    let eval = (0, EVAL_ROWS.min(cfg.samples));
    let loss_of = |p: &[f32]| mlp::loss(&setup.layers, p, &setup.data, eval);
    run.record(INITIAL_LOSS, loss_of(&setup.initial));
    run.derive_as(
        "parameters",
        setup.initial.len() as f64,
        Figure::new(Unit::Number, Better::Neither),
    );
    run.record(ALLREDUCE_BYTES, 4.0 * setup.initial.len() as f64);

    let reference = &trained[0];
    let asynchronous = trained.iter().find(|(n, _)| n == ASYNC);
    // Every variant after the baseline but `async` must end where the baseline ends.
    let synchronous: Vec<&(String, Trained)> =
        trained[1..].iter().filter(|(n, _)| n != ASYNC).collect();
    for (name, t) in synchronous.iter().copied() {
        let (ok, rel) = agrees(&reference.1.params, &t.params);
        run.check(
            &format!("{name} equals {} SGD", reference.0),
            ok,
            format!(
                "{} parameters after {} steps, difference {rel:.2e} of their norm \
                 (tolerance {AGREEMENT:.0e})",
                t.params.len(),
                cfg.steps
            ),
        );
    }
    if let [a, b, ..] = synchronous.as_slice() {
        let (ok, rel) = agrees(&a.1.params, &b.1.params);
        run.check(
            &format!("{} and {} give the same parameters", a.0, b.0),
            ok,
            format!("difference {rel:.2e} of their norm (tolerance {AGREEMENT:.0e})"),
        );
    }

    let mut variants = Vec::new();
    let base_rate = run.median(&reference.0).map(|t| samples / t);
    for (name, t) in trained {
        let rate = run.median(name).map_or(f64::NAN, |s| samples / s);
        let full = curve(&t.log, cfg.batch);
        // The first crossing on every point; the stored curve is thinned.
        let reached = time_to_target(&full, cfg.target_loss);
        let c = thin(full, 200);
        let final_loss = loss_of(&t.params);
        let kp = key(name);
        run.derive_as(
            &format!("{kp}_samples_per_second"),
            rate,
            SAMPLES_PER_SECOND,
        );
        run.derive_as(&format!("{kp}_final_loss"), final_loss, FINAL_LOSS);
        run.derive_as(
            &format!("{kp}_time_to_target_s"),
            reached.unwrap_or(f64::NAN),
            Figure::new(Unit::Seconds, Better::Lower),
        );
        run.derive_series(&format!("{kp}_loss_curve"), json!(c));
        let is_sync = synchronous.iter().any(|(n, _)| n == name);
        let efficiency = base_rate.filter(|_| is_sync).map(|b| rate / (k as f64 * b));
        if let Some(e) = efficiency {
            run.derive_as(&format!("{kp}_scaling_efficiency"), e, SCALING_EFFICIENCY);
        }
        let share = shares.iter().find(|(n, _)| n == name).map(|(_, s)| *s);
        if let Some(s) = share {
            run.derive_as(
                &format!("{kp}_communication_share"),
                s,
                Figure::new(Unit::Number, Better::Neither),
            );
        }
        variants.push(VariantFigures {
            name: name.clone(),
            samples_per_second: rate,
            final_loss,
            time_to_target: reached,
            scaling_efficiency: efficiency,
            communication_share: share,
        });
    }
    let staleness_mean = asynchronous.map(|(_, t)| {
        let s = &t.staleness;
        run.record(
            ASYNC_STALENESS_MAX,
            s.iter().copied().max().unwrap_or(0) as f64,
        );
        s.iter().sum::<u64>() as f64 / s.len().max(1) as f64
    });
    if let Some(m) = staleness_mean {
        run.record(ASYNC_STALENESS_MEAN, m);
    }
    explain(&Figures {
        devices: k,
        what,
        share_of: if what == "ranks" {
            "rank 0's time, waits included"
        } else {
            "the devices' busy time"
        },
        parameters: setup.initial.len(),
        target_loss: cfg.target_loss,
        variants,
        staleness_mean,
    })
    .record(run);
}

impl DataParallel {
    fn run_in_process(
        &self,
        params: &Params,
        cfg: &Config,
        ctx: &RunContext,
    ) -> Result<RunRecord, ScenarioError> {
        let setup = cfg.setup(cfg.devices);
        let threads = ctx.cpu_split(cfg.devices);
        let rt = Runtime::cpu(&ctx.runtime, &threads)?;
        let engine = &rt.engine;
        let schemes = [
            ("one-device", Scheme::OneDevice),
            ("parameter-server", Scheme::ParameterServer),
            ("ring", Scheme::Ring),
            (ASYNC, Scheme::Async),
        ];
        let workspaces: Vec<Workspace> = schemes.iter().map(|s| setup.workspace(s.1)).collect();
        let last: Vec<Mutex<Option<Pending>>> = schemes.iter().map(|_| Mutex::new(None)).collect();
        let train = |i: usize| {
            let (setup, rt, ws, last) = (&setup, &rt, &workspaces[i], &last);
            move || {
                synced(engine, || -> Result<(), ScenarioError> {
                    let pending = setup.push(rt, ws);
                    *last[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(pending);
                    Ok(())
                })
            }
        };
        let mut variants: Vec<Variant<ScenarioError>> = (0..schemes.len())
            .map(|i| Variant::new(schemes[i].0, train(i)))
            .collect();
        let summaries = ctx.sample(self, engine, &mut variants)?;
        drop(variants);
        // The last timed run of each scheme, before the traced runs below reuse its buffers.
        let trained: Vec<(String, Trained)> = schemes
            .iter()
            .zip(&last)
            .map(|((name, _), p)| {
                let t = p
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .as_ref()
                    .map(Pending::take)
                    .unwrap_or_default();
                (name.to_string(), t)
            })
            .collect();

        // Communication's share, from one more traced run of each synchronous scheme.
        let mut shares = Vec::new();
        for i in [1, 2] {
            let (_, records) = traced(engine, || -> Result<(), ScenarioError> {
                setup.push(&rt, &workspaces[i]);
                engine.wait_all()?;
                Ok(())
            })?;
            if let Some(records) = records {
                shares.push((schemes[i].0.to_string(), communication_share(&records)));
            }
        }

        let k = cfg.devices;
        let mut run = RunRecord::new(self.name(), params.to_json(), rt.describe_devices());
        run.add_variants(
            schemes.iter().map(|s| s.0.to_string()).collect(),
            summaries,
            [
                Some(format!("{} steps of {} rows on cpu:0", cfg.steps, cfg.batch)),
                Some(format!(
                    "{k} shard gradients, reduce onto cpu:0, update, broadcast"
                )),
                Some(format!(
                    "{k} shard gradients, ring reduce-scatter + all-gather in {k} chunks, {k} updates"
                )),
                Some(format!(
                    "{k} devices × {} updates of their shard, stale reads allowed",
                    cfg.steps
                )),
            ],
        );
        if threads.iter().any(|&t| t != threads[0]) {
            run.notes.push(format!(
                "the devices have unequal threads ({}): one-device runs on cpu:0's {}, so the \
                 scaling efficiency compares with the largest device; --cpu-threads N gives \
                 each N",
                threads
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                threads[0]
            ));
        }
        let cores = crate::device::available_cores();
        if threads.iter().sum::<usize>() > cores {
            run.notes.push(format!(
                "the devices' {} threads share {cores} cores: the scaling efficiency cannot \
                 reach 1",
                threads.iter().sum::<usize>()
            ));
        }
        conclude(&mut run, cfg, &setup, "devices", &trained, &shares);
        Ok(run)
    }
}

impl Scenario for DataParallel {
    fn name(&self) -> &'static str {
        "data-parallel"
    }

    fn about(&self) -> &'static str {
        "MLP training on 1 vs k devices: parameter server and ring all-reduce, async updates; scaling, loss vs time"
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
        let cfg = Config::of(params)?;
        if cfg.layers.0.len() < 2 {
            return Err(ScenarioError::Input(
                "data-parallel: --layers needs at least inputs and classes (e.g. 784x1024x10)"
                    .into(),
            ));
        }
        let mpi = cfg.backend == Backend::Mpi;
        // The data, the noise it is made from while it is built, and the class centroids.
        let (inputs, classes) = (cfg.layers.inputs() as u64, cfg.layers.classes() as u64);
        let data = (cfg.samples as u64)
            .checked_mul(2)
            .and_then(|rows| rows.checked_add(classes))
            .and_then(|rows| rows.checked_mul(inputs));
        check_elements("data-parallel's training data", data)?;
        // All four schemes' buffers are alive at once: one-device 2n, parameter server and
        // ring 2kn each, async 2kn + n; plus the initial parameters and each variant's trained
        // copy (4n). Under MPI a rank holds about 8n, and every rank on the host as much: the
        // check counts --devices of them.
        let n = parameter_count(&cfg.layers.0);
        let k = cfg.devices as u64;
        let floats = n.and_then(|n| n.checked_mul(6 * k + 8));
        check_elements("data-parallel's parameters and gradients", floats)?;
        let widest = cfg.layers.0.iter().max().copied().unwrap_or(1) as u64;
        check_elements(
            "data-parallel's activations",
            (cfg.batch as u64).checked_mul(widest.saturating_mul(cfg.layers.0.len() as u64)),
        )?;
        // Under MPI the ranks are the devices: the run checks the batch against their number.
        if cfg.batch < cfg.devices && !mpi {
            return Err(ScenarioError::Input(
                "data-parallel: --batch must be at least --devices (one row per device)".into(),
            ));
        }
        if mpi && !cfg!(feature = "mpi") {
            return Err(ScenarioError::Input(format!(
                "data-parallel: --backend mpi needs a build with the mpi feature: {}",
                crate::distributed::INSTALL
            )));
        }
        Ok(())
    }

    fn distributed(&self, params: &Params) -> bool {
        Config::of(params).is_ok_and(|cfg| cfg.backend == Backend::Mpi)
    }

    fn run(&self, params: &Params, ctx: &RunContext) -> Result<RunRecord, ScenarioError> {
        let cfg = Config::of(params)?;
        match cfg.backend {
            #[cfg(feature = "mpi")]
            Backend::Mpi => self::mpi::run(self, params, &cfg, ctx),
            // `validate` refuses mpi in a build without the feature.
            _ => self.run_in_process(params, &cfg, ctx),
        }
    }
}

#[cfg(test)]
mod tests {
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
    fn a_synchronous_curve_has_a_point_per_step() {
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
    }

    #[test]
    fn an_asynchronous_curve_averages_the_last_batch_of_updates() {
        // Batch 4 in shards of 2: each point is the mean over the last two updates.
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

    fn record(name: &str, duration: u64) -> TraceRecord {
        TraceRecord {
            lane: 0,
            lane_name: "cpu:0".into(),
            name: name.into(),
            seq: 0,
            reads: vec![],
            writes: vec![],
            worker: "w".into(),
            pushed_ns: 0,
            started_ns: 0,
            ended_ns: duration,
            failed: false,
        }
    }

    #[test]
    fn communication_share_counts_the_collectives_only() {
        let records = vec![
            record("gradient", 70),
            record("update", 10),
            record("reduce-scatter", 10),
            record("all-gather", 10),
        ];
        assert_eq!(communication_share(&records), 0.2);
        assert_eq!(communication_share(&[]), 0.0);
    }

    fn figures() -> Figures {
        let v = |name: &str, rate: f64, e: Option<f64>, c: Option<f64>, t: Option<f64>| {
            VariantFigures {
                name: name.into(),
                samples_per_second: rate,
                final_loss: 0.1234,
                time_to_target: t,
                scaling_efficiency: e,
                communication_share: c,
            }
        };
        Figures {
            devices: 2,
            what: "devices",
            share_of: "the devices' busy time",
            parameters: 1_000_000,
            target_loss: 0.5,
            variants: vec![
                v("one-device", 1000.0, None, None, Some(0.5)),
                v("ring", 1800.4, Some(0.9002), Some(0.0412), Some(0.3)),
                v("async", 1900.0, None, None, None),
            ],
            staleness_mean: Some(0.96),
        }
    }

    #[test]
    fn the_explanation_quotes_the_figures_as_the_table_prints_them() {
        let e = explain(&figures());
        assert_eq!(
            e.sentences,
            [
                "ring: 1,800 samples/s, a scaling efficiency of 0.90 (2 devices against 2 × \
                 1,000 samples/s on one); communication took 4.1% of the devices' busy time \
                 (all-reduce of 3.8 MiB a step).",
                "async: 1,900 samples/s.",
                "Time to a loss of 0.500: one-device in 500.0 ms, ring in 300.0 ms, async not \
                 within its run; final loss one-device 0.123, ring 0.123, async 0.123.",
                "Asynchronous updates read parameters 1.0 updates old on average: no device \
                 waits for another, but a stale gradient is worth less than a fresh one.",
            ]
        );
        assert!(e.warnings.is_empty());
        let mut f = figures();
        f.staleness_mean = Some(0.0);
        assert!(explain(&f).sentences[3].contains("never stale"));
        f.variants[1].scaling_efficiency = Some(1.3);
        assert_eq!(explain(&f).warnings.len(), 1);
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
}
