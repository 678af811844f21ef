//! The seeded program: a random DAG over `width` slots, and pushing it op by op or at once.

use std::sync::Arc;

use crate::device::Device;
use crate::scenario::ScenarioError;
use crate::tensor::Tensor;

/// What an op of the program does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// `out = (a · b) / 4n + 3/4`, a new value for slot `out` (see [`input`] for why the
    /// affine form).
    Product,
    /// `out = (a + b) / 2`, a new value for slot `out`.
    Mix,
    /// `out ← (out + a) / 2` in place: a read-modify-write of the slot's existing var.
    Update,
}

/// A product's scale and shift at size `n`: `out = scale · (a · b) + shift`, the same on the
/// host, in the host reference and on the GPU's streams.
pub(super) fn product_affine(n: usize) -> (f32, f32) {
    (0.25 / n as f32, 0.75)
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Node {
    pub(super) out: usize,
    pub(super) a: usize,
    pub(super) b: usize,
    pub(super) kind: Kind,
    pub(super) device: usize,
}

/// A seeded `n`×`n` input, the same on every machine (SplitMix64): positive values whose every
/// row sums to `n` (about 1 each, from 0.5 to 1.5 before the rows are scaled).
///
/// Why: a chain of plain products `(a · b) / n` squares a slot's scale again and again, so any
/// drift from 1 — the inputs' own, or f32 rounding's — doubles its exponent each time: from
/// values in [0, 1), width 2 and depth 64 fell below f32's normal range, and the run timed
/// subnormal arithmetic instead of the engine; from rows summing to `n`, rounding alone
/// overflows them within a few hundred ops. So a product is `(a · b) / 4n + 3/4`: with rows
/// summing to `n` its rows sum to `n` again, and a drift `d` of that sum comes out about `d / 2`,
/// while a mix or an update is a mean of two slots. Every value stays near 1, at any width and
/// depth (a test runs the program on the host to check it).
pub(super) fn input(n: usize, seed: u64) -> Vec<f32> {
    let mut draw = draws(seed);
    // 24 bits: exact in f32.
    let mut values: Vec<f32> = (0..n * n)
        .map(|_| 0.5 + (draw() >> 40) as f32 / (1u32 << 24) as f32)
        .collect();
    for row in values.chunks_mut(n.max(1)) {
        let scale = n as f32 / row.iter().sum::<f32>();
        row.iter_mut().for_each(|v| *v *= scale);
    }
    values
}

/// SplitMix64's draws from `seed`, one after another.
fn draws(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        let z = crate::device::cpu::splitmix64(state);
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z
    }
}

/// What a program starts from: its `width` seeded slots and, on each device, the all-ones
/// matrix its products add (`3/4` of it).
pub(super) struct Inputs {
    pub(super) slots: Vec<Tensor>,
    ones: Vec<Tensor>,
}

/// The inputs of a program of `width` slots of `n`×`n`, slot `i` on `devices[i % devices]`.
pub(super) fn inputs(
    engine: &crate::engine::Engine,
    devices: &[Arc<Device>],
    width: usize,
    n: usize,
    seed: u64,
) -> Inputs {
    let on = |device: &Arc<Device>, values: Vec<f32>| {
        let array =
            ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&[n, n]), values).expect("n² values");
        Tensor::from_host(engine, device, array)
    };
    Inputs {
        slots: (0..width)
            .map(|i| {
                on(
                    &devices[i % devices.len()],
                    input(n, seed.wrapping_add(i as u64)),
                )
            })
            .collect(),
        ones: devices.iter().map(|d| on(d, vec![1.0; n * n])).collect(),
    }
}

/// The seeded program (SplitMix64 draws, so the DAG is the same on every machine).
pub(super) fn program(width: usize, depth: usize, devices: usize, seed: u64) -> Vec<Node> {
    let mut draw = draws(seed);
    let mut next = |n: usize| (draw() % n as u64) as usize;
    (0..depth)
        .map(|_| Node {
            out: next(width),
            a: next(width),
            b: next(width),
            kind: [Kind::Product, Kind::Mix, Kind::Update][next(3)],
            device: next(devices),
        })
        .collect()
}

