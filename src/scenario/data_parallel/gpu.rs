//! `data-parallel --device cuda`: the seeded MLP trained on the GPU, the [`Plan`] of
//! `gpu_step` run with parbench's MLP kernels and cuBLAS (fp32, TF32 off).
//!
//! The data and the initial parameters are uploaded once; a run copies the initial parameters
//! into place on the device, zeroes the step counter and enqueues its steps. Two variants:
//! - `one-device`: each step's kernels launched one by one (eager), the step's loss read back
//!   after it (one blocking 4-byte copy a step, as an eager training loop reads `loss.item()`);
//! - `one-device-graph`: the step captured once as a CUDA graph and replayed each step
//!   (`hybridize`'s lesson applied to training). A graph cannot hand a value to the host in
//!   the middle of its replays without a host synchronization, so each replay writes its loss
//!   into its step's slot of a device buffer (the step counter, on the device, picks the slot
//!   and the batch) and the run reads the losses back once, after its last step.
//!
//! Checks: both variants' parameters after `min(steps, 20)` steps agree with host one-device
//! SGD (`mlp::gradient`, `mlp::sgd`) within [`AGREEMENT`], and with each other.

use std::sync::{Arc, Mutex};

use cudarc::driver::CudaSlice;

pub use super::gpu_step::host_sgd;
use super::gpu_step::{shard_of, At, Buf, Op, Plan, Planted, StepShape};
use super::mlp::{self, Dataset};
use super::training::{agrees, AGREEMENT};
use super::{Config, Timed, EVAL_ROWS, FINAL_LOSS, INITIAL_LOSS, SAMPLES_PER_SECOND, SEED};
use crate::device::cuda::mlp::{MlpKernels, MlpLaunch, Region};
use crate::device::cuda::nccl::{Comms, RankBuffer};
use crate::device::cuda::ops::GpuGraph;
use crate::device::cuda::{CudaDevice, GpuError};
use crate::device::{DeviceKind, DeviceRequest, Runtime};
use crate::harness::{synced, Variant};
use crate::report::{Better, Figure, RunRecord, Unit};
use crate::scenario::{Params, RunContext, Scenario, ScenarioError};

/// Steps the agreement check trains (fewer when a run takes fewer): the host's SGD it compares
/// with costs as much as the CPU variants' one-device run.
pub const CHECK_STEPS: usize = 20;

/// The GPU's buffers for a [`Plan`], its kernels and (once captured) the graph of a step.
///
/// Rust drops fields in declaration order, and the order here is the order they must go in:
/// the graph (whose kernels address the buffers), the buffers (freed in the compute stream's
/// order into the device's memory pool), the kernels' module, and the device last. A trainer
/// may hold the last reference to its device (`NcclTrainer`'s ranks on cuda:1.., a test's
/// device): dropped first, the device would destroy its pool, its cuBLAS handle and its
/// pollers while buffers allocated from that pool and work that uses them were still queued.
pub struct GpuTrainer {
    /// Dropped first: the graph's kernels address the buffers below.
    graph: Option<GpuGraph>,
    /// The plan's buffers, in its order (each one's whole region in `regions`). Only the
    /// regions are used; the buffers are held so that the memory they address lives as long
    /// as `self`, and dropped before the device whose pool they came from.
    _bufs: Vec<CudaSlice<f32>>,
    /// The initial parameters, copied into place at the start of each run (held, as `_bufs`).
    _initial: CudaSlice<f32>,
    /// After the buffers: the module whose kernels the queued work runs.
    kernels: MlpKernels,
    /// Declared after everything allocated on it, so dropped last (see above).
    device: Arc<CudaDevice>,
    plan: Plan,
    regions: Vec<Region>,
    initial_region: Region,
    steps: usize,
}

impl GpuTrainer {
    /// Allocate the plan's buffers on `device` and upload the data and the initial parameters.
    pub fn new(
        device: Arc<CudaDevice>,
        shape: &StepShape,
        data: &Dataset,
        initial: &[f32],
        planted: Option<Planted>,
    ) -> Result<GpuTrainer, GpuError> {
        GpuTrainer::with_plan(device, Plan::new(shape, planted), shape, data, initial)
    }

    /// [`new`](Self::new) for a given plan of `shape` (a shard's, [`Plan::scaled`]).
    pub fn with_plan(
        device: Arc<CudaDevice>,
        plan: Plan,
        shape: &StepShape,
        data: &Dataset,
        initial: &[f32],
    ) -> Result<GpuTrainer, GpuError> {
        plan.check().map_err(GpuError::Lengths)?;
        if data.rows() != shape.samples || initial.len() != plan.len_of(Buf::Params) {
            return Err(GpuError::Lengths(format!(
                "{} samples and {} parameters for a plan of {} and {}",
                data.rows(),
                initial.len(),
                shape.samples,
                plan.len_of(Buf::Params)
            )));
        }
        let kernels = MlpKernels::load(&device.ctx)?;
        let mut bufs = Vec::with_capacity(plan.buffers.len());
        let mut regions = Vec::with_capacity(plan.buffers.len());
        for &(_, len) in &plan.buffers {
            let buf = device.alloc(len.max(1))?;
            regions.push(Region::of(&device, &buf, 0, len)?);
            bufs.push(buf);
        }
        let initial_buf = device.alloc(initial.len().max(1))?;
        let initial_region = Region::of(&device, &initial_buf, 0, initial.len())?;
        let trainer = GpuTrainer {
            graph: None,
            _bufs: bufs,
            _initial: initial_buf,
            kernels,
            device,
            plan,
            regions,
            initial_region,
            steps: shape.steps,
        };
        let labels: Vec<f32> = data.labels.iter().map(|&l| l as f32).collect();
        // SAFETY: the regions address buffers `trainer` owns; each upload waits for its copy.
        unsafe {
            trainer
                .device
                .upload_region(&data.x, trainer.whole(Buf::Data)?)?;
            trainer
                .device
                .upload_region(&labels, trainer.whole(Buf::Labels)?)?;
            trainer
                .device
                .upload_region(initial, trainer.initial_region)?;
        }
        Ok(trainer)
    }

