//! The GPU's limits, measured by parbench itself beside the CPU's (`crate::machine::limits`):
//! what one tiny kernel costs the driver (a bare launch; with its output's allocation and the
//! previous output's free; with a ready event as well; a launch and a wait; the GPU's own time
//! per kernel in a CUDA graph), the pinned-memory copy bandwidth in each direction, and
//! cuBLAS's fp32 matrix-product rate at a large size. A GPU figure of a scenario means little
//! without them: an `async` op of 5 µs is 1.5× a bare launch here, a copy of 50 GB/s is 0.9×
//! what the link gives.
//!
//! Measured once per process ([`gpu_limits`]), on a device of its own opened for the purpose
//! and closed after, in well under a second on an H100-class GPU.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::MemoryFraction;
use crate::machine::Probe;
use crate::units::{human_bytes, human_gbytes_per_s, human_time};

/// What the GPU can do, and how each figure was taken.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuLimits {
    /// Seconds per bare launch of a tiny kernel (enqueued only, one wait at the end).
    pub launch_s: f64,
    /// Seconds per launch plus its output's stream-ordered allocation and the previous
    /// output's free, as an engine op does; `None` in reports written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_alloc_free_s: Option<f64>,
    /// That plus a ready event recorded after the launch; `None` in reports written before it
    /// was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch_alloc_free_event_s: Option<f64>,
    /// Seconds per launch followed by a host wait for it.
    pub launch_and_wait_s: f64,
    /// The GPU's own seconds per tiny kernel: a CUDA graph of them, timed on the GPU's clock.
    pub graph_per_kernel_s: f64,
    /// Host→device copy from pinned memory, in GB/s (10^9 bytes per second).
    pub h2d_pinned_gbytes_per_s: f64,
    /// Device→host copy into pinned memory, in GB/s.
    pub d2h_pinned_gbytes_per_s: f64,
    pub copy_bytes: u64,
    /// cuBLAS fp32 matrix product (TF32 off), in GFLOP/s.
    pub sgemm_gflops: f64,
    /// The product's size n (n×n by n×n).
    pub sgemm_size: usize,
    /// How the figures were taken.
    pub method: String,
}

impl GpuLimits {
    /// One line per limit, as `parbench devices --probe` prints them.
    pub fn lines(&self) -> Vec<String> {
        let tiers = match (self.launch_alloc_free_s, self.launch_alloc_free_event_s) {
            (Some(alloc), Some(event)) => format!(
                ", {} with its output's allocation and the previous one's free, {} with a ready \
                 event as well",
                human_time(alloc),
                human_time(event)
            ),
            _ => String::new(),
        };
        vec![
            format!(
                "GPU kernel launch: {} bare{tiers}, {} with a wait for it, {} of the GPU's own \
                 time per kernel (a CUDA graph)",
                human_time(self.launch_s),
                human_time(self.launch_and_wait_s),
                human_time(self.graph_per_kernel_s)
            ),
            format!(
                "GPU copies, pinned host memory: {} host→device, {} device→host ({} each)",
                human_gbytes_per_s(self.h2d_pinned_gbytes_per_s),
                human_gbytes_per_s(self.d2h_pinned_gbytes_per_s),
                human_bytes(self.copy_bytes)
            ),
            format!(
                "GPU fp32 matrix product (cuBLAS, TF32 off): {:.1} TFLOP/s at {n}×{n}",
                self.sgemm_gflops / 1e3,
                n = self.sgemm_size
            ),
        ]
    }
}

/// Lines for a GPU probe: its figures, or why there are none.
pub fn probe_lines(probe: &Probe<GpuLimits>) -> Vec<String> {
    match probe {
        Probe::Measured(l) => l.lines(),
        Probe::NotMeasured(why) => vec![format!("GPU limits: not measured ({why})")],
    }
}

static MEMORY_CAP: OnceLock<Option<MemoryFraction>> = OnceLock::new();

/// The `--gpu-memory-fraction` this process runs under: the limits' probe stays within it too
/// (an allocation past it fails the probe, which then says so). Set before [`gpu_limits`] is
/// first called; later calls change nothing.
pub fn keep_within(cap: Option<MemoryFraction>) {
    let _ = MEMORY_CAP.set(cap);
}

/// This process's GPU limits: measured on the first call where a GPU is usable, the same
/// answer after; `None` where there is no usable GPU.
pub fn gpu_limits() -> Option<&'static Probe<GpuLimits>> {
    static LIMITS: OnceLock<Option<Probe<GpuLimits>>> = OnceLock::new();
    LIMITS.get_or_init(measure).as_ref()
}

#[cfg(feature = "cuda")]
fn measure() -> Option<Probe<GpuLimits>> {
    if !super::cuda::probe().available {
        return None;
    }
    let cap = MEMORY_CAP.get().copied().flatten();
    Some(Probe::from_result(
        "the GPU probe",
        super::cuda::measure_limits(cap),
    ))
}

#[cfg(not(feature = "cuda"))]
fn measure() -> Option<Probe<GpuLimits>> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> GpuLimits {
        GpuLimits {
            launch_s: 3.4e-6,
            launch_alloc_free_s: Some(4.0e-6),
            launch_alloc_free_event_s: Some(4.4e-6),
            launch_and_wait_s: 9.04e-6,
            graph_per_kernel_s: 1.2e-6,
            h2d_pinned_gbytes_per_s: 55.1,
            d2h_pinned_gbytes_per_s: 54.9,
            copy_bytes: 256 << 20,
            sgemm_gflops: 51_234.0,
            sgemm_size: 8192,
            method: String::new(),
        }
    }

    #[test]
    fn each_limit_is_one_line_in_its_unit() {
        assert_eq!(
            limits().lines(),
            [
                "GPU kernel launch: 3.400 µs bare, 4.000 µs with its output's allocation and the \
                 previous one's free, 4.400 µs with a ready event as well, 9.040 µs with a wait \
                 for it, 1.200 µs of the GPU's own time per kernel (a CUDA graph)",
                "GPU copies, pinned host memory: 55.1 GB/s host→device, 54.9 GB/s device→host \
                 (256.0 MiB each)",
                "GPU fp32 matrix product (cuBLAS, TF32 off): 51.2 TFLOP/s at 8192×8192",
            ]
        );
        let none = Probe::<GpuLimits>::NotMeasured("no GPU".into());
        assert_eq!(probe_lines(&none), ["GPU limits: not measured (no GPU)"]);
    }

    #[test]
    fn limits_written_before_the_allocation_tiers_still_read_and_print() {
        let mut json = serde_json::to_value(limits()).unwrap();
        let fields = json.as_object_mut().unwrap();
        fields.remove("launch_alloc_free_s");
        fields.remove("launch_alloc_free_event_s");
        let old: GpuLimits = serde_json::from_value(json).unwrap();
        assert_eq!(old.launch_alloc_free_s, None);
        assert_eq!(
            old.lines()[0],
            "GPU kernel launch: 3.400 µs bare, 9.040 µs with a wait for it, 1.200 µs of the GPU's \
             own time per kernel (a CUDA graph)"
        );
    }

    #[test]
    fn limits_round_trip_through_json() {
        let p = Probe::Measured(limits());
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(serde_json::from_str::<Probe<GpuLimits>>(&json).unwrap(), p);
    }

    #[test]
    fn limits_are_measured_exactly_where_a_gpu_is_usable() {
        let usable = crate::device::discovery::probe_gpu().available;
        assert_eq!(gpu_limits().is_some(), usable);
    }
}
