//! `data-parallel --device cuda`: the seeded MLP trained on the GPU, the
//! [`Plan`](super::gpu_step::Plan) of `gpu_step` run with parbench's MLP kernels and cuBLAS
//! (fp32, TF32 off). This file is the backend's run; the trainers it times are [`GpuTrainer`]
//! (one GPU) and [`NcclTrainer`] (k GPUs).
//!
//! The data and the initial parameters are uploaded once; a run copies the initial parameters
//! into place on the device, zeroes the step counter and enqueues its steps. The variants:
//! - `one-device`: each step's kernels launched one by one (eager), the step's loss read back
//!   after it (one blocking 4-byte copy a step, as an eager training loop reads `loss.item()`);
//! - `one-device-graph`: the step captured once as a CUDA graph and replayed each step
//!   (`hybridize`'s lesson applied to training). A graph cannot hand a value to the host in
//!   the middle of its replays without a host synchronization, so each replay writes its loss
//!   into its step's slot of a device buffer (the step counter, on the device, picks the slot
//!   and the batch) and the run reads the losses back once, after its last step;
//! - `nccl-allreduce`: `--devices` GPUs, the shard gradients summed by NCCL ([`NcclTrainer`]).
//!
//! Checks: every variant's parameters after `min(steps, 20)` steps agree with host one-device
//! SGD (`mlp::gradient`, `mlp::sgd`) within [`AGREEMENT`], and the two one-GPU variants with
//! each other.

use std::sync::Mutex;

use super::gpu_step::{host_sgd, Plan, StepShape};
use super::gpu_trainer::GpuTrainer;
use super::mlp;
use super::nccl::{nccl_devices, NcclTrainer};
use super::training::{agrees, AGREEMENT};
use super::{
    Config, Timed, EVAL_ROWS, FINAL_LOSS, INITIAL_LOSS, PARAMETERS, SAMPLES_PER_SECOND, SEED,
};
use crate::device::{DeviceKind, DeviceRequest, Runtime};
use crate::harness::{synced, Variant};
use crate::report::{Better, Figure, RunRecord, Unit};
use crate::scenario::{Params, RunContext, Scenario, ScenarioError};

/// Steps the agreement check trains (fewer when a run takes fewer): the host's SGD it compares
/// with costs as much as the CPU variants' one-device run.
pub const CHECK_STEPS: usize = 20;

