//! The host reference of every kernel of `src/device/cuda/kernels/mlp.cu` (five are the host
//! MLP's own steps, in [`super::mlp`]), computing the same values in the same order of
//! operations (the GPU's expf and logf may differ by an ulp; the rest is bit for bit), and
//! [`HostStep`], which runs a [`Plan`] with them and the host's products: what the GPU computes
//! (`data-parallel --device cuda`), on any machine, for the checks `gpu_step` describes.
//! Compiled for the tests alone: the GPU run checks itself against
//! [`host_sgd`](super::gpu_step::host_sgd).

use super::gpu_step::{At, Buf, Op, Plan};
use super::mlp::{self, Dataset};
pub use super::mlp::{bias_act, column_sum, relu_backward, sgd, softmax_xent};

/// `gather_batch`: rows `(step · batch + r) mod samples`.
pub fn gather_batch(
    x: &[f32],
    y: &[f32],
    step: u32,
    (xb, yb): (&mut [f32], &mut [f32]),
    inputs: usize,
) {
    let samples = y.len();
    let start = u64::from(step) * yb.len() as u64;
    for (r, (row, label)) in xb.chunks_mut(inputs).zip(yb.iter_mut()).enumerate() {
        let src = ((start + r as u64) % samples as u64) as usize;
        row.copy_from_slice(&x[src * inputs..(src + 1) * inputs]);
        *label = y[src];
    }
}

/// Threads of `record_loss`'s one block: its partial sums. The kernel's own count is
/// `LOSS_THREADS` in `device/cuda/kernels/mlp.cu`; a test holds the two equal.
pub const LOSS_THREADS: usize = 256;

/// `record_loss`: the rows' losses summed in f64 as the kernel's block sums them (thread `t`
/// adds rows `t, t + 256, ...`, then a tree over the threads), divided by `scale`, into
/// `losses[step]`; then the step advances.
pub fn record_loss(row_loss: &[f32], scale: f32, step: &mut u32, losses: &mut [f32]) {
    let mut partial = [0f64; LOSS_THREADS];
    for (t, p) in partial.iter_mut().enumerate() {
        let mut sum = 0f64;
        for v in row_loss.iter().skip(t).step_by(LOSS_THREADS) {
            sum += f64::from(*v);
        }
        *p = sum;
    }
    let mut s = LOSS_THREADS / 2;
    while s > 0 {
        for t in 0..s {
            partial[t] += partial[t + s];
        }
        s /= 2;
    }
    if let Some(slot) = losses.get_mut(*step as usize) {
        *slot = (partial[0] / f64::from(scale)) as f32;
    }
    *step = step.wrapping_add(1);
}

/// The step counter's value as its slot holds it.
pub fn counter(slot: f32) -> u32 {
    slot.to_bits()
}

/// A step counter's slot holding `step`.
pub fn counter_slot(step: u32) -> f32 {
    f32::from_bits(step)
}

/// A [`Plan`] run on the host with the references: what the GPU computes, on any machine.
pub struct HostStep {
    plan: Plan,
    bufs: Vec<Vec<f32>>,
}

impl HostStep {
    /// The buffers of `plan`, the data and the initial parameters in place, the counter at 0.
    pub fn new(plan: Plan, data: &Dataset, initial: &[f32]) -> HostStep {
        let bufs = plan.buffers.iter().map(|(_, n)| vec![0f32; *n]).collect();
        let mut step = HostStep { plan, bufs };
        step.set(Buf::Data, &data.x);
        let labels: Vec<f32> = data.labels.iter().map(|&l| l as f32).collect();
        step.set(Buf::Labels, &labels);
        step.set(Buf::Params, initial);
        step
    }

    pub fn get(&self, buf: Buf) -> &[f32] {
        self.plan.index(buf).map_or(&[], |i| &self.bufs[i])
    }

    fn region(&self, at: At) -> &[f32] {
        &self.get(at.buf)[at.offset..at.offset + at.len]
    }

    /// Run `op` with `out`'s buffer taken out of the others (it is written, the others read).
    fn with_out(&mut self, out: Buf, f: impl FnOnce(&HostStep, &mut Vec<f32>)) {
        let Some(i) = self.plan.index(out) else {
            return;
        };
        let mut taken = std::mem::take(&mut self.bufs[i]);
        f(self, &mut taken);
        self.bufs[i] = taken;
    }

    /// One step: every op of the plan, in order.
    pub fn step(&mut self) {
        self.run_ops(0..self.plan.ops.len());
    }

    /// The step's gradient phase alone ([`Plan::phases`]).
    pub fn gradient(&mut self) {
        self.run_ops(0..self.plan.update_start());
    }

    /// The step's update phase alone.
    pub fn update(&mut self) {
        self.run_ops(self.plan.update_start()..self.plan.ops.len());
    }

    fn run_ops(&mut self, ops: std::ops::Range<usize>) {
        for i in ops {
            let op = self.plan.ops[i];
            self.run(op);
        }
    }

