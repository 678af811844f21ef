use super::storage::{into_flat, read, read_both, CellShape};
use super::*;
#[cfg(feature = "cuda")]
use crate::device::cpu;
use crate::device::memory::MemTracker;
use crate::device::{Runtime, RuntimeOptions};
use ndarray::IxDyn;

fn rt() -> Runtime {
    Runtime::cpu(&RuntimeOptions::default(), &[2]).unwrap()
}

#[test]
fn add_scalar_chain_computes_in_order() {
    let rt = rt();
    let d = &rt.devices[0];
    let mut y = Tensor::ones(&rt.engine, d, &[1, 2]);
    for _ in 0..100 {
        y = y.add_scalar(1.0);
    }
    assert_eq!(y.to_vec().unwrap(), vec![101.0, 101.0]);
}

#[test]
fn matmul_matches_a_naive_product() {
    let rt = rt();
    let d = &rt.devices[0];
    let a = Tensor::uniform(&rt.engine, d, &[3, 5], 1);
    let b = Tensor::uniform(&rt.engine, d, &[5, 7], 2);
    let c = a.matmul(&b).unwrap();
    let (av, bv, cv) = (
        a.to_vec().unwrap(),
        b.to_vec().unwrap(),
        c.to_vec().unwrap(),
    );
    assert_eq!(c.shape(), &[3, 7]);
    for i in 0..3 {
        for j in 0..7 {
            let want: f32 = (0..5).map(|k| av[i * 5 + k] * bv[k * 7 + j]).sum();
            assert!((cv[i * 7 + j] - want).abs() < 1e-5);
        }
    }
}

#[test]
fn matmul_rejects_bad_shapes_at_push() {
    let rt = rt();
    let d = &rt.devices[0];
    let a = Tensor::ones(&rt.engine, d, &[3, 5]);
    assert!(matches!(a.matmul(&a), Err(TensorError::Shape(_))));
}

#[test]
fn relu_and_add_row_compute_a_dense_layer() {
    let rt = rt();
    let d = &rt.devices[0];
    let x = Tensor::from_host(
        &rt.engine,
        d,
        ndarray::arr2(&[[1.0f32, -2.0], [3.0, -4.0]]).into_dyn(),
    );
    let b = Tensor::from_host(&rt.engine, d, ndarray::arr2(&[[0.5f32, 1.0]]).into_dyn());
    let y = x.add_row(&b).unwrap().relu();
    assert_eq!(y.to_vec().unwrap(), vec![1.5, 0.0, 3.5, 0.0]);
    assert!(matches!(x.add_row(&x), Err(TensorError::Shape(_))));
}

#[test]
fn reading_one_buffer_twice_takes_one_lock() {
    let memory = Arc::new(MemTracker::default());
    let buf = Buffer::new(memory.clone(), &[2], Storage::Empty);
    // The pair of one buffer is one guard; of two buffers, two.
    let (one, two) = read_both(&buf, &buf).unwrap();
    assert!(two.is_none());
    drop(one);
    let other = Buffer::new(memory, &[2], Storage::Empty);
    assert!(read_both(&buf, &other).unwrap().1.is_some());
}

#[test]
fn axpby_assign_updates_in_place_after_earlier_readers() {
    let rt = rt();
    let d = &rt.devices[0];
    let x = Tensor::from_host(&rt.engine, d, ndarray::arr1(&[1.0f32, 2.0]).into_dyn());
    let y = Tensor::from_host(&rt.engine, d, ndarray::arr1(&[10.0f32, 20.0]).into_dyn());
    // A reader of x pushed before the in-place write must see the old values (WAR)...
    let before = x.duplicate();
    x.axpby_assign(0.5, &y, 0.5).unwrap();
    // ...and writes apply in push order (WAW), including one with x on both sides.
    x.axpby_assign(1.0, &x, 1.0).unwrap();
    assert_eq!(before.to_vec().unwrap(), vec![1.0, 2.0]);
    assert_eq!(x.to_vec().unwrap(), vec![11.0, 22.0]);
    assert!(matches!(
        x.axpby_assign(1.0, &Tensor::ones(&rt.engine, d, &[3]), 1.0),
        Err(TensorError::Shape(_))
    ));
}

#[test]
fn a_host_copy_is_usable_by_host_ops() {
    let rt = rt();
    let d = &rt.devices[0];
    let x = Tensor::from_host(&rt.engine, d, ndarray::arr1(&[-1.0f32, 2.0]).into_dyn());
    let h = x.copy_to_host();
    assert!(Arc::ptr_eq(h.device(), d), "a CPU device is its own host");
    assert_eq!(h.relu().to_vec().unwrap(), vec![0.0, 2.0]);
}

