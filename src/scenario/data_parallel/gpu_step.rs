//! One SGD step of the MLP as the GPU runs it (`data-parallel --device cuda`): a [`Plan`] of
//! kernel launches and cuBLAS products on named buffers, each GPU's shard of a run
//! ([`shard_of`]), and the host's one-device SGD every GPU run is checked against
//! ([`host_sgd`]).
//!
//! The GPU path (`gpu_trainer` module, feature `cuda`) turns each [`Op`] into a launch;
//! `HostStep` (`host_step` module, built for the tests) runs the same plan with the kernels'
//! host references and the host's products, so that the plan itself — which buffer each op reads
//! and writes, the transposes of the backward pass, the order — is checked against the host MLP
//! ([`super::mlp`]) on any machine, and the GPU's kernels are checked against the references
//! on a GPU.
//!
//! A step, for layers `0..L` with `A_0` the batch and `A_L` the logits:
//! - gather the step's rows (`gather_batch`, the step counter on the device);
//! - per layer `A_{l+1} = act(A_l · W_l + b_l)` (a product, then `bias_act`);
//! - `softmax_xent` (δ and each row's loss), `record_loss` (the loss sum into the step's slot,
//!   then the counter advances);
//! - per layer, last first: `dW_l = A_lᵀ · δ` (product), `db_l = Σ_rows δ` (`column_sum`), and
//!   below the last, `δ = (δ · W_lᵀ) ⊙ [A_l > 0]` (product, `relu_backward`);
//! - `sgd` over the whole parameter vector.

use super::mlp::{self, Dataset, Layers};

/// A buffer of the step. Labels are stored as floats (exact below 2^24) and the step counter as
/// a `u32`'s bits in one float slot, so every buffer is an `f32` buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buf {
    /// The training samples, row-major `samples × inputs` (uploaded once).
    Data,
    /// Their labels (uploaded once).
    Labels,
    /// The step counter: which batch the next step takes, which loss slot it writes.
    Step,
    /// One loss (the batch's mean) per step of a run.
    Losses,
    /// The flat parameter vector `[W_0, b_0, W_1, b_1, ...]`, as the host lays it out.
    Params,
    /// The gradient, laid out as the parameters.
    Grad,
    BatchLabels,
    RowLoss,
    /// `A_l`: the batch (`l = 0`), a hidden layer's output, the logits (`l = L`).
    Act(usize),
    /// The backward pass's δ, in two buffers used in turn.
    Delta(usize),
}

/// A region of a buffer: `len` floats from `offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct At {
    pub buf: Buf,
    pub offset: usize,
    pub len: usize,
}

impl At {
    fn whole(buf: Buf, len: usize) -> At {
        At {
            buf,
            offset: 0,
            len,
        }
    }
}

/// A row-major matrix operand of a product: its region, its stored `(rows, cols)`, and whether
/// the product uses its transpose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Operand {
    pub at: At,
    pub dims: (usize, usize),
    pub transposed: bool,
}

impl Operand {
    /// Rows and columns of the operand as the product uses it.
    pub fn used(&self) -> (usize, usize) {
        if self.transposed {
            (self.dims.1, self.dims.0)
        } else {
            self.dims
        }
    }
}