    fn whole(&self, buf: Buf) -> Result<Region, GpuError> {
        self.plan
            .index(buf)
            .map(|i| self.regions[i])
            .ok_or_else(|| GpuError::Lengths(format!("the plan has no {buf:?}")))
    }

    fn region(&self, at: At) -> Result<Region, GpuError> {
        let base = self.whole(at.buf)?;
        match at.offset.checked_add(at.len) {
            Some(end) if end <= base.len => Ok(Region {
                ptr: base.ptr + 4 * at.offset as u64,
                len: at.len,
            }),
            _ => Err(GpuError::Lengths(format!(
                "{at:?} past a buffer of {}",
                base.len
            ))),
        }
    }

    /// Enqueue the start of a run: the initial parameters in place, the counter at 0, every
    /// loss slot NaN (a step that never ran shows).
    fn reset(&self) -> Result<(), GpuError> {
        // SAFETY: the regions address buffers `self` owns, alive while the work runs (a run
        // waits for its last step before returning, and the buffers are freed in stream order).
        unsafe {
            self.device
                .copy_region(self.initial_region, self.whole(Buf::Params)?)?;
            self.device.fill_region(self.whole(Buf::Step)?, 0.0)?;
            self.device
                .fill_region(self.whole(Buf::Losses)?, f32::NAN)?;
        }
        Ok(())
    }

    /// Enqueue one step: every op of the plan, on this thread's launch stream (a capture's
    /// side stream while capturing).
    fn enqueue_step(&self) -> Result<(), GpuError> {
        self.enqueue(&self.plan.ops)
    }

    /// Enqueue the step's gradient phase (forward and backward into [`Buf::Grad`]).
    fn enqueue_gradient(&self) -> Result<(), GpuError> {
        self.enqueue(self.plan.phases().0)
    }

    /// Enqueue the step's update phase (`sgd` with [`Buf::Grad`]).
    fn enqueue_update(&self) -> Result<(), GpuError> {
        self.enqueue(self.plan.phases().1)
    }

    fn enqueue(&self, ops: &[Op]) -> Result<(), GpuError> {
        let d = &self.device;
        for op in ops {
            // SAFETY: every region is inside a buffer `self` owns (`Plan::check`, `region`),
            // which outlives the work: runs wait for their last step, the graph is dropped
            // before the buffers, and buffers are freed in stream order.
            unsafe {
                match *op {
                    Op::Gather { inputs, .. } => d.launch_mlp(
                        &self.kernels,
                        MlpLaunch::GatherBatch {
                            x: self.whole(Buf::Data)?,
                            y: self.whole(Buf::Labels)?,
                            step: self.whole(Buf::Step)?,
                            xb: self.whole(Buf::Act(0))?,
                            yb: self.whole(Buf::BatchLabels)?,
                            inputs,
                        },
                    )?,
                    Op::Product { a, b, c } => d.gemm_regions(
                        (self.region(a.at)?, a.dims, a.transposed),
                        (self.region(b.at)?, b.dims, b.transposed),
                        self.region(c)?,
                    )?,
                    Op::BiasAct { z, b, relu, .. } => d.launch_mlp(
                        &self.kernels,
                        MlpLaunch::BiasAct {
                            z: self.region(z)?,
                            b: self.region(b)?,
                            relu,
                        },
                    )?,
                    Op::SoftmaxXent {
                        logits,
                        rows,
                        classes,
                        scale,
                    } => d.launch_mlp(
                        &self.kernels,
                        MlpLaunch::SoftmaxXent {
                            logits: self.region(logits)?,
                            labels: self.whole(Buf::BatchLabels)?,
                            delta: self.region(At {
                                buf: Buf::Delta(0),
                                offset: 0,
                                len: rows * classes,
                            })?,
                            row_loss: self.whole(Buf::RowLoss)?,
                            classes,
                            scale,
                        },
                    )?,
                    Op::RecordLoss { scale, .. } => d.launch_mlp(
                        &self.kernels,
                        MlpLaunch::RecordLoss {
                            row_loss: self.whole(Buf::RowLoss)?,
                            scale,
                            step: self.whole(Buf::Step)?,
                            losses: self.whole(Buf::Losses)?,
                        },
                    )?,
                    Op::ReluBackward { delta, act } => d.launch_mlp(
                        &self.kernels,
                        MlpLaunch::ReluBackward {
                            delta: self.region(delta)?,
                            act: self.region(act)?,
                        },
                    )?,
                    Op::ColumnSum { x, out, .. } => d.launch_mlp(
                        &self.kernels,
                        MlpLaunch::ColumnSum {
                            x: self.region(x)?,
                            out: self.region(out)?,
                        },
                    )?,
                    Op::Sgd { w, g, lr } => d.launch_mlp(
                        &self.kernels,
                        MlpLaunch::Sgd {
                            w: self.region(w)?,
                            g: self.region(g)?,
                            lr,
                        },
                    )?,
                }
            }
        }
        Ok(())
    }

    /// `one-device`: `steps` eager steps from the initial parameters, each step's loss read
    /// back after it. Returns the losses.
    pub fn train_eager(&self, steps: usize) -> Result<Vec<f32>, GpuError> {
        self.device.bind()?;
        self.reset()?;
        let losses = self.whole(Buf::Losses)?;
        let mut out = Vec::with_capacity(steps);
        for s in 0..steps.min(self.steps) {
            self.enqueue_step()?;
            let slot = Region {
                ptr: losses.ptr + 4 * s as u64,
                len: 1,
            };
            // SAFETY: slot `s` of the losses buffer `self` owns; the read waits for the step.
            out.extend(unsafe { self.device.read_region(slot) }?);
        }
        Ok(out)
    }