/// A runtime with the GPU. The GPU tests are `#[ignore = "needs a GPU"]`: a plain
/// `cargo test` leaves them out, and run with `--ignored` (`scripts/gpu-check.sh` does, on a
/// GPU machine) they fail here when no GPU is usable, rather than pass without testing.
#[cfg(feature = "cuda")]
pub(super) fn gpu_runtime() -> Runtime {
    gpu_runtime_in(crate::device::GpuOrder::Stream)
}

#[cfg(feature = "cuda")]
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

#[cfg(feature = "cuda")]
pub(super) const BOTH_ORDERS: [crate::device::GpuOrder; 2] = [
    crate::device::GpuOrder::Stream,
    crate::device::GpuOrder::Host,
];

/// Every element-wise kernel against its host closure, bit for bit, in both GPU orders
/// (odd sizes, negatives, NaN and a size beyond one grid's worth of blocks).
#[cfg(feature = "cuda")]
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
#[cfg(feature = "cuda")]
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
        // Products that keep the GPU milliseconds behind the lanes: a copy enqueued without
        // waiting for its source's ready event would read the buffer before it is written.
        let x = Tensor::uniform(&rt.engine, d, &[4096, 4096], 7);
        // A pooled pinned buffer for the copy: allocating a new one would synchronize the
        // device and hide a missing wait.
        drop(x.copy_to_host().to_vec().unwrap());
        let mut p = x.clone();
        for _ in 0..4 {
            p = p.matmul(&x).unwrap().scale(1.0 / 2048.0);
        }
        let copied = p.copy_to_host();
        let (copied, direct) = (copied.to_vec().unwrap(), p.to_vec().unwrap());
        assert!(
            copied == direct,
            "{order:?}: the copy did not wait for the products"
        );
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
#[cfg(feature = "cuda")]
#[test]
#[ignore = "needs a GPU"]
fn gpu_random_programs_equal_a_sequential_interpretation() {
    for order in BOTH_ORDERS {
        let rt = gpu_runtime_in(order);
        let (e, d) = (&rt.engine, &rt.devices[0]);
        for seed in 1..=4u64 {
            let mut state = seed;
            let mut next = move || {
                state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut z = state;
                z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                z ^ (z >> 31)
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
#[cfg(feature = "cuda")]
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
#[cfg(feature = "cuda")]
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
        let mut h = x.clone();
        for (w, b) in &layers {
            h = h.matmul(w).unwrap().add_row(b).unwrap().relu();
        }
        let want = h.to_vec().unwrap();
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
#[cfg(feature = "cuda")]
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
#[cfg(feature = "cuda")]
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
#[cfg(feature = "cuda")]
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

#[test]
fn copy_to_host_runs_on_the_copy_lane_and_copies() {
    let rt = rt();
    let d = &rt.devices[0];
    rt.engine.set_tracing(true);
    let x = Tensor::uniform(&rt.engine, d, &[4, 4], 9);
    let y = x.copy_to_host();
    assert_eq!(y.to_vec().unwrap(), x.to_vec().unwrap());
    let trace = rt.engine.take_trace();
    let copy = trace.iter().find(|r| r.name == "copy to host").unwrap();
    assert_eq!(copy.lane_name, "cpu:0 copy");
}

/// A CUDA graph of a host tensor is refused at push time as a device error, not a shape one.
#[cfg(feature = "cuda")]
#[test]
fn a_cuda_graph_of_a_host_tensor_is_a_device_error() {
    let rt = rt();
    let x = Tensor::ones(&rt.engine, &rt.devices[0], &[2, 2]);
    match x.capture_dense_relu(&[]) {
        Err(TensorError::Device(message)) => assert!(message.contains("cpu:0"), "{message}"),
        Err(other) => panic!("wrong error: {other}"),
        Ok(_) => panic!("a host tensor was captured"),
    }
}

#[test]
fn values_are_freed_once_the_last_handle_and_the_last_op_using_them_are_gone() {
    let rt = rt();
    let d = &rt.devices[0];
    let memory = d.memory.clone();
    let base = memory.live();
    let x = Tensor::ones(&rt.engine, d, &[1000]);
    x.wait_to_read().unwrap();
    assert_eq!(memory.live(), base + 4000, "x counts once written");
    // Hold the lane, so that every op below is still pending when its tensors are dropped.
    // Released on the way out too, so a failed assertion cannot leave the engine's drop
    // waiting on the held op.
    struct Release(Arc<std::sync::atomic::AtomicBool>);
    impl Drop for Release {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::Release);
        }
    }
    let go = Release(Arc::new(std::sync::atomic::AtomicBool::new(false)));
    let go2 = go.0.clone();
    rt.engine.push("hold", d.compute, &[], &[], move || {
        while !go2.load(std::sync::atomic::Ordering::Acquire) {
            std::thread::yield_now();
        }
        Ok(())
    });
    let y = x.add_scalar(1.0);
    let z = y.scale(2.0);
    drop(x);
    drop(y);
    assert_eq!(
        memory.live(),
        base + 4000,
        "x lives on while an op reads it"
    );
    drop(go);
    assert_eq!(z.to_vec().unwrap(), vec![4.0; 1000]);
    rt.engine.wait_all().unwrap();
    assert_eq!(memory.live(), base + 4000, "x and y are freed, z lives");
    assert!(memory.peak() >= base + 8000);
    drop(z);
    assert_eq!(memory.live(), base, "every byte is uncounted");
}

#[test]
fn arrays_are_stored_row_major_whatever_their_layout() {
    let a = ndarray::arr2(&[[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]]);
    // Standard layout: the values as they are.
    assert_eq!(
        &*into_flat(a.clone().into_dyn()),
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    );
    // Transposed (column-major memory): read back in the transposed shape's row order.
    let t = a.clone().reversed_axes().into_dyn();
    assert!(!t.is_standard_layout());
    assert_eq!(&*into_flat(t), &[1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    // Standard layout that starts past the first element of its vector.
    let mut tail = a.into_dyn();
    tail.slice_collapse(ndarray::s![1.., ..]);
    assert!(tail.is_standard_layout());
    assert_eq!(&*into_flat(tail), &[4.0, 5.0, 6.0]);
}

#[test]
fn a_cell_refuses_values_of_another_shape() {
    let memory = Arc::new(MemTracker::default());
    let buf = Buffer::new(memory.clone(), &[2, 3], Storage::Empty);
    let wrong = ndarray::ArrayD::<f32>::zeros(ndarray::IxDyn(&[3, 2]));
    let err = buf.put_host(wrong).unwrap_err().to_string();
    assert!(err.contains("[3, 2]") && err.contains("[2, 3]"), "{err}");
    let err = buf.put_flat(vec![0.0; 5].into()).unwrap_err().to_string();
    assert!(err.contains("5 values"), "{err}");
    assert_eq!(memory.live(), 0, "nothing refused was counted");
    buf.put_flat(vec![1.0; 6].into()).unwrap();
    assert_eq!(memory.live(), 24);
    let slot = read(&buf).unwrap();
    let view = buf.view(&slot).unwrap();
    assert_eq!(view.shape(), &[2, 3]);
}

#[test]
fn views_and_in_place_ops_see_the_values_in_their_shape() {
    let rt = rt();
    let d = &rt.devices[0];
    let a = ndarray::arr2(&[[1.0f32, 2.0], [3.0, 4.0], [5.0, 6.0]]);
    // A transposed array uploads in its own row order.
    let x = Tensor::from_host(&rt.engine, d, a.clone().reversed_axes().into_dyn());
    assert_eq!(x.shape(), &[2, 3]);
    assert_eq!(x.to_vec().unwrap(), vec![1.0, 3.0, 5.0, 2.0, 4.0, 6.0]);
    let y = Tensor::from_host(&rt.engine, d, a.into_dyn());
    let p = x.matmul(&y).unwrap();
    assert_eq!(p.to_vec().unwrap(), vec![35.0, 44.0, 44.0, 56.0]);
    let shifted = p.apply("shift", &[2, 2], |v| {
        Ok::<_, ndarray::ShapeError>(v.mapv(|e| e - 1.0))
    });
    shifted.axpby_assign(2.0, &shifted, 0.0).unwrap();
    assert_eq!(shifted.to_vec().unwrap(), vec![68.0, 86.0, 86.0, 110.0]);
}

#[test]
fn a_cell_keeps_its_shape_inline_up_to_four_dimensions_and_on_the_heap_beyond() {
    for shape in [
        &[][..],
        &[3],
        &[2, 3],
        &[1, 2, 3, 4],
        &[2, 1, 2, 1, 2],
        &[1; 7],
    ] {
        let s = CellShape::new(shape);
        assert_eq!(s.dims(), shape);
        assert_eq!(s.size(), shape.iter().product::<usize>());
        assert_eq!(
            matches!(s, CellShape::Inline { .. }),
            shape.len() <= 4,
            "{shape:?}"
        );
    }
}

#[test]
fn tensors_of_five_dimensions_compute_and_read_back() {
    let rt = rt();
    let d = &rt.devices[0];
    let x = ndarray::ArrayD::from_shape_fn(IxDyn(&[2, 1, 2, 1, 2]), |i| i[0] as f32 - i[4] as f32);
    // `apply` reads its input as an array of the cell's shape and stores one of that shape.
    let y = Tensor::from_host(&rt.engine, d, x.clone())
        .apply("relu", &[2, 1, 2, 1, 2], |v| {
            Ok::<_, std::convert::Infallible>(v.mapv(|a| a.max(0.0)))
        })
        .add_scalar(2.0);
    assert_eq!(y.shape(), &[2, 1, 2, 1, 2]);
    let want: Vec<f32> = x.iter().map(|v| v.max(0.0) + 2.0).collect();
    assert_eq!(y.to_vec().unwrap(), want);
}