/// One launch of a step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op {
    /// `gather_batch`: the step's rows of [`Buf::Data`] and [`Buf::Labels`] into `Act(0)` and
    /// [`Buf::BatchLabels`].
    Gather {
        samples: usize,
        batch: usize,
        inputs: usize,
    },
    /// `c = op(a) · op(b)` (cuBLAS sgemm, fp32).
    Product { a: Operand, b: Operand, c: At },
    /// `bias_act`: `z += b` per row, then ReLU where `relu`.
    BiasAct {
        z: At,
        b: At,
        rows: usize,
        cols: usize,
        relu: bool,
    },
    /// `softmax_xent` of the logits with [`Buf::BatchLabels`]: δ into `Delta(0)`, each row's
    /// loss into [`Buf::RowLoss`].
    SoftmaxXent {
        logits: At,
        rows: usize,
        classes: usize,
        scale: f32,
    },
    /// `record_loss`: Σ [`Buf::RowLoss`] / scale into [`Buf::Losses`]`[step]`, then the step
    /// counter advances.
    RecordLoss {
        rows: usize,
        scale: f32,
        capacity: usize,
    },
    /// `relu_backward`: `delta = 0` where `act ≤ 0`.
    ReluBackward { delta: At, act: At },
    /// `column_sum`: `out[j] = Σ_r x[r][j]`.
    ColumnSum {
        x: At,
        out: At,
        rows: usize,
        cols: usize,
    },
    /// `sgd`: `w -= lr · g`.
    Sgd { w: At, g: At, lr: f32 },
}

/// A planted error, for checking that the agreement check catches a wrong step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Planted {
    /// The update leaves the biases alone.
    #[cfg_attr(not(test), allow(dead_code))]
    SkipBiasUpdate,
}

/// A run's shape: the model, the data's size, the batch, the learning rate and the steps a
/// run takes (the loss slots).
#[derive(Clone, Debug, PartialEq)]
pub struct StepShape {
    pub layers: Layers,
    pub samples: usize,
    pub batch: usize,
    pub lr: f32,
    pub steps: usize,
}

/// The step's launches, in order, and every buffer with its length.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub ops: Vec<Op>,
    pub buffers: Vec<(Buf, usize)>,
}

impl Plan {
    /// The plan of one step of `shape` (with an error planted, for the checks' own tests).
    pub fn new(shape: &StepShape, planted: Option<Planted>) -> Plan {
        Plan::scaled(shape, shape.batch as f32, planted)
    }

