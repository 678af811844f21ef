//! The GPU path, in both GPU orders: element-wise kernels bit for bit as the host's, dependent
//! chains exact, a copy and a host read waiting for the work that wrote their source, random
//! programs against a sequential interpretation, products, layers and graphs as on the host,
//! buffers cached and counted. All but one (a host tensor's graph refused) need a GPU
//! (`#[ignore]`; the GPU check runs them). The helpers here serve `gpu_hardening_tests.rs` too.

use ndarray::IxDyn;

use super::tests::rt;
use super::*;
use crate::device::{cpu, Runtime, RuntimeOptions};

/// A runtime with the GPU. The GPU tests are `#[ignore = "needs a GPU"]`: a plain
/// `cargo test` leaves them out, and run with `--ignored` (`scripts/gpu-check.sh` does, on a
/// GPU machine) they fail here when no GPU is usable, rather than pass without testing.
pub(super) fn gpu_runtime() -> Runtime {
    gpu_runtime_in(crate::device::GpuOrder::Stream)
}

pub(super) fn gpu_runtime_in(gpu_order: crate::device::GpuOrder) -> Runtime {
    use crate::device::{discovery, DeviceRequest};
    let gpu = discovery::probe_gpu();
    assert!(
        gpu.available,
        "this test needs a GPU, and there is no usable GPU: {}",
        gpu.reason.unwrap_or_default()
    );
    let options = RuntimeOptions {
        gpu_order,
        ..RuntimeOptions::default()
    };
    Runtime::new(&options, &[DeviceRequest::Cuda]).expect("the probed GPU opens")
}

pub(super) const BOTH_ORDERS: [crate::device::GpuOrder; 2] = [
    crate::device::GpuOrder::Stream,
    crate::device::GpuOrder::Host,
];

/// Products that keep the GPU behind the lanes (`x`, `n`×`n`, times itself four times, each
/// scaled by `scale`): a copy enqueued without waiting for its source's ready event would read
/// the buffer before it is written, so the copy must equal the direct read. The product.
pub(super) fn copy_waits_for_products(rt: &Runtime, n: usize, scale: f32, case: &str) -> Vec<f32> {
    let x = Tensor::uniform(&rt.engine, &rt.devices[0], &[n, n], 7);
    // A pooled pinned buffer for the copy: allocating a new one would synchronize the device
    // and hide a missing wait.
    drop(x.copy_to_host().to_vec().unwrap());
    let mut p = x.clone();
    for _ in 0..4 {
        p = p.matmul(&x).unwrap().scale(scale);
    }
    let copied = p.copy_to_host();
    let (copied, direct) = (copied.to_vec().unwrap(), p.to_vec().unwrap());
    assert!(
        copied == direct,
        "{case}: the copy did not wait for the products"
    );
    p.wait_to_read().unwrap();
    direct
}

/// A dense ReLU stack pushed op by op: what a captured graph of `layers` must replay.
pub(super) fn dense_relu(x: &Tensor, layers: &[(Tensor, Tensor)]) -> Vec<f32> {
    let mut h = x.clone();
    for (w, b) in layers {
        h = h.matmul(w).unwrap().add_row(b).unwrap().relu();
    }
    h.to_vec().unwrap()
}

/// The last handles of 64 GPU tensors dropped each on a fresh thread (no context current
/// there), then every op waited for.
pub(super) fn drop_on_fresh_threads(rt: &Runtime) {
    let (e, d) = (&rt.engine, &rt.devices[0]);
    for i in 0..64 {
        let t = Tensor::uniform(e, d, &[512, 512], i).add_scalar(1.0);
        t.wait_to_read().unwrap();
        std::thread::spawn(move || drop(t)).join().unwrap();
    }
    e.wait_all().unwrap();
}

