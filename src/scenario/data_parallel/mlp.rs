//! The model every data-parallel variant trains: a seeded MLP classifier (ReLU hidden layers,
//! softmax cross-entropy) on seeded synthetic data, with its gradient written out by hand.
//!
//! Plain host code on flat `f32` buffers, so the same functions serve an engine op on a CPU
//! device (whose products then use that device's threads: they parallelize on the current
//! rayon pool) and an MPI rank. The parameters are one flat vector, `[W1, b1, W2, b2, ...]`
//! with `W_l` row-major `fan_in × fan_out`: what an all-reduce moves is that one buffer.

use ndarray::{ArrayView2, ArrayViewMut2};

use crate::device::cpu::{matmul_into, uniform};

/// Layer widths, input first and classes last (`784x1024x1024x10`).
#[derive(Clone, Debug, PartialEq)]
pub struct Layers(pub Vec<usize>);

impl Layers {
    pub fn inputs(&self) -> usize {
        self.0[0]
    }

    pub fn classes(&self) -> usize {
        self.0[self.0.len() - 1]
    }

    /// Parameters (weights and biases) in all.
    pub fn parameters(&self) -> usize {
        self.0.windows(2).map(|w| w[0] * w[1] + w[1]).sum()
    }

    /// Layers with parameters (one fewer than the widths).
    pub fn count(&self) -> usize {
        self.0.len().saturating_sub(1)
    }

    /// Layer `l`'s weights then bias, as a range of the flat parameter vector.
    pub fn range(&self, l: usize) -> std::ops::Range<usize> {
        let (weights, bias) = self.offsets()[l];
        weights..bias + self.0[l + 1]
    }

    /// Offsets of each layer's weights and bias in the flat parameter vector.
    fn offsets(&self) -> Vec<(usize, usize)> {
        let mut at = 0;
        self.0
            .windows(2)
            .map(|w| {
                let weights = at;
                at += w[0] * w[1];
                let bias = at;
                at += w[1];
                (weights, bias)
            })
            .collect()
    }

    /// Seeded Glorot-uniform weights, zero biases.
    pub fn initial_parameters(&self, seed: u64) -> Vec<f32> {
        let mut p = vec![0f32; self.parameters()];
        for (l, (w, (weights, _))) in self.0.windows(2).zip(self.offsets()).enumerate() {
            let a = (6.0 / (w[0] + w[1]) as f32).sqrt();
            let u = uniform(&[w[0] * w[1]], seed.wrapping_add(l as u64));
            for (p, u) in p[weights..weights + w[0] * w[1]].iter_mut().zip(u.iter()) {
                *p = (2.0 * u - 1.0) * a;
            }
        }
        p
    }
}

/// Seeded synthetic classification data: each class a random centroid, each sample its class's
/// centroid plus uniform noise. Rows are addressed modulo the number of samples, so any number
/// of steps walks through them in order.
pub struct Dataset {
    /// Row-major `samples × inputs`.
    pub x: Vec<f32>,
    pub labels: Vec<u32>,
    pub inputs: usize,
}

impl Dataset {
    pub fn new(samples: usize, inputs: usize, classes: usize, seed: u64) -> Dataset {
        let centroids = uniform(&[classes, inputs], seed);
        let pick = uniform(&[samples], seed ^ 0x5eed);
        let labels: Vec<u32> = pick
            .iter()
            .map(|u| ((u * classes as f32) as usize).min(classes - 1) as u32)
            .collect();
        let noise = uniform(&[samples, inputs], seed.wrapping_add(1));
        let c = centroids.as_slice().unwrap_or(&[]);
        let x = noise
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let (row, col) = (i / inputs, i % inputs);
                let centre = c[labels[row] as usize * inputs + col] - 0.5;
                centre + 1.5 * (n - 0.5)
            })
            .collect();
        Dataset { x, labels, inputs }
    }

    pub fn rows(&self) -> usize {
        self.labels.len()
    }

    /// Rows `start..start + len` (wrapping) as one contiguous batch, and their labels (as
    /// floats, exact below 2^24, as the GPU holds them).
    fn batch(&self, start: usize, len: usize) -> (Vec<f32>, Vec<f32>) {
        let d = self.inputs;
        let mut x = Vec::with_capacity(len * d);
        let mut y = Vec::with_capacity(len);
        for k in 0..len {
            let i = (start + k) % self.rows();
            x.extend_from_slice(&self.x[i * d..(i + 1) * d]);
            y.push(self.labels[i] as f32);
        }
        (x, y)
    }
}

