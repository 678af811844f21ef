//! The program as `deps --device cuda --streams k` runs it: which GPU buffer each op reads and
//! writes, which compute stream runs it, and which ops wait for an event of another stream.
//! Worked out on the host alone, so it is tested without a GPU.
//!
//! Buffers are set aside once for a run and reused by every run (ops write over them rather
//! than allocating): `0..width` hold the inputs (never written), `width..2·width` the copies
//! each run starts from, then one buffer per op that writes a new value (a product or a mix).
//! An in-place update writes the buffer its slot holds. So the buffers' dependencies are the
//! program's: a new value never waits for the readers of the slot's old one.

use super::program::{Kind, Node};
use crate::device::stream_order::StreamOrder;

/// What a step of the GPU program does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum StepKind {
    /// `write = reads[0]`: a slot's fresh copy of its input.
    Copy,
    /// `write = (reads[0] · reads[1]) / 4n + 3/4`.
    Product,
    /// `write = (reads[0] + reads[1]) / 2`.
    Mix,
    /// `write ← (write + reads[0]) / 2`, in place.
    Update,
}

/// One op of the GPU program: the buffers it reads and writes and the stream that runs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Step {
    pub(super) kind: StepKind,
    pub(super) stream: usize,
    /// The buffers read besides `write` (an update also reads `write`).
    pub(super) reads: Vec<usize>,
    pub(super) write: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Plan {
    pub(super) steps: Vec<Step>,
    /// Buffers the run needs, inputs included.
    pub(super) buffers: usize,
    /// The buffer each slot holds at the end.
    pub(super) finals: Vec<usize>,
}

impl Plan {
    /// `nodes` over `width` slots on `streams` streams: the copy of slot `i` on stream
    /// `i % streams`, each op on stream `node.device % streams` (the program draws `device`
    /// below the stream count it is given).
    pub(super) fn of(nodes: &[Node], width: usize, streams: usize) -> Plan {
        let streams = streams.max(1);
        let mut steps: Vec<Step> = (0..width)
            .map(|i| Step {
                kind: StepKind::Copy,
                stream: i % streams,
                reads: vec![i],
                write: width + i,
            })
            .collect();
        let mut slots: Vec<usize> = (width..2 * width).collect();
        let mut next = 2 * width;
        for node in nodes {
            let stream = node.device % streams;
            let (a, b) = (slots[node.a], slots[node.b]);
            let (kind, reads) = match node.kind {
                Kind::Product => (StepKind::Product, vec![a, b]),
                Kind::Mix => (StepKind::Mix, vec![a, b]),
                Kind::Update => (StepKind::Update, vec![a]),
            };
            if kind != StepKind::Update {
                slots[node.out] = next;
                next += 1;
            }
            let write = slots[node.out];
            steps.push(Step {
                kind,
                stream,
                reads,
                write,
            });
        }
        Plan {
            steps,
            buffers: next,
            finals: slots,
        }
    }

    /// For each step, the earlier steps on *other* streams whose events it waits for, by the
    /// rule the GPU runtime applies ([`StreamOrder`]) on a fresh set of buffers (the inputs'
    /// uploads are outside the streams and not listed).
    pub(super) fn waits(&self) -> Vec<Vec<usize>> {
        let mut order: Vec<StreamOrder<Option<usize>>> = (0..self.buffers)
            .map(|_| StreamOrder::written_outside(None))
            .collect();
        let mut waits = Vec::with_capacity(self.steps.len());
        for (i, step) in self.steps.iter().enumerate() {
            let s = step.stream;
            let reads: Vec<usize> = step
                .reads
                .iter()
                .enumerate()
                .filter(|(j, &r)| r != step.write && !step.reads[..*j].contains(&r))
                .map(|(_, &r)| r)
                .collect();
            let mut on: Vec<usize> = reads
                .iter()
                .filter_map(|&r| order[r].before_read(s).copied().flatten())
                .collect();
            on.extend(order[step.write].before_write(s).into_iter().flatten());
            on.sort_unstable();
            on.dedup();
            for &r in &reads {
                order[r].read(s, Some(i));
            }
            order[step.write].written(s, Some(i));
            waits.push(on);
        }
        waits
    }