/// The run of `data-parallel --device cuda`: one-device and one-device-graph on cuda:0, and
/// nccl-allreduce on `--devices` GPUs (`validate` refuses more than the machine has).
pub(super) fn run(
    scenario: &dyn Scenario,
    params: &Params,
    cfg: &Config,
    ctx: &RunContext,
) -> Result<RunRecord, ScenarioError> {
    let rt = Runtime::new(&ctx.runtime, &[DeviceRequest::Cuda])?;
    let engine = &rt.engine;
    let DeviceKind::Cuda(device) = &rt.devices[0].kind else {
        return Err(ScenarioError::Input(
            "data-parallel --device cuda: the runtime has no GPU".into(),
        ));
    };
    let setup = cfg.setup(1);
    let steps = usize::try_from(cfg.steps)
        .map_err(|_| ScenarioError::Input("data-parallel: --steps too large".into()))?;
    let shape = StepShape {
        layers: cfg.layers.clone(),
        samples: cfg.samples,
        batch: cfg.batch,
        lr: cfg.lr,
        steps,
    };
    let dev = crate::device::DeviceError::from;
    let plan = Plan::new(&shape, None);
    let mut trainer =
        GpuTrainer::new(device.clone(), plan, &shape, &setup.data, &setup.initial).map_err(dev)?;
    trainer.capture().map_err(dev)?;
    let trainer = trainer;
    // nccl-allreduce over --devices k GPUs. Without NCCL a one-GPU run goes on without it
    // (and says so); k > 1 needs it.
    let k = cfg.devices;
    let mut nccl_missing = None;
    let nccl = match nccl_devices(device, k)
        .and_then(|d| NcclTrainer::new(d, &shape, &setup.data, &setup.initial))
    {
        Ok(t) => Some(t),
        Err(e) if k == 1 => {
            nccl_missing = Some(e.to_string());
            None
        }
        Err(e) => return Err(dev(e).into()),
    };
    let mut timed = vec![Timed::OneDevice, Timed::OneDeviceGraph];
    timed.extend(nccl.as_ref().map(|_| Timed::NcclAllreduce));
    // A variant's run of `steps` from the initial parameters (its losses), and its
    // parameters now, a set per GPU.
    let train = |v: Timed, steps: usize| match (v, &nccl) {
        (Timed::OneDeviceGraph, _) => trainer.train_graph(steps),
        (Timed::NcclAllreduce, Some(nccl)) => nccl.train(steps),
        _ => trainer.train_eager(steps),
    };
    let parameters = |v: Timed| match (v, &nccl) {
        (Timed::NcclAllreduce, Some(nccl)) => nccl.parameters(),
        _ => trainer.parameters().map(|p| vec![p]),
    };
    let last: Vec<Mutex<Vec<f32>>> = timed.iter().map(|_| Mutex::default()).collect();
    let mut variants: Vec<Variant<ScenarioError>> = timed
        .iter()
        .zip(&last)
        .map(|(&v, last)| {
            let train = &train;
            Variant::new(v.name(), move || {
                synced(engine, || -> Result<(), ScenarioError> {
                    let losses = train(v, steps).map_err(dev)?;
                    *last.lock().unwrap_or_else(|e| e.into_inner()) = losses;
                    Ok(())
                })
            })
        })
        .collect();
    let summaries = ctx.sample(scenario, engine, &mut variants)?;
    drop(variants);
    let losses: Vec<Vec<f32>> = last
        .into_iter()
        .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()))
        .collect();

    // The check: a short run of each variant against host SGD over as many steps; then the
    // full run's final parameters (on cuda:0), for the final loss.
    let check_steps = steps.min(CHECK_STEPS);
    let (host, _) = host_sgd(&shape, &setup.data, &setup.initial, check_steps);
    let (mut checked, mut finals) = (Vec::new(), Vec::new());
    for &v in &timed {
        train(v, check_steps).map_err(dev)?;
        checked.push(parameters(v).map_err(dev)?);
        train(v, steps).map_err(dev)?;
        finals.push(parameters(v).map_err(dev)?.swap_remove(0));
    }
    if let Some(nccl) = &nccl {
        nccl.synchronize().map_err(dev)?;
    }

    let mut run = RunRecord::new(scenario.name(), params.to_json(), rt.describe_devices());
    let gpus = if k == 1 {
        "cuda:0".to_string()
    } else {
        format!("cuda:0..cuda:{}", k - 1)
    };
    let label = |v: Timed| match v {
        Timed::NcclAllreduce => format!(
            "{steps} steps of {} rows split over {gpus} (one NCCL rank a GPU), the shard \
             gradients summed by ncclAllReduce between each step's backward pass and its \
             update; the losses read after the last step",
            cfg.batch
        ),
        Timed::OneDeviceGraph => format!(
            "{steps} steps of {} rows on cuda:0, the step captured once as a CUDA graph and \
             replayed; the losses read after the last step",
            cfg.batch
        ),
        _ => format!(
            "{steps} steps of {} rows on cuda:0, kernel by kernel; the loss read after each step",
            cfg.batch
        ),
    };
    run.add_variants(
        timed.iter().map(|v| v.name().to_string()).collect(),
        summaries,
        timed.iter().map(|&v| Some(label(v))),
    );
    for (&v, ranks) in timed.iter().zip(&checked) {
        for (r, p) in ranks.iter().enumerate() {
            let (ok, rel) = agrees(&host, p);
            let name = match v {
                Timed::NcclAllreduce => format!("nccl-allreduce rank {r} of {k} (cuda:{r})"),
                _ => format!("{} on cuda:0", v.name()),
            };
            run.check(
                &format!("{name} equals host one-device SGD"),
                ok,
                format!(
                    "{} parameters after {check_steps} steps, difference {rel:.2e} of their \
                     norm (tolerance {AGREEMENT:.0e})",
                    p.len()
                ),
            );
        }
    }
    let (ok, rel) = agrees(&checked[0][0], &checked[1][0]);
    run.check(
        "one-device-graph and one-device give the same parameters",
        ok,
        format!("difference {rel:.2e} of their norm (tolerance {AGREEMENT:.0e})"),
    );
    let eval = (0, EVAL_ROWS.min(cfg.samples));
    run.record(
        INITIAL_LOSS,
        mlp::loss(&setup.layers, &setup.initial, &setup.data, eval),
    );
    run.record(PARAMETERS, setup.initial.len() as f64);
    let samples = cfg.steps as f64 * cfg.batch as f64;
    for ((v, p), l) in timed.iter().zip(&finals).zip(&losses) {
        let key = |name: &str| format!("{}_{name}", v.key());
        let rate = run.median(v.name()).map_or(f64::NAN, |s| samples / s);
        run.derive_as(&key("samples_per_second"), rate, SAMPLES_PER_SECOND);
        let final_loss = mlp::loss(&setup.layers, p, &setup.data, eval);
        run.derive_as(&key("final_loss"), final_loss, FINAL_LOSS);
        if let Some(last) = l.last() {
            let figure = Figure::new(Unit::Number, Better::Neither);
            run.derive_as(&key("last_step_loss"), f64::from(*last), figure);
        }
        // `[step, its batch's loss, seconds]` as the CPU curves; no per-step clock runs on
        // the GPU, so the seconds spread the run's median evenly over its steps.
        let median = run.median(v.name()).unwrap_or(f64::NAN);
        let n = l.len().max(1) as f64;
        let curve: Vec<[f64; 3]> = l
            .iter()
            .enumerate()
            .map(|(s, &loss)| [s as f64, f64::from(loss), median * (s + 1) as f64 / n])
            .collect();
        let curve = serde_json::json!(super::training::thin(curve, 200));
        run.derive_series(&key("loss_curve"), curve);
    }
    run.notes.push(format!(
        "on the GPU (seed {SEED}): fp32 products through cuBLAS (TF32 off), one GPU; the \
         graph variant reads its losses back once per run, the eager one once per step"
    ));
    match (&nccl, nccl_missing) {
        (Some(_), _) => run.notes.push(format!(
            "nccl-allreduce: {k} GPU{} in one process, one NCCL communicator (ncclCommInitAll), \
             NCCL {}",
            if k == 1 { "" } else { "s" },
            crate::device::cuda::nccl::version().unwrap_or_else(|e| e.to_string())
        )),
        (None, Some(why)) => run.notes.push(format!("nccl-allreduce not run: {why}")),
        (None, None) => {}
    }
    // One GPU: nccl-allreduce is one device through NCCL, not a scaling to weigh.
    let weighed: Vec<Timed> = timed
        .iter()
        .copied()
        .filter(|v| k > 1 || *v != Timed::NcclAllreduce)
        .collect();
    super::explain::conclude(&mut run, &weighed, k);
    Ok(run)
}

