//! The timed passes of `hybridize`: the MLP's parameters on the device, the imperative pass
//! (three engine ops per layer) and the captured graph's replay (one op), timed on the host's
//! clock and, on a GPU, the GPU's; the checks that the replay equals the imperative pass (and,
//! on a GPU, the host's forward pass); and the figures.

use std::sync::Arc;

use ndarray::{Array2, Axis, Ix2};

use super::explain::{conclude, explain, Passes};
#[cfg(feature = "cuda")]
use super::gpu_clock;
use super::{Config, Hybridize, Timed, HYBRIDIZE_SPEEDUP, OPS_PER_PASS, OVERHEAD_PER_OP_S};
use crate::device::{available_cores, cpu, Runtime};
use crate::engine::Var;
use crate::harness::{synced, Variant};
use crate::report::evidence::Estimate;
use crate::report::RunRecord;
use crate::scenario::gpu_clocks::Clocks;
use crate::scenario::kit::{chosen_device, matmul_tolerance};
use crate::scenario::{Params, RunContext, Scenario, ScenarioError};
use crate::tensor::Tensor;

/// One layer's kernels on host arrays: exactly what the imperative ops run, in the same order.
fn layer(h: &Array2<f32>, w: &Array2<f32>, b: &Array2<f32>) -> Array2<f32> {
    let z = cpu::matmul(h.view(), w.view());
    let z = &z + &b.row(0).insert_axis(Axis(0));
    z.mapv(|v| v.max(0.0))
}

/// (W, b) per layer: the captured graph's parameters, fixed at capture, replayed as one op.
type Weights = Vec<(Array2<f32>, Array2<f32>)>;

/// The imperative pass: each layer's product, bias and ReLU pushed as engine ops of their own.
fn imperative_pass(x: &Tensor, tensors: &[(Tensor, Tensor)]) -> Result<Tensor, ScenarioError> {
    let layer = |h: Tensor, (w, b): &(Tensor, Tensor)| Ok(h.matmul(w)?.add_row(b)?.relu());
    tensors.iter().try_fold(x.clone(), layer)
}

/// The captured graph's forward pass on host arrays.
fn forward(weights: &Weights, x: &Array2<f32>) -> Array2<f32> {
    weights.iter().fold(x.clone(), |h, (w, b)| layer(&h, w, b))
}