    /// Capture one step as a CUDA graph (once; later calls keep the first graph).
    pub fn capture(&mut self) -> Result<(), GpuError> {
        if self.graph.is_none() {
            // One step first, outside the capture: cuBLAS's lazy set-up for these shapes (as
            // hybridize runs its pass once before capturing it, and PyTorch requires).
            self.reset()?;
            self.enqueue_step()?;
            self.device.synchronize()?;
            let graph = self.device.capture(|_| self.enqueue_step())?;
            self.graph = Some(graph);
        }
        Ok(())
    }

    /// `one-device-graph`: `steps` replays of the captured step from the initial parameters,
    /// the losses read back once, after the last.
    pub fn train_graph(&self, steps: usize) -> Result<Vec<f32>, GpuError> {
        let graph = self.graph.as_ref().ok_or(GpuError::NotCaptured)?;
        self.device.bind()?;
        self.reset()?;
        let steps = steps.min(self.steps);
        for _ in 0..steps {
            graph.launch()?;
        }
        let losses = self.whole(Buf::Losses)?;
        // SAFETY: the first `steps` slots of the losses buffer `self` owns; the read waits for
        // the last replay (the graph runs on the compute stream the read is enqueued on).
        unsafe {
            self.device.read_region(Region {
                ptr: losses.ptr,
                len: steps,
            })
        }
    }

    /// The parameters now (after the work enqueued so far).
    pub fn parameters(&self) -> Result<Vec<f32>, GpuError> {
        // SAFETY: the parameters buffer `self` owns; the read waits for the enqueued work.
        unsafe { self.device.read_region(self.whole(Buf::Params)?) }
    }

    /// The device the trainer runs on.
    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.device
    }
}

/// `nccl-allreduce`: data-parallel SGD over k GPUs of this process, one [`GpuTrainer`] a GPU
/// on its shard of each batch ([`shard_of`]: the rows `training::shard` gives the CPU
/// devices), and one NCCL communicator over them ([`Comms`]). A step enqueues every GPU's
/// gradient phase, then `ncclAllReduce` (sum, fp32, in place) of the gradients on each GPU's
/// compute stream in one NCCL group, then every GPU's update: each shard's loss is divided by
/// the global batch, so the sum is the whole batch's gradient and every GPU takes the step
/// one-device SGD takes. The same code for k = 1 (a one-rank communicator) as for k > 1.
pub struct NcclTrainer {
    /// Declared first, so destroyed before the GPUs' buffers and contexts go.
    comms: Mutex<Comms>,
    ranks: Vec<GpuTrainer>,
    steps: usize,
}

impl NcclTrainer {
    /// Communicators over `devices` (rank r on `devices[r]`), then each rank's shard uploaded.
    pub fn new(
        devices: Vec<Arc<CudaDevice>>,
        shape: &StepShape,
        data: &Dataset,
        initial: &[f32],
    ) -> Result<NcclTrainer, GpuError> {
        let k = devices.len();
        if k == 0 || k > shape.batch {
            return Err(GpuError::Lengths(format!(
                "{k} GPUs for a batch of {}",
                shape.batch
            )));
        }
        let ordinals: Vec<usize> = devices.iter().map(|d| d.ctx.ordinal()).collect();
        let comms = Comms::init_all(&ordinals)?;
        let mut ranks = Vec::with_capacity(k);
        for (r, device) in devices.into_iter().enumerate() {
            let (shard, shard_data) = shard_of(shape, data, k, r);
            let plan = Plan::scaled(&shard, shape.batch as f32, None);
            ranks.push(GpuTrainer::with_plan(
                device,
                plan,
                &shard,
                &shard_data,
                initial,
            )?);
        }
        Ok(NcclTrainer {
            comms: Mutex::new(comms),
            ranks,
            steps: shape.steps,
        })
    }

    /// The GPUs.
    pub fn ranks(&self) -> usize {
        self.ranks.len()
    }

