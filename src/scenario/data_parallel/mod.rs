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
//! - `engine` backend (`engine` module, timed by `measure`): k CPU devices of one engine;
//! - `mpi` backend (`mpi` module, cargo feature `mpi`): one rank per device, started by `mpirun`.

mod engine;
mod explain;
#[cfg(feature = "cuda")]
mod gpu;
#[cfg(any(test, feature = "cuda"))]
mod gpu_step;
#[cfg(feature = "cuda")]
mod gpu_trainer;
#[cfg(test)]
mod host_step;
mod measure;
mod mlp;
#[cfg(feature = "mpi")]
mod mpi;
#[cfg(feature = "cuda")]
mod nccl;
mod training;

use std::sync::Arc;
use std::time::Duration;

use self::mlp::{Dataset, Layers};
use super::backend::{Backend, BACKEND_PARAM, TIMEOUT_PARAM};
use super::kit::{self, check_elements};
use super::{Choice, DeviceChoice, Params, RunContext, Scenario, ScenarioError};
use crate::report::{Better, Figure, FigureSpec, RunRecord, Unit};

/// The derived figures this scenario records, each with its unit and direction; a variant's
/// own figures are named `<variant>_samples_per_second` and so on.
const SAMPLES_PER_SECOND: Figure = Figure::new(Unit::SamplesPerSecond, Better::Higher);
const FINAL_LOSS: Figure = Figure::new(Unit::Number, Better::Neither);
const SCALING_EFFICIENCY: Figure = Figure::new(Unit::Number, Better::Higher);
const INITIAL_LOSS: FigureSpec = kit::number("initial_loss", Better::Neither);
const PARAMETERS: FigureSpec = kit::number("parameters", Better::Neither);
const ALLREDUCE_BYTES: FigureSpec =
    FigureSpec::new("allreduce_bytes", Unit::Bytes, Better::Neither);
const ASYNC_STALENESS_MAX: FigureSpec = kit::number("async_staleness_max", Better::Neither);
const ASYNC_STALENESS_MEAN: FigureSpec = kit::number("async_staleness_mean", Better::Neither);

pub struct DataParallel;

super::params::params! {
    /// The validated parameters of a run.
    struct Config {
        /// CPU devices training together (engine backend; under MPI, the ranks)
        devices: usize = Int { min: 1, max: 64 }, "2";
        /// layer widths of the MLP, inputs first and classes last
        layers: Layers = Shape { max_dims: 8 }, "784x1024x1024x10" => Layers;
        /// global minibatch size (split between the devices)
        // 256 rows a device at 2: at 128 the products run ~10% slower per row, and the
        // all-reduce and the full update each step weigh twice as much
        // (results/data-parallel-scaling.md).
        batch: usize = Int { min: 1, max: 1_000_000 }, "512";
        /// SGD steps of each run (asynchronous: each device makes as many updates of its shard)
        steps: u64 = Int { min: 1, max: 1_000_000 }, "20";
        /// learning rate
        // Plain SGD on the default MLP trains at 1.5 and diverges from 2, where every check
        // fails with "the training diverged": the largest rate keeps a margin below that.
        lr: f32 = Float { min: 0.0, max: 1.0 }, "0.1" => |lr: f64| lr as f32;
        /// training samples (the batches walk through them in order)
        samples: usize = Int { min: 1, max: 10_000_000 }, "8192";
        /// loss whose first crossing times each variant (time to target)
        target_loss: f64 = Float { min: 0.0, max: 1000.0 }, "0.5";
        /// ring-overlapped: MiB of gradients a bucket closes at (whole layers, last first;
        /// PyTorch DDP's bucket_cap_mb)
        #[name = "bucket_mb"]
        bucket_bytes: f64 = Float { min: 0.0, max: 1_000_000.0 }, "25" => |mb: f64| mb * 1024.0 * 1024.0;
        /// ring-overlapped: where its collectives run: copy (each device's copy lane, its own
        /// thread, as DDP's communication stream) or compute (the device's compute lane, after
        /// its backward ops)
        collective_lane: CollectiveLane = Choice(CollectiveLane::WORDS), "copy";
        #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
        timeout: Duration = TIMEOUT_PARAM => Duration::from_secs_f64;
        backend: Backend = BACKEND_PARAM;
        /// cpu, or cuda: train on the GPU, eager and as a CUDA graph, and over --devices GPUs
        /// with NCCL's all-reduce (nccl-allreduce; needs libnccl.so.2); an error without a
        /// usable GPU, unless --fallback
        device: DeviceChoice = Choice(DeviceChoice::WORDS), "cpu";
    }
}

/// Seed of the data and of the initial parameters: every variant and rank starts alike.
const SEED: u64 = 20;

/// Rows the final loss is measured on (the first ones of the training set).
const EVAL_ROWS: usize = 1024;