pub(super) fn passes(
    scenario: &Hybridize,
    params: &Params,
    ctx: &RunContext,
    cfg: Config,
) -> Result<RunRecord, ScenarioError> {
    let Config {
        layers,
        width,
        batch,
        passes,
        device: choice,
    } = cfg;
    let threads = ctx.cpu_threads.unwrap_or_else(available_cores);
    let chosen = chosen_device(choice, threads, ctx.gpu_fallback)?;
    let rt = Runtime::new(&ctx.runtime, &[chosen.request])?;
    let (engine, device) = (&rt.engine, &rt.devices[0]);

    let host = |shape: [usize; 2], seed: u64| -> Result<Array2<f32>, ScenarioError> {
        cpu::uniform(&shape, seed)
            .mapv(|v| v - 0.5)
            .into_dimensionality::<Ix2>()
            .map_err(|e| ScenarioError::Input(e.to_string()))
    };
    let x_host = host([batch, width], 1)?;
    let weights_host = (0..layers as u64)
        .map(|l| Ok((host([width, width], 10 + l)?, host([1, width], 100 + l)?)))
        .collect::<Result<Vec<_>, ScenarioError>>()?;
    // Imperative: tensors on the device, one engine op per kernel.
    let on = |a: &Array2<f32>| Tensor::from_host(engine, device, a.clone().into_dyn());
    let x = on(&x_host);
    let tensors: Vec<(Tensor, Tensor)> = weights_host.iter().map(|(w, b)| (on(w), on(b))).collect();
    let imperative = || imperative_pass(&x, &tensors);
    // Hybridized: capture once, replay as a single op (on a GPU, a CUDA graph).
    let replay = Replay::capture(&x, &tensors, &weights_host, [batch, width])?;
    let hybrid = || replay.run();

    // On a GPU, the GPU's clock around each sample, beside the host's.
    #[cfg(feature = "cuda")]
    let owned_clocks = Clocks::open(device, &gpu_clock::timed());
    #[cfg(not(feature = "cuda"))]
    let owned_clocks = Clocks::default();
    let clocks = &owned_clocks;
    let (imperative, hybrid) = (&imperative, &hybrid);
    let mut variants: Vec<Variant<ScenarioError>> = Timed::each(|v| match v {
        Timed::Imperative => Variant::new(v.name(), move || {
            engine.wait_all()?;
            clocks.start(v.name());
            let elapsed = synced(engine, || {
                let outs = (0..passes)
                    .map(|_| imperative())
                    .collect::<Result<Vec<_>, _>>()?;
                // The passes are independent: the stop follows every one's output.
                let after: Vec<&Var> = outs.iter().map(Tensor::var).collect();
                clocks.stop_after(v.name(), engine, &after);
                Ok::<_, ScenarioError>(outs)
            })?;
            clocks.read(v.name());
            Ok(elapsed)
        }),
        Timed::Hybridized => Variant::new(v.name(), move || {
            engine.wait_all()?;
            clocks.start(v.name());
            let elapsed = synced(engine, || {
                let outs = (0..passes).map(|_| hybrid()).collect::<Vec<_>>();
                // Every replay writes the graph's one output: the last follows all.
                let after: Vec<&Var> = outs.last().map(Tensor::var).into_iter().collect();
                clocks.stop_after(v.name(), engine, &after);
                Ok::<_, ScenarioError>(outs)
            })?;
            clocks.read(v.name());
            Ok(elapsed)
        }),
    });
    let summaries = ctx.sample(scenario, engine, &mut variants)?;
    drop(variants);

    let ops_per_pass = 3 * layers;
    let mut run = RunRecord::new(scenario.name(), params.to_json(), rt.describe_devices());
    run.notes.extend(chosen.fallback_note);
    let graph_op = if device.is_gpu() {
        "replayed CUDA graph (one launch)"
    } else {
        "replayed graph op"
    };
    let label = |v: Timed| match v {
        Timed::Imperative => {
            format!("{passes} passes × {ops_per_pass} ops (product, bias, ReLU per layer)")
        }
        Timed::Hybridized => format!("{passes} passes × 1 {graph_op}"),
    };
    Timed::add_to(&mut run, summaries, |v| Some(label(v)));
    let replayed = hybrid().to_vec()?;
    let identical = imperative()?.to_vec()? == replayed;
    run.check(
        "replay gives identical results",
        identical,
        format!("{batch}×{width} outputs of {layers} layers compared element by element"),
    );
    if device.is_gpu() {
        // The GPU's kernels against the host's: close, not identical (cuBLAS rounds in
        // another order than the CPU kernel).
        let host = forward(&weights_host, &x_host);
        let gap = relative_gap(&replayed, host.iter().copied());
        let tolerance = matmul_tolerance(width) * layers as f64;
        run.check(
            "matches the host forward pass",
            gap <= tolerance,
            format!(
                "max |GPU − host| / max |host| = {gap:.2e} over {batch}×{width} outputs (tolerance {tolerance:.1e})"
            ),
        );
    }
    let est = |v: Timed| Estimate::of(&run, v.name());
    let f = Passes {
        imp: est(Timed::Imperative),
        hyb: est(Timed::Hybridized),
        passes,
        ops_per_pass,
        gpu: device.is_gpu(),
    };
    run.record(HYBRIDIZE_SPEEDUP, f.speedup().value);
    run.record(OPS_PER_PASS, ops_per_pass as f64);
    run.record(OVERHEAD_PER_OP_S, f.overhead_per_op());
    explain(&f).record(&mut run);
    let recorded = owned_clocks.derive(&mut run, usize::from(ctx.traces.is_some()));
    #[cfg(feature = "cuda")]
    match gpu_clock::hybridized_host_over_gpu(&recorded) {
        Some(ratio) => run.record(gpu_clock::HYBRIDIZED_HOST_OVER_GPU_RATIO, ratio),
        None if f.gpu => run.unmeasured(
            gpu_clock::HYBRIDIZED_HOST_OVER_GPU_RATIO,
            "hybridized's GPU time was not measured",
        ),
        None => {}
    }
    let _ = recorded;
    conclude(&mut run, &f);
    Ok(run)
}