/// Every element-wise kernel against its host closure, bit for bit, in both GPU orders
/// (odd sizes, negatives, NaN and a size beyond one grid's worth of blocks).
#[test]
#[ignore = "needs a GPU"]
fn gpu_elementwise_kernels_equal_the_host_ops() {
    for order in BOTH_ORDERS {
        let rt = gpu_runtime_in(order);
        let (e, d) = (&rt.engine, &rt.devices[0]);
        for (rows, cols) in [(1, 1), (3, 7), (129, 257), (1, (1 << 24) + 3)] {
            let mut host: Vec<f32> = (0..rows * cols)
                .map(|i| ((i * 7919) % 1000) as f32 / 100.0 - 5.0)
                .collect();
            host[0] = f32::NAN;
            let row: Vec<f32> = (0..cols).map(|j| j as f32 * 0.25 - 1.0).collect();
            let arr =
                |v: &Vec<f32>, r, c| ArrayD::from_shape_vec(IxDyn(&[r, c]), v.clone()).unwrap();
            let x = Tensor::from_host(e, d, arr(&host, rows, cols));
            let b = Tensor::from_host(e, d, arr(&row, 1, cols));
            // Bit for bit, except that every NaN is one NaN: a GPU's NaN has another payload.
            let bits = |v: Vec<f32>| {
                v.into_iter()
                    .map(|x| if x.is_nan() { u32::MAX } else { x.to_bits() })
                    .collect::<Vec<_>>()
            };
            let want = |f: &dyn Fn(usize, f32) -> f32| {
                bits(host.iter().enumerate().map(|(i, &v)| f(i, v)).collect())
            };
            let what = format!("{rows}×{cols}, {order:?}");
            assert_eq!(bits(x.to_vec().unwrap()), want(&|_, v| v), "upload {what}");
            assert_eq!(
                bits(x.add_scalar(1.5).to_vec().unwrap()),
                want(&|_, v| v + 1.5),
                "add {what}"
            );
            assert_eq!(
                bits(x.scale(-0.5).to_vec().unwrap()),
                want(&|_, v| v * -0.5),
                "scale {what}"
            );
            assert_eq!(
                bits(x.relu().to_vec().unwrap()),
                want(&|_, v| v.max(0.0)),
                "relu {what}"
            );
            assert_eq!(
                bits(x.duplicate().to_vec().unwrap()),
                want(&|_, v| v),
                "duplicate {what}"
            );
            assert_eq!(
                bits(x.add_row(&b).unwrap().to_vec().unwrap()),
                want(&|i, v| v + row[i % cols]),
                "add_row {what}"
            );
        }
    }
}

/// A long dependent chain pushed at once, read three ways: the host waits for the GPU's
/// ready event (to_vec), the copy stream waits for it on the device (copy_to_host), and a
/// host op on the copy runs after both.
#[test]
#[ignore = "needs a GPU"]
fn gpu_dependent_chains_are_exact_and_their_readers_wait() {
    for order in BOTH_ORDERS {
        let rt = gpu_runtime_in(order);
        let d = &rt.devices[0];
        let x = Tensor::ones(&rt.engine, d, &[1000, 1000]);
        let mut y = x.clone();
        for _ in 0..2000 {
            y = y.add_scalar(1.0);
        }
        // Pushed before anything waits: the copy must see the chain's end, not a prefix.
        let copied = y.copy_to_host();
        let shifted = copied.add_scalar(-2001.0);
        assert!(
            y.to_vec().unwrap().iter().all(|&v| v == 2001.0),
            "{order:?}"
        );
        assert!(
            copied.to_vec().unwrap().iter().all(|&v| v == 2001.0),
            "{order:?}"
        );
        assert!(
            shifted.to_vec().unwrap().iter().all(|&v| v == 0.0),
            "{order:?}"
        );
        y.wait_to_read().unwrap();
        // Products that keep the GPU milliseconds behind the lanes.
        let direct = copy_waits_for_products(&rt, 4096, 1.0 / 2048.0, &format!("{order:?}"));
        assert!(
            direct.iter().all(|v| v.is_finite() && *v > 0.0),
            "{order:?}"
        );
        rt.engine.wait_all().unwrap();
    }
}