super::variant::variants! {
    /// What `data-parallel` times: the baseline, the synchronous schemes of each backend
    /// (in process: parameter server and ring; MPI: `MPI_Allreduce` and the ring), and
    /// asynchronous updates.
    pub enum Timed {
        /// One device (rank 0) alone.
        OneDevice = "one-device",
        /// One GPU, the step captured once as a CUDA graph and replayed (`--device cuda`).
        OneDeviceGraph = "one-device-graph",
        /// `--device cuda`: shard gradients summed by NCCL's all-reduce across the GPUs.
        NcclAllreduce = "nccl-allreduce",
        /// Shard gradients reduced onto one device, updated, broadcast.
        ParameterServer = "parameter-server",
        /// Shard gradients summed by `MPI_Allreduce`.
        Allreduce = "allreduce",
        /// Ring reduce-scatter + all-gather.
        Ring = "ring",
        /// The ring on buckets of layers, each pushed as soon as the backward pass has
        /// written its layers' gradients (PyTorch DDP's overlap).
        RingOverlapped = "ring-overlapped",
        /// `MPI_Iallreduce` per bucket of layers, each posted as soon as the backward pass
        /// has written its layers' gradients (PyTorch DDP over a process group; MPI).
        AllreduceOverlapped = "allreduce-overlapped",
        /// Asynchronous updates, stale reads allowed.
        Async = "async",
    }
}

impl Timed {
    /// A synchronous data-parallel scheme, which must end where one-device SGD ends: all but
    /// the one-device baselines and asynchronous updates.
    pub fn is_synchronous(self) -> bool {
        !matches!(self, Self::OneDevice | Self::OneDeviceGraph | Self::Async)
    }

    /// The variant's name as a figure key prefix (`parameter-server` → `parameter_server`).
    fn key(self) -> String {
        self.name().replace('-', "_")
    }
}

crate::scenario::params::choice! {
    /// Where `ring-overlapped` runs its collectives.
    pub enum CollectiveLane {
        /// Each device's copy lane: its own thread, beside the compute lane (DDP's
        /// communication stream).
        Copy = "copy",
        /// Each device's compute lane, in order after the backward ops pushed before it.
        Compute = "compute",
    }
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
    /// `ring-overlapped`: a bucket closes at this many bytes of gradients.
    pub bucket_bytes: f64,
    /// `ring-overlapped`: the lanes its collectives run on.
    pub collective_lane: CollectiveLane,
}

impl Config {
    fn setup(&self, devices: usize) -> Setup {
        let (inputs, classes) = (self.layers.inputs(), self.layers.classes());
        Setup {
            data: Arc::new(Dataset::new(self.samples, inputs, classes, SEED)),
            initial: Arc::new(self.layers.initial_parameters(SEED)),
            layers: self.layers.clone(),
            devices,
            batch: self.batch,
            steps: self.steps,
            lr: self.lr,
            bucket_bytes: self.bucket_bytes,
            collective_lane: self.collective_lane,
        }
    }
}

/// What `--device cuda` accepts: the engine backend (`--backend mpi` is not offered on the
/// GPU), and `--devices` no more than the GPUs present (`None`: no usable GPU, checked
/// elsewhere). k GPUs train with NCCL's all-reduce (`nccl-allreduce`).
fn check_gpu_count(
    backend: Backend,
    devices: usize,
    present: Option<usize>,
) -> Result<(), ScenarioError> {
    if backend == Backend::Mpi {
        return Err(ScenarioError::Input(
            "data-parallel: --device cuda trains in one process; --backend mpi is not offered \
             on the GPU"
                .into(),
        ));
    }
    match present {
        Some(gpus) if devices > gpus => Err(ScenarioError::Input(format!(
            "data-parallel: --device cuda --devices {devices} asks for {devices} GPUs, and this \
             machine has {gpus}: use --devices {gpus}"
        ))),
        _ => Ok(()),
    }
}

static SPEC: super::Spec = super::Spec {
    name: "data-parallel",
    about: "MLP training on 1 vs k devices: parameter server and ring all-reduce, async updates; scaling, loss vs time",
    params: PARAMS,
    lesson: Some(explain::LESSON),
    book: &[],
    sampling: kit::sampling_to_95(30, 1),
};