/// The gradient of the summed cross-entropy over rows `start..start + len`, divided by `scale`
/// (the global batch size, so the gradients of a batch's shards add up to the batch's), written
/// into `grad`: [`forward`], then [`Forward::backward`] on every layer, last first (the steps
/// the overlapped ring runs as separate ops). Returns the shard's summed loss divided by
/// `scale` (the shards' losses add up to the batch's mean loss). Panics if `weights` or `grad`
/// is not [`Layers::parameters`] long (a programming error).
pub fn gradient(
    layers: &Layers,
    weights: &[f32],
    data: &Dataset,
    rows: (usize, usize),
    scale: f32,
    grad: &mut [f32],
) -> f64 {
    let n = layers.parameters();
    assert!(weights.len() == n && grad.len() == n, "parameter buffers");
    let mut pass = forward(layers, weights, data, rows, scale);
    for l in (0..layers.count()).rev() {
        pass.backward(layers, weights, l, &mut grad[layers.range(l)]);
    }
    pass.loss
}

/// A forward pass kept for the backward steps: the input and every hidden activation, the
/// gradient of the loss by the current layer's output (`delta`), and the layers still to go.
pub struct Forward {
    activations: Vec<Vec<f32>>,
    delta: Vec<f32>,
    rows: usize,
    /// Layers whose gradient is still to be computed: the next backward step is layer
    /// `remaining - 1`.
    remaining: usize,
    /// The rows' summed loss divided by `scale`.
    pub loss: f64,
}

/// The forward pass over rows `start..start + len` and the softmax cross-entropy's gradient by
/// the logits, divided by `scale` (see [`gradient`]). Panics if `weights` is not
/// [`Layers::parameters`] long (a programming error).
pub fn forward(
    layers: &Layers,
    weights: &[f32],
    data: &Dataset,
    (start, len): (usize, usize),
    scale: f32,
) -> Forward {
    assert!(weights.len() == layers.parameters(), "parameter buffer");
    let (x, labels) = data.batch(start, len);
    let offsets = layers.offsets();
    let widths = &layers.0;
    // Forward: keep every layer's pre-activation (for ReLU's derivative) and activation.
    let mut activations: Vec<Vec<f32>> = vec![x];
    for (l, &(w_at, b_at)) in offsets.iter().enumerate() {
        let (fan_in, fan_out) = (widths[l], widths[l + 1]);
        let (w, b) = (&weights[w_at..b_at], &weights[b_at..b_at + fan_out]);
        let mut z = vec![0f32; len * fan_out];
        product(
            (&activations[l], len, fan_in, false),
            (w, fan_in, fan_out, false),
            &mut z,
        );
        bias_act(&mut z, b, l + 1 < offsets.len());
        activations.push(z);
    }
    // Softmax cross-entropy; the output's gradient is (p - onehot) / scale.
    let classes = layers.classes();
    let logits = activations.pop().unwrap_or_default();
    let (mut delta, mut row_loss) = (vec![0f32; len * classes], vec![0f32; len]);
    softmax_xent(
        &logits,
        &labels,
        (&mut delta, &mut row_loss),
        classes,
        scale,
    );
    let loss: f64 = row_loss.iter().map(|&l| f64::from(l)).sum();
    Forward {
        activations,
        delta,
        rows: len,
        remaining: offsets.len(),
        loss: loss / f64::from(scale),
    }
}

impl Forward {
    /// The layer whose gradient the next [`backward`](Self::backward) step computes, `None`
    /// once every layer's is done.
    pub fn next_layer(&self) -> Option<usize> {
        self.remaining.checked_sub(1)
    }

    /// One backward step, on layer `l` (which must be [`next_layer`](Self::next_layer)): its
    /// weights' and bias's gradient into `grad` ([`Layers::range`] of it: `dW = Aᵀ·δ`,
    /// `db = Σ_rows δ`), then `δ_prev = (δ·Wᵀ) ⊙ [A_prev > 0]` for the layer below. Panics if
    /// `l` is not the next layer or `grad` is not the layer's length (a programming error).
    pub fn backward(&mut self, layers: &Layers, weights: &[f32], l: usize, grad: &mut [f32]) {
        assert_eq!(
            self.next_layer(),
            Some(l),
            "backward steps go last layer first"
        );
        let (w_at, b_at) = layers.offsets()[l];
        let (fan_in, fan_out) = (layers.0[l], layers.0[l + 1]);
        assert_eq!(
            grad.len(),
            fan_in * fan_out + fan_out,
            "layer gradient buffer"
        );
        let len = self.rows;
        let (dw, db) = grad.split_at_mut(fan_in * fan_out);
        product(
            (&self.activations[l], len, fan_in, true),
            (&self.delta, len, fan_out, false),
            dw,
        );
        column_sum(&self.delta, db);
        if l > 0 {
            let mut prev = vec![0f32; len * fan_in];
            let w = &weights[w_at..b_at];
            product(
                (&self.delta, len, fan_out, false),
                (w, fan_in, fan_out, true),
                &mut prev,
            );
            relu_backward(&mut prev, &self.activations[l]);
            self.delta = prev;
        }
        self.remaining = l;
    }
}