/// Random programs of element-wise GPU ops over a few slots, pushed without waiting, with
/// host copies and reads at random points, against a sequential interpretation on plain
/// vectors, bit for bit: the stream order, the ready events and the stream-ordered frees
/// must never let an op see a stale or freed value.
#[test]
#[ignore = "needs a GPU"]
fn gpu_random_programs_equal_a_sequential_interpretation() {
    for order in BOTH_ORDERS {
        let rt = gpu_runtime_in(order);
        let (e, d) = (&rt.engine, &rt.devices[0]);
        for seed in 1..=4u64 {
            let mut state = seed;
            let mut next = move || {
                let z = cpu::splitmix64(state);
                state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                z
            };
            let (rows, cols, slots) = (8, 16, 6);
            let arr = |v: &[f32], r: usize| {
                ArrayD::from_shape_vec(IxDyn(&[r, v.len() / r]), v.to_vec()).unwrap()
            };
            let row: Vec<f32> = (0..cols).map(|j| j as f32 - 7.5).collect();
            let row_t = Tensor::from_host(e, d, arr(&row, 1));
            let mut want: Vec<Vec<f32>> = (0..slots)
                .map(|k| {
                    (0..rows * cols)
                        .map(|i| ((i * 31 + k * 7) % 17) as f32 - 8.0)
                        .collect()
                })
                .collect();
            let mut got: Vec<Tensor> = want
                .iter()
                .map(|v| Tensor::from_host(e, d, arr(v, rows)))
                .collect();
            let mut pending: Vec<(Tensor, Vec<f32>)> = Vec::new();
            for step in 0..400 {
                let (a, b) = (
                    (next() % slots as u64) as usize,
                    (next() % slots as u64) as usize,
                );
                let src = want[b].clone();
                let (t, v): (Tensor, Vec<f32>) = match next() % 7 {
                    0 => (
                        got[b].add_scalar(1.0),
                        src.iter().map(|x| x + 1.0).collect(),
                    ),
                    1 => (got[b].scale(0.5), src.iter().map(|x| x * 0.5).collect()),
                    2 => (got[b].scale(-2.0), src.iter().map(|x| x * -2.0).collect()),
                    3 => (got[b].relu(), src.iter().map(|x| x.max(0.0)).collect()),
                    4 => (
                        got[b].add_row(&row_t).unwrap(),
                        src.iter()
                            .enumerate()
                            .map(|(i, x)| x + row[i % cols])
                            .collect(),
                    ),
                    5 => (got[b].duplicate(), src),
                    _ => {
                        // A host copy, checked at the end: it must hold this step's value.
                        pending.push((got[b].copy_to_host(), src));
                        continue;
                    }
                };
                got[a] = t;
                want[a] = v;
                if next() % 50 == 0 {
                    assert_eq!(
                        got[a].to_vec().unwrap(),
                        want[a],
                        "seed {seed} step {step} {order:?}"
                    );
                }
            }
            for (k, (t, v)) in got.iter().zip(&want).enumerate() {
                assert_eq!(&t.to_vec().unwrap(), v, "seed {seed} slot {k} {order:?}");
            }
            for (i, (t, v)) in pending.iter().enumerate() {
                assert_eq!(&t.to_vec().unwrap(), v, "seed {seed} copy {i} {order:?}");
            }
        }
        rt.engine.wait_all().unwrap();
    }
}

/// GPU buffers are counted while they live, exactly.
#[test]
#[ignore = "needs a GPU"]
fn gpu_buffers_are_counted_while_they_live() {
    let rt = gpu_runtime();
    let d = &rt.devices[0];
    let before = d.memory.live();
    let x = Tensor::ones(&rt.engine, d, &[256, 1024]);
    let y = x.add_scalar(1.0);
    y.wait_to_read().unwrap();
    assert_eq!(d.memory.live() - before, 2 * 256 * 1024 * 4);
    drop((x, y));
    rt.engine.wait_all().unwrap();
    assert_eq!(d.memory.live(), before);
}