    /// `steps` steps from the initial parameters; returns each step's loss (the ranks' shard
    /// losses summed), read back once after the last step.
    pub fn train(&self, steps: usize) -> Result<Vec<f32>, GpuError> {
        let steps = steps.min(self.steps);
        for r in &self.ranks {
            r.device.bind()?;
            r.reset()?;
        }
        let comms = self
            .comms
            .lock()
            .map_err(|_| GpuError::Poisoned("NCCL communicators"))?;
        let grads = self
            .ranks
            .iter()
            .map(|r| {
                r.whole(Buf::Grad).map(|g| RankBuffer {
                    ptr: g.ptr,
                    len: g.len,
                    stream: r.device.compute.cu_stream(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        for _ in 0..steps {
            for r in &self.ranks {
                r.device.bind()?;
                r.enqueue_gradient()?;
            }
            // SAFETY: each rank's gradient buffer, owned by its trainer (alive as `self`),
            // on its GPU's compute stream, after that GPU's gradient phase.
            unsafe { comms.all_reduce_sum(&grads) }?;
            for r in &self.ranks {
                r.device.bind()?;
                r.enqueue_update()?;
            }
        }
        let mut total = vec![0f32; steps];
        for r in &self.ranks {
            r.device.bind()?;
            let losses = r.whole(Buf::Losses)?;
            // SAFETY: the first `steps` slots of the rank's losses buffer; the read waits for
            // its stream's work.
            let got = unsafe {
                r.device.read_region(Region {
                    ptr: losses.ptr,
                    len: steps,
                })
            }?;
            total.iter_mut().zip(got).for_each(|(t, l)| *t += l);
        }
        Ok(total)
    }

    /// Each rank's parameters now (they are the same: every rank applies the same sum).
    pub fn parameters(&self) -> Result<Vec<Vec<f32>>, GpuError> {
        self.ranks
            .iter()
            .map(|r| {
                r.device.bind()?;
                r.parameters()
            })
            .collect()
    }

    /// Wait for every GPU's work; the first error.
    pub fn synchronize(&self) -> Result<(), GpuError> {
        self.ranks.iter().try_for_each(|r| r.device.synchronize())
    }
}

/// The GPUs of an `nccl-allreduce` run of `k`: cuda:0 (the runtime's) and cuda:1..k opened
/// beside it.
fn nccl_devices(first: &Arc<CudaDevice>, k: usize) -> Result<Vec<Arc<CudaDevice>>, GpuError> {
    let mut devices = vec![first.clone()];
    for ordinal in 1..k {
        devices.push(Arc::new(CudaDevice::open_ordinal(
            ordinal,
            SEED,
            first.order(),
        )?));
    }
    Ok(devices)
}

/// The run of `data-parallel --device cuda`: one-device and one-device-graph on cuda:0, and
/// nccl-allreduce on `--devices` GPUs (`validate` refuses more than the machine has).
pub(super) fn run(
    scenario: &dyn Scenario,
    params: &Params,
    cfg: &Config,
    ctx: &RunContext,
) -> Result<RunRecord, ScenarioError> {
    let rt = Runtime::new(&ctx.runtime, &[DeviceRequest::Cuda])?;
    let engine = &rt.engine;
    let DeviceKind::Cuda(device) = &rt.devices[0].kind else {
        return Err(ScenarioError::Input(
            "data-parallel --device cuda: the runtime has no GPU".into(),
        ));
    };
    let setup = cfg.setup(1);
    let steps = usize::try_from(cfg.steps)
        .map_err(|_| ScenarioError::Input("data-parallel: --steps too large".into()))?;
    let shape = StepShape {
        layers: cfg.layers.clone(),
        samples: cfg.samples,
        batch: cfg.batch,
        lr: cfg.lr,
        steps,
    };
    let mut trainer = GpuTrainer::new(device.clone(), &shape, &setup.data, &setup.initial, None)
        .map_err(crate::device::DeviceError::from)?;
    trainer
        .capture()
        .map_err(crate::device::DeviceError::from)?;
    let trainer = trainer;
    // nccl-allreduce over --devices k GPUs. Without NCCL a one-GPU run goes on without it
    // (and says so); k > 1 needs it.
    let k = cfg.devices;
    let mut nccl_missing = None;
    let nccl = match nccl_devices(device, k)
        .and_then(|d| NcclTrainer::new(d, &shape, &setup.data, &setup.initial))
    {
        Ok(t) => Some(t),
        Err(e) if k == 1 => {
            nccl_missing = Some(e.to_string());
            None
        }
        Err(e) => return Err(crate::device::DeviceError::from(e).into()),
    };
    let last: [Mutex<Vec<f32>>; 3] = Default::default();
    let gpu = |r: Result<Vec<f32>, GpuError>| r.map_err(crate::device::DeviceError::from);
    let mut variants: Vec<Variant<ScenarioError>> = vec![
        Variant::new(Timed::OneDevice.name(), || {
            synced(engine, || -> Result<(), ScenarioError> {
                let losses = gpu(trainer.train_eager(steps))?;
                *last[0].lock().unwrap_or_else(|e| e.into_inner()) = losses;
                Ok(())
            })
        }),
        Variant::new(Timed::OneDeviceGraph.name(), || {
            synced(engine, || -> Result<(), ScenarioError> {
                let losses = gpu(trainer.train_graph(steps))?;
                *last[1].lock().unwrap_or_else(|e| e.into_inner()) = losses;
                Ok(())
            })
        }),
    ];
    let mut timed = vec![Timed::OneDevice, Timed::OneDeviceGraph];
    if let Some(nccl) = &nccl {
        timed.push(Timed::NcclAllreduce);
        variants.push(Variant::new(Timed::NcclAllreduce.name(), || {
            synced(engine, || -> Result<(), ScenarioError> {
                let losses = gpu(nccl.train(steps))?;
                *last[2].lock().unwrap_or_else(|e| e.into_inner()) = losses;
                Ok(())
            })
        }));
    }
    let summaries = ctx.sample(scenario, engine, &mut variants)?;
    drop(variants);
    let losses: Vec<Vec<f32>> = last
        .iter()
        .map(|m| std::mem::take(&mut *m.lock().unwrap_or_else(|e| e.into_inner())))
        .collect();

    // The check: a short run of each variant against host SGD over as many steps.
    let check_steps = steps.min(CHECK_STEPS);
    let (host, _) = host_sgd(&shape, &setup.data, &setup.initial, check_steps);
    gpu(trainer.train_eager(check_steps))?;
    let eager = gpu(trainer.parameters())?;
    gpu(trainer.train_graph(check_steps))?;
    let graphed = gpu(trainer.parameters())?;
    // The full runs' final parameters, for the final loss.
    gpu(trainer.train_eager(steps))?;
    let eager_final = gpu(trainer.parameters())?;
    gpu(trainer.train_graph(steps))?;
    let graph_final = gpu(trainer.parameters())?;
    let mut finals = vec![eager_final, graph_final];
    let mut nccl_checked = None;
    if let Some(nccl) = &nccl {
        gpu(nccl.train(check_steps))?;
        let dev = |e: GpuError| crate::device::DeviceError::from(e);
        nccl_checked = Some(nccl.parameters().map_err(dev)?);
        gpu(nccl.train(steps))?;
        let mut ranks = nccl.parameters().map_err(dev)?;
        nccl.synchronize().map_err(dev)?;
        finals.push(ranks.swap_remove(0));
    }

    let mut run = RunRecord::new(scenario.name(), params.to_json(), rt.describe_devices());
    let gpus = if k == 1 {
        "cuda:0".to_string()
    } else {
        format!("cuda:0..cuda:{}", k - 1)
    };
    let label = |v: Timed| match v {
        Timed::NcclAllreduce => format!(
            "{steps} steps of {} rows split over {gpus} (one NCCL rank a GPU), the shard \
             gradients summed by ncclAllReduce between each step's backward pass and its \
             update; the losses read after the last step",
            cfg.batch
        ),
        Timed::OneDeviceGraph => format!(
            "{steps} steps of {} rows on cuda:0, the step captured once as a CUDA graph and \
             replayed; the losses read after the last step",
            cfg.batch
        ),
        _ => format!(
            "{steps} steps of {} rows on cuda:0, kernel by kernel; the loss read after each step",
            cfg.batch
        ),
    };
    run.add_variants(
        timed.iter().map(|v| v.name().to_string()).collect(),
        summaries,
        timed.iter().map(|&v| Some(label(v))),
    );
    for (v, p) in [
        (Timed::OneDevice, &eager),
        (Timed::OneDeviceGraph, &graphed),
    ] {
        let (ok, rel) = agrees(&host, p);
        run.check(
            &format!("{} on cuda:0 equals host one-device SGD", v.name()),
            ok,
            format!(
                "{} parameters after {check_steps} steps, difference {rel:.2e} of their norm \
                 (tolerance {AGREEMENT:.0e})",
                p.len()
            ),
        );
    }
    if let Some(ranks) = &nccl_checked {
        for (r, p) in ranks.iter().enumerate() {
            let (ok, rel) = agrees(&host, p);
            run.check(
                &format!("nccl-allreduce rank {r} of {k} (cuda:{r}) equals host one-device SGD"),
                ok,
                format!(
                    "{} parameters after {check_steps} steps, difference {rel:.2e} of their \
                     norm (tolerance {AGREEMENT:.0e})",
                    p.len()
                ),
            );
        }
    }
    let (ok, rel) = agrees(&eager, &graphed);
    run.check(
        "one-device-graph and one-device give the same parameters",
        ok,
        format!("difference {rel:.2e} of their norm (tolerance {AGREEMENT:.0e})"),
    );
    let eval = (0, EVAL_ROWS.min(cfg.samples));
    run.record(
        INITIAL_LOSS,
        mlp::loss(&setup.layers, &setup.initial, &setup.data, eval),
    );
    run.derive_as(
        "parameters",
        setup.initial.len() as f64,
        Figure::new(Unit::Number, Better::Neither),
    );
    let samples = cfg.steps as f64 * cfg.batch as f64;
    for ((v, p), l) in timed.iter().zip(&finals).zip(&losses) {
        let kp = v.name().replace('-', "_");
        let rate = run.median(v.name()).map_or(f64::NAN, |s| samples / s);
        run.derive_as(
            &format!("{kp}_samples_per_second"),
            rate,
            SAMPLES_PER_SECOND,
        );
        run.derive_as(
            &format!("{kp}_final_loss"),
            mlp::loss(&setup.layers, p, &setup.data, eval),
            FINAL_LOSS,
        );
        if let Some(last) = l.last() {
            run.derive_as(
                &format!("{kp}_last_step_loss"),
                f64::from(*last),
                Figure::new(Unit::Number, Better::Neither),
            );
        }
        // `[step, its batch's loss, seconds]` as the CPU curves; no per-step clock runs on
        // the GPU, so the seconds spread the run's median evenly over its steps.
        let median = run.median(v.name()).unwrap_or(f64::NAN);
        let n = l.len().max(1) as f64;
        let curve: Vec<[f64; 3]> = l
            .iter()
            .enumerate()
            .map(|(s, &loss)| [s as f64, f64::from(loss), median * (s + 1) as f64 / n])
            .collect();
        run.derive_series(
            &format!("{kp}_loss_curve"),
            serde_json::json!(super::training::thin(curve, 200)),
        );
    }
    run.notes.push(format!(
        "on the GPU (seed {SEED}): fp32 products through cuBLAS (TF32 off), one GPU; the \
         graph variant reads its losses back once per run, the eager one once per step"
    ));
    match (&nccl, nccl_missing) {
        (Some(_), _) => run.notes.push(format!(
            "nccl-allreduce: {k} GPU{} in one process, one NCCL communicator (ncclCommInitAll), \
             NCCL {}",
            if k == 1 { "" } else { "s" },
            crate::device::cuda::nccl::version().unwrap_or_else(|e| e.to_string())
        )),
        (None, Some(why)) => run.notes.push(format!("nccl-allreduce not run: {why}")),
        (None, None) => {}
    }
    // One GPU: nccl-allreduce is one device through NCCL, not a scaling to weigh.
    let weighed: Vec<Timed> = timed
        .iter()
        .copied()
        .filter(|v| k > 1 || *v != Timed::NcclAllreduce)
        .collect();
    super::lesson::conclude(&mut run, &weighed, k);
    Ok(run)
}

#[cfg(test)]
mod tests {
    //! On a GPU only (`#[ignore = "needs a GPU"]`, run by scripts/gpu-check.sh): each kernel
    //! against its host reference on random inputs, then the training step against host SGD.
    //! Anywhere: what a missing NCCL gives, and the order a trainer's fields drop in.
    use super::super::host_step::{self as reference, counter_slot};
    use super::*;
    use crate::device::GpuOrder;

    fn device() -> Arc<CudaDevice> {
        Arc::new(CudaDevice::open(0, GpuOrder::Stream).expect("the GPU opens"))
    }

    /// A device buffer holding `values`, and its region.
    fn put(d: &CudaDevice, values: &[f32]) -> (CudaSlice<f32>, Region) {
        let buf = d.alloc(values.len()).expect("alloc");
        let region = Region::of(d, &buf, 0, values.len()).expect("region");
        // SAFETY: the region of the buffer just allocated, alive here.
        unsafe { d.upload_region(values, region) }.expect("upload");
        (buf, region)
    }

    fn read(d: &CudaDevice, r: Region) -> Vec<f32> {
        // SAFETY: regions of buffers the test keeps alive.
        unsafe { d.read_region(r) }.expect("read")
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// Equal within `tolerance` (absolute), NaN where the host has NaN: for the kernels that
    /// use `expf` and `logf`, which may differ from the host's by an ulp or two (and δ at the
    /// label, `p / scale − 1 / scale`, is a difference of two such values).
    fn close(got: &[f32], want: &[f32], tolerance: f32) {
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            let same = (g.is_nan() && w.is_nan()) || (g - w).abs() <= tolerance;
            assert!(same, "{i}: GPU {g} host {w}");
        }
    }

    /// Random values in `[lo, hi)` from `seed`, for the kernels' tests.
    pub fn random(len: usize, seed: u64, (lo, hi): (f32, f32)) -> Vec<f32> {
        crate::device::cpu::uniform(&[len], seed)
            .iter()
            .map(|u| lo + (hi - lo) * u)
            .collect()
    }

    #[test]
    #[ignore = "needs a GPU"]
    fn gpu_mlp_kernels_equal_their_host_references() {
        let d = device();
        let k = MlpKernels::load(&d.ctx).expect("the MLP kernels load");
        let (rows, cols) = (37, 300);
        // gather_batch: a batch that wraps around the samples.
        let (samples, inputs, batch) = (50, 7, 33);
        let x = random(samples * inputs, 1, (-1.0, 1.0));
        let y: Vec<f32> = (0..samples).map(|i| (i % 5) as f32).collect();
        let (_xd, xr) = put(&d, &x);
        let (_yd, yr) = put(&d, &y);
        let (_sd, sr) = put(&d, &[counter_slot(3)]);
        let (_xbd, xbr) = put(&d, &vec![0.0; batch * inputs]);
        let (_ybd, ybr) = put(&d, &vec![0.0; batch]);
        // SAFETY (every launch below): regions of buffers alive until the test ends.
        unsafe {
            d.launch_mlp(
                &k,
                MlpLaunch::GatherBatch {
                    x: xr,
                    y: yr,
                    step: sr,
                    xb: xbr,
                    yb: ybr,
                    inputs,
                },
            )
        }
        .expect("gather");
        let (mut xb, mut yb) = (vec![0f32; batch * inputs], vec![0f32; batch]);
        reference::gather_batch(&x, &y, 3, (&mut xb, &mut yb), inputs);
        assert_eq!(bits(&read(&d, xbr)), bits(&xb));
        assert_eq!(bits(&read(&d, ybr)), bits(&yb));

        // bias_act, with and without ReLU: bit for bit.
        for relu in [true, false] {
            let z = random(rows * cols, 2, (-2.0, 2.0));
            let b = random(cols, 3, (-1.0, 1.0));
            let (_zd, zr) = put(&d, &z);
            let (_bd, br) = put(&d, &b);
            unsafe { d.launch_mlp(&k, MlpLaunch::BiasAct { z: zr, b: br, relu }) }.expect("bias");
            let mut want = z.clone();
            reference::bias_act(&mut want, &b, relu);
            assert_eq!(bits(&read(&d, zr)), bits(&want), "relu {relu}");
        }

        // softmax_xent: expf and logf within a few ulps of the host's; one label out of range.
        let classes = 10;
        let logits = random(rows * classes, 4, (-8.0, 8.0));
        let mut labels: Vec<f32> = (0..rows).map(|i| (i * 7 % classes) as f32).collect();
        labels[5] = classes as f32;
        let (_ld, lr) = put(&d, &logits);
        let (_lbd, lbr) = put(&d, &labels);
        let (_dd, dr) = put(&d, &vec![0.0; rows * classes]);
        let (_rd, rr) = put(&d, &vec![0.0; rows]);
        unsafe {
            d.launch_mlp(
                &k,
                MlpLaunch::SoftmaxXent {
                    logits: lr,
                    labels: lbr,
                    delta: dr,
                    row_loss: rr,
                    classes,
                    scale: 37.0,
                },
            )
        }
        .expect("softmax");
        let (mut delta, mut row_loss) = (vec![0f32; rows * classes], vec![0f32; rows]);
        reference::softmax_xent(&logits, &labels, (&mut delta, &mut row_loss), classes, 37.0);
        // δ is of the order of 1 / scale; a row's loss of 1 to 16.
        close(&read(&d, dr), &delta, 4e-6 / 37.0);
        close(&read(&d, rr), &row_loss, 1e-5);
        // Not vacuous: the values are there, and the out-of-range label gave NaN.
        assert!(row_loss[5].is_nan() && row_loss[0] > 0.0);

        // record_loss: over more rows than the block's threads; the counter advances.
        let row_losses = random(1000, 5, (0.0, 3.0));
        let (_rld, rlr) = put(&d, &row_losses);
        let (_cd, cr) = put(&d, &[counter_slot(1)]);
        let (_lsd, lsr) = put(&d, &[f32::NAN; 3]);
        unsafe {
            d.launch_mlp(
                &k,
                MlpLaunch::RecordLoss {
                    row_loss: rlr,
                    scale: 1000.0,
                    step: cr,
                    losses: lsr,
                },
            )
        }
        .expect("record_loss");
        let (mut step, mut losses) = (1u32, vec![f32::NAN; 3]);
        reference::record_loss(&row_losses, 1000.0, &mut step, &mut losses);
        assert_eq!(bits(&read(&d, lsr)), bits(&losses));
        assert_eq!(bits(&read(&d, cr)), bits(&[counter_slot(step)]));

        // relu_backward, column_sum and sgd: bit for bit.
        let delta = random(rows * cols, 6, (-1.0, 1.0));
        let act = random(rows * cols, 7, (-1.0, 1.0));
        let (_dd2, dr2) = put(&d, &delta);
        let (_ad, ar) = put(&d, &act);
        unsafe {
            d.launch_mlp(
                &k,
                MlpLaunch::ReluBackward {
                    delta: dr2,
                    act: ar,
                },
            )
        }
        .expect("relu_backward");
        let mut want = delta.clone();
        reference::relu_backward(&mut want, &act);
        assert_eq!(bits(&read(&d, dr2)), bits(&want));

        let (_od, or) = put(&d, &vec![0.0; cols]);
        unsafe { d.launch_mlp(&k, MlpLaunch::ColumnSum { x: ar, out: or }) }.expect("sum");
        let mut sums = vec![0f32; cols];
        reference::column_sum(&act, &mut sums);
        assert_eq!(bits(&read(&d, or)), bits(&sums));

        let w = random(rows * cols, 8, (-1.0, 1.0));
        let (_wd, wr) = put(&d, &w);
        unsafe {
            d.launch_mlp(
                &k,
                MlpLaunch::Sgd {
                    w: wr,
                    g: dr2,
                    lr: 0.37,
                },
            )
        }
        .expect("sgd");
        let mut want_w = w.clone();
        reference::sgd(&mut want_w, &read(&d, dr2), 0.37);
        assert_eq!(bits(&read(&d, wr)), bits(&want_w));
        d.synchronize().expect("no deferred error");
    }

    #[test]
    #[ignore = "needs a GPU"]
    fn gpu_mlp_products_with_transposes_equal_the_hosts() {
        let d = device();
        // op(a) m×k, op(b) k×n, each operand stored as the product uses it or transposed.
        let (m, k, n) = (33, 70, 45);
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let a_dims = if ta { (k, m) } else { (m, k) };
            let b_dims = if tb { (n, k) } else { (k, n) };
            let a = random(m * k, 11, (-1.0, 1.0));
            let b = random(k * n, 12, (-1.0, 1.0));
            let (_ad, ar) = put(&d, &a);
            let (_bd, br) = put(&d, &b);
            let (_cd, cr) = put(&d, &vec![f32::NAN; m * n]);
            // SAFETY: regions of buffers alive until the end of the iteration.
            unsafe { d.gemm_regions((ar, a_dims, ta), (br, b_dims, tb), cr) }.expect("gemm");
            // Host in f64, straight from the definition.
            let at = |i: usize, j: usize| f64::from(if ta { a[j * m + i] } else { a[i * k + j] });
            let bt = |i: usize, j: usize| f64::from(if tb { b[j * k + i] } else { b[i * n + j] });
            let got = read(&d, cr);
            for i in 0..m {
                for j in 0..n {
                    let want: f64 = (0..k).map(|p| at(i, p) * bt(p, j)).sum();
                    let g = f64::from(got[i * n + j]);
                    assert!(
                        (g - want).abs() <= 1e-5 * (k as f64),
                        "({ta}, {tb}) at {i},{j}: GPU {g} host {want}"
                    );
                }
            }
        }
        // Shapes that do not fit are refused, not launched.
        let (_xd, xr) = put(&d, &[0.0; 6]);
        // SAFETY: as above.
        let refused = unsafe { d.gemm_regions((xr, (2, 3), false), (xr, (2, 3), false), xr) };
        assert!(matches!(refused, Err(GpuError::Lengths(_))));
    }

    fn small_run() -> (StepShape, Dataset, Vec<f32>) {
        let layers = super::super::mlp::Layers(vec![64, 128, 96, 10]);
        let shape = StepShape {
            layers: layers.clone(),
            samples: 700,
            batch: 128,
            lr: 0.1,
            steps: 20,
        };
        let data = Dataset::new(700, 64, 10, SEED);
        let initial = layers.initial_parameters(SEED);
        (shape, data, initial)
    }

    #[test]
    #[ignore = "needs a GPU"]
    fn gpu_training_equals_host_sgd_eager_and_graphed() {
        let (shape, data, initial) = small_run();
        let mut t = GpuTrainer::new(device(), &shape, &data, &initial, None).expect("trainer");
        t.capture().expect("the step captures");
        let (host, _) = host_sgd(&shape, &data, &initial, 20);
        let eager_losses = t.train_eager(20).expect("eager");
        let eager = t.parameters().expect("read");
        let graph_losses = t.train_graph(20).expect("graph");
        let graphed = t.parameters().expect("read");
        for (what, p) in [("eager", &eager), ("graph", &graphed)] {
            let (ok, rel) = agrees(&host, p);
            assert!(ok, "{what}: {rel:.2e} from host SGD");
        }
        // Every step's loss was written, and they fall.
        assert_eq!(eager_losses.len(), 20);
        assert_eq!(graph_losses.len(), 20);
        assert!(eager_losses
            .iter()
            .chain(&graph_losses)
            .all(|l| l.is_finite()));
        assert!(eager_losses[19] < eager_losses[0], "{eager_losses:?}");
        // Runs start again from the initial parameters: a second run ends where the first did.
        t.train_graph(20).expect("graph again");
        assert_eq!(t.parameters().expect("read"), graphed);
        t.device().synchronize().expect("no deferred error");
    }

    /// `nccl-allreduce` on `k` GPUs against host SGD: every rank's parameters, the losses, and
    /// a second run ending where the first did. Where NCCL cannot be loaded (or set up), the
    /// test fails with that error in one line (where NCCL was sought, what to install), not
    /// with a panic's backtrace; NCCL is loaded first, so that is the error with or without a
    /// GPU. The kit runs it only where it found `libnccl.so.2`, and records where (`nccl.txt`).
    fn nccl_equals_host_sgd(k: usize) -> Result<(), String> {
        let nccl = |e: GpuError| format!("NCCL over {k} GPU(s): {e}");
        crate::device::cuda::nccl::version().map_err(nccl)?;
        let (shape, data, initial) = small_run();
        let first = CudaDevice::open(0, GpuOrder::Stream)
            .map(Arc::new)
            .map_err(|e| format!("the GPU opens: {e}"))?;
        let devices = nccl_devices(&first, k).map_err(|e| format!("the GPUs open: {e}"))?;
        let t = NcclTrainer::new(devices, &shape, &data, &initial).map_err(nccl)?;
        assert_eq!(t.ranks(), k);
        let (host, _) = host_sgd(&shape, &data, &initial, 20);
        let losses = t.train(20).expect("train");
        let ranks = t.parameters().expect("read");
        assert_eq!(ranks.len(), k);
        for (r, p) in ranks.iter().enumerate() {
            let (ok, rel) = agrees(&host, p);
            assert!(ok, "rank {r} of {k}: {rel:.2e} from host SGD");
        }
        assert_eq!(losses.len(), 20);
        assert!(losses.iter().all(|l| l.is_finite()), "{losses:?}");
        assert!(losses[19] < losses[0], "{losses:?}");
        t.train(20).expect("again");
        assert_eq!(t.parameters().expect("read"), ranks);
        t.synchronize().expect("no deferred error");
        Ok(())
    }

    #[test]
    #[ignore = "needs a GPU and NCCL (libnccl.so.2)"]
    fn gpu_nccl_allreduce_on_one_rank_equals_host_sgd() -> Result<(), String> {
        nccl_equals_host_sgd(1)
    }

    #[test]
    #[ignore = "needs 2 GPUs and NCCL (libnccl.so.2)"]
    fn gpu_nccl_allreduce_on_two_gpus_equals_host_sgd() -> Result<(), String> {
        nccl_equals_host_sgd(2)
    }

    /// Without a GPU: where NCCL is missing (as on CI), the NCCL tests return an error in one
    /// line naming what was sought and what to install, before any GPU is touched, rather
    /// than panic; so does setting up the communicators.
    #[test]
    fn a_missing_nccl_is_an_error_before_any_gpu_is_touched() {
        if let Ok(v) = crate::device::cuda::nccl::version() {
            eprintln!("NCCL {v} loads here: only a GPU can take the NCCL tests further");
            return;
        }
        for k in [1, 2] {
            let text = nccl_equals_host_sgd(k).expect_err("no NCCL");
            assert!(
                text.starts_with(&format!("NCCL over {k} GPU(s): NCCL (libnccl.so.2)"))
                    && text.contains("pip install nvidia-nccl-cu13")
                    && !text.contains('\n'),
                "{text}"
            );
        }
        let e = Comms::init_all(&[0])
            .err()
            .expect("no NCCL, no communicator");
        assert!(matches!(e, GpuError::Nccl(_)), "{e}");
    }

    /// The order the fields drop in: everything allocated on the device before the device
    /// (Rust drops fields in declaration order; see `GpuTrainer`).
    #[test]
    fn a_trainer_drops_its_buffers_and_kernels_before_its_device() {
        let source = include_str!("gpu.rs");
        let start = source.find("pub struct GpuTrainer {").expect("the struct");
        let body = &source[start..start + source[start..].find("\n}").expect("its end")];
        let at = |field: &str| {
            body.find(&format!("    {field}: "))
                .unwrap_or_else(|| panic!("no field {field}"))
        };
        for field in ["graph", "_bufs", "_initial", "kernels"] {
            assert!(at(field) < at("device"), "{field} drops after the device");
        }
        assert!(
            at("graph") < at("_bufs"),
            "the graph drops after its buffers"
        );
    }

    /// A trainer that holds the last reference to its device drops cleanly: its buffers and
    /// kernels go before the device (a fresh device then works; under memcheck, no error).
    #[test]
    #[ignore = "needs a GPU"]
    fn gpu_a_trainer_holding_its_device_alone_drops_cleanly() {
        let (shape, data, initial) = small_run();
        for graphed in [false, true] {
            let mut t = GpuTrainer::new(device(), &shape, &data, &initial, None).expect("trainer");
            if graphed {
                t.capture().expect("the step captures");
                t.train_graph(3).expect("graph");
            } else {
                t.train_eager(3).expect("eager");
            }
            // The trainer holds it alone (its graph, dropped first, holds one more).
            let held = if graphed { 2 } else { 1 };
            assert_eq!(Arc::strong_count(t.device()), held);
            drop(t);
        }
        let d = device();
        let (_buf, region) = put(&d, &[1.5; 8]);
        assert_eq!(read(&d, region), vec![1.5; 8]);
        d.synchronize().expect("no deferred error");
    }

    #[test]
    #[ignore = "needs a GPU"]
    fn gpu_a_missing_ordinal_is_refused_not_opened() {
        let present = crate::device::cuda::gpus().len();
        let e = CudaDevice::open_ordinal(present, SEED, GpuOrder::Stream)
            .err()
            .expect("no such GPU");
        assert!(
            e.to_string().contains(&format!("no GPU cuda:{present}")),
            "{e}"
        );
    }

    #[test]
    #[ignore = "needs a GPU"]
    fn gpu_training_with_a_planted_error_fails_the_check() {
        let (shape, data, initial) = small_run();
        let planted = Some(Planted::SkipBiasUpdate);
        let t = GpuTrainer::new(device(), &shape, &data, &initial, planted).expect("trainer");
        t.train_eager(20).expect("eager");
        let (ok, rel) = agrees(
            &host_sgd(&shape, &data, &initial, 20).0,
            &t.parameters().expect("read"),
        );
        assert!(!ok, "skipping the bias update passed the check ({rel:.2e})");
    }
}
