//! What a traced parallel sample says about its own lower bound: no schedule of its ops can
//! finish before max(critical path, work / devices), and no op may start before an op it
//! depends on has completed.

use std::sync::Arc;
use std::time::Duration;

use super::program::{execute, Inputs, Node};
use crate::device::Device;
use crate::engine::trace::OrderViolation;
use crate::engine::{trace, Engine};
use crate::harness::synced;
use crate::scenario::kit::traced;
use crate::scenario::ScenarioError;

/// What one traced parallel sample says about its own lower bound.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct SampleBound {
    /// The sample's time, as the sampler recorded it.
    pub(super) wall_s: f64,
    pub(super) path_s: f64,
    pub(super) work_s: f64,
    /// max(critical path, work / devices).
    pub(super) bound_s: f64,
    /// `Err` names the first dependency the trace shows broken.
    pub(super) order: Result<(), OrderViolation>,
}

impl SampleBound {
    /// wall / bound: at least 1 for any correct schedule.
    pub(super) fn ratio(&self) -> f64 {
        self.wall_s / self.bound_s
    }

    pub(super) fn holds(&self) -> bool {
        self.order.is_ok() && self.ratio() >= 1.0
    }
}

/// One parallel run, timed, with the bound from its own trace (none while a `--trace` repeat
/// records the ops).
pub(super) fn parallel_sample(
    engine: &Engine,
    nodes: &[Node],
    inputs: &Inputs,
    devices: &[Arc<Device>],
    n: usize,
) -> Result<(Duration, Option<SampleBound>), ScenarioError> {
    let (wall, records) = traced(engine, || {
        synced(engine, || execute(nodes, inputs, devices, n, false))
    })?;
    let bound = records.map(|r| {
        let cp = trace::critical_path(&r);
        let (path_s, work_s) = (cp.path_ns as f64 * 1e-9, cp.work_ns as f64 * 1e-9);
        SampleBound {
            wall_s: wall.as_secs_f64(),
            path_s,
            work_s,
            bound_s: path_s.max(work_s / devices.len() as f64),
            order: trace::check_order(&r),
        }
    });
    Ok((wall, bound))
}

#[cfg(test)]
mod tests {
    use super::super::program::{node, program, setup, Kind};
    use super::*;

    #[test]
    fn no_parallel_sample_beats_its_own_bound_over_many_seeds() {
        let (rt, inputs) = setup(6, 2, 24);
        for seed in 0..40 {
            let nodes = program(6, 40, 2, seed);
            let (_, bound) = parallel_sample(&rt.engine, &nodes, &inputs, &rt.devices, 24).unwrap();
            let bound = bound.expect("traced");
            assert!(bound.order.is_ok(), "seed {seed}: {:?}", bound.order);
            assert!(bound.ratio() >= 1.0, "seed {seed}: {bound:?}");
            assert!(bound.path_s > 0.0 && bound.work_s >= bound.path_s);
        }
    }

    #[test]
    fn a_sample_faster_than_its_bound_fails_the_check() {
        let ok = SampleBound {
            wall_s: 2.0,
            path_s: 1.5,
            work_s: 3.0,
            bound_s: 1.5,
            order: Ok(()),
        };
        assert!(ok.holds());
        let beaten = SampleBound {
            wall_s: 1.0,
            ..ok.clone()
        };
        assert!(!beaten.holds());
        let broken = SampleBound {
            order: Err(OrderViolation {
                op: 3,
                op_name: "matmul".into(),
                early_ns: 10,
                dependency: 2,
                dependency_name: "matmul".into(),
            }),
            ..ok
        };
        assert!(!broken.holds());
    }

    #[test]
    fn a_trace_records_the_vars_so_the_bound_sees_every_dependency() {
        let (rt, inputs) = setup(2, 2, 8);
        let nodes = [node(0, 1, 1, Kind::Update, 0)];
        let (_, records) = traced(&rt.engine, || {
            let slots = execute(&nodes, &inputs, &rt.devices, 8, false)?;
            rt.engine.wait_all()?;
            Ok::<_, ScenarioError>(slots)
        })
        .unwrap();
        let records = records.unwrap();
        // Two copies, then the update, which reads slot 1's copy and writes slot 0's.
        assert_eq!(records.len(), 3);
        let update = &records[2];
        assert_eq!(update.writes, records[0].writes);
        assert_eq!(update.reads, records[1].writes);
        assert_eq!(trace::dependencies(&records)[2], vec![0, 1]);
    }
}