/// Push the program on fresh copies of `inputs` (in-place updates must not change them);
/// `wait_each` waits for every op (the op-by-op reference). The slots' final tensors come back.
pub(super) fn execute(
    nodes: &[Node],
    inputs: &Inputs,
    devices: &[Arc<Device>],
    n: usize,
    wait_each: bool,
) -> Result<Vec<Tensor>, ScenarioError> {
    let mut slots = Vec::with_capacity(inputs.slots.len());
    for x in &inputs.slots {
        let copy = x.duplicate();
        if wait_each {
            copy.wait_to_read()?;
        }
        slots.push(copy);
    }
    for node in nodes {
        let device = &devices[node.device];
        match node.kind {
            Kind::Product => {
                let (scale, shift) = product_affine(n);
                slots[node.out] = slots[node.a]
                    .placed_on(device)?
                    .matmul(&slots[node.b])?
                    .axpby(scale, &inputs.ones[node.device], shift)?;
            }
            Kind::Mix => {
                let y = slots[node.a].placed_on(device)?;
                slots[node.out] = y.axpby(0.5, &slots[node.b], 0.5)?;
            }
            Kind::Update => {
                slots[node.out]
                    .placed_on(device)?
                    .axpby_assign(0.5, &slots[node.a], 0.5)?
            }
        }
        if wait_each {
            slots[node.out].wait_to_read()?;
        }
    }
    Ok(slots)
}