#[cfg(test)]
pub(super) mod tests {
    //! On a GPU only (`#[ignore = "needs a GPU"]`, run by scripts/gpu-check.sh): each kernel
    //! against its host reference on random inputs. The helpers here serve the trainers' tests
    //! too (`gpu_trainer`, `nccl`).
    use std::sync::Arc;

    use cudarc::driver::CudaSlice;

    use super::super::gpu_step::StepShape;
    use super::super::host_step::{self as reference, counter_slot};
    use super::super::mlp::{Dataset, Layers};
    use super::super::SEED;
    use crate::device::cuda::mlp::{MlpKernels, MlpLaunch, Region};
    use crate::device::cuda::{CudaDevice, GpuError};
    use crate::device::GpuOrder;

    pub(in super::super) fn device() -> Arc<CudaDevice> {
        Arc::new(CudaDevice::open(0, GpuOrder::Stream).expect("the GPU opens"))
    }

    /// A device buffer holding `values`, and its region.
    pub(in super::super) fn put(d: &CudaDevice, values: &[f32]) -> (CudaSlice<f32>, Region) {
        let buf = d.alloc(values.len()).expect("alloc");
        let region = Region::of(d, &buf, 0, values.len()).expect("region");
        // SAFETY: the region of the buffer just allocated, alive here.
        unsafe { d.upload_region(values, region) }.expect("upload");
        (buf, region)
    }

    pub(in super::super) fn read(d: &CudaDevice, r: Region) -> Vec<f32> {
        // SAFETY: regions of buffers the test keeps alive.
        unsafe { d.read_region(r) }.expect("read")
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// Equal within `tolerance` (absolute), NaN where the host has NaN: for the kernels that
    /// use `expf` and `logf`, which may differ from the host's by an ulp or two (and δ at the
    /// label, `p / scale − 1 / scale`, is a difference of two such values).
    fn close(got: &[f32], want: &[f32], tolerance: f32) {
        assert_eq!(got.len(), want.len());
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            let same = (g.is_nan() && w.is_nan()) || (g - w).abs() <= tolerance;
            assert!(same, "{i}: GPU {g} host {w}");
        }
    }

