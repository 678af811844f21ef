//! One GPU's trainer for `data-parallel --device cuda`: the buffers of a [`Plan`] of `gpu_step`
//! on the GPU, its ops launched as parbench's MLP kernels and cuBLAS products (fp32, TF32 off),
//! eagerly kernel by kernel (`one-device`) or captured once as a CUDA graph and replayed
//! (`one-device-graph`). The `gpu` module times it; `nccl` runs one a GPU.

use std::sync::Arc;

use cudarc::driver::CudaSlice;

use super::gpu_step::{At, Buf, Op, Plan, StepShape};
use super::mlp::Dataset;
use crate::device::cuda::mlp::{MlpKernels, MlpLaunch, Region};
use crate::device::cuda::ops::GpuGraph;
use crate::device::cuda::{CudaDevice, GpuError};

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
    /// Allocate `plan`'s buffers (a plan of `shape`: [`Plan::new`], or a shard's
    /// [`Plan::scaled`]) on `device` and upload the data and the initial parameters.
    pub fn new(
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

    pub(super) fn whole(&self, buf: Buf) -> Result<Region, GpuError> {
        self.plan
            .index(buf)
            .map(|i| self.regions[i])
            .ok_or_else(|| GpuError::Lengths(format!("the plan has no {buf:?}")))
    }

    fn region(&self, at: At) -> Result<Region, GpuError> {
        self.whole(at.buf)?.part(at.offset, at.len)
    }

    /// Enqueue the start of a run: the initial parameters in place, the counter at 0, every
    /// loss slot NaN (a step that never ran shows).
    pub(super) fn reset(&self) -> Result<(), GpuError> {
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
    pub(super) fn enqueue_gradient(&self) -> Result<(), GpuError> {
        self.enqueue(self.plan.phases().0)
    }

    /// Enqueue the step's update phase (`sgd` with [`Buf::Grad`]).
    pub(super) fn enqueue_update(&self) -> Result<(), GpuError> {
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
            // SAFETY: slot `s` of the losses buffer `self` owns; the read waits for the step.
            out.extend(unsafe { self.device.read_region(losses.part(s, 1)?) }?);
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
        let losses = self.whole(Buf::Losses)?.part(0, steps)?;
        // SAFETY: the first `steps` slots of the losses buffer `self` owns; the read waits for
        // the last replay (the graph runs on the compute stream the read is enqueued on).
        unsafe { self.device.read_region(losses) }
    }

    /// The parameters now (after the work enqueued so far).
    pub fn parameters(&self) -> Result<Vec<f32>, GpuError> {
        // SAFETY: the parameters buffer `self` owns; the read waits for the enqueued work.
        unsafe { self.device.read_region(self.whole(Buf::Params)?) }
    }

    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.device
    }
}

#[cfg(test)]
mod tests {
    //! On a GPU only (`#[ignore = "needs a GPU"]`, run by scripts/gpu-check.sh): the training
    //! step against host SGD, eager and graphed, and with a planted error. Anywhere: the order
    //! a trainer's fields drop in.
    use super::super::gpu::tests::{device, put, read, small_run};
    use super::super::gpu_step::{host_sgd, Planted};
    use super::super::training::agrees;
    use super::*;

    #[test]
    #[ignore = "needs a GPU"]
    fn gpu_training_equals_host_sgd_eager_and_graphed() {
        let (shape, data, initial) = small_run();
        let mut t = GpuTrainer::new(device(), Plan::new(&shape, None), &shape, &data, &initial)
            .expect("trainer");
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

    /// The order the fields drop in: everything allocated on the device before the device
    /// (Rust drops fields in declaration order; see `GpuTrainer`).
    #[test]
    fn a_trainer_drops_its_buffers_and_kernels_before_its_device() {
        let source = include_str!("gpu_trainer.rs");
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
            let mut t = GpuTrainer::new(device(), Plan::new(&shape, None), &shape, &data, &initial)
                .expect("trainer");
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
    fn gpu_training_with_a_planted_error_fails_the_check() {
        let (shape, data, initial) = small_run();
        let planted = Some(Planted::SkipBiasUpdate);
        let t = GpuTrainer::new(
            device(),
            Plan::new(&shape, planted),
            &shape,
            &data,
            &initial,
        )
        .expect("trainer");
        t.train_eager(20).expect("eager");
        let (ok, rel) = agrees(
            &host_sgd(&shape, &data, &initial, 20).0,
            &t.parameters().expect("read"),
        );
        assert!(!ok, "skipping the bias update passed the check ({rel:.2e})");
    }
}
