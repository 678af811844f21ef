//! CPU devices and their kernels.
//!
//! Kernels run inside the device's pool (the lane's worker is one of its threads), so their
//! rayon parallelism stays on that device's share of the cores.

use std::sync::Arc;

use ndarray::{ArrayD, ArrayView2, IxDyn};
use rayon::prelude::*;

use super::{add_lanes, Device, DeviceError, DeviceKind};
use crate::engine::EngineBuilder;

/// Build `cpu:{index}` with `threads` threads and register its lanes.
pub fn add_cpu_device(
    builder: &mut EngineBuilder,
    index: usize,
    threads: usize,
) -> Result<Device, DeviceError> {
    let name = format!("cpu:{index}");
    let threads = threads.max(1);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name({
            let name = name.clone();
            move |i| format!("{name} t{i}")
        })
        .build()
        .map_err(|e| DeviceError::Pool {
            device: name.clone(),
            reason: e.to_string(),
        })?;
    let pool = Arc::new(pool);
    let (compute, copy) = add_lanes(builder, &name, &pool);
    Ok(Device {
        name,
        threads,
        compute,
        copy,
        kind: DeviceKind::Cpu { pool },
    })
}

/// SplitMix64: a tiny, well-mixed, stateless generator, so element `i` of a seeded tensor is
/// the same however many threads fill it.
fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Uniform values in [0, 1) from `seed`, element by element.
pub fn uniform(shape: &[usize], seed: u64) -> ArrayD<f32> {
    let n: usize = shape.iter().product();
    let key = splitmix64(seed);
    let mut data = vec![0f32; n];
    data.par_chunks_mut(1 << 14)
        .enumerate()
        .for_each(|(c, chunk)| {
            let base = (c << 14) as u64;
            for (i, x) in chunk.iter_mut().enumerate() {
                // 24 high bits: exactly representable in f32, so the value is in [0, 1).
                *x = (splitmix64(key ^ (base + i as u64)) >> 40) as f32 / (1u64 << 24) as f32;
            }
        });
    ArrayD::from_shape_vec(IxDyn(shape), data).expect("length equals the shape's product")
}

/// `x + s`, element-wise.
pub fn add_scalar(x: &ArrayD<f32>, s: f32) -> ArrayD<f32> {
    x.mapv(|v| v + s)
}

/// Row-major `a · b`.
pub fn matmul(a: ArrayView2<'_, f32>, b: ArrayView2<'_, f32>) -> ndarray::Array2<f32> {
    a.dot(&b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_is_seeded_and_in_range() {
        let a = uniform(&[3, 1000], 7);
        let b = uniform(&[3, 1000], 7);
        let c = uniform(&[3, 1000], 8);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.iter().all(|&x| (0.0..1.0).contains(&x)));
        let mean = a.iter().sum::<f32>() / a.len() as f32;
        assert!((mean - 0.5).abs() < 0.05, "mean {mean}");
    }

    #[test]
    fn uniform_does_not_depend_on_thread_count() {
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let two = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let shape = [100_000];
        assert_eq!(
            one.install(|| uniform(&shape, 3)),
            two.install(|| uniform(&shape, 3))
        );
    }
}
