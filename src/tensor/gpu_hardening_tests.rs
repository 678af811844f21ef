//! The GPU path under the conditions a library user creates and the scenarios do not: tensors
//! dropped on threads that never used the GPU, and a graph captured while another thread
//! frees GPU memory. All need a GPU (`#[ignore]`; the GPU check runs them).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::gpu_path_tests::{
    dense_relu, drop_on_fresh_threads, gpu_runtime, gpu_runtime_in, BOTH_ORDERS,
};
use super::*;
use crate::device::cpu;

/// The device's own error slot: what a drop recorded shows up at the next synchronization.
fn synchronize(d: &Device) -> Result<(), crate::device::cuda::GpuError> {
    match &d.kind {
        DeviceKind::Cuda(dev) => dev.synchronize(),
        _ => panic!("not a GPU device: {}", d.name),
    }
}

/// The last handle of a GPU tensor dropped on a fresh thread (no context current there)
/// frees its memory without an error, and the memory is counted as freed.
#[test]
#[ignore = "needs a GPU"]
fn gpu_tensors_dropped_on_fresh_threads_free_cleanly() {
    let rt = gpu_runtime();
    let (e, d) = (&rt.engine, &rt.devices[0]);
    let before = d.memory.live();
    drop_on_fresh_threads(&rt);
    if let Err(err) = synchronize(d) {
        panic!("an error recorded by the drops: {err} ({err:?})");
    }
    assert_eq!(d.memory.live(), before, "every buffer was freed");
    // And the device still computes.
    let y = Tensor::ones(e, d, &[4, 4]).add_scalar(1.0);
    assert!(y.to_vec().unwrap().iter().all(|&v| v == 2.0));
}

/// Graphs captured while another thread keeps allocating and dropping GPU tensors (their
/// memory freed in stream order on the compute stream) capture exactly the stack and replay
/// it bit for bit, and the other thread's work is unharmed.
#[test]
#[ignore = "needs a GPU"]
fn gpu_capture_goes_on_while_another_thread_drops_gpu_tensors() {
    for order in BOTH_ORDERS {
        let rt = gpu_runtime_in(order);
        let (e, d) = (&rt.engine, &rt.devices[0]);
        let m = |r: usize, c: usize, seed| {
            Tensor::from_host(e, d, cpu::uniform(&[r, c], seed).mapv(|v| v - 0.5))
        };
        let x = m(16, 64, 1);
        let layers: Vec<_> = (0..16)
            .map(|i| (m(64, 64, 2 + i), m(1, 64, 40 + i)))
            .collect();
        let want = dense_relu(&x, &layers);
        let stop = AtomicBool::new(false);
        let churned = AtomicUsize::new(0);
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut seed = 0;
                while !stop.load(Ordering::Acquire) {
                    let t = Tensor::ones(e, d, &[256, 256]).add_scalar(1.0);
                    let v = t.to_vec().unwrap();
                    assert!(
                        v.iter().all(|&v| v == 2.0),
                        "{order:?}: the churn's own result"
                    );
                    drop(t);
                    // cuRAND seeds its states with synchronizing calls: beside a capture they
                    // broke it on an H200 until captures and such calls were kept apart.
                    seed += 1;
                    let r = Tensor::uniform(e, d, &[64, 64], seed).to_vec().unwrap();
                    assert!(r.iter().all(|&v| v > 0.0 && v <= 1.0), "{order:?}: uniform");
                    churned.fetch_add(1, Ordering::Relaxed);
                }
            });
            // However the loop below ends (a failed assertion too), the other thread stops:
            // the scope waits for it.
            struct Stop<'a>(&'a AtomicBool);
            impl Drop for Stop<'_> {
                fn drop(&mut self) {
                    self.0.store(true, Ordering::Release);
                }
            }
            let _stop = Stop(&stop);
            for i in 0..100 {
                let graph = x.capture_dense_relu(&layers).unwrap();
                assert_eq!(graph.replay().to_vec().unwrap(), want, "{order:?}");
                assert_eq!(graph.replay().to_vec().unwrap(), want, "{order:?}");
                if i % 25 == 0 {
                    // Progress, for a run that stops somewhere: where, and whether the other
                    // thread still runs.
                    eprintln!(
                        "{order:?}: capture {i}, {} tensors churned",
                        churned.load(Ordering::Relaxed)
                    );
                }
            }
        });
        assert!(churned.load(Ordering::Relaxed) > 0, "the other thread ran");
        e.wait_all().unwrap();
        synchronize(d).expect("no error recorded meanwhile");
    }
}