/// Mean cross-entropy of `weights` over rows `start..start + len` (no gradient kept).
pub fn loss(layers: &Layers, weights: &[f32], data: &Dataset, rows: (usize, usize)) -> f64 {
    let mut scratch = vec![0f32; weights.len()];
    gradient(layers, weights, data, rows, rows.1 as f32, &mut scratch)
}

/// `out = op(a) · op(b)` where each operand is (row-major data, rows, columns, transposed).
pub(crate) fn product(
    (a, ar, ac, at): (&[f32], usize, usize, bool),
    (b, br, bc, bt): (&[f32], usize, usize, bool),
    out: &mut [f32],
) {
    let view = |data, r, c, t: bool| {
        let v = ArrayView2::from_shape((r, c), data).expect("operand length matches its shape");
        if t {
            v.reversed_axes()
        } else {
            v
        }
    };
    let (a, b) = (view(a, ar, ac, at), view(b, br, bc, bt));
    let c = ArrayViewMut2::from_shape((a.nrows(), b.ncols()), out)
        .expect("output length matches its shape");
    matmul_into(a, b, c);
}

/// Per row, its loss `ln Σ exp(z − max) + max − z[label]` (NaN for a label outside the
/// classes) and `δ = (softmax(z) − onehot) / scale`; the `softmax_xent` kernel's reference.
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

/// `z += b` on every row, then ReLU (`f32::max`, NaN to 0) where `relu`; the `bias_act`
/// kernel's reference, as the functions around it are of theirs (`host_step` runs the GPU's
/// plan with them).
pub fn bias_act(z: &mut [f32], b: &[f32], relu: bool) {
    for row in z.chunks_mut(b.len()) {
        for (v, b) in row.iter_mut().zip(b) {
            let s = *v + b;
            *v = if relu { s.max(0.0) } else { s };
        }
    }
}

/// ReLU's derivative: `δ = 0` where the layer's output (its activation) was not positive.
pub fn relu_backward(delta: &mut [f32], act: &[f32]) {
    for (d, a) in delta.iter_mut().zip(act) {
        if *a <= 0.0 {
            *d = 0.0;
        }
    }
}

/// Each column of the row-major `x` summed over its rows, in order.
pub fn column_sum(x: &[f32], out: &mut [f32]) {
    out.fill(0.0);
    for row in x.chunks(out.len()) {
        for (o, v) in out.iter_mut().zip(row) {
            *o += v;
        }
    }
}