/// A captured CUDA graph replays the imperative kernels bit for bit, and its output is
/// rewritten by each replay only after earlier readers are done with it.
#[test]
#[ignore = "needs a GPU"]
fn gpu_graph_replay_equals_the_imperative_pass() {
    for order in BOTH_ORDERS {
        let rt = gpu_runtime_in(order);
        let (e, d) = (&rt.engine, &rt.devices[0]);
        let m = |r: usize, c: usize, seed| {
            Tensor::from_host(e, d, cpu::uniform(&[r, c], seed).mapv(|v| v - 0.5))
        };
        let x = m(16, 48, 1);
        let layers = vec![(m(48, 64, 2), m(1, 64, 3)), (m(64, 32, 4), m(1, 32, 5))];
        let want = dense_relu(&x, &layers);
        let graph = x.capture_dense_relu(&layers).unwrap();
        let first = graph.replay();
        let copy = first.copy_to_host();
        let again = graph.replay();
        assert_eq!(copy.to_vec().unwrap(), want, "{order:?}");
        assert_eq!(again.to_vec().unwrap(), want, "{order:?}");
        assert!(
            want.iter().any(|&v| v > 0.0),
            "a ReLU stack of all zeros proves little"
        );
        // Shapes that do not chain are refused before anything is pushed.
        assert!(x.capture_dense_relu(&[(m(32, 8, 6), m(1, 8, 7))]).is_err());
    }
}

/// On a GPU the copy is pinned memory on the GPU's host device; host ops must accept it.
#[test]
#[ignore = "needs a GPU"]
fn gpu_host_copy_is_usable_by_host_ops() {
    let rt = gpu_runtime();
    let d = &rt.devices[0];
    let x = Tensor::uniform(&rt.engine, d, &[64, 64], 3);
    let y = x.matmul(&x).unwrap();
    let h = y.copy_to_host();
    assert_eq!(h.device().name, "host");
    let got = h.add_scalar(-1.0).relu().to_vec().unwrap();
    let want: Vec<f32> = y
        .to_vec()
        .unwrap()
        .iter()
        .map(|v| (v - 1.0).max(0.0))
        .collect();
    assert_eq!(got, want);
}

/// cuBLAS's row-major product (odd sizes, so a transposition shows) against float64.
#[test]
#[ignore = "needs a GPU"]
fn gpu_matmul_matches_float64() {
    let rt = gpu_runtime();
    let d = &rt.devices[0];
    let (m, k, n) = (37, 53, 29);
    let a = Tensor::uniform(&rt.engine, d, &[m, k], 1);
    let b = Tensor::uniform(&rt.engine, d, &[k, n], 2);
    let c = a.matmul(&b).unwrap();
    let (av, bv, cv) = (
        a.to_vec().unwrap(),
        b.to_vec().unwrap(),
        c.to_vec().unwrap(),
    );
    let err = crate::scenario::kit::matmul_error(&av, &bv, &cv, (m, k, n), 64);
    assert!(err <= crate::scenario::kit::matmul_tolerance(k), "{err}");
}

/// Pooled pinned buffers are reused: with poisoning on, every copy must still carry its
/// own product, never a previous one or NaN.
#[test]
#[ignore = "needs a GPU"]
fn gpu_copies_into_reused_pinned_buffers_are_complete() {
    let rt = gpu_runtime();
    let d = &rt.devices[0];
    d.poison_reused_host_buffers(true);
    for seed in 0..4 {
        let x = Tensor::uniform(&rt.engine, d, &[256, 256], seed);
        let y = x.matmul(&x).unwrap();
        let h = y.copy_to_host();
        assert_eq!(h.to_vec().unwrap(), y.to_vec().unwrap(), "seed {seed}");
    }
    d.poison_reused_host_buffers(false);
}

