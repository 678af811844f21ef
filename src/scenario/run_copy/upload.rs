//! `run-copy --direction h2d|both`: host→device copies (uploads) of prepared host inputs, on
//! the GPU's upload stream beside its download stream, from page-locked or pageable memory,
//! and the pipeline that uploads x[i+1] while computing on x[i] (and, with `both`, while
//! downloading y[i−1]). On a CPU device, whose memory is host memory, an upload is a copy
//! into a separate buffer on the device's copy lane, and the memory kind changes nothing.

use ndarray::ArrayD;

use super::measure::{accelerator_for, copy_error};
use super::{Config, COPY_GBYTES_PER_S};
use crate::device::Runtime;
use crate::harness::{synced, Variant};
use crate::report::evidence::Estimate;
use crate::report::{Better, FigureSpec, RunRecord, Unit};
use crate::scenario::kit::{host_ordered, matmul_tolerance, number, run_matmuls, Explained};
use crate::scenario::{Choice, RunContext, Scenario, ScenarioError};
use crate::tensor::Tensor;
use crate::units::{human_gbytes_per_s, human_time};

/// Host→device bandwidth of the `upload` variant.
pub(super) const H2D_GBYTES_PER_S: FigureSpec =
    FigureSpec::new("h2d_gbytes_per_s", Unit::GbytesPerSecond, Better::Higher);
/// (the stages measured alone, summed) / pipeline.
pub(super) const PIPELINE_OVERLAP_EFFICIENCY: FigureSpec =
    number("pipeline_overlap_efficiency", Better::Higher);

crate::scenario::params::choice! {
    /// Which way `run-copy` copies.
    pub enum Direction {
        /// Device→host: each product copied to host memory (the book's experiment).
        D2h = "d2h",
        /// Host→device: each input uploaded, then multiplied.
        H2d = "h2d",
        /// Both: upload x[i+1] ‖ compute on x[i] ‖ download y[i−1].
        Both = "both",
    }
}

crate::scenario::params::choice! {
    /// Where an upload's host values are.
    pub enum HostMemory {
        /// Page-locked (pooled), which the copy engine reads directly.
        Pinned = "pinned",
        /// Ordinary memory, which the driver stages through page-locked buffers of its own.
        Pageable = "pageable",
    }
}

super::super::variant::variants! {
    /// What `run-copy --direction h2d|both` times.
    enum Staged {
        /// The products alone, of inputs already on the device.
        Run = "run",
        /// The uploads alone.
        Upload = "upload",
        /// The downloads alone, of products computed before (`both` only).
        Copy = "copy",
        /// Upload, product and (with `both`) download of each input, all pushed together.
        Pipeline = "pipeline",
    }
}

/// The medians the pipeline's figures and sentences use.
#[derive(Debug, Clone, Copy)]
pub(super) struct Stages {
    pub(super) run: f64,
    pub(super) upload: f64,
    /// NaN without downloads (`h2d`).
    pub(super) copy: f64,
    pub(super) pipeline: f64,
}

impl Stages {
    /// The stages measured alone, summed (without downloads for `h2d`).
    pub(super) fn serial(&self) -> f64 {
        self.run + self.upload + if self.copy.is_nan() { 0.0 } else { self.copy }
    }

    /// serial / pipeline: 1 without overlap; at most the number of stages.
    pub(super) fn efficiency(&self) -> f64 {
        self.serial() / self.pipeline
    }
}

pub(super) fn explain(
    s: &Stages,
    direction: Direction,
    memory: HostMemory,
    gpu: bool,
    h2d: f64,
) -> Explained {
    let mut out = Explained::default();
    let from = match (gpu, memory) {
        (false, _) => {
            "host memory (a CPU device: pinned and pageable are the same ordinary memory)"
        }
        (true, HostMemory::Pinned) => {
            "page-locked host memory, which the copy engine reads directly"
        }
        (true, HostMemory::Pageable) => {
            "pageable host memory, which the driver stages through page-locked buffers first"
        }
    };
    out.sentences.push(format!(
        "uploads from {from} took {} ({}); the products alone took {}.",
        human_time(s.upload),
        human_gbytes_per_s(h2d),
        human_time(s.run),
    ));
    let stages = match direction {
        Direction::Both => format!(
            "upload, product and download measured alone sum to {} (downloads {})",
            human_time(s.serial()),
            human_time(s.copy)
        ),
        _ => format!(
            "upload and product measured alone sum to {}",
            human_time(s.serial())
        ),
    };
    out.sentences.push(format!(
        "{stages}; pushed together, the pipeline took {}: overlap efficiency (stages alone) / \
         pipeline = {:.2} (1 is no overlap; each stage on its own engine can reach the number \
         of stages).",
        human_time(s.pipeline),
        s.efficiency()
    ));
    out
}