/// `weights -= lr · grad`: a product rounded, then a difference.
pub fn sgd(weights: &mut [f32], grad: &[f32], lr: f32) {
    for (p, g) in weights.iter_mut().zip(grad) {
        *p -= lr * g;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> (Layers, Dataset) {
        let layers = Layers(vec![6, 5, 4, 3]);
        let data = Dataset::new(40, 6, 3, 7);
        (layers, data)
    }

    #[test]
    fn the_gradient_matches_finite_differences() {
        let (layers, data) = small();
        let p = layers.initial_parameters(3);
        let mut g = vec![0f32; p.len()];
        gradient(&layers, &p, &data, (0, 16), 16.0, &mut g);
        // Central differences in f64 of the f32 loss, at a spread of coordinates (weights and
        // biases of every layer).
        let f = |q: &[f32]| loss(&layers, q, &data, (0, 16));
        let mut checked = 0;
        for i in (0..p.len()).step_by(7) {
            let h = 1e-2f32;
            let (mut up, mut down) = (p.clone(), p.clone());
            up[i] += h;
            down[i] -= h;
            let numeric = (f(&up) - f(&down)) / (2.0 * f64::from(h));
            assert!(
                (numeric - f64::from(g[i])).abs() < 2e-3,
                "coordinate {i}: analytic {} numeric {numeric}",
                g[i]
            );
            checked += 1;
        }
        assert!(checked > 10);
    }

    #[test]
    fn backward_steps_layer_by_layer_give_the_gradient_bit_for_bit() {
        let (layers, data) = small();
        let p = layers.initial_parameters(3);
        let mut whole = vec![0f32; p.len()];
        let loss = gradient(&layers, &p, &data, (3, 9), 12.0, &mut whole);
        // Each layer's gradient into a buffer of its own, as the overlapped ring's ops write
        // them into their buckets.
        let mut pass = forward(&layers, &p, &data, (3, 9), 12.0);
        assert_eq!(pass.loss.to_bits(), loss.to_bits());
        let mut steps = Vec::new();
        while let Some(l) = pass.next_layer() {
            let mut g = vec![f32::NAN; layers.range(l).len()];
            pass.backward(&layers, &p, l, &mut g);
            let want: Vec<u32> = whole[layers.range(l)].iter().map(|v| v.to_bits()).collect();
            assert_eq!(g.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), want);
            steps.push(l);
        }
        assert_eq!(steps, [2, 1, 0]);
        // The layers' ranges tile the parameter vector.
        assert_eq!(layers.range(0).start, 0);
        assert_eq!(layers.range(2).end, p.len());
        assert_eq!(layers.range(0).end, layers.range(1).start);
    }

    #[test]
    fn shard_gradients_add_up_to_the_batch_gradient() {
        let (layers, data) = small();
        let p = layers.initial_parameters(3);
        let n = p.len();
        let mut whole = vec![0f32; n];
        let l = gradient(&layers, &p, &data, (4, 12), 12.0, &mut whole);
        let (mut a, mut b) = (vec![0f32; n], vec![0f32; n]);
        let la = gradient(&layers, &p, &data, (4, 5), 12.0, &mut a);
        let lb = gradient(&layers, &p, &data, (9, 7), 12.0, &mut b);
        assert!((l - la - lb).abs() < 1e-5);
        for i in 0..n {
            assert!((whole[i] - a[i] - b[i]).abs() < 1e-5, "{i}");
        }
    }

    #[test]
    fn sgd_lowers_the_loss_and_rows_wrap() {
        let (layers, data) = small();
        let mut p = layers.initial_parameters(3);
        let before = loss(&layers, &p, &data, (0, 40));
        let mut g = vec![0f32; p.len()];
        for step in 0..100 {
            gradient(&layers, &p, &data, (step * 16, 16), 16.0, &mut g);
            sgd(&mut p, &g, 0.5);
        }
        let after = loss(&layers, &p, &data, (0, 40));
        assert!(after < 0.5 * before, "{before} -> {after}");
        // Row 40 is row 0 again.
        assert_eq!(data.batch(40, 1), data.batch(0, 1));
        assert_eq!(layers.parameters(), 6 * 5 + 5 + 5 * 4 + 4 + 4 * 3 + 3);
    }
}

#[cfg(test)]
mod split_cost {
    use super::*;

    /// The one-op gradient against its split into a forward op and a backward step per layer,
    /// on one thread, in interleaved rounds: docs/scenarios.md quotes these. Run with
    /// `cargo test --release --lib split_gradient_costs_what_the_one_op_gradient_does --
    /// --ignored --nocapture`.
    #[test]
    #[ignore = "prints timings for the docs; run in release"]
    fn split_gradient_costs_what_the_one_op_gradient_does() {
        let layers = Layers(vec![784, 1024, 1024, 10]);
        let data = Dataset::new(8192, 784, 10, 20);
        let w = layers.initial_parameters(20);
        let mut g = vec![0f32; w.len()];
        let one_thread = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .expect("a thread");
        one_thread.install(|| {
            for round in 0..3 {
                let t = std::time::Instant::now();
                for s in 0..20 {
                    gradient(&layers, &w, &data, (s * 256, 256), 512.0, &mut g);
                }
                let fused = t.elapsed();
                let t = std::time::Instant::now();
                for s in 0..20 {
                    let mut f = forward(&layers, &w, &data, (s * 256, 256), 512.0);
                    for l in (0..layers.count()).rev() {
                        f.backward(&layers, &w, l, &mut g[layers.range(l)]);
                    }
                }
                let split = t.elapsed();
                println!("round {round}: one op {fused:?}, split {split:?} (20 steps)");
            }
        });
    }
}
