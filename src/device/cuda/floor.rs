//! The driver's own floor for a tiny op, without any engine, in tiers that add one by one what
//! an engine op on the GPU does: the launch, the output's allocation and the previous output's
//! free, the ready event, and (for comparison) a host wait after each launch; beside them the
//! GPU's own time per kernel, from a CUDA graph that replays the launches with no host in the
//! loop. Every tier is per launch of `add_scalar` on a 2-element buffer, the median of several
//! rounds, on a stream warmed by a first round.

use std::sync::Arc;

use cudarc::driver::{sys, CudaSlice, CudaStream, PushKernelArg};

use super::ops::grid;
use super::timing::GpuTimer;
use super::{CudaDevice, GpuError};
use crate::device::Map;

/// Elements of the floor's buffers: the smallest op, so the kernel itself costs next to nothing.
const ELEMENTS: usize = 2;

/// The middle value of `xs` (the mean of the two middle ones for an even count); `None` when
/// empty or when any value is not finite.
fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || xs.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    })
}

/// Seconds per launch of each tier of the driver's floor.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DriverFloor {
    /// A bare launch on the compute stream: enqueued only, one wait at the end.
    pub launch_s: f64,
    /// A launch plus the stream-ordered allocation of its output and free of the previous
    /// one (`cuMemAllocAsync`/`cuMemFreeAsync` on the compute stream), as an engine op does.
    pub launch_alloc_free_s: f64,
    /// That plus a ready event recorded after the launch (what stream order records per op).
    pub launch_alloc_free_event_s: f64,
    /// A launch followed by a host wait for its event.
    pub launch_and_wait_s: f64,
    /// The GPU's own time per kernel: launches captured once as a CUDA graph and replayed,
    /// timed with timing events on the GPU's clock.
    pub graph_per_kernel_s: f64,
}

impl CudaDevice {
    /// Measure every tier of [`DriverFloor`]: `rounds` rounds (at least one) of `launches`
    /// launches each (at least one), after a warm-up round of each; the graph holds `launches`
    /// kernels and is replayed `rounds` times.
    pub fn driver_floor(&self, launches: u32, rounds: usize) -> Result<DriverFloor, GpuError> {
        let (launches, rounds) = (launches.max(1), rounds.max(1));
        let mut x = self.alloc(ELEMENTS)?;
        self.fill(&mut x, 1.0)?;
        let mut y = self.alloc(ELEMENTS)?;
        let per_launch = |elapsed: std::time::Duration| elapsed.as_secs_f64() / f64::from(launches);
        // The median of `rounds` timed rounds of `round`, after one untimed.
        let tier = |round: &mut dyn FnMut() -> Result<(), GpuError>| -> Result<f64, GpuError> {
            let mut times = Vec::with_capacity(rounds);
            for i in 0..=rounds {
                self.synchronize()?;
                let start = std::time::Instant::now();
                round()?;
                self.synchronize()?;
                if i > 0 {
                    times.push(per_launch(start.elapsed()));
                }
            }
            median(&times).ok_or(GpuError::NoTime("a tier of the driver's floor"))
        };
        let add = Map::AddScalar(1.0);
        let launch_s = tier(&mut || {
            for _ in 0..launches {
                self.map(add, &x, &mut y)?;
            }
            Ok(())
        })?;
        let launch_alloc_free_s = tier(&mut || {
            // Each output replaces the previous one, which is freed in stream order.
            let mut previous = None;
            for _ in 0..launches {
                let mut out = self.alloc(ELEMENTS)?;
                self.map(add, &x, &mut out)?;
                previous = Some(out);
            }
            drop(previous);
            Ok(())
        })?;
        let launch_alloc_free_event_s = tier(&mut || {
            let (mut previous, mut ready) = (None, None);
            for _ in 0..launches {
                let mut out = self.alloc(ELEMENTS)?;
                self.map(add, &x, &mut out)?;
                // The previous output's ready event goes back to the pool, as when an engine
                // op's output is rewritten.
                ready = Some(self.record_ready()?);
                previous = Some(out);
            }
            drop((previous, ready));
            Ok(())
        })?;
        let launch_and_wait_s = tier(&mut || {
            for _ in 0..launches {
                self.map(add, &x, &mut y)?;
                self.record_ready()?.synchronize()?;
            }
            Ok(())
        })?;
        let graph_per_kernel_s = self.graph_per_kernel(&x, &mut y, launches, rounds)?;
        Ok(DriverFloor {
            launch_s,
            launch_alloc_free_s,
            launch_alloc_free_event_s,
            launch_and_wait_s,
            graph_per_kernel_s,
        })
    }

