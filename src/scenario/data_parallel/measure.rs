//! Set-up and the timed runs of the engine backend (`--backend engine`, in one process):
//! [`run`] builds the [`Setup`](super::Setup) and each scheme's workspace, samples the five
//! schemes of [`engine`](super::engine) on k CPU devices, traces one more run of each
//! synchronous scheme for communication's share, and records the run ([`record_run`]).

use super::engine::Workspace;
use super::explain::{record_run, Communication};
use super::training::{buckets, communication_overlap, communication_share, Runs};
use super::{Config, DataParallel, Timed};
use crate::device::Runtime;
use crate::harness::{synced, Variant};
use crate::report::RunRecord;
use crate::scenario::collective;
use crate::scenario::kit::{traced, ALREADY_TRACING};
use crate::scenario::{Params, RunContext, Scenario, ScenarioError};

/// The run of `data-parallel` on the engine backend (`--device cpu`, and `--device cuda`
/// falling back): the five schemes on `--devices` CPU devices of one engine.
pub(super) fn run(
    scenario: &DataParallel,
    params: &Params,
    cfg: &Config,
    ctx: &RunContext,
) -> Result<RunRecord, ScenarioError> {
    let setup = cfg.setup(cfg.devices);
    let threads = ctx.cpu_split(cfg.devices);
    let rt = Runtime::cpu(&ctx.runtime, &threads)?;
    let engine = &rt.engine;
    let (k, plan) = (cfg.devices, buckets(&cfg.layers, cfg.bucket_bytes));
    let (steps, batch) = (cfg.steps, cfg.batch);
    let label = |v: Timed| match v {
        Timed::OneDevice => format!("{steps} steps of {batch} rows on cpu:0"),
        Timed::ParameterServer => {
            format!("{k} shard gradients, reduce onto cpu:0, update, broadcast")
        }
        Timed::Ring => {
            format!(
                "{k} shard gradients, ring reduce-scatter + all-gather in {k} chunks, {k} updates"
            )
        }
        Timed::RingOverlapped => format!(
            "{k} shard gradients layer by layer, {} ({}) each on the ring as soon as written, \
             {k} updates",
            crate::units::count(plan.len(), "bucket"),
            plan.iter()
                .map(|b| crate::units::human_bytes(4 * b.range.len() as u64))
                .collect::<Vec<_>>()
                .join(" + ")
        ),
        // Async: the engine times no other variant.
        _ => format!("{k} devices × {steps} updates of their shard, stale reads allowed"),
    };
    use Timed::{Async, OneDevice, ParameterServer, Ring, RingOverlapped};
    let schemes = [OneDevice, ParameterServer, Ring, RingOverlapped, Async];
    let schemes: Vec<(Timed, String)> = schemes.map(|v| (v, label(v))).into();
    let workspaces: Vec<Workspace> = schemes.iter().map(|s| setup.workspace(s.0)).collect();
    let runs = Runs::new(schemes.len());
    let train = |i: usize| {
        let (setup, rt, ws, runs) = (&setup, &rt, &workspaces[i], &runs);
        move || {
            let wall = synced(engine, || -> Result<(), ScenarioError> {
                setup.push(rt, ws);
                Ok(())
            })?;
            // Finished (synced waited): read its log, after the clock stopped.
            runs.keep(i, wall.as_secs_f64(), ws.log(), i);
            Ok(wall)
        }
    };
    let mut variants: Vec<Variant<ScenarioError>> = (0..schemes.len())
        .map(|i| Variant::new(schemes[i].0.name(), train(i)))
        .collect();
    let summaries = ctx.sample(scenario, engine, &mut variants)?;
    drop(variants);
    // The last timed run of each scheme, before the traced runs below reuse its buffers.
    let trained = runs.trained(&summaries, |i| workspaces[i].trained());

    // Communication's share and how much of it ran beside computation, from one more
    // traced run of each synchronous scheme.
    let (mut shares, mut overlaps) = (Vec::new(), Vec::new());
    let synchronous = schemes
        .iter()
        .zip(&workspaces)
        .filter(|(s, _)| s.0.is_synchronous());
    for (&(v, _), ws) in synchronous {
        let (_, records) = traced(engine, || -> Result<(), ScenarioError> {
            setup.push(&rt, ws);
            engine.wait_all()?;
            Ok(())
        })?;
        if let Some(records) = records {
            shares.push((v, communication_share(&records)));
            overlaps.push((v, communication_overlap(&records)));
        }
    }

    let mut run = RunRecord::new(scenario.name(), params.to_json(), rt.describe_devices());
    if threads.iter().any(|&t| t != threads[0]) {
        let each: Vec<String> = threads.iter().map(usize::to_string).collect();
        run.notes.push(format!(
            "the devices have unequal threads ({}): one-device runs on cpu:0's {}, so the \
             scaling efficiency compares with the largest device; --cpu-threads N gives \
             each N",
            each.join(", "),
            threads[0]
        ));
    }
    let consequence = ": the scaling efficiency cannot reach 1";
    collective::note_shared_cores(&mut run, &threads, consequence);
    let comm = Communication {
        shares: &shares,
        overlaps: &overlaps,
        threads: &threads,
        untraced: ALREADY_TRACING,
    };
    record_run(&mut run, cfg, &setup, &schemes, summaries, trained, &comm);
    Ok(run)
}