pub(super) fn run(
    sc: &dyn Scenario,
    cfg: &Config,
    params_json: serde_json::Map<String, serde_json::Value>,
    ctx: &RunContext,
) -> Result<RunRecord, ScenarioError> {
    let Config {
        ops,
        size,
        direction,
        host_memory,
    } = *cfg;
    let acc = accelerator_for(ctx);
    let rt = Runtime::new(&host_ordered(&ctx.runtime), &[acc.request])?;
    let (engine, device) = (&rt.engine, &rt.devices[0]);
    let host = device.host_device(device);
    if let Some(free) = device.free_memory() {
        crate::scenario::kit::check_matrices(
            "run-copy on the GPU",
            size as u64,
            1 + 3 * ops,
            Some(free),
        )?;
    }
    // The inputs in host memory: page-locked when copied off the device (a GPU's copies land
    // in pinned buffers), pageable when made from plain values.
    let source = |seed: u64| -> Result<Tensor, ScenarioError> {
        let pinned = Tensor::uniform(engine, device, &[size, size], seed).copy_to_host();
        Ok(match host_memory {
            HostMemory::Pinned => pinned,
            HostMemory::Pageable => {
                let values = ArrayD::from_shape_vec(vec![size, size], pinned.to_vec()?)
                    .map_err(|e| ScenarioError::Input(e.to_string()))?;
                Tensor::from_host(engine, &host, values)
            }
        })
    };
    let sources = (0..ops)
        .map(|i| source(1 + i))
        .collect::<Result<Vec<_>, _>>()?;
    let x = sources[0].copy_to_device(device);
    let kept = run_matmuls(&x, ops)?;
    engine.wait_all()?;

    let with_download = direction == Direction::Both;
    let chosen: Vec<Staged> = Staged::ALL
        .iter()
        .copied()
        .filter(|&v| v != Staged::Copy || with_download)
        .collect();
    let (x, kept, sources) = (&x, &kept, &sources);
    let mut variants: Vec<Variant<ScenarioError>> = chosen
        .iter()
        .map(|&v| match v {
            Staged::Run => Variant::new(v.name(), move || {
                synced(engine, || Ok::<_, ScenarioError>(run_matmuls(x, ops)?))
            }),
            Staged::Upload => Variant::new(v.name(), move || {
                synced(engine, || {
                    Ok::<_, ScenarioError>(
                        sources
                            .iter()
                            .map(|s| s.copy_to_device(device))
                            .collect::<Vec<_>>(),
                    )
                })
            }),
            Staged::Copy => Variant::new(v.name(), move || {
                synced(engine, || {
                    Ok::<_, ScenarioError>(
                        kept.iter().map(Tensor::copy_to_host).collect::<Vec<_>>(),
                    )
                })
            }),
            Staged::Pipeline => Variant::new(v.name(), move || {
                synced(engine, || {
                    let mut all = Vec::new();
                    for s in sources {
                        let x = s.copy_to_device(device);
                        let y = x.matmul(&x)?;
                        if with_download {
                            all.push(y.copy_to_host());
                        }
                        all.push(x);
                        all.push(y);
                    }
                    Ok::<_, ScenarioError>(all)
                })
            }),
        })
        .collect();
    let summaries = ctx.sample(sc, engine, &mut variants)?;
    drop(variants);

    let devices = acc.describe_devices(&rt, 0);
    let mut run = RunRecord::new(sc.name(), params_json, devices);
    run.notes.extend(acc.fallback_note);
    let label = |v: Staged| match v {
        Staged::Run => format!("{ops} products {size}² on {}", device.name),
        Staged::Upload => format!(
            "{ops} uploads of {size}² from {} memory",
            host_memory.word()
        ),
        Staged::Copy => format!("{ops} downloads of {size}² to pinned host memory"),
        Staged::Pipeline if with_download => {
            "upload x[i+1] ‖ product of x[i] ‖ download y[i−1], pushed together".to_string()
        }
        Staged::Pipeline => "upload x[i+1] ‖ product of x[i], pushed together".to_string(),
    };
    run.add_variants(
        chosen.iter().map(|v| v.name().to_string()).collect(),
        summaries,
        chosen.iter().map(|&v| Some(label(v))),
    );
    let est = |v: Staged| Estimate::of(&run, v.name()).median;
    let stages = Stages {
        run: est(Staged::Run),
        upload: est(Staged::Upload),
        copy: if with_download {
            est(Staged::Copy)
        } else {
            f64::NAN
        },
        pipeline: est(Staged::Pipeline),
    };
    let bytes = (size * size * 4) as f64 * ops as f64;
    let h2d = bytes / stages.upload / 1e9;
    run.record(H2D_GBYTES_PER_S, h2d);
    if with_download {
        run.record(COPY_GBYTES_PER_S, bytes / stages.copy / 1e9);
    }
    run.record(PIPELINE_OVERLAP_EFFICIENCY, stages.efficiency());

    // Correctness: distinct inputs, reused pinned buffers poisoned first; each upload equals
    // its host values exactly, and each product computed on the device from it (downloaded,
    // with `both`) matches a float64 product of the host values at 16 positions.
    let checked = ops.min(3) as usize;
    device.poison_reused_host_buffers(true);
    let mut identical = true;
    let mut worst = 0f64;
    for i in 0..checked {
        let s = source(100 + i as u64)?;
        let x = s.copy_to_device(device);
        let y = x.matmul(&x)?;
        let h = if with_download { y.copy_to_host() } else { y };
        let (sv, xv, hv) = (s.to_vec()?, x.to_vec()?, h.to_vec()?);
        identical &= sv == xv;
        worst = worst.max(copy_error(&sv, &hv, size));
    }
    device.poison_reused_host_buffers(false);
    let tol = matmul_tolerance(size);
    run.check(
        "uploaded values equal the host values",
        identical && worst <= tol,
        format!(
            "{checked} distinct inputs from {} memory: each upload equals its host values element \
             by element, and the product computed from it{} matches a float64 product of the host \
             values at 16 positions (max relative error {worst:.2e}, tolerance {tol:.1e})",
            host_memory.word(),
            if with_download { " and downloaded" } else { "" },
        ),
    );
    explain(&stages, direction, host_memory, device.is_gpu(), h2d).record(&mut run);
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Upload (pinned and pageable, both GPU orders), multiply, download: the uploads equal
    /// the host values exactly and the downloaded products match a float64 reference.
    #[test]
    #[ignore = "needs a GPU"]
    fn gpu_run_copy_h2d_and_both_are_exact() {
        use crate::device::{DeviceRequest, GpuOrder, RuntimeOptions};
        let gpu = crate::device::discovery::probe_gpu();
        assert!(
            gpu.available,
            "no usable GPU: {}",
            gpu.reason.unwrap_or_default()
        );
        let n = 256;
        for order in [GpuOrder::Stream, GpuOrder::Host] {
            let options = RuntimeOptions {
                gpu_order: order,
                ..RuntimeOptions::default()
            };
            let rt = Runtime::new(&options, &[DeviceRequest::Cuda]).expect("the GPU opens");
            let (engine, device) = (&rt.engine, &rt.devices[0]);
            let host = device.host_device(device);
            device.poison_reused_host_buffers(true);
            for (i, memory) in [HostMemory::Pinned, HostMemory::Pageable]
                .into_iter()
                .enumerate()
            {
                let pinned = Tensor::uniform(engine, device, &[n, n], 40 + i as u64).copy_to_host();
                let src = match memory {
                    HostMemory::Pinned => pinned,
                    HostMemory::Pageable => Tensor::from_host(
                        engine,
                        &host,
                        ArrayD::from_shape_vec(vec![n, n], pinned.to_vec().unwrap()).unwrap(),
                    ),
                };
                // Several in flight at once, as in the pipeline.
                let outs: Vec<(Tensor, Tensor)> = (0..4)
                    .map(|_| {
                        let x = src.copy_to_device(device);
                        let y = x.matmul(&x).unwrap();
                        (x, y.copy_to_host())
                    })
                    .collect();
                let sv = src.to_vec().unwrap();
                for (x, h) in &outs {
                    assert_eq!(
                        x.to_vec().unwrap(),
                        sv,
                        "{order:?} {memory:?}: upload differs"
                    );
                    let err = copy_error(&sv, &h.to_vec().unwrap(), n);
                    assert!(
                        err <= matmul_tolerance(n),
                        "{order:?} {memory:?}: error {err:e}"
                    );
                }
            }
            device.poison_reused_host_buffers(false);
            engine.wait_all().expect("no deferred error");
        }
    }

    #[test]
    fn the_explanation_names_the_memory_kind_and_the_efficiency() {
        let s = Stages {
            run: 1.0,
            upload: 0.5,
            copy: f64::NAN,
            pipeline: 1.2,
        };
        let gpu = explain(&s, Direction::H2d, HostMemory::Pageable, true, 12.0);
        assert_eq!(gpu.sentences.join("\n"), "uploads from pageable host memory, which the driver stages through page-locked buffers first took 500.0 ms (12.0 GB/s); the products alone took 1.000 s.\nupload and product measured alone sum to 1.500 s; pushed together, the pipeline took 1.200 s: overlap efficiency (stages alone) / pipeline = 1.25 (1 is no overlap; each stage on its own engine can reach the number of stages).");
        let cpu = explain(&s, Direction::H2d, HostMemory::Pinned, false, 12.0);
        assert_eq!(cpu.sentences.join("\n"), "uploads from host memory (a CPU device: pinned and pageable are the same ordinary memory) took 500.0 ms (12.0 GB/s); the products alone took 1.000 s.\nupload and product measured alone sum to 1.500 s; pushed together, the pipeline took 1.200 s: overlap efficiency (stages alone) / pipeline = 1.25 (1 is no overlap; each stage on its own engine can reach the number of stages).");
        // The efficiency is the stages alone over the pipeline.
        let both = Stages {
            run: 1.0,
            upload: 0.5,
            copy: 0.5,
            pipeline: 1.0,
        };
        assert_eq!(both.serial(), 2.0);
        assert_eq!(both.efficiency(), 2.0);
        // Without downloads, the copy stage is not counted.
        let h2d = Stages {
            copy: f64::NAN,
            ..both
        };
        assert_eq!(h2d.serial(), 1.5);
        assert_eq!(h2d.efficiency(), 1.5);
    }
}
