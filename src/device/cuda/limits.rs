//! Measuring the GPU's limits ([`GpuLimits`]) on a device opened for the purpose: the driver's
//! floor in all its tiers (`floor.rs`), pinned copies each way timed on the GPU's clock, and
//! cuBLAS's fp32 product at 8192² (4096² where the GPU has too little free memory), each the
//! best of a few repeats after a warm-up, as a limit is what the hardware *can* do.

use std::sync::Arc;

use cudarc::driver::CudaSlice;

use super::timing::GpuTimer;
use super::{CudaDevice, GpuError, GpuOrder, MemoryFraction};
use crate::device::gpu_limits::GpuLimits;

/// Bytes of each copy: past any cache, as PyTorch's and nvbench's bandwidth tests size them.
const COPY_BYTES: usize = 256 << 20;
/// Timed repeats of each copy and product; the best is kept.
const REPEATS: usize = 3;
/// Products per timed repeat.
const PRODUCTS: u32 = 3;
/// Launches per round and rounds of the driver's floor.
const FLOOR_LAUNCHES: u32 = 1000;
const FLOOR_ROUNDS: usize = 5;

/// Open a device of its own (within `cap`, the run's `--gpu-memory-fraction`), measure, close
/// it.
pub fn measure_limits(cap: Option<MemoryFraction>) -> Result<GpuLimits, GpuError> {
    let device = Arc::new(CudaDevice::open_unplanted(0, GpuOrder::Stream, cap)?);
    let limits = device.measure_limits();
    device.synchronize()?;
    limits
}

impl CudaDevice {
    fn measure_limits(self: &Arc<Self>) -> Result<GpuLimits, GpuError> {
        let floor = self.driver_floor(FLOOR_LAUNCHES, FLOOR_ROUNDS)?;
        let (h2d, d2h) = self.copy_bandwidths()?;
        let n = if self.free_memory().unwrap_or(0) > 4 * 3 * 8192 * 8192 * 2 {
            8192
        } else {
            4096
        };
        let sgemm_gflops = self.sgemm_rate(n)?;
        Ok(GpuLimits {
            launch_s: floor.launch_s,
            launch_alloc_free_s: Some(floor.launch_alloc_free_s),
            launch_alloc_free_event_s: Some(floor.launch_alloc_free_event_s),
            launch_and_wait_s: floor.launch_and_wait_s,
            graph_per_kernel_s: floor.graph_per_kernel_s,
            h2d_pinned_gbytes_per_s: h2d,
            d2h_pinned_gbytes_per_s: d2h,
            copy_bytes: COPY_BYTES as u64,
            sgemm_gflops,
            sgemm_size: n,
            method: format!(
                "launches: medians of {FLOOR_ROUNDS} rounds of {FLOOR_LAUNCHES} add_scalar \
                 launches on 2 floats; copies: {} MiB from/to pinned memory on the upload and \
                 copy streams; product: {PRODUCTS} cuBLAS sgemm a repeat; copies and products \
                 the best of {REPEATS} repeats on the GPU's clock (timing events)",
                COPY_BYTES >> 20
            ),
        })
    }

    /// Host→device and device→host bandwidth, pinned, in GB/s.
    fn copy_bandwidths(self: &Arc<Self>) -> Result<(f64, f64), GpuError> {
        self.bind()?;
        let len = COPY_BYTES / 4;
        let mut dev = self.alloc(len)?;
        self.fill(&mut dev, 1.0)?;
        let mut host = self.alloc_pinned(len)?;
        self.synchronize()?;
        let pinned = host.buf.as_mut().ok_or(GpuError::PinnedReleased)?;
        let up = GpuTimer::on(&self.upload)?;
        let h2d = best_rate(|| {
            up.start()?;
            self.upload.memcpy_htod(&*pinned, &mut dev)?;
            up.stop()?;
            up.elapsed_s()
        })?;
        let down = GpuTimer::on(&self.copy)?;
        let d2h = best_rate(|| {
            down.start()?;
            self.copy.memcpy_dtoh(&dev, &mut *pinned)?;
            down.stop()?;
            down.elapsed_s()
        })?;
        self.synchronize()?;
        let gb = COPY_BYTES as f64 / 1e9;
        Ok((gb / h2d, gb / d2h))
    }

    /// cuBLAS's fp32 rate at n×n, in GFLOP/s.
    fn sgemm_rate(self: &Arc<Self>, n: usize) -> Result<f64, GpuError> {
        let len = n * n;
        let (mut a, mut b): (CudaSlice<f32>, CudaSlice<f32>) = (self.alloc(len)?, self.alloc(len)?);
        self.fill_uniform(&mut a, 1)?;
        self.fill_uniform(&mut b, 2)?;
        let mut c = self.alloc(len)?;
        let timer = self.timer()?;
        let best = best_rate(|| {
            timer.start()?;
            for _ in 0..PRODUCTS {
                self.matmul(&a, &b, &mut c, (n, n, n))?;
            }
            timer.stop()?;
            timer.elapsed_s()
        })?;
        self.synchronize()?;
        let flops = 2.0 * (n as f64).powi(3) * f64::from(PRODUCTS);
        Ok(flops / best / 1e9)
    }
}

/// The shortest of [`REPEATS`] timings after one warm-up; an error or a time that is not a
/// positive number fails the probe rather than giving a figure.
fn best_rate(mut time: impl FnMut() -> Result<f64, GpuError>) -> Result<f64, GpuError> {
    time()?;
    let mut best = f64::INFINITY;
    for _ in 0..REPEATS {
        best = best.min(time()?);
    }
    if best.is_finite() && best > 0.0 {
        Ok(best)
    } else {
        Err(GpuError::NoTime("a GPU limit's timing"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_best_of_the_repeats_after_a_warm_up_is_kept() {
        let mut times = [9.0, 3.0, 2.0, 4.0].into_iter();
        let best = best_rate(|| Ok(times.next().unwrap_or(f64::NAN))).unwrap();
        assert_eq!(best, 2.0);
        let mut zero = [1.0, 0.0, 0.0, 0.0].into_iter();
        assert!(best_rate(|| Ok(zero.next().unwrap_or(f64::NAN))).is_err());
        let mut fails = 0;
        assert!(best_rate(|| {
            fails += 1;
            Err(GpuError::NoTime("test"))
        })
        .is_err());
        assert_eq!(fails, 1, "the first error ends the probe");
    }

    #[test]
    #[ignore = "needs a GPU"]
    fn gpu_limits_are_measured_and_plausible() {
        let l = measure_limits(None).expect("the GPU's limits");
        assert!(
            l.launch_s > 0.0 && l.launch_and_wait_s > l.launch_s,
            "{l:?}"
        );
        assert!(l.graph_per_kernel_s > 0.0, "{l:?}");
        for tier in [l.launch_alloc_free_s, l.launch_alloc_free_event_s] {
            assert!(tier.is_some_and(|s| s.is_finite() && s > 0.0), "{l:?}");
        }
        // PCIe 3 x16 moves about 12 GB/s, PCIe 5 x16 about 55: anything far outside that is a
        // broken timer, not a link.
        for bw in [l.h2d_pinned_gbytes_per_s, l.d2h_pinned_gbytes_per_s] {
            assert!((1.0..200.0).contains(&bw), "{l:?}");
        }
        assert!(l.sgemm_gflops > 1_000.0, "{l:?}");
    }
}