/// max |got − want| / max |want| (at least 1e-30), infinite when any value is NaN or the
/// lengths differ: a NaN must never pass as close.
fn relative_gap(got: &[f32], want: impl ExactSizeIterator<Item = f32>) -> f64 {
    if got.len() != want.len() {
        return f64::INFINITY;
    }
    let (mut diff, mut scale) = (0f64, 1e-30f64);
    for (&g, w) in got.iter().zip(want) {
        let d = (f64::from(g) - f64::from(w)).abs();
        if d.is_nan() {
            return f64::INFINITY;
        }
        diff = diff.max(d);
        scale = scale.max(f64::from(w).abs());
    }
    diff / scale
}

/// The hybridized forward pass: a host graph replayed as one op, or a CUDA graph.
enum Replay {
    Host {
        x: Tensor,
        graph: Arc<Weights>,
        shape: [usize; 2],
    },
    #[cfg(feature = "cuda")]
    Cuda(crate::tensor::CapturedGraph),
}

impl Replay {
    fn capture(
        x: &Tensor,
        tensors: &[(Tensor, Tensor)],
        weights: &Weights,
        shape: [usize; 2],
    ) -> Result<Replay, ScenarioError> {
        #[cfg(feature = "cuda")]
        if x.device().is_gpu() {
            let _ = weights;
            return Ok(Replay::Cuda(x.capture_dense_relu(tensors)?));
        }
        let _ = tensors;
        Ok(Replay::Host {
            x: x.clone(),
            graph: Arc::new(weights.to_vec()),
            shape,
        })
    }

    /// Push one replay; the output tensor.
    fn run(&self) -> Tensor {
        match self {
            Replay::Host { x, graph, shape } => {
                let g = graph.clone();
                x.apply("hybridized forward", shape, move |input| {
                    let input = input
                        .view()
                        .into_dimensionality::<Ix2>()
                        .map(|v| v.to_owned());
                    input.map(|i| forward(&g, &i).into_dyn())
                })
            }
            #[cfg(feature = "cuda")]
            Replay::Cuda(graph) => graph.replay(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::RuntimeOptions;

    /// The imperative path over tensors, as the scenario runs it.
    fn imperative(rt: &Runtime, x: &Array2<f32>, weights: &Weights) -> Vec<f32> {
        let on =
            |a: &Array2<f32>| Tensor::from_host(&rt.engine, &rt.devices[0], a.clone().into_dyn());
        let tensors: Vec<_> = weights.iter().map(|(w, b)| (on(w), on(b))).collect();
        imperative_pass(&on(x), &tensors).unwrap().to_vec().unwrap()
    }

    #[test]
    fn the_relative_gap_sees_errors_nan_and_length() {
        assert_eq!(relative_gap(&[1.0, -2.0], [1.0, -2.0].into_iter()), 0.0);
        assert!((relative_gap(&[1.0, -2.1], [1.0, -2.0].into_iter()) - 0.05).abs() < 1e-6);
        assert_eq!(
            relative_gap(&[f32::NAN, 1.0], [1.0, 1.0].into_iter()),
            f64::INFINITY
        );
        assert_eq!(relative_gap(&[1.0], [1.0, 1.0].into_iter()), f64::INFINITY);
    }

    #[test]
    fn replay_matches_imperative_and_the_check_can_fail() {
        let rt = Runtime::cpu(&RuntimeOptions::default(), &[1]).unwrap();
        let m = |r, c, seed| {
            cpu::uniform(&[r, c], seed)
                .mapv(|v| v - 0.5)
                .into_dimensionality::<Ix2>()
                .unwrap()
        };
        let x = m(3, 6, 1);
        let weights = vec![(m(6, 6, 2), m(1, 6, 3)), (m(6, 6, 4), m(1, 6, 5))];
        let replayed: Vec<f32> = forward(&weights, &x).iter().copied().collect();
        assert_eq!(replayed, imperative(&rt, &x, &weights));
        // A reference with one weight changed differs.
        let mut wrong = weights;
        wrong[1].1[[0, 2]] += 1.0;
        assert_ne!(replayed, imperative(&rt, &x, &wrong));
    }
}