/// A CUDA graph of a host tensor is refused at push time as a device error, not a shape one.
#[test]
fn a_cuda_graph_of_a_host_tensor_is_a_device_error() {
    let (rt, d) = &rt();
    let x = Tensor::ones(&rt.engine, d, &[2, 2]);
    match x.capture_dense_relu(&[]) {
        Err(TensorError::Device(message)) => assert!(message.contains("cpu:0"), "{message}"),
        Err(other) => panic!("wrong error: {other}"),
        Ok(_) => panic!("a host tensor was captured"),
    }
}

#[test]
#[ignore = "needs a GPU"]
fn gpu_chains_copies_and_layers_give_the_hosts_results() {
    for order in BOTH_ORDERS {
        let rt = gpu_runtime_in(order);
        let (e, d) = (&rt.engine, &rt.devices[0]);
        let case = format!("{order:?}");
        let live_before = d.memory.live();
        // A chain pushed at once, read by a copy pushed before anything waits.
        let mut y = Tensor::ones(e, d, &[1000, 1000]);
        for _ in 0..500 {
            y = y.add_scalar(1.0);
        }
        let copied = y.copy_to_host();
        assert!(
            copied.to_vec().unwrap().iter().all(|&v| v == 501.0),
            "{case}"
        );
        assert!(y.to_vec().unwrap().iter().all(|&v| v == 501.0), "{case}");
        // Products that keep the GPU behind the lanes: the copy and the host read must
        // wait for them (the ready event recorded after the write).
        copy_waits_for_products(&rt, 2048, 1.0 / 1024.0, &case);
        // A layer against the host's.
        let host_x = cpu::uniform(&[16, 64], 5).mapv(|v| v - 0.5);
        let host_w = cpu::uniform(&[64, 32], 6).mapv(|v| v - 0.5);
        let host_b = cpu::uniform(&[1, 32], 7).mapv(|v| v - 0.5);
        let gx = Tensor::from_host(e, d, host_x.clone());
        let gw = Tensor::from_host(e, d, host_w.clone());
        let gb = Tensor::from_host(e, d, host_b.clone());
        let layer = gx.matmul(&gw).unwrap().add_row(&gb).unwrap().relu();
        let got = layer.to_vec().unwrap();
        let x2 = host_x.into_dimensionality::<ndarray::Ix2>().unwrap();
        let w2 = host_w.into_dimensionality::<ndarray::Ix2>().unwrap();
        let b2 = host_b.into_dimensionality::<ndarray::Ix2>().unwrap();
        let want = (x2.dot(&w2) + &b2).mapv(|v: f32| v.max(0.0));
        for (g, w) in got.iter().zip(want.iter()) {
            assert!(
                (g - w).abs() <= 1e-4 * (1.0 + w.abs()),
                "{case}: {g} vs {w}"
            );
        }
        drop((y, gx, gw, gb, layer));
        e.wait_all().unwrap_or_else(|err| panic!("{case}: {err}"));
        assert_eq!(
            d.memory.live(),
            live_before,
            "{case}: every buffer counted freed"
        );
    }
}

/// Buffers dropped on threads that never used the GPU go back to the caching allocator's
/// cache (no driver call there), and the device goes on computing with them.
#[test]
#[ignore = "needs a GPU"]
fn gpu_cached_buffers_dropped_on_fresh_threads_are_reused() {
    let rt = gpu_runtime();
    let (e, d) = (&rt.engine, &rt.devices[0]);
    drop_on_fresh_threads(&rt);
    let y = Tensor::ones(e, d, &[512, 512]).add_scalar(1.0);
    assert!(y.to_vec().unwrap().iter().all(|&v| v == 2.0));
}
