//! `allreduce` on k CPU devices of one engine: every algorithm's ops pushed onto the devices'
//! lanes, each step an op on its receiver's device.

use std::sync::Arc;

use super::measure::{check, copy_bandwidth, input, Checked, Tally};
use super::size_label;
use super::{Algorithm, Allreduce, Config};
use crate::device::Runtime;
use crate::engine::{Engine, LaneId};
use crate::harness::{synced, Variant};
use crate::report::RunRecord;
use crate::scenario::backend::Backend;
use crate::scenario::collective::{self, Chunked, Replica};
use crate::scenario::{Params, RunContext, Scenario, ScenarioError};

impl Algorithm {
    /// Push one all-reduce of `replicas` onto the devices' `lanes`.
    pub(super) fn push(self, engine: &Engine, lanes: &[LaneId], replicas: &[Replica]) {
        match self {
            Algorithm::Ring => collective::push_ring(engine, lanes, replicas),
            Algorithm::ParameterServer => {
                collective::push_reduce(engine, lanes[0], replicas);
                collective::push_broadcast(engine, lanes, replicas);
            }
            Algorithm::Tree => collective::push_tree(engine, lanes, replicas),
            // Not among the engine's algorithms (`Algorithm::of`).
            Algorithm::MpiAllreduce => {}
        }
    }
}

/// One size's buffers on every device, `elements` each: element `i` of device `d`'s input
/// `value(d, i)`, and its result.
pub(super) fn buffers(
    elements: usize,
    devices: usize,
    value: impl Fn(usize, usize) -> f32,
) -> Vec<Replica> {
    let buffer = || Arc::new(Chunked::new(elements, devices));
    (0..devices)
        .map(|d| {
            let send = buffer();
            if let Ok(mut s) = send.write_all() {
                s.iter_mut().enumerate().for_each(|(i, v)| *v = value(d, i));
            }
            Replica::new(send, buffer())
        })
        .collect()
}

/// Run `algorithm` once on results filled with NaN, and check every device's result.
pub(super) fn verify(
    replicas: &[Replica],
    engine: &Engine,
    lanes: &[LaneId],
    algorithm: Algorithm,
) -> Result<Checked, ScenarioError> {
    engine.wait_all()?;
    for r in replicas {
        r.recv.write_all().map_err(busy)?.fill(f32::NAN);
    }
    algorithm.push(engine, lanes, replicas);
    engine.wait_all()?;
    let whole = |pick: fn(&Replica) -> &Chunked| {
        let all = replicas.iter().map(|r| pick(r).write_all());
        all.collect::<Result<Vec<_>, _>>().map_err(busy)
    };
    let (sends, recvs) = (whole(|r| &r.send)?, whole(|r| &r.recv)?);
    let inputs: Vec<&[f32]> = sends.iter().map(|s| &s[..]).collect();
    let outputs: Vec<&[f32]> = recvs.iter().map(|s| &s[..]).collect();
    Ok(check(&inputs, &outputs))
}

/// A buffer still borrowed after the engine drained: a bug, reported as the check's failure
/// rather than a panic.
fn busy(e: crate::engine::OpError) -> ScenarioError {
    ScenarioError::Engine(crate::engine::EngineError::OpFailed {
        op: "allreduce check".into(),
        message: e.to_string(),
    })
}

/// Measure every size on `cfg.devices` CPU devices of one engine.
pub(super) fn run(
    scenario: &Allreduce,
    params: &Params,
    cfg: &Config,
    ctx: &RunContext,
) -> Result<RunRecord, ScenarioError> {
    let k = cfg.devices;
    // The machine's copy bandwidth, measured before the devices' threads exist.
    let copy = copy_bandwidth();
    let threads = ctx.cpu_split(k);
    let rt = Runtime::cpu(&ctx.runtime, &threads)?;
    let engine = &rt.engine;
    let lanes: Vec<LaneId> = rt.devices.iter().map(|d| d.compute).collect();
    let mut run = RunRecord::new(scenario.name(), params.to_json(), rt.describe_devices());
    let algorithms = Algorithm::of(Backend::Engine);
    let mut tally = Tally::new(Backend::Engine, k, copy);
    for &bytes in &cfg.sizes {
        let elements = (bytes / 4) as usize;
        let buffers = buffers(elements, k, input);
        let mut checked = Vec::new();
        for &a in algorithms {
            checked.push(verify(&buffers, engine, &lanes, a)?);
        }
        let (replicas, lanes) = (&buffers, &lanes);
        let mut variants: Vec<Variant<ScenarioError>> = algorithms
            .iter()
            .map(|&a| {
                Variant::new(a.variant(bytes), move || {
                    synced(engine, || -> Result<(), ScenarioError> {
                        a.push(engine, lanes, replicas);
                        Ok(())
                    })
                })
            })
            .collect();
        let summaries = ctx.sample(scenario, engine, &mut variants)?;
        drop(variants);
        engine.wait_all()?;
        drop(buffers);
        let how = |a: Algorithm| match a {
            Algorithm::Ring => format!("reduce-scatter + all-gather in {k} chunks"),
            Algorithm::ParameterServer => "reduce onto cpu:0, broadcast".into(),
            // The tree: the engine runs no other algorithm (`Algorithm::of`).
            _ => "binomial tree reduce, then broadcast".into(),
        };
        let size = size_label(bytes);
        let labels = algorithms.iter();
        let labels = labels.map(|&a| format!("{size} on {k} devices: {}", how(a)));
        tally.size(&mut run, bytes, summaries, labels.collect(), &checked);
    }
    collective::note_shared_cores(&mut run, &threads, "");
    tally.finish(&mut run);
    Ok(run)
}