    /// Overwrite a buffer (the same length): the all-reduced gradient, in the tests.
    pub fn set(&mut self, buf: Buf, values: &[f32]) {
        if let Some(i) = self.plan.index(buf) {
            self.bufs[i].copy_from_slice(values);
        }
    }

    fn run(&mut self, op: Op) {
        match op {
            Op::Gather { inputs, .. } => {
                let step = counter(self.get(Buf::Step)[0]);
                let mut xb = vec![0f32; self.get(Buf::Act(0)).len()];
                let mut yb = vec![0f32; self.get(Buf::BatchLabels).len()];
                let (x, y) = (self.get(Buf::Data), self.get(Buf::Labels));
                gather_batch(x, y, step, (&mut xb, &mut yb), inputs);
                self.with_out(Buf::Act(0), |_, out| out.copy_from_slice(&xb));
                self.with_out(Buf::BatchLabels, |_, out| out.copy_from_slice(&yb));
            }
            Op::Product { a, b, c } => self.with_out(c.buf, |s, out| {
                mlp::product(
                    (s.region(a.at), a.dims.0, a.dims.1, a.transposed),
                    (s.region(b.at), b.dims.0, b.dims.1, b.transposed),
                    &mut out[c.offset..c.offset + c.len],
                );
            }),
            Op::BiasAct { z, b, relu, .. } => self.with_out(z.buf, |s, out| {
                bias_act(&mut out[z.offset..z.offset + z.len], s.region(b), relu)
            }),
            Op::SoftmaxXent {
                logits,
                rows,
                classes,
                scale,
            } => {
                let mut row_loss = vec![0f32; rows];
                self.with_out(Buf::Delta(0), |s, delta| {
                    let (z, labels) = (s.region(logits), s.get(Buf::BatchLabels));
                    let out = (&mut delta[..rows * classes], &mut row_loss[..]);
                    softmax_xent(z, labels, out, classes, scale)
                });
                self.with_out(Buf::RowLoss, |_, out| out.copy_from_slice(&row_loss));
            }
            Op::RecordLoss { scale, .. } => {
                let mut step = counter(self.get(Buf::Step)[0]);
                self.with_out(Buf::Losses, |s, losses| {
                    record_loss(s.get(Buf::RowLoss), scale, &mut step, losses)
                });
                self.with_out(Buf::Step, |_, slot| slot[0] = counter_slot(step));
            }
            Op::ReluBackward { delta, act } => self.with_out(delta.buf, |s, out| {
                let d = &mut out[delta.offset..delta.offset + delta.len];
                relu_backward(d, s.region(act))
            }),
            Op::ColumnSum { x, out: o, .. } => self.with_out(o.buf, |s, out| {
                column_sum(s.region(x), &mut out[o.offset..o.offset + o.len])
            }),
            Op::Sgd { w, g, lr } => self.with_out(w.buf, |s, out| {
                sgd(&mut out[w.offset..w.offset + w.len], s.region(g), lr)
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::gpu_step::tests::shape;
    use super::super::gpu_step::{host_sgd, shard_of, Planted, StepShape};
    use super::super::training::agrees;
    use super::*;

    #[test]
    fn the_loss_sum_has_the_kernels_thread_count() {
        let source = include_str!("../../device/cuda/kernels/mlp.cu");
        assert_eq!(
            crate::device::cuda_source::define(source, "LOSS_THREADS"),
            Some(LOSS_THREADS)
        );
    }

    /// What `nccl-allreduce` does on k GPUs, on the host: each shard's gradient phase, the
    /// gradients summed (NCCL's all-reduce), each shard's update.
    fn sharded_run(s: &StepShape, data: &Dataset, initial: &[f32], k: usize) -> Vec<HostStep> {
        let mut ranks: Vec<HostStep> = (0..k)
            .map(|r| {
                let (shard, shard_data) = shard_of(s, data, k, r);
                let plan = Plan::scaled(&shard, s.batch as f32, None);
                plan.check().unwrap();
                HostStep::new(plan, &shard_data, initial)
            })
            .collect();
        for _ in 0..s.steps {
            ranks.iter_mut().for_each(HostStep::gradient);
            let mut sum = vec![0f32; initial.len()];
            for r in &ranks {
                sum.iter_mut()
                    .zip(r.get(Buf::Grad))
                    .for_each(|(a, g)| *a += g);
            }
            for r in &mut ranks {
                r.set(Buf::Grad, &sum);
                r.update();
            }
        }
        ranks
    }

    #[test]
    fn shard_gradients_summed_between_the_phases_equal_host_sgd() {
        // Uneven shards (10 rows over 3), batches that wrap, a run longer than the batches'
        // cycle (23 samples, batch 10: 23 steps) and shorter.
        for (samples, batch, steps) in [(23, 10, 9), (40, 16, 7), (12, 6, 5)] {
            let s = shape(&[6, 5, 4], samples, batch, steps);
            let data = Dataset::new(samples, 6, 4, 7);
            let initial = s.layers.initial_parameters(7);
            let (want, losses) = host_sgd(&s, &data, &initial, s.steps);
            for k in [1, 2, 3] {
                let ranks = sharded_run(&s, &data, &initial, k);
                for r in &ranks {
                    let (ok, rel) = agrees(&want, r.get(Buf::Params));
                    assert!(ok, "{samples}/{batch} on {k}: {rel:.2e}");
                }
                // One rank is one device, bit for bit.
                if k == 1 {
                    assert_eq!(ranks[0].get(Buf::Params), &want[..]);
                }
                // The ranks' losses sum to the batch's.
                for (t, want) in losses.iter().enumerate() {
                    let got: f64 = ranks.iter().map(|r| f64::from(r.get(Buf::Losses)[t])).sum();
                    assert!((got - want).abs() <= 1e-5 * want.abs(), "{t}: {got} {want}");
                }
            }
        }
    }

    #[test]
    fn the_plan_run_on_the_host_is_host_sgd_bit_for_bit_and_a_planted_error_is_caught() {
        // Batches that wrap around the samples, three hidden layers, classes narrower and
        // wider than the hidden layers.
        for (widths, samples, batch, steps, seed) in [
            (&[6, 5, 4, 3][..], 40, 16, 9, 5),
            (&[7, 9, 12][..], 23, 10, 9, 5),
            (&[5, 3][..], 11, 4, 9, 5),
            (&[8, 16, 4][..], 64, 32, 20, 2),
        ] {
            let s = shape(widths, samples, batch, steps);
            let data = Dataset::new(samples, widths[0], *widths.last().unwrap(), seed);
            let initial = s.layers.initial_parameters(seed);
            let (want, losses) = host_sgd(&s, &data, &initial, s.steps);
            let plan = Plan::new(&s, None);
            plan.check().unwrap();
            let mut host = HostStep::new(plan, &data, &initial);
            let planted = Plan::new(&s, Some(Planted::SkipBiasUpdate));
            let mut wrong = HostStep::new(planted, &data, &initial);
            for _ in 0..s.steps {
                host.step();
                wrong.step();
            }
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(host.get(Buf::Params)), bits(&want), "{widths:?}");
            assert_eq!(counter(host.get(Buf::Step)[0]) as usize, steps);
            for (got, want) in host.get(Buf::Losses).iter().zip(&losses) {
                assert!(
                    (f64::from(*got) - want).abs() <= 1e-6 * want.abs(),
                    "{got} {want}"
                );
            }
            assert!(agrees(&want, host.get(Buf::Params)).0);
            let (ok, rel) = agrees(&want, wrong.get(Buf::Params));
            assert!(!ok, "skipping the bias update differs by only {rel:.2e}");
        }
    }

    #[test]
    fn the_references_compute_what_they_say() {
        // bias_act: rows plus the bias, ReLU'd (NaN to 0) or not.
        let mut z = vec![1.0, -2.0, f32::NAN, 0.5];
        bias_act(&mut z, &[0.5, 1.0], true);
        assert_eq!(z, [1.5, 0.0, 0.0, 1.5]);
        let mut z = vec![1.0, -2.0];
        bias_act(&mut z, &[0.5, 1.0], false);
        assert_eq!(z, [1.5, -1.0]);
        // softmax_xent: two equal logits, label 1: loss ln 2, δ = (½, ½ − 1) / 2.
        let (mut d, mut l) = (vec![0f32; 4], vec![0f32; 2]);
        softmax_xent(&[3.0, 3.0, 0.0, 0.0], &[1.0, 7.0], (&mut d, &mut l), 2, 2.0);
        assert!((l[0] - std::f32::consts::LN_2).abs() < 1e-6);
        assert!(l[1].is_nan(), "a label outside the classes");
        assert_eq!(&d[..2], &[0.25, -0.25]);
        // record_loss: sums over more rows than threads, divides, advances, stays in bounds.
        let rows: Vec<f32> = (0..600).map(|i| i as f32).collect();
        let (mut step, mut losses) = (1u32, vec![0f32; 2]);
        record_loss(&rows, 3.0, &mut step, &mut losses);
        assert_eq!((step, losses[1]), (2, (599.0 * 600.0 / 2.0 / 3.0) as f32));
        record_loss(&rows, 3.0, &mut step, &mut losses);
        assert_eq!(step, 3);
        // relu_backward, column_sum, gather.
        let mut d = vec![1.0, 2.0, 3.0];
        relu_backward(&mut d, &[0.0, 1.0, -1.0]);
        assert_eq!(d, [0.0, 2.0, 0.0]);
        let mut out = vec![9.0; 2];
        column_sum(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &mut out);
        assert_eq!(out, [9.0, 12.0]);
        let x: Vec<f32> = (0..6).map(|i| i as f32).collect();
        let (mut xb, mut yb) = (vec![0f32; 4], vec![0f32; 2]);
        gather_batch(&x, &[10.0, 11.0, 12.0], 1, (&mut xb, &mut yb), 2);
        assert_eq!((xb, yb), (vec![4.0, 5.0, 0.0, 1.0], vec![12.0, 10.0]));
        assert_eq!(counter(counter_slot(7)), 7);
        assert_eq!(counter_slot(0), 0.0);
    }
}
