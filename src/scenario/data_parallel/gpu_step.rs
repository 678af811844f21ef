//! One SGD step of the MLP as the GPU runs it (`data-parallel --device cuda`): a [`Plan`] of
//! kernel launches and cuBLAS products on named buffers, and the host reference of every
//! kernel of `src/device/cuda/kernels/mlp.cu`.
//!
//! The GPU path (`gpu` module, feature `cuda`) turns each [`Op`] into a launch; [`HostStep`]
//! runs the same plan with the references and the host's products, so that the plan itself —
//! which buffer each op reads and writes, the transposes of the backward pass, the order —
//! is checked against the host MLP ([`super::mlp`]) on any machine, and the GPU's kernels are
//! checked against the references on a GPU.
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
    /// The batch's labels.
    BatchLabels,
    /// Each row's loss.
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
        let StepShape {
            layers,
            samples,
            batch,
            lr,
            steps,
        } = shape;
        let (samples, batch, steps) = (*samples, *batch, *steps);
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
        // Layer l's weights (fan_in × fan_out) and bias in the flat vector.
        let weights = |buf: Buf, l: usize| {
            let start = layers.range(l).start;
            At {
                buf,
                offset: start,
                len: widths[l] * widths[l + 1],
            }
        };
        let bias = |buf: Buf, l: usize| {
            let r = layers.range(l);
            At {
                buf,
                offset: r.start + widths[l] * widths[l + 1],
                len: widths[l + 1],
            }
        };
        let mut ops = vec![Op::Gather {
            samples,
            batch,
            inputs: layers.inputs(),
        }];
        for l in 0..count {
            let (fan_in, fan_out) = (widths[l], widths[l + 1]);
            ops.push(Op::Product {
                a: Operand {
                    at: act(l),
                    dims: (batch, fan_in),
                    transposed: false,
                },
                b: Operand {
                    at: weights(Buf::Params, l),
                    dims: (fan_in, fan_out),
                    transposed: false,
                },
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
                a: Operand {
                    at: act(l),
                    dims: (batch, fan_in),
                    transposed: true,
                },
                b: Operand {
                    at: delta,
                    dims: (batch, fan_out),
                    transposed: false,
                },
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
                    a: Operand {
                        at: delta,
                        dims: (batch, fan_out),
                        transposed: false,
                    },
                    b: Operand {
                        at: weights(Buf::Params, l),
                        dims: (fan_in, fan_out),
                        transposed: true,
                    },
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
                lr: *lr,
            }),
            Some(Planted::SkipBiasUpdate) => ops.extend((0..count).map(|l| Op::Sgd {
                w: weights(Buf::Params, l),
                g: weights(Buf::Grad, l),
                lr: *lr,
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
            match op {
                Op::Gather {
                    samples,
                    batch,
                    inputs,
                } => {
                    let ok = self.len_of(Buf::Data) == samples * inputs
                        && self.len_of(Buf::Labels) == *samples
                        && self.len_of(Buf::Act(0)) == batch * inputs
                        && self.len_of(Buf::BatchLabels) == *batch;
                    if !ok {
                        return Err(format!("{op:?}: buffers of other sizes"));
                    }
                }
                Op::Product { a, b, c } => {
                    for at in [&a.at, &b.at, c] {
                        inside(at)?;
                    }
                    let ((m, k), (k2, n)) = (a.used(), b.used());
                    if k != k2
                        || a.at.len != a.dims.0 * a.dims.1
                        || b.at.len != b.dims.0 * b.dims.1
                        || c.len != m * n
                    {
                        return Err(format!("{op:?}: shapes do not match"));
                    }
                }
                Op::BiasAct {
                    z, b, rows, cols, ..
                } => {
                    inside(z)?;
                    inside(b)?;
                    if z.len != rows * cols || b.len != *cols {
                        return Err(format!("{op:?}: shapes do not match"));
                    }
                }
                Op::SoftmaxXent {
                    logits,
                    rows,
                    classes,
                    ..
                } => {
                    inside(logits)?;
                    if logits.len != rows * classes
                        || self.len_of(Buf::Delta(0)) < rows * classes
                        || self.len_of(Buf::RowLoss) != *rows
                        || self.len_of(Buf::BatchLabels) != *rows
                    {
                        return Err(format!("{op:?}: shapes do not match"));
                    }
                }
                Op::RecordLoss { rows, capacity, .. } => {
                    if self.len_of(Buf::RowLoss) != *rows
                        || self.len_of(Buf::Losses) != *capacity
                        || self.len_of(Buf::Step) != 1
                    {
                        return Err(format!("{op:?}: shapes do not match"));
                    }
                }
                Op::ReluBackward { delta, act } => {
                    inside(delta)?;
                    inside(act)?;
                    if delta.len != act.len {
                        return Err(format!("{op:?}: shapes do not match"));
                    }
                }
                Op::ColumnSum { x, out, rows, cols } => {
                    inside(x)?;
                    inside(out)?;
                    if x.len != rows * cols || out.len != *cols {
                        return Err(format!("{op:?}: shapes do not match"));
                    }
                }
                Op::Sgd { w, g, .. } => {
                    inside(w)?;
                    inside(g)?;
                    if w.len != g.len {
                        return Err(format!("{op:?}: shapes do not match"));
                    }
                }
            }
        }
        Ok(())
    }
}

// The host references of mlp.cu's kernels: the same values in the same order of operations
// (the GPU's expf and logf may differ from the host's by an ulp; the rest is bit for bit).

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

/// `bias_act`: `z += b` on every row, then ReLU (`f32::max`, NaN to 0) where `relu`.
pub fn bias_act(z: &mut [f32], b: &[f32], relu: bool) {
    for row in z.chunks_mut(b.len()) {
        for (v, b) in row.iter_mut().zip(b) {
            let s = *v + b;
            *v = if relu { s.max(0.0) } else { s };
        }
    }
}

/// `softmax_xent`: per row, its loss `ln Σ exp(z − max) + max − z[label]` (NaN for a label
/// outside the classes) and `δ = (softmax(z) − onehot) / scale`.
pub fn softmax_xent(
    logits: &[f32],
    labels: &[f32],
    (delta, row_loss): (&mut [f32], &mut [f32]),
    classes: usize,
    scale: f32,
) {
    for (((z, d), loss), &label) in logits
        .chunks(classes)
        .zip(delta.chunks_mut(classes))
        .zip(row_loss.iter_mut())
        .zip(labels)
    {
        let m = z.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut s = 0f32;
        for v in z {
            s += (v - m).exp();
        }
        for (d, v) in d.iter_mut().zip(z) {
            *d = (v - m).exp() / s / scale;
        }
        // As the kernel converts: a float label to an unsigned integer (negative: 0).
        let label = label as usize;
        if label < classes {
            *loss = s.ln() + m - z[label];
            d[label] -= 1.0 / scale;
        } else {
            *loss = f32::NAN;
        }
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

/// `relu_backward`: `δ = 0` where the layer's output was not positive.
pub fn relu_backward(delta: &mut [f32], act: &[f32]) {
    for (d, a) in delta.iter_mut().zip(act) {
        if *a <= 0.0 {
            *d = 0.0;
        }
    }
}

/// `column_sum`: each column of the row-major `x` summed over its rows, in order.
pub fn column_sum(x: &[f32], out: &mut [f32]) {
    out.fill(0.0);
    for row in x.chunks(out.len()) {
        for (o, v) in out.iter_mut().zip(row) {
            *o += v;
        }
    }
}

/// `sgd`: `w -= lr · g`, a product rounded, then a difference.
pub fn sgd(w: &mut [f32], g: &[f32], lr: f32) {
    mlp::sgd(w, g, lr);
}

/// The step counter's value as its slot holds it.
pub fn counter(slot: f32) -> u32 {
    slot.to_bits()
}

/// A step counter's slot holding `step`.
pub fn counter_slot(step: u32) -> f32 {
    f32::from_bits(step)
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
/// CPU variants train.
pub fn host_sgd(shape: &StepShape, data: &Dataset, initial: &[f32], steps: usize) -> Vec<f32> {
    let mut p = initial.to_vec();
    let mut g = vec![0f32; p.len()];
    for step in 0..steps {
        let rows = (step * shape.batch, shape.batch);
        mlp::gradient(&shape.layers, &p, data, rows, shape.batch as f32, &mut g);
        mlp::sgd(&mut p, &g, shape.lr);
    }
    p
}

/// A [`Plan`] run on the host with the references: what the GPU computes, on any machine.
pub struct HostStep {
    plan: Plan,
    bufs: Vec<Vec<f32>>,
}

impl HostStep {
    /// The buffers of `plan`, the data and the initial parameters in place, the counter at 0.
    pub fn new(plan: Plan, data: &Dataset, initial: &[f32]) -> HostStep {
        let mut bufs: Vec<Vec<f32>> = plan.buffers.iter().map(|(_, n)| vec![0f32; *n]).collect();
        let mut put = |buf: Buf, values: &[f32]| {
            if let Some(i) = plan.index(buf) {
                bufs[i].copy_from_slice(values);
            }
        };
        put(Buf::Data, &data.x);
        let labels: Vec<f32> = data.labels.iter().map(|&l| l as f32).collect();
        put(Buf::Labels, &labels);
        put(Buf::Params, initial);
        HostStep { plan, bufs }
    }

    /// A buffer's values.
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
        for op in self.plan.ops.clone() {
            self.run(op);
        }
    }

    /// The step's gradient phase alone ([`Plan::phases`]).
    pub fn gradient(&mut self) {
        for i in 0..self.plan.update_start() {
            let op = self.plan.ops[i];
            self.run(op);
        }
    }

    /// The step's update phase alone.
    pub fn update(&mut self) {
        for i in self.plan.update_start()..self.plan.ops.len() {
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
                gather_batch(
                    self.get(Buf::Data),
                    self.get(Buf::Labels),
                    step,
                    (&mut xb, &mut yb),
                    inputs,
                );
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
                    softmax_xent(
                        s.region(logits),
                        s.get(Buf::BatchLabels),
                        (&mut delta[..rows * classes], &mut row_loss),
                        classes,
                        scale,
                    )
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
                relu_backward(
                    &mut out[delta.offset..delta.offset + delta.len],
                    s.region(act),
                )
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

/// Random values in `[lo, hi)` from `seed`, for the kernels' tests.
pub fn random(len: usize, seed: u64, (lo, hi): (f32, f32)) -> Vec<f32> {
    crate::device::cpu::uniform(&[len], seed)
        .iter()
        .map(|u| lo + (hi - lo) * u)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loss_sum_has_the_kernels_thread_count() {
        let source = include_str!("../../device/cuda/kernels/mlp.cu");
        assert_eq!(
            crate::device::cuda_source::define(source, "LOSS_THREADS"),
            Some(LOSS_THREADS)
        );
    }

    fn shape(layers: &[usize], samples: usize, batch: usize, steps: usize) -> StepShape {
        StepShape {
            layers: Layers(layers.to_vec()),
            samples,
            batch,
            lr: 0.3,
            steps,
        }
    }

    /// `steps` of host SGD as the CPU variants train (`mlp::gradient`, then `mlp::sgd`): the
    /// parameters and each step's loss.
    fn host_sgd(s: &StepShape, data: &Dataset, initial: &[f32]) -> (Vec<f32>, Vec<f64>) {
        let mut p = initial.to_vec();
        let mut g = vec![0f32; p.len()];
        let mut losses = Vec::new();
        for step in 0..s.steps {
            let rows = (step * s.batch, s.batch);
            losses.push(mlp::gradient(
                &s.layers,
                &p,
                data,
                rows,
                s.batch as f32,
                &mut g,
            ));
            mlp::sgd(&mut p, &g, s.lr);
        }
        (p, losses)
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
            let (want, losses) = host_sgd(&s, &data, &initial);
            for k in [1, 2, 3] {
                let ranks = sharded_run(&s, &data, &initial, k);
                for r in &ranks {
                    let (ok, rel) = super::super::training::agrees(&want, r.get(Buf::Params));
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
        assert_eq!(
            d.labels,
            vec![
                data.labels[2],
                data.labels[3],
                data.labels[8],
                data.labels[9]
            ]
        );
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
    fn the_plan_run_on_the_host_is_host_sgd_bit_for_bit() {
        // Batches that wrap around the samples, three hidden layers, classes narrower and
        // wider than the hidden layers.
        for (widths, samples, batch) in [
            (&[6, 5, 4, 3][..], 40, 16),
            (&[7, 9, 12][..], 23, 10),
            (&[5, 3][..], 11, 4),
        ] {
            let s = shape(widths, samples, batch, 9);
            let data = Dataset::new(samples, widths[0], *widths.last().unwrap(), 5);
            let initial = s.layers.initial_parameters(5);
            let (want, losses) = host_sgd(&s, &data, &initial);
            let plan = Plan::new(&s, None);
            plan.check().unwrap();
            let mut host = HostStep::new(plan, &data, &initial);
            for _ in 0..s.steps {
                host.step();
            }
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(host.get(Buf::Params)), bits(&want), "{widths:?}");
            assert_eq!(counter(host.get(Buf::Step)[0]), 9);
            for (got, want) in host.get(Buf::Losses).iter().zip(&losses) {
                assert!(
                    (f64::from(*got) - want).abs() <= 1e-6 * want.abs(),
                    "{got} {want}"
                );
            }
        }
    }

    #[test]
    fn a_planted_error_fails_the_agreement_check() {
        let s = shape(&[8, 16, 4], 64, 32, 20);
        let data = Dataset::new(64, 8, 4, 2);
        let initial = s.layers.initial_parameters(2);
        let (want, _) = host_sgd(&s, &data, &initial);
        let mut right = HostStep::new(Plan::new(&s, None), &data, &initial);
        let mut wrong = HostStep::new(
            Plan::new(&s, Some(Planted::SkipBiasUpdate)),
            &data,
            &initial,
        );
        for _ in 0..s.steps {
            right.step();
            wrong.step();
        }
        assert!(super::super::agrees(&want, right.get(Buf::Params)).0);
        let (ok, rel) = super::super::agrees(&want, wrong.get(Buf::Params));
        assert!(!ok, "skipping the bias update differs by only {rel:.2e}");
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
        assert_eq!(
            transposes,
            [
                (false, false),
                (false, false),
                (false, false),
                (true, false),
                (false, true),
                (true, false),
                (false, true),
                (true, false),
            ]
        );
        // A region past its buffer is caught.
        let mut bad = plan.clone();
        if let Some(Op::Sgd { w, .. }) = bad.ops.last_mut() {
            w.offset = 1;
        }
        assert!(bad.check().is_err());
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