    /// [`new`](Self::new) with the loss and its gradient divided by `scale` rather than by
    /// `shape.batch`: a shard's step, whose gradients summed over the shards (the global
    /// batch's `scale`) make the whole batch's.
    pub fn scaled(shape: &StepShape, scale: f32, planted: Option<Planted>) -> Plan {
        let (layers, lr) = (&shape.layers, shape.lr);
        let (samples, batch, steps) = (shape.samples, shape.batch, shape.steps);
        let widths = &layers.0;
        let count = layers.count();
        let n = layers.parameters();
        let widest = widths.iter().copied().max().unwrap_or(1);
        let mut buffers = vec![
            (Buf::Data, samples * layers.inputs()),
            (Buf::Labels, samples),
            (Buf::Step, 1),
            (Buf::Losses, steps.max(1)),
            (Buf::Params, n),
            (Buf::Grad, n),
            (Buf::BatchLabels, batch),
            (Buf::RowLoss, batch),
            (Buf::Delta(0), batch * widest),
            (Buf::Delta(1), batch * widest),
        ];
        buffers.extend((0..=count).map(|l| (Buf::Act(l), batch * widths[l])));
        let act = |l: usize| At::whole(Buf::Act(l), batch * widths[l]);
        let operand = |at, dims, transposed| Operand {
            at,
            dims,
            transposed,
        };
        // Layer l's weights (fan_in × fan_out), or its bias, in the flat vector.
        let part = |buf: Buf, l: usize, bias: bool| {
            let (start, weights) = (layers.range(l).start, widths[l] * widths[l + 1]);
            let (offset, len) = match bias {
                false => (start, weights),
                true => (start + weights, widths[l + 1]),
            };
            At { buf, offset, len }
        };
        let weights = |buf: Buf, l: usize| part(buf, l, false);
        let bias = |buf: Buf, l: usize| part(buf, l, true);
        let mut ops = vec![Op::Gather {
            samples,
            batch,
            inputs: layers.inputs(),
        }];
        for l in 0..count {
            let (fan_in, fan_out) = (widths[l], widths[l + 1]);
            ops.push(Op::Product {
                a: operand(act(l), (batch, fan_in), false),
                b: operand(weights(Buf::Params, l), (fan_in, fan_out), false),
                c: act(l + 1),
            });
            ops.push(Op::BiasAct {
                z: act(l + 1),
                b: bias(Buf::Params, l),
                rows: batch,
                cols: fan_out,
                relu: l + 1 < count,
            });
        }
        let classes = layers.classes();
        ops.push(Op::SoftmaxXent {
            logits: act(count),
            rows: batch,
            classes,
            scale,
        });
        ops.push(Op::RecordLoss {
            rows: batch,
            scale,
            capacity: steps.max(1),
        });
        let mut cur = 0;
        for l in (0..count).rev() {
            let (fan_in, fan_out) = (widths[l], widths[l + 1]);
            let delta = At::whole(Buf::Delta(cur), batch * fan_out);
            ops.push(Op::Product {
                a: operand(act(l), (batch, fan_in), true),
                b: operand(delta, (batch, fan_out), false),
                c: weights(Buf::Grad, l),
            });
            ops.push(Op::ColumnSum {
                x: delta,
                out: bias(Buf::Grad, l),
                rows: batch,
                cols: fan_out,
            });
            if l > 0 {
                let below = At::whole(Buf::Delta(1 - cur), batch * fan_in);
                ops.push(Op::Product {
                    a: operand(delta, (batch, fan_out), false),
                    b: operand(weights(Buf::Params, l), (fan_in, fan_out), true),
                    c: below,
                });
                ops.push(Op::ReluBackward {
                    delta: below,
                    act: act(l),
                });
                cur = 1 - cur;
            }
        }
        match planted {
            None => ops.push(Op::Sgd {
                w: At::whole(Buf::Params, n),
                g: At::whole(Buf::Grad, n),
                lr,
            }),
            Some(Planted::SkipBiasUpdate) => ops.extend((0..count).map(|l| Op::Sgd {
                w: weights(Buf::Params, l),
                g: weights(Buf::Grad, l),
                lr,
            })),
        }
        Plan { ops, buffers }
    }

    /// Where the update starts: the index of the first `sgd` op. The ops before it write the
    /// gradient into [`Buf::Grad`] (forward and backward), those from it update the
    /// parameters, so that a data-parallel step can sum the shards' gradients in between.
    pub fn update_start(&self) -> usize {
        self.ops
            .iter()
            .position(|op| matches!(op, Op::Sgd { .. }))
            .unwrap_or(self.ops.len())
    }

    /// The gradient's ops and the update's ([`update_start`](Self::update_start)).
    pub fn phases(&self) -> (&[Op], &[Op]) {
        self.ops.split_at(self.update_start())
    }

    /// The length of `buf`, 0 if the plan has no such buffer.
    pub fn len_of(&self, buf: Buf) -> usize {
        self.buffers
            .iter()
            .find(|(b, _)| *b == buf)
            .map_or(0, |(_, n)| *n)
    }

    /// Where `buf` is in [`buffers`](Self::buffers).
    pub fn index(&self, buf: Buf) -> Option<usize> {
        self.buffers.iter().position(|(b, _)| *b == buf)
    }

