//! The GPU path, in both GPU orders: dependent chains exact, a copy and a host read waiting for
//! the work that wrote their source, a layer's product, bias and ReLU as on the host, buffers
//! cached and counted. All need a GPU (`#[ignore]`; the GPU check runs them).

use super::tests::{gpu_runtime, gpu_runtime_in, BOTH_ORDERS};
use super::*;
use crate::device::cpu;

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

/// Buffers dropped on threads that never used the GPU go back to the caching allocator's
/// cache (no driver call there), and the device goes on computing with them.
#[test]
#[ignore = "needs a GPU"]
fn gpu_cached_buffers_dropped_on_fresh_threads_are_reused() {
    let rt = gpu_runtime();
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
