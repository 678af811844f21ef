//! The seeded program: a random DAG over `width` slots, and pushing it op by op or at once.

use std::sync::Arc;

use crate::device::Device;
use crate::scenario::ScenarioError;
use crate::tensor::Tensor;

/// What an op of the program does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// `out = (a · b) / n`, a new value for slot `out`.
    Product,
    /// `out = (a + b) / 2`, a new value for slot `out`.
    Mix,
    /// `out ← (out + a) / 2` in place: a read-modify-write of the slot's existing var.
    Update,
}

/// One op of the program.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Node {
    pub(super) out: usize,
    pub(super) a: usize,
    pub(super) b: usize,
    pub(super) kind: Kind,
    pub(super) device: usize,
}

/// The seeded program (SplitMix64 draws, so the DAG is the same on every machine).
pub(super) fn program(width: usize, depth: usize, devices: usize, seed: u64) -> Vec<Node> {
    let mut state = seed;
    let mut next = |n: usize| {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) % n as u64) as usize
    };
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
    inputs: &[Tensor],
    devices: &[Arc<Device>],
    n: usize,
    wait_each: bool,
) -> Result<Vec<Tensor>, ScenarioError> {
    let mut slots = Vec::with_capacity(inputs.len());
    for x in inputs {
        let copy = x.duplicate();
        if wait_each {
            copy.wait_to_read()?;
        }
        slots.push(copy);
    }
    for node in nodes {
        let device = &devices[node.device];
        let written = match node.kind {
            Kind::Product => {
                let y = slots[node.a]
                    .placed_on(device)?
                    .matmul(&slots[node.b])?
                    .scale(1.0 / n as f32);
                slots[node.out] = y;
                &slots[node.out]
            }
            Kind::Mix => {
                let y = slots[node.a]
                    .placed_on(device)?
                    .axpby(0.5, &slots[node.b], 0.5)?;
                slots[node.out] = y;
                &slots[node.out]
            }
            Kind::Update => {
                slots[node.out]
                    .placed_on(device)?
                    .axpby_assign(0.5, &slots[node.a], 0.5)?;
                &slots[node.out]
            }
        };
        if wait_each {
            written.wait_to_read()?;
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
pub(super) fn setup(
    width: usize,
    devices: usize,
    n: usize,
) -> (crate::device::Runtime, Vec<Tensor>) {
    let rt =
        crate::device::Runtime::cpu(&Default::default(), &vec![1; devices]).expect("a CPU runtime");
    let inputs: Vec<Tensor> = (0..width)
        .map(|i| Tensor::uniform(&rt.engine, &rt.devices[i % devices], &[n, n], i as u64))
        .collect();
    (rt, inputs)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let before: Vec<Vec<f32>> = inputs.iter().map(|x| x.to_vec().unwrap()).collect();
        // Only in-place updates: without fresh copies they would change the inputs.
        let nodes: Vec<Node> = (0..12)
            .map(|i| Node {
                out: i % 3,
                a: (i + 1) % 3,
                b: 0,
                kind: Kind::Update,
                device: i % 2,
            })
            .collect();
        let first = execute(&nodes, &inputs, &rt.devices, 5, false).unwrap();
        let second = execute(&nodes, &inputs, &rt.devices, 5, false).unwrap();
        assert!(same_values(&first, &second).unwrap());
        let after: Vec<Vec<f32>> = inputs.iter().map(|x| x.to_vec().unwrap()).collect();
        assert_eq!(before, after);
    }

    #[test]
    fn in_place_updates_must_wait_for_earlier_readers() {
        // slot 1 = slot0 · slot0 reads slot 0; the update of slot 0 right after must not
        // overtake it. Sequentially the product sees the old slot 0; an engine that ignored
        // write-after-read would give another product.
        let (rt, inputs) = setup(2, 2, 16);
        let node = |out, a, b, kind, device| Node {
            out,
            a,
            b,
            kind,
            device,
        };
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
