use super::storage::{into_flat, read, read_both, CellShape};
use super::*;
use crate::device::memory::MemTracker;
use crate::device::{Runtime, RuntimeOptions};
use crate::engine::tests::Gate;
use ndarray::IxDyn;

/// A runtime of one CPU device of two threads, and that device.
pub(super) fn rt() -> (Runtime, Arc<Device>) {
    let rt = Runtime::cpu(&RuntimeOptions::default(), &[2]).unwrap();
    let d = rt.devices[0].clone();
    (rt, d)
}

#[test]
fn add_scalar_chain_computes_in_order() {
    let (rt, d) = &rt();
    let mut y = Tensor::ones(&rt.engine, d, &[1, 2]);
    for _ in 0..100 {
        y = y.add_scalar(1.0);
    }
    assert_eq!(y.to_vec().unwrap(), vec![101.0, 101.0]);
}

#[test]
fn matmul_matches_a_naive_product_and_rejects_bad_shapes_at_push() {
    let (rt, d) = &rt();
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
    assert!(matches!(a.matmul(&a), Err(TensorError::Shape(_))));
}

#[test]
fn relu_and_add_row_compute_a_dense_layer() {
    let (rt, d) = &rt();
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
    let (rt, d) = &rt();
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
fn copy_to_host_runs_on_the_copy_lane_and_its_copy_is_usable_by_host_ops() {
    let (rt, d) = &rt();
    rt.engine.set_tracing(true);
    let x = ndarray::arr2(&[[-1.0f32, 2.0], [3.0, -4.0]]).into_dyn();
    let x = Tensor::from_host(&rt.engine, d, x);
    let y = x.copy_to_host();
    assert_eq!(y.to_vec().unwrap(), x.to_vec().unwrap());
    let trace = rt.engine.take_trace();
    let copy = trace.iter().find(|r| r.name == "copy to host").unwrap();
    assert_eq!(copy.lane_name, "cpu:0 copy");
    assert!(Arc::ptr_eq(y.device(), d), "a CPU device is its own host");
    assert_eq!(y.relu().to_vec().unwrap(), vec![0.0, 2.0, 3.0, 0.0]);
}

#[test]
fn values_are_freed_once_the_last_handle_and_the_last_op_using_them_are_gone() {
    let (rt, d) = &rt();
    let memory = d.memory.clone();
    let base = memory.live();
    let x = Tensor::ones(&rt.engine, d, &[1000]);
    x.wait_to_read().unwrap();
    assert_eq!(memory.live(), base + 4000, "x counts once written");
    // Hold the lane, so that every op below is still pending when its tensors are dropped.
    let go = Gate::closed();
    rt.engine.push("hold", d.compute, &[], &[], go.waiter());
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
    let (rt, d) = &rt();
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
    let (rt, d) = &rt();
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