    /// Random values in `[lo, hi)` from `seed`, for the kernels' tests.
    pub fn random(len: usize, seed: u64, (lo, hi): (f32, f32)) -> Vec<f32> {
        crate::device::cpu::uniform(&[len], seed)
            .iter()
            .map(|u| lo + (hi - lo) * u)
            .collect()
    }

    pub(in super::super) fn small_run() -> (StepShape, Dataset, Vec<f32>) {
        let layers = Layers(vec![64, 128, 96, 10]);
        let shape = StepShape {
            layers: layers.clone(),
            samples: 700,
            batch: 128,
            lr: 0.1,
            steps: 20,
        };
        let data = Dataset::new(700, 64, 10, SEED);
        let initial = layers.initial_parameters(SEED);
        (shape, data, initial)
    }

    #[test]
    #[ignore = "needs a GPU"]
    fn gpu_mlp_kernels_equal_their_host_references() {
        let d = device();
        let k = MlpKernels::load(&d.ctx).expect("the MLP kernels load");
        let (rows, cols) = (37, 300);
        // gather_batch: a batch that wraps around the samples.
        let (samples, inputs, batch) = (50, 7, 33);
        let x = random(samples * inputs, 1, (-1.0, 1.0));
        let y: Vec<f32> = (0..samples).map(|i| (i % 5) as f32).collect();
        let (_xd, xr) = put(&d, &x);
        let (_yd, yr) = put(&d, &y);
        let (_sd, sr) = put(&d, &[counter_slot(3)]);
        let (_xbd, xbr) = put(&d, &vec![0.0; batch * inputs]);
        let (_ybd, ybr) = put(&d, &vec![0.0; batch]);
        // SAFETY (every launch below): regions of buffers alive until the test ends.
        unsafe {
            d.launch_mlp(
                &k,
                MlpLaunch::GatherBatch {
                    x: xr,
                    y: yr,
                    step: sr,
                    xb: xbr,
                    yb: ybr,
                    inputs,
                },
            )
        }
        .expect("gather");
        let (mut xb, mut yb) = (vec![0f32; batch * inputs], vec![0f32; batch]);
        reference::gather_batch(&x, &y, 3, (&mut xb, &mut yb), inputs);
        assert_eq!(bits(&read(&d, xbr)), bits(&xb));
        assert_eq!(bits(&read(&d, ybr)), bits(&yb));

        // bias_act, with and without ReLU: bit for bit.
        for relu in [true, false] {
            let z = random(rows * cols, 2, (-2.0, 2.0));
            let b = random(cols, 3, (-1.0, 1.0));
            let (_zd, zr) = put(&d, &z);
            let (_bd, br) = put(&d, &b);
            unsafe { d.launch_mlp(&k, MlpLaunch::BiasAct { z: zr, b: br, relu }) }.expect("bias");
            let mut want = z.clone();
            reference::bias_act(&mut want, &b, relu);
            assert_eq!(bits(&read(&d, zr)), bits(&want), "relu {relu}");
        }

        // softmax_xent: expf and logf within a few ulps of the host's; one label out of range.
        let classes = 10;
        let logits = random(rows * classes, 4, (-8.0, 8.0));
        let mut labels: Vec<f32> = (0..rows).map(|i| (i * 7 % classes) as f32).collect();
        labels[5] = classes as f32;
        let (_ld, lr) = put(&d, &logits);
        let (_lbd, lbr) = put(&d, &labels);
        let (_dd, dr) = put(&d, &vec![0.0; rows * classes]);
        let (_rd, rr) = put(&d, &vec![0.0; rows]);
        unsafe {
            d.launch_mlp(
                &k,
                MlpLaunch::SoftmaxXent {
                    logits: lr,
                    labels: lbr,
                    delta: dr,
                    row_loss: rr,
                    classes,
                    scale: 37.0,
                },
            )
        }
        .expect("softmax");
        let (mut delta, mut row_loss) = (vec![0f32; rows * classes], vec![0f32; rows]);
        reference::softmax_xent(&logits, &labels, (&mut delta, &mut row_loss), classes, 37.0);
        // δ is of the order of 1 / scale; a row's loss of 1 to 16.
        close(&read(&d, dr), &delta, 4e-6 / 37.0);
        close(&read(&d, rr), &row_loss, 1e-5);
        // Not vacuous: the values are there, and the out-of-range label gave NaN.
        assert!(row_loss[5].is_nan() && row_loss[0] > 0.0);

        // record_loss: over more rows than the block's threads; the counter advances.
        let row_losses = random(1000, 5, (0.0, 3.0));
        let (_rld, rlr) = put(&d, &row_losses);
        let (_cd, cr) = put(&d, &[counter_slot(1)]);
        let (_lsd, lsr) = put(&d, &[f32::NAN; 3]);
        unsafe {
            d.launch_mlp(
                &k,
                MlpLaunch::RecordLoss {
                    row_loss: rlr,
                    scale: 1000.0,
                    step: cr,
                    losses: lsr,
                },
            )
        }
        .expect("record_loss");
        let (mut step, mut losses) = (1u32, vec![f32::NAN; 3]);
        reference::record_loss(&row_losses, 1000.0, &mut step, &mut losses);
        assert_eq!(bits(&read(&d, lsr)), bits(&losses));
        assert_eq!(bits(&read(&d, cr)), bits(&[counter_slot(step)]));

        // relu_backward, column_sum and sgd: bit for bit.
        let delta = random(rows * cols, 6, (-1.0, 1.0));
        let act = random(rows * cols, 7, (-1.0, 1.0));
        let (_dd2, dr2) = put(&d, &delta);
        let (_ad, ar) = put(&d, &act);
        unsafe {
            d.launch_mlp(
                &k,
                MlpLaunch::ReluBackward {
                    delta: dr2,
                    act: ar,
                },
            )
        }
        .expect("relu_backward");
        let mut want = delta.clone();
        reference::relu_backward(&mut want, &act);
        assert_eq!(bits(&read(&d, dr2)), bits(&want));

        let (_od, or) = put(&d, &vec![0.0; cols]);
        unsafe { d.launch_mlp(&k, MlpLaunch::ColumnSum { x: ar, out: or }) }.expect("sum");
        let mut sums = vec![0f32; cols];
        reference::column_sum(&act, &mut sums);
        assert_eq!(bits(&read(&d, or)), bits(&sums));

        let w = random(rows * cols, 8, (-1.0, 1.0));
        let (_wd, wr) = put(&d, &w);
        unsafe {
            d.launch_mlp(
                &k,
                MlpLaunch::Sgd {
                    w: wr,
                    g: dr2,
                    lr: 0.37,
                },
            )
        }
        .expect("sgd");
        let mut want_w = w.clone();
        reference::sgd(&mut want_w, &read(&d, dr2), 0.37);
        assert_eq!(bits(&read(&d, wr)), bits(&want_w));
        d.synchronize().expect("no deferred error");
    }