/// True when every slot of `got` holds exactly the values of the same slot of `reference`.
pub(super) fn same_values(reference: &[Tensor], got: &[Tensor]) -> Result<bool, ScenarioError> {
    if reference.len() != got.len() {
        return Ok(false);
    }
    for (r, g) in reference.iter().zip(got) {
        if r.to_vec()? != g.to_vec()? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A CPU runtime of `devices` devices and `width` seeded inputs of `n`×`n`, for tests.
#[cfg(test)]
pub(super) fn setup(width: usize, devices: usize, n: usize) -> (crate::device::Runtime, Inputs) {
    let rt =
        crate::device::Runtime::cpu(&Default::default(), &vec![1; devices]).expect("a CPU runtime");
    let inputs = self::inputs(&rt.engine, &rt.devices, width, n, 0);
    (rt, inputs)
}

/// One op, for tests: slot `out` from slots `a` and `b` on `device`.
#[cfg(test)]
pub(super) fn node(out: usize, a: usize, b: usize, kind: Kind, device: usize) -> Node {
    Node {
        out,
        a,
        b,
        kind,
        device,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The program run on plain host matrices, each op as `execute` pushes it.
    fn interpret(nodes: &[Node], width: usize, n: usize, seed: u64) -> Vec<Vec<f32>> {
        let mut slots: Vec<Vec<f32>> = (0..width)
            .map(|i| input(n, seed.wrapping_add(i as u64)))
            .collect();
        let mut seen = Vec::new();
        for node in nodes {
            let (a, b) = (&slots[node.a], &slots[node.b]);
            let y: Vec<f32> = match node.kind {
                Kind::Product => (0..n * n)
                    .map(|ij| {
                        let (i, j) = (ij / n, ij % n);
                        let p = (0..n).map(|k| a[i * n + k] * b[k * n + j]).sum::<f32>();
                        // The GPU's streams take the same scale and shift.
                        let (scale, shift) = product_affine(n);
                        scale * p + shift
                    })
                    .collect(),
                Kind::Mix => a.iter().zip(b).map(|(x, y)| 0.5 * x + 0.5 * y).collect(),
                Kind::Update => slots[node.out]
                    .iter()
                    .zip(a)
                    .map(|(o, x)| 0.5 * o + 0.5 * x)
                    .collect(),
            };
            seen.push(y.clone());
            slots[node.out] = y;
        }
        seen
    }

    /// At every width and depth the program's values stay in the normal f32 range, within the
    /// inputs' own range: the engine is timed on ordinary arithmetic, never on subnormals or
    /// infinities (width 2, depth 64 once squared a slot into subnormals).
    #[test]
    fn every_value_stays_within_the_inputs_range_at_every_width_and_depth() {
        let n = 6;
        for width in [1, 2, 3, 4, 8] {
            for seed in [0, 7] {
                let nodes = program(width, 3000, 1, seed);
                let inputs: Vec<f32> = (0..width)
                    .flat_map(|i| input(n, seed.wrapping_add(i as u64)))
                    .collect();
                let lo = inputs.iter().copied().fold(f32::INFINITY, f32::min);
                let hi = inputs.iter().copied().fold(0.0, f32::max);
                assert!(lo > 0.25 && hi < 4.0, "inputs {lo}..{hi}");
                for (d, values) in interpret(&nodes, width, n, seed).iter().enumerate() {
                    for &v in values {
                        assert!(
                            v.is_normal() && v >= lo * 0.999 && v <= hi * 1.001,
                            "width {width}, op {d}: {v} outside {lo}..{hi}"
                        );
                    }
                }
            }
        }
        // The interpreter is the program: the engine's run ends at its values.
        let (rt, engine_inputs) = setup(3, 2, n);
        let nodes = program(3, 60, 2, 0);
        let ran = execute(&nodes, &engine_inputs, &rt.devices, n, false).expect("runs");
        let mut expected: Vec<Vec<f32>> = (0..3).map(|i| input(n, i as u64)).collect();
        for (node, values) in nodes.iter().zip(interpret(&nodes, 3, n, 0)) {
            expected[node.out] = values;
        }
        for (slot, want) in ran.iter().zip(&expected) {
            let got = slot.to_vec().expect("values");
            for (g, w) in got.iter().zip(want) {
                assert!((g - w).abs() <= 1e-4 * w.abs(), "{g} against {w}");
            }
        }
        // Each input is seeded, and its rows sum to n.
        assert_eq!(input(5, 3), input(5, 3));
        assert_ne!(input(5, 3), input(5, 4));
        let x = input(5, 3);
        for row in x.chunks(5) {
            assert!((row.iter().sum::<f32>() - 5.0).abs() < 1e-4, "{row:?}");
        }
    }

    #[test]
    fn the_program_is_a_function_of_the_seed() {
        assert_eq!(program(8, 50, 2, 7), program(8, 50, 2, 7));
        assert_ne!(program(8, 50, 2, 7), program(8, 50, 2, 8));
        let p = program(8, 200, 3, 1);
        assert!(p
            .iter()
            .all(|x| x.out < 8 && x.a < 8 && x.b < 8 && x.device < 3));
        for k in [Kind::Product, Kind::Mix, Kind::Update] {
            assert!(p.iter().any(|x| x.kind == k), "{k:?} never drawn");
        }
    }

    #[test]
    fn the_check_catches_a_wrong_reference() {
        let (rt, inputs) = setup(4, 2, 9);
        let nodes = program(4, 20, 2, 3);
        let reference = execute(&nodes, &inputs, &rt.devices, 9, true).unwrap();
        let parallel = execute(&nodes, &inputs, &rt.devices, 9, false).unwrap();
        assert!(same_values(&reference, &parallel).unwrap());
        // A reference from another program (another seed) must not pass.
        let wrong = execute(&program(4, 20, 2, 4), &inputs, &rt.devices, 9, true).unwrap();
        assert!(!same_values(&wrong, &parallel).unwrap());
    }

    #[test]
    fn runs_leave_the_inputs_alone_and_repeat_exactly() {
        let (rt, inputs) = setup(3, 2, 5);
        let before: Vec<Vec<f32>> = inputs.slots.iter().map(|x| x.to_vec().unwrap()).collect();
        // Only in-place updates: without fresh copies they would change the inputs.
        let nodes: Vec<Node> = (0..12)
            .map(|i| node(i % 3, (i + 1) % 3, 0, Kind::Update, i % 2))
            .collect();
        let first = execute(&nodes, &inputs, &rt.devices, 5, false).unwrap();
        let second = execute(&nodes, &inputs, &rt.devices, 5, false).unwrap();
        assert!(same_values(&first, &second).unwrap());
        let after: Vec<Vec<f32>> = inputs.slots.iter().map(|x| x.to_vec().unwrap()).collect();
        assert_eq!(before, after);
    }

    #[test]
    fn in_place_updates_must_wait_for_earlier_readers() {
        // slot 1 = slot0 · slot0 reads slot 0; the update of slot 0 right after must not
        // overtake it. Sequentially the product sees the old slot 0; an engine that ignored
        // write-after-read would give another product.
        let (rt, inputs) = setup(2, 2, 16);
        let nodes = [
            node(1, 0, 0, Kind::Product, 0),
            node(0, 1, 1, Kind::Update, 1),
            node(0, 0, 0, Kind::Update, 1),
        ];
        let reference = execute(&nodes, &inputs, &rt.devices, 16, true).unwrap();
        for _ in 0..20 {
            let got = execute(&nodes, &inputs, &rt.devices, 16, false).unwrap();
            assert!(same_values(&reference, &got).unwrap());
        }
        // The product computed after the updates (what a broken order would give) differs.
        let reordered = [nodes[1], nodes[2], nodes[0]];
        let wrong = execute(&reordered, &inputs, &rt.devices, 16, true).unwrap();
        assert!(!same_values(&reference, &wrong).unwrap());
    }
}