    /// Every region an op names lies inside its buffer, and every product's operands fit
    /// their regions and each other: what makes the GPU's launches in-bounds.
    pub fn check(&self) -> Result<(), String> {
        let inside = |at: &At| -> Result<(), String> {
            let len = self.len_of(at.buf);
            match at.offset.checked_add(at.len) {
                Some(end) if end <= len && self.index(at.buf).is_some() => Ok(()),
                _ => Err(format!("{at:?} outside its buffer of {len}")),
            }
        };
        for op in &self.ops {
            let fits = |ok: bool| match ok {
                true => Ok(()),
                false => Err(format!("{op:?}: shapes do not match")),
            };
            match op {
                Op::Gather {
                    samples,
                    batch,
                    inputs,
                } => fits(
                    self.len_of(Buf::Data) == samples * inputs
                        && self.len_of(Buf::Labels) == *samples
                        && self.len_of(Buf::Act(0)) == batch * inputs
                        && self.len_of(Buf::BatchLabels) == *batch,
                )?,
                Op::Product { a, b, c } => {
                    for at in [&a.at, &b.at, c] {
                        inside(at)?;
                    }
                    let ((m, k), (k2, n)) = (a.used(), b.used());
                    fits(
                        k == k2
                            && a.at.len == a.dims.0 * a.dims.1
                            && b.at.len == b.dims.0 * b.dims.1
                            && c.len == m * n,
                    )?;
                }
                Op::BiasAct {
                    z, b, rows, cols, ..
                } => {
                    inside(z)?;
                    inside(b)?;
                    fits(z.len == rows * cols && b.len == *cols)?;
                }
                Op::SoftmaxXent {
                    logits,
                    rows,
                    classes,
                    ..
                } => {
                    inside(logits)?;
                    fits(
                        logits.len == rows * classes
                            && self.len_of(Buf::Delta(0)) >= rows * classes
                            && self.len_of(Buf::RowLoss) == *rows
                            && self.len_of(Buf::BatchLabels) == *rows,
                    )?;
                }
                Op::RecordLoss { rows, capacity, .. } => fits(
                    self.len_of(Buf::RowLoss) == *rows
                        && self.len_of(Buf::Losses) == *capacity
                        && self.len_of(Buf::Step) == 1,
                )?,
                Op::ReluBackward { delta: x, act: y } | Op::Sgd { w: x, g: y, .. } => {
                    inside(x)?;
                    inside(y)?;
                    fits(x.len == y.len)?;
                }
                Op::ColumnSum { x, out, rows, cols } => {
                    inside(x)?;
                    inside(out)?;
                    fits(x.len == rows * cols && out.len == *cols)?;
                }
            }
        }
        Ok(())
    }
}

