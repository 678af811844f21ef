//! `nccl-allreduce` of `data-parallel --device cuda`: data-parallel SGD over k GPUs of this
//! process, one [`GpuTrainer`] a GPU and one NCCL communicator over them.

use std::sync::{Arc, Mutex};

use super::gpu_step::{shard_of, Buf, Plan, StepShape};
use super::gpu_trainer::GpuTrainer;
use super::mlp::Dataset;
use super::SEED;
use crate::device::cuda::nccl::{Comms, RankBuffer};
use crate::device::cuda::{CudaDevice, GpuError};

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
            ranks.push(GpuTrainer::new(device, plan, &shard, &shard_data, initial)?);
        }
        Ok(NcclTrainer {
            comms: Mutex::new(comms),
            ranks,
            steps: shape.steps,
        })
    }

    /// `steps` steps from the initial parameters; returns each step's loss (the ranks' shard
    /// losses summed), read back once after the last step.
    pub fn train(&self, steps: usize) -> Result<Vec<f32>, GpuError> {
        let steps = steps.min(self.steps);
        for r in &self.ranks {
            r.device().bind()?;
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
                    stream: r.device().compute.cu_stream(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        for _ in 0..steps {
            for r in &self.ranks {
                r.device().bind()?;
                r.enqueue_gradient()?;
            }
            // SAFETY: each rank's gradient buffer, owned by its trainer (alive as `self`),
            // on its GPU's compute stream, after that GPU's gradient phase.
            unsafe { comms.all_reduce_sum(&grads) }?;
            for r in &self.ranks {
                r.device().bind()?;
                r.enqueue_update()?;
            }
        }
        let mut total = vec![0f32; steps];
        for r in &self.ranks {
            r.device().bind()?;
            let losses = r.whole(Buf::Losses)?.part(0, steps)?;
            // SAFETY: the first `steps` slots of the rank's losses buffer; the read waits for
            // its stream's work.
            let got = unsafe { r.device().read_region(losses) }?;
            total.iter_mut().zip(got).for_each(|(t, l)| *t += l);
        }
        Ok(total)
    }

    /// Each rank's parameters now (they are the same: every rank applies the same sum).
    pub fn parameters(&self) -> Result<Vec<Vec<f32>>, GpuError> {
        self.ranks
            .iter()
            .map(|r| {
                r.device().bind()?;
                r.parameters()
            })
            .collect()
    }

    /// Wait for every GPU's work; the first error.
    pub fn synchronize(&self) -> Result<(), GpuError> {
        self.ranks.iter().try_for_each(|r| r.device().synchronize())
    }
}

/// The GPUs of an `nccl-allreduce` run of `k`: cuda:0 (the runtime's) and cuda:1..k opened
/// beside it.
pub(super) fn nccl_devices(
    first: &Arc<CudaDevice>,
    k: usize,
) -> Result<Vec<Arc<CudaDevice>>, GpuError> {
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

#[cfg(test)]
mod tests {
    //! On a GPU with NCCL only: `nccl-allreduce` on 1 and 2 GPUs against host SGD, and the
    //! refusal of a missing ordinal. Anywhere: what a missing NCCL gives.
    use super::super::gpu::tests::small_run;
    use super::super::gpu_step::host_sgd;
    use super::super::training::agrees;
    use super::*;
    use crate::device::GpuOrder;

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
}