    #[test]
    #[ignore = "needs a GPU"]
    fn gpu_mlp_products_with_transposes_equal_the_hosts() {
        let d = device();
        // op(a) m×k, op(b) k×n, each operand stored as the product uses it or transposed.
        let (m, k, n) = (33, 70, 45);
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let a_dims = if ta { (k, m) } else { (m, k) };
            let b_dims = if tb { (n, k) } else { (k, n) };
            let a = random(m * k, 11, (-1.0, 1.0));
            let b = random(k * n, 12, (-1.0, 1.0));
            let (_ad, ar) = put(&d, &a);
            let (_bd, br) = put(&d, &b);
            let (_cd, cr) = put(&d, &vec![f32::NAN; m * n]);
            // SAFETY: regions of buffers alive until the end of the iteration.
            unsafe { d.gemm_regions((ar, a_dims, ta), (br, b_dims, tb), cr) }.expect("gemm");
            // Host in f64, straight from the definition.
            let at = |i: usize, j: usize| f64::from(if ta { a[j * m + i] } else { a[i * k + j] });
            let bt = |i: usize, j: usize| f64::from(if tb { b[j * k + i] } else { b[i * n + j] });
            let got = read(&d, cr);
            for i in 0..m {
                for j in 0..n {
                    let want: f64 = (0..k).map(|p| at(i, p) * bt(p, j)).sum();
                    let g = f64::from(got[i * n + j]);
                    assert!(
                        (g - want).abs() <= 1e-5 * (k as f64),
                        "({ta}, {tb}) at {i},{j}: GPU {g} host {want}"
                    );
                }
            }
        }
        // Shapes that do not fit are refused, not launched.
        let (_xd, xr) = put(&d, &[0.0; 6]);
        // SAFETY: as above.
        let refused = unsafe { d.gemm_regions((xr, (2, 3), false), (xr, (2, 3), false), xr) };
        assert!(matches!(refused, Err(GpuError::Lengths(_))));
    }
}