impl Scenario for DataParallel {
    fn spec(&self) -> &'static super::Spec {
        &SPEC
    }

    fn validate(&self, params: &Params) -> Result<(), ScenarioError> {
        let cfg = Config::of(params)?;
        if cfg.layers.0.len() < 2 {
            return Err(ScenarioError::Input(
                "data-parallel: --layers needs at least inputs and classes (e.g. 784x1024x10)"
                    .into(),
            ));
        }
        // The data, the noise it is made from while it is built, and the class centroids.
        let (inputs, classes) = (cfg.layers.inputs() as u64, cfg.layers.classes() as u64);
        let data = (cfg.samples as u64)
            .checked_mul(2)
            .and_then(|rows| rows.checked_add(classes))
            .and_then(|rows| rows.checked_mul(inputs));
        check_elements("data-parallel's training data", data)?;
        // All five schemes' buffers are alive at once: one-device 2n, parameter server,
        // ring and ring-overlapped 2kn each, async 2kn + n; plus the initial parameters and
        // each variant's trained copy (5n). Under MPI a rank holds about 8n, and every rank on
        // the host as much: the check counts --devices of them.
        let n = cfg.layers.0.windows(2).try_fold(0u64, |sum, w| {
            let (fan_in, fan_out) = (w[0] as u64, w[1] as u64);
            let weights = fan_in.checked_mul(fan_out)?;
            weights.checked_add(fan_out)?.checked_add(sum)
        });
        let k = cfg.devices as u64;
        let floats = n.and_then(|n| n.checked_mul(8 * k + 9));
        check_elements("data-parallel's parameters and gradients", floats)?;
        let widest = cfg.layers.0.iter().max().copied().unwrap_or(1) as u64;
        let activations = widest.saturating_mul(cfg.layers.0.len() as u64);
        let activations = (cfg.batch as u64).checked_mul(activations);
        check_elements("data-parallel's activations", activations)?;
        // Under MPI the ranks are the devices: the run checks the batch against their number.
        if cfg.batch < cfg.devices && cfg.backend != Backend::Mpi {
            return Err(ScenarioError::Input(
                "data-parallel: --batch must be at least --devices (one row per device)".into(),
            ));
        }
        if cfg.device == DeviceChoice::Cuda {
            // The GPUs the driver lists when a GPU is usable, else `None` (the unusable GPU is
            // refused, or replaced under `--fallback`, by the device check every `--device
            // cuda` goes through).
            use crate::device::discovery::{list_gpus, probe_gpu};
            let present = probe_gpu().available.then(|| list_gpus().len().max(1));
            check_gpu_count(cfg.backend, cfg.devices, present)?;
        }
        cfg.backend.check_built("data-parallel")
    }

    fn distributed(&self, params: &Params) -> bool {
        Config::of(params).is_ok_and(|cfg| cfg.backend == Backend::Mpi)
    }

    fn run(&self, params: &Params, ctx: &RunContext) -> Result<RunRecord, ScenarioError> {
        let cfg = Config::of(params)?;
        if cfg.device == DeviceChoice::Cuda {
            return match kit::on_gpu(ctx)? {
                #[cfg(feature = "cuda")]
                kit::OnGpu::Gpu => gpu::run(self, params, &cfg, ctx),
                kit::OnGpu::Fallback(note) => {
                    let mut run = measure::run(self, params, &cfg, ctx)?;
                    let instead = format!(
                        "the model trains on {} CPU devices of this process, as with --device cpu",
                        cfg.devices
                    );
                    kit::note_fallback(&mut run, &note, &instead);
                    Ok(run)
                }
            };
        }
        match cfg.backend {
            #[cfg(feature = "mpi")]
            Backend::Mpi => self::mpi::run(self, params, &cfg, ctx),
            // `validate` refuses mpi in a build without the feature.
            _ => measure::run(self, params, &cfg, ctx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_takes_up_to_the_gpus_present_and_the_engine_backend() {
        assert!(check_gpu_count(Backend::Engine, 1, Some(1)).is_ok());
        // No usable GPU: the device check refuses it (or --fallback replaces it), not this.
        assert!(check_gpu_count(Backend::Engine, 4, None).is_ok());
        let more = check_gpu_count(Backend::Engine, 3, Some(2)).unwrap_err();
        assert!(more.is_usage());
        assert_eq!(
            more.to_string(),
            "data-parallel: --device cuda --devices 3 asks for 3 GPUs, and this machine has 2: \
             use --devices 2"
        );
        // Up to the GPUs present: nccl-allreduce over them.
        assert!(check_gpu_count(Backend::Engine, 2, Some(8)).is_ok());
        assert!(check_gpu_count(Backend::Engine, 8, Some(8)).is_ok());
        for present in [None, Some(1)] {
            let mpi = check_gpu_count(Backend::Mpi, 1, present).unwrap_err();
            let said = mpi.to_string();
            assert!(
                said.contains("--backend mpi is not offered on the GPU"),
                "{said}"
            );
        }
    }

    #[test]
    fn the_device_parameter_defaults_to_the_cpu() {
        let params = Params::parse("data-parallel", PARAMS, &[]).unwrap();
        let cfg = Config::of(&params).unwrap();
        assert_eq!(cfg.device, DeviceChoice::Cpu);
        assert!(!DataParallel.may_use_gpu(&params));
        let cuda = [("device".to_string(), "cuda".to_string())];
        let params = Params::parse("data-parallel", PARAMS, &cuda).unwrap();
        assert_eq!(Config::of(&params).unwrap().device, DeviceChoice::Cuda);
        assert!(DataParallel.may_use_gpu(&params));
    }
}