/// The steps after which the global batches repeat: the batch at step `s` starts at row
/// `s · batch mod samples`, so they come round again after `samples / gcd(samples, batch)`.
pub fn batch_cycle(samples: usize, batch: usize) -> usize {
    fn gcd(a: usize, b: usize) -> usize {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    samples / gcd(samples, batch).max(1)
}

/// Shard `s` of `k` of a run of `shape` as one GPU runs it: its shape (the shard's rows as its
/// batch) and its data, the rows its shard of each global batch takes laid out one step after
/// another, for as many steps as the batches take to repeat (at most the run's). `gather_batch`
/// then takes step `t`'s shard at row `t · rows` of it, wrapping round where the batches do:
/// the same rows as `training::shard` gives the CPU devices, with no kernel of its own.
pub fn shard_of(shape: &StepShape, data: &Dataset, k: usize, s: usize) -> (StepShape, Dataset) {
    let cycle = shape
        .steps
        .min(batch_cycle(shape.samples, shape.batch))
        .max(1);
    let (_, rows) = super::training::shard(0, shape.batch, k, s);
    let inputs = data.inputs;
    let n = data.rows().max(1);
    let mut x = Vec::with_capacity(cycle * rows * inputs);
    let mut labels = Vec::with_capacity(cycle * rows);
    for t in 0..cycle {
        let (start, per) = super::training::shard(t as u64, shape.batch, k, s);
        for r in (start..start + per).map(|r| r % n) {
            x.extend_from_slice(&data.x[r * inputs..(r + 1) * inputs]);
            labels.push(data.labels[r]);
        }
    }
    let shard_shape = StepShape {
        samples: cycle * rows,
        batch: rows,
        ..shape.clone()
    };
    (shard_shape, Dataset { x, labels, inputs })
}

/// Host one-device SGD from `initial`: `steps` steps of `mlp::gradient` and `mlp::sgd`, as the
/// CPU variants train. Returns the parameters and each step's loss.
pub fn host_sgd(
    shape: &StepShape,
    data: &Dataset,
    initial: &[f32],
    steps: usize,
) -> (Vec<f32>, Vec<f64>) {
    let mut p = initial.to_vec();
    let mut g = vec![0f32; p.len()];
    let mut losses = Vec::with_capacity(steps);
    let scale = shape.batch as f32;
    for step in 0..steps {
        let rows = (step * shape.batch, shape.batch);
        losses.push(mlp::gradient(&shape.layers, &p, data, rows, scale, &mut g));
        mlp::sgd(&mut p, &g, shape.lr);
    }
    (p, losses)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(in super::super) fn shape(
        layers: &[usize],
        samples: usize,
        batch: usize,
        steps: usize,
    ) -> StepShape {
        StepShape {
            layers: Layers(layers.to_vec()),
            samples,
            batch,
            lr: 0.3,
            steps,
        }
    }

    #[test]
    fn a_shards_data_repeats_when_the_batches_do() {
        assert_eq!(batch_cycle(23, 10), 23);
        assert_eq!(batch_cycle(40, 16), 5);
        assert_eq!(batch_cycle(12, 6), 2);
        let s = shape(&[2, 2], 12, 6, 100);
        let data = Dataset::new(12, 2, 2, 1);
        let (shard, d) = shard_of(&s, &data, 4, 1);
        // Batch 6 over 4: shard 1 takes rows 2..4 of each batch, which repeat after 2 steps.
        assert_eq!((shard.batch, shard.samples, d.rows()), (2, 4, 4));
        assert_eq!(&d.x[..], &[&data.x[4..8], &data.x[16..20]].concat()[..]);
        assert_eq!(d.labels, [2, 3, 8, 9].map(|r| data.labels[r]));
    }

    #[test]
    fn the_update_is_split_from_the_gradient() {
        let s = shape(&[6, 5, 4], 40, 16, 3);
        let plan = Plan::new(&s, None);
        let (gradient, update) = plan.phases();
        assert_eq!(update.len(), 1);
        assert!(matches!(update[0], Op::Sgd { .. }));
        assert!(!gradient.iter().any(|op| matches!(op, Op::Sgd { .. })));
        let planted = Plan::new(&s, Some(Planted::SkipBiasUpdate));
        assert_eq!(planted.phases().1.len(), 2);
    }

    #[test]
    fn every_region_of_the_default_plan_is_in_bounds() {
        let s = shape(&[784, 1024, 1024, 10], 8192, 512, 20);
        let plan = Plan::new(&s, None);
        plan.check().unwrap();
        // 1 gather, 3 × (product, bias), softmax, loss, 3 × (product, sum), 2 × (product,
        // ReLU), the update.
        assert_eq!(plan.ops.len(), 1 + 6 + 2 + 6 + 4 + 1);
        assert_eq!(plan.len_of(Buf::Params), s.layers.parameters());
        assert_eq!(plan.len_of(Buf::Delta(0)), 512 * 1024);
        // The backward pass's products use the transposes: Aᵀ·δ, then δ·Wᵀ.
        let transposes: Vec<(bool, bool)> = plan
            .ops
            .iter()
            .filter_map(|op| match op {
                Op::Product { a, b, .. } => Some((a.transposed, b.transposed)),
                _ => None,
            })
            .collect();
        let (forward, dw, delta) = ((false, false), (true, false), (false, true));
        assert_eq!(
            transposes,
            [forward, forward, forward, dw, delta, dw, delta, dw]
        );
        // A region past its buffer is caught.
        let mut bad = plan.clone();
        if let Some(Op::Sgd { w, .. }) = bad.ops.last_mut() {
            w.offset = 1;
        }
        assert!(bad.check().is_err());
    }
}
