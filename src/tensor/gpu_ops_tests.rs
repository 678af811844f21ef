//! Each of `PARBENCH_GPU_OPS`'s switches, alone and together, in both GPU orders, gives the
//! plain path's results: dependent chains exact, a copy and a host read waiting for the work
//! that wrote their source, a layer's product, bias and ReLU as on the host, buffers freed or
//! cached and counted. All need a GPU (`#[ignore]`; the GPU check runs them).

use super::tests::{gpu_runtime_with, BOTH_ORDERS};
use super::*;
use crate::device::cpu;
use crate::device::gpu_ops::GpuOps;

/// The plain path, each switch alone, and all of them.
fn settings() -> Vec<GpuOps> {
    let one = |f: fn(&mut GpuOps)| {
        let mut ops = GpuOps::NONE;
        f(&mut ops);
        ops
    };
    vec![
        GpuOps::NONE,
        one(|o| o.caching_allocator = true),
        one(|o| o.lazy_ready_events = true),
        one(|o| o.one_bind = true),
        GpuOps::ALL,
    ]
}

#[test]
#[ignore = "needs a GPU"]
fn gpu_every_op_switch_gives_the_plain_paths_results() {
    for ops in settings() {
        for order in BOTH_ORDERS {
            let rt = gpu_runtime_with(order, Some(ops));
            let (e, d) = (&rt.engine, &rt.devices[0]);
            let case = format!("{ops}, {order:?}");
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
            // wait for them (a ready event recorded lazily still comes after the write).
            let x = Tensor::uniform(e, d, &[2048, 2048], 3);
            drop(x.copy_to_host().to_vec().unwrap());
            let mut p = x.clone();
            for _ in 0..4 {
                p = p.matmul(&x).unwrap().scale(1.0 / 1024.0);
            }
            let copied = p.copy_to_host();
            let (copied, direct) = (copied.to_vec().unwrap(), p.to_vec().unwrap());
            assert!(
                copied == direct,
                "{case}: the copy did not wait for the products"
            );
            p.wait_to_read().unwrap();
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
            drop((y, x, p, gx, gw, gb, layer));
            e.wait_all().unwrap_or_else(|err| panic!("{case}: {err}"));
            assert_eq!(
                d.memory.live(),
                live_before,
                "{case}: every buffer counted freed"
            );
        }
    }
}

/// Under the caching allocator, buffers dropped on threads that never used the GPU go back
/// to the cache (no driver call there), and the device goes on computing with them.
#[test]
#[ignore = "needs a GPU"]
fn gpu_cached_buffers_dropped_on_fresh_threads_are_reused() {
    let ops = GpuOps {
        caching_allocator: true,
        ..GpuOps::NONE
    };
    let rt = gpu_runtime_with(crate::device::GpuOrder::Stream, Some(ops));
    let (e, d) = (&rt.engine, &rt.devices[0]);
    for i in 0..64 {
        let t = Tensor::uniform(e, d, &[512, 512], i).add_scalar(1.0);
        t.wait_to_read().unwrap();
        std::thread::spawn(move || drop(t)).join().unwrap();
    }
    e.wait_all().unwrap();
    let y = Tensor::ones(e, d, &[512, 512]).add_scalar(1.0);
    assert!(y.to_vec().unwrap().iter().all(|&v| v == 2.0));
}