    /// The GPU's time per kernel: `kernels` launches of `add_scalar` captured as one graph on
    /// a stream of its own (so nothing else the device does is captured), replayed `rounds`
    /// times after a warm-up replay, each replay timed with timing events on that stream.
    fn graph_per_kernel(
        &self,
        x: &CudaSlice<f32>,
        y: &mut CudaSlice<f32>,
        kernels: u32,
        rounds: usize,
    ) -> Result<f64, GpuError> {
        // x and y were written on the compute stream: done before another stream reads them.
        self.synchronize()?;
        // Creating and destroying a stream synchronizes (see `capture_guard`).
        let stream = {
            let _outside = super::capture_guard::outside_captures();
            self.ctx.new_stream()?
        };
        // The host's wait above orders the replays after x and y's allocation and writes, but
        // only a stream-ordered dependency says so to the driver's and compute-sanitizer's
        // view of stream-ordered memory (memcheck reported the graph's reads of x as "before
        // it is allocated" without it).
        self.record_ready()?.wait_on(&stream)?;
        let measured = self.replay_timed(&stream, x, y, kernels, rounds);
        // Whatever happened, nothing may still run on the stream once x and y can be freed.
        let drained = stream.synchronize();
        {
            let _outside = super::capture_guard::outside_captures();
            drop(stream);
        }
        let per_kernel = measured?;
        drained?;
        Ok(per_kernel)
    }

    fn replay_timed(
        &self,
        stream: &Arc<CudaStream>,
        x: &CudaSlice<f32>,
        y: &mut CudaSlice<f32>,
        kernels: u32,
        rounds: usize,
    ) -> Result<f64, GpuError> {
        let n = ELEMENTS as u64;
        // No synchronizing call of another thread may start during the capture, or it breaks
        // both (`capture_guard`); thread-local: only this thread's own calls are restricted.
        let capture = super::capture_guard::capturing();
        stream
            .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(GpuError::CaptureStart)?;
        let enqueued = (0..kernels).try_for_each(|_| {
            let mut launch = stream.launch_builder(self.kernels.add_scalar());
            let s = 1.0f32;
            launch.arg(x).arg(&mut *y).arg(&s).arg(&n);
            // SAFETY: (x, y, s, n) is add_scalar's signature in elementwise.cu, and both
            // buffers hold n f32 that nothing else uses while the graph exists.
            unsafe { launch.launch(grid(n)) }.map(|_| ())
        });
        // End the capture whatever happened, or the stream stays unusable.
        let ended = stream.end_capture(sys::CUgraphInstantiate_flags(0));
        drop(capture);
        enqueued?;
        let graph = match ended {
            Ok(Some(graph)) => graph,
            Ok(None) => return Err(GpuError::EmptyCapture),
            Err(e) => return Err(GpuError::Instantiate(e)),
        };
        let timer = GpuTimer::on(stream)?;
        // Warm-up: the first replay uploads the graph.
        graph.launch()?;
        stream.synchronize()?;
        let mut per_kernel = Vec::with_capacity(rounds);
        for _ in 0..rounds {
            timer.start()?;
            graph.launch()?;
            timer.stop()?;
            per_kernel.push(timer.elapsed_s()? / f64::from(kernels));
        }
        median(&per_kernel).ok_or(GpuError::NoTime("the graph's replays"))
    }
}

#[cfg(test)]
mod tests {
    use super::super::timing::test_gpu;
    use super::median;

    #[test]
    fn the_median_of_rounds() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, f64::INFINITY]), None);
    }

    #[test]
    #[ignore = "needs a GPU"]
    fn gpu_driver_floor_tiers_are_positive_and_ordered_loosely() {
        let f = test_gpu().driver_floor(2_000, 5).expect("measured");
        for (tier, s) in [
            ("launch", f.launch_s),
            ("launch + alloc/free", f.launch_alloc_free_s),
            ("launch + alloc/free + event", f.launch_alloc_free_event_s),
            ("launch and wait", f.launch_and_wait_s),
            ("graph per kernel", f.graph_per_kernel_s),
        ] {
            assert!(s.is_finite() && s > 0.0, "{tier}: {s} ({f:?})");
            // Tiny kernels: nothing here takes a millisecond per launch.
            assert!(s < 1e-3, "{tier}: {s} ({f:?})");
        }
        // A replayed graph spares the GPU the host's launch path; a wait costs a round trip.
        assert!(f.graph_per_kernel_s < f.launch_s, "{f:?}");
        assert!(f.launch_and_wait_s > f.launch_s, "{f:?}");
    }
}