    /// Steps that wait for at least one event of another stream.
    pub(super) fn cross_stream_ops(&self) -> usize {
        self.waits().iter().filter(|w| !w.is_empty()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::super::program::{node, program};
    use super::*;

    /// Run a plan on the host, step by step, over buffers of one value each (the arithmetic
    /// of the ops on 1×1 matrices).
    fn interpret(plan: &Plan, inputs: &[f64]) -> Vec<f64> {
        let mut buf = vec![f64::NAN; plan.buffers];
        buf[..inputs.len()].copy_from_slice(inputs);
        for s in &plan.steps {
            buf[s.write] = match s.kind {
                StepKind::Copy => buf[s.reads[0]],
                StepKind::Product => buf[s.reads[0]] * buf[s.reads[1]],
                StepKind::Mix => (buf[s.reads[0]] + buf[s.reads[1]]) / 2.0,
                StepKind::Update => (buf[s.write] + buf[s.reads[0]]) / 2.0,
            };
        }
        plan.finals.iter().map(|&b| buf[b]).collect()
    }

    /// The program on slots, as `execute` runs it on the CPU (1×1 values).
    fn on_slots(nodes: &[Node], inputs: &[f64]) -> Vec<f64> {
        let mut slots = inputs.to_vec();
        for n in nodes {
            slots[n.out] = match n.kind {
                Kind::Product => slots[n.a] * slots[n.b],
                Kind::Mix => (slots[n.a] + slots[n.b]) / 2.0,
                Kind::Update => (slots[n.out] + slots[n.a]) / 2.0,
            };
        }
        slots
    }

    #[test]
    fn the_buffers_compute_what_the_slots_do() {
        for seed in 0..200 {
            let width = 1 + (seed as usize % 7);
            let nodes = program(width, 40, 3, seed);
            let plan = Plan::of(&nodes, width, 3);
            let inputs: Vec<f64> = (0..width).map(|i| 0.5 + i as f64 * 0.125).collect();
            let (got, want) = (interpret(&plan, &inputs), on_slots(&nodes, &inputs));
            assert_eq!(got, want, "seed {seed}");
            // Inputs are only read; each new value has a buffer of its own.
            assert!(plan.steps.iter().all(|s| s.write >= width));
            let new = nodes.iter().filter(|n| n.kind != Kind::Update).count();
            assert_eq!(plan.buffers, 2 * width + new);
        }
    }

    #[test]
    fn ops_go_to_the_streams_the_program_drew() {
        let nodes = program(8, 64, 4, 1);
        let plan = Plan::of(&nodes, 8, 4);
        let streams: Vec<usize> = plan.steps.iter().map(|s| s.stream).collect();
        assert_eq!(&streams[..8], &[0, 1, 2, 3, 0, 1, 2, 3]);
        assert!(nodes.iter().zip(&streams[8..]).all(|(n, &s)| s == n.device));
        for k in 0..4 {
            assert!(streams.contains(&k), "stream {k} unused");
        }
        // One stream: everything on stream 0 and nothing waits.
        let one = Plan::of(&nodes, 8, 1);
        assert!(one.steps.iter().all(|s| s.stream == 0));
        assert_eq!(one.cross_stream_ops(), 0);
        assert!(plan.cross_stream_ops() > 0);
    }

    /// Every dependency between two steps (they touch one buffer and one of them writes it) is
    /// kept on the GPU: the later step is after the earlier one on its stream, or waits for an
    /// event recorded at or after it, through a chain of stream order and waits.
    #[test]
    fn every_dependency_is_kept_by_stream_order_or_an_event() {
        for seed in 0..100 {
            let (width, k) = (1 + seed as usize % 6, 1 + seed as usize % 4);
            let nodes = program(width, 30, k, seed);
            let plan = Plan::of(&nodes, width, k);
            let waits = plan.waits();
            let n = plan.steps.len();
            // after[j][i]: step j runs after step i completes on the GPU.
            let mut after: Vec<Vec<bool>> = Vec::with_capacity(n);
            for (j, step) in plan.steps.iter().enumerate() {
                let mut row = vec![false; n];
                for (i, earlier) in after.iter().enumerate() {
                    if plan.steps[i].stream == step.stream || waits[j].contains(&i) {
                        row[i] = true;
                        for (h, &x) in earlier.iter().enumerate() {
                            row[h] |= x;
                        }
                    }
                }
                after.push(row);
            }
            let touches = |s: &Step| -> Vec<(usize, bool)> {
                let mut t: Vec<(usize, bool)> = s.reads.iter().map(|&r| (r, false)).collect();
                t.push((s.write, true));
                t
            };
            for (j, row) in after.iter().enumerate() {
                for (i, &ordered) in row.iter().enumerate().take(j) {
                    let conflict = touches(&plan.steps[i]).iter().any(|&(b, wi)| {
                        touches(&plan.steps[j])
                            .iter()
                            .any(|&(c, wj)| b == c && (wi || wj))
                    });
                    assert!(
                        !conflict || ordered,
                        "seed {seed}: step {j} may overtake step {i} ({:?} then {:?})",
                        plan.steps[i],
                        plan.steps[j]
                    );
                }
            }
        }
    }

    #[test]
    fn a_consumer_on_another_stream_waits_for_its_producer_and_a_writer_for_its_readers() {
        // slot 1 = slot0 · slot0 on stream 0; slot 0 ← (slot 0 + slot 1) / 2 on stream 1.
        let nodes = [
            node(1, 0, 0, Kind::Product, 0),
            node(0, 1, 1, Kind::Update, 1),
        ];
        let plan = Plan::of(&nodes, 2, 2);
        // Copies on streams 0 and 1, then the product (step 2) on stream 0, the update (step 3)
        // on stream 1: it reads the product (read after write) and overwrites slot 0's copy
        // (write after write: the copy's event, step 0), which the product read (write after
        // read: the product's event again).
        assert_eq!(plan.steps[2].stream, 0);
        assert_eq!(plan.steps[3].stream, 1);
        let waits = plan.waits();
        assert_eq!(
            waits[2],
            Vec::<usize>::new(),
            "the copy of slot 0 is on stream 0"
        );
        assert_eq!(waits[3], vec![0, 2]);
        // On one stream, the same program waits for nothing.
        assert!(Plan::of(&nodes, 2, 1).waits().iter().all(Vec::is_empty));
    }
}
