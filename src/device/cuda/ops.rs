//! The GPU's own kernels and CUDA graphs: what the chapter needs beyond cuBLAS and cuRAND.
//!
//! - Element-wise kernels (`y = x + s`, `y = s·x`, ReLU, a layer's bias) come from
//!   `kernels/elementwise.cu`, compiled ahead of time to PTX (`kernels/elementwise.ptx`) and
//!   JIT-compiled by the driver when the device opens: no CUDA toolkit or NVRTC is needed to
//!   build or run parbench.
//! - [`GpuGraph`] is a CUDA graph captured from the compute stream (stream capture) and
//!   replayed with one launch: the GPU analogue of MXNet's cached op after `hybridize()`.

use std::cell::RefCell;
use std::sync::{Arc, Mutex};

use cudarc::driver::{
    sys, CudaContext, CudaFunction, CudaGraph, CudaSlice, CudaStream, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::Ptx;

use super::{CudaDevice, GpuError};
use crate::device::Map;

/// The PTX of `kernels/elementwise.cu` (ISA 7.5, sm_75: CUDA 12 and 13 drivers load it).
pub const ELEMENTWISE_PTX: &str = include_str!("kernels/elementwise.ptx");

/// Threads per block of every element-wise launch.
const BLOCK: u32 = 256;
/// Most blocks per launch: the kernels loop over the rest (grid stride).
const MAX_BLOCKS: u64 = 1 << 16;

/// The module of `ptx` loaded into `ctx`, and a lookup of its kernels by name.
pub(super) fn load_ptx(
    ctx: &Arc<CudaContext>,
    ptx: &str,
) -> Result<impl Fn(&str) -> Result<CudaFunction, GpuError>, GpuError> {
    let module = ctx
        .load_module(Ptx::from_src(ptx))
        .map_err(GpuError::LoadKernels)?;
    Ok(move |name: &str| {
        module
            .load_function(name)
            .map_err(|source| GpuError::MissingKernel {
                name: name.into(),
                source,
            })
    })
}

/// The loaded element-wise kernels of one context.
pub(crate) struct Kernels {
    add_scalar: CudaFunction,
    scale: CudaFunction,
    relu: CudaFunction,
    add_row: CudaFunction,
}

impl Kernels {
    /// Load the PTX into `ctx` (the driver compiles it for the GPU at hand).
    pub(crate) fn load(ctx: &Arc<CudaContext>) -> Result<Kernels, GpuError> {
        let get = load_ptx(ctx, ELEMENTWISE_PTX)?;
        Ok(Kernels {
            add_scalar: get("add_scalar")?,
            scale: get("scale")?,
            relu: get("relu")?,
            add_row: get("add_row")?,
        })
    }

    /// `y = x + s`: the kernel the driver's floor (`floor.rs`) launches on streams of its own.
    pub(super) fn add_scalar(&self) -> &CudaFunction {
        &self.add_scalar
    }
}

/// Grid for `n` elements: one thread per element up to [`MAX_BLOCKS`] blocks.
pub(super) fn grid(n: u64) -> LaunchConfig {
    let blocks = n.div_ceil(u64::from(BLOCK)).clamp(1, MAX_BLOCKS) as u32;
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

thread_local! {
    /// The stream this thread is capturing a graph on, if any: while it is set, this thread's
    /// launches go to it instead of the compute stream (see [`CudaDevice::capture`]).
    static CAPTURING: RefCell<Option<Arc<CudaStream>>> = const { RefCell::new(None) };
}

/// Clears [`CAPTURING`] when the capture ends, however it ends.
struct CaptureScope;

impl CaptureScope {
    fn enter(stream: Arc<CudaStream>) -> CaptureScope {
        CAPTURING.with(|c| *c.borrow_mut() = Some(stream));
        CaptureScope
    }
}

impl Drop for CaptureScope {
    fn drop(&mut self) {
        CAPTURING.with(|c| *c.borrow_mut() = None);
    }
}

impl CudaDevice {
    /// Call `f` with the stream this thread's kernels go to: the compute stream, or the side
    /// stream of a capture this thread is running on this device.
    pub(super) fn with_launch_stream<R>(&self, f: impl FnOnce(&Arc<CudaStream>) -> R) -> R {
        CAPTURING.with(|c| match &*c.borrow() {
            Some(side) if Arc::ptr_eq(side.context(), &self.ctx) => f(side),
            _ => f(&self.compute),
        })
    }

    /// Enqueue `y = f(x)` on the compute stream (`x` and `y` of one length).
    pub fn map(&self, f: Map, x: &CudaSlice<f32>, y: &mut CudaSlice<f32>) -> Result<(), GpuError> {
        if x.len() != y.len() {
            return Err(GpuError::Lengths(format!(
                "map: {} inputs for {} outputs",
                x.len(),
                y.len()
            )));
        }
        self.bind()?;
        let n = x.len() as u64;
        let (func, s) = match f {
            Map::AddScalar(s) => (&self.kernels.add_scalar, Some(s)),
            Map::Scale(s) => (&self.kernels.scale, Some(s)),
            Map::Relu => (&self.kernels.relu, None),
        };
        self.with_launch_stream(|stream| {
            let mut launch = stream.launch_builder(func);
            launch.arg(x).arg(y);
            if let Some(s) = &s {
                launch.arg(s);
            }
            launch.arg(&n);
            // SAFETY: the argument list matches the kernel's signature in elementwise.cu
            // (x, y[, s], n), both buffers hold n f32, and the engine gives this op `y` alone.
            unsafe { launch.launch(grid(n)) }?;
            Ok(())
        })
    }

    /// Enqueue `y = x + b` on the compute stream: the 1×`cols` row `b` added to every row of
    /// the row-major `rows`×`cols` `x`.
    pub fn add_row(
        &self,
        x: &CudaSlice<f32>,
        b: &CudaSlice<f32>,
        y: &mut CudaSlice<f32>,
        (rows, cols): (usize, usize),
    ) -> Result<(), GpuError> {
        let n = rows
            .checked_mul(cols)
            .ok_or_else(|| GpuError::Lengths("add_row: size overflows usize".into()))?;
        if x.len() != n || y.len() != n || b.len() != cols {
            return Err(GpuError::Lengths(format!(
                "add_row: {rows}×{cols} needs {n} inputs and outputs and {cols} biases, got {}, {} and {}",
                x.len(),
                y.len(),
                b.len()
            )));
        }
        self.bind()?;
        let (rows, cols) = (rows as u64, cols as u64);
        self.with_launch_stream(|stream| {
            let mut launch = stream.launch_builder(&self.kernels.add_row);
            launch.arg(x).arg(b).arg(y).arg(&rows).arg(&cols);
            // SAFETY: (x, b, y, rows, cols) as in elementwise.cu; the lengths were checked above.
            unsafe { launch.launch(grid(rows * cols)) }?;
            Ok(())
        })
    }

    /// Enqueue a host→device copy on the compute stream. From pageable memory the driver
    /// stages `src` before returning, so the caller may free it right after.
    pub fn upload(&self, src: &[f32], dst: &mut CudaSlice<f32>) -> Result<(), GpuError> {
        if src.len() != dst.len() {
            return Err(GpuError::Lengths(format!(
                "upload: {} values for {} slots",
                src.len(),
                dst.len()
            )));
        }
        self.bind()?;
        Ok(self.compute.memcpy_htod(src, dst)?)
    }

    /// Enqueue a kernel that reads address 0: a sticky fault, reported at the next wait
    /// (planted on purpose, see `fault`).
    pub(super) fn plant_fault(&self) -> Result<(), GpuError> {
        self.bind()?;
        let null: u64 = 0;
        let n: u64 = 2;
        let mut launch = self.compute.launch_builder(&self.kernels.add_scalar);
        launch.arg(&null).arg(&null).arg(&1.0f32).arg(&n);
        // SAFETY: deliberately not safe for the GPU: the kernel dereferences a null device
        // pointer and faults there. The host's memory is untouched: the arguments are plain
        // values of the kernel's parameter sizes (two 8-byte pointers, an f32, a u64).
        unsafe { launch.launch(grid(n)) }?;
        Ok(())
    }

    /// Capture the kernels and cuBLAS calls `enqueue` makes into a CUDA graph instead of
    /// running them. `enqueue` must only launch work on buffers allocated before the capture.
    ///
    /// The capture runs on a side stream forked from the compute stream, as PyTorch's graph
    /// capture does: other threads go on enqueueing onto the compute stream meanwhile (a
    /// tensor dropped elsewhere frees its memory there with `cuMemFreeAsync`), and none of
    /// that may land in the graph or break the capture. This thread's launches are sent to
    /// the side stream while it captures ([`with_launch_stream`](Self::with_launch_stream));
    /// the graph is replayed on the compute stream.
    pub fn capture(
        self: &Arc<Self>,
        enqueue: impl FnOnce(&CudaDevice) -> Result<(), GpuError>,
    ) -> Result<GpuGraph, GpuError> {
        self.bind()?;
        let _capture = super::capture_guard::capturing();
        let side = self.compute.fork()?;
        // Thread-local: only this thread's unsafe calls are refused during the capture, the
        // device's pollers and other lanes go on.
        side.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(GpuError::CaptureStart)?;
        let enqueued = {
            let _scope = CaptureScope::enter(side.clone());
            enqueue(self)
        };
        // End the capture whatever happened, or the stream stays unusable. Auto-free: memory a
        // captured call allocated in the graph (cuBLAS's workspace, from CUDA 12.2, when it
        // needs one) is freed before each relaunch, which would otherwise fail.
        let ended = side.end_capture(
            sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH,
        );
        enqueued?;
        match ended {
            Ok(Some(graph)) => Ok(GpuGraph {
                graph: Mutex::new(SendGraph(graph)),
                device: self.clone(),
            }),
            Ok(None) => Err(GpuError::EmptyCapture),
            Err(e) => Err(GpuError::Instantiate(e)),
        }
    }
}

/// cudarc's graph holds raw handles and is not `Send`; it is only used under a mutex.
struct SendGraph(CudaGraph);
// SAFETY: CUDA graph handles may be used from any thread as long as calls on one graph do not
// overlap (CUDA's graph thread-safety rules); the mutex around it guarantees that.
unsafe impl Send for SendGraph {}

/// A captured CUDA graph of the device's compute stream.
pub struct GpuGraph {
    graph: Mutex<SendGraph>,
    device: Arc<CudaDevice>,
}

impl GpuGraph {
    /// Enqueue one replay on the compute stream (not the side stream it was captured on, so
    /// that it is ordered with everything else the device does).
    pub fn launch(&self) -> Result<(), GpuError> {
        self.device.bind()?;
        let graph = self
            .graph
            .lock()
            .map_err(|_| GpuError::Poisoned("CUDA graph"))?;
        // SAFETY: the executable graph is live while `graph` is (held under the lock), and the
        // compute stream belongs to the context the graph was captured in.
        unsafe { sys::cuGraphLaunch(graph.0.cu_graph_exec(), self.device.compute.cu_stream()) }
            .result()?;
        Ok(())
    }

    /// The device the graph replays on.
    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.device
    }
}

/// Assert that `ptx` declares each kernel with its number of parameters, in ISA 7.5 for
/// sm_75: without a GPU, this at least pins the entry points and the ISA the loader relies on.
#[cfg(test)]
pub(super) fn assert_declares(ptx: &str, kernels: &[(&str, usize)]) {
    for &(name, params) in kernels {
        let entry = format!(".visible .entry {name}(");
        let start = ptx
            .find(&entry)
            .unwrap_or_else(|| panic!("{name} is not in the PTX"));
        let header = &ptx[start..];
        let header = &header[..header.find(')').expect("closing parenthesis")];
        assert_eq!(header.matches(".param").count(), params, "{name}");
    }
    assert!(ptx.contains("\n.version 7.5\n"));
    assert!(ptx.contains("\n.target sm_75\n"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ptx_declares_every_kernel_with_its_parameters() {
        // The driver is the only PTX compiler parbench has at run time; without a GPU this
        // at least pins the entry points and the ISA the loader relies on.
        assert_declares(
            ELEMENTWISE_PTX,
            &[("add_scalar", 4), ("scale", 4), ("relu", 3), ("add_row", 5)],
        );
    }

    #[test]
    fn the_grid_covers_small_and_huge_sizes() {
        assert_eq!(grid(0).grid_dim.0, 1);
        assert_eq!(grid(1).grid_dim.0, 1);
        assert_eq!(grid(256).grid_dim.0, 1);
        assert_eq!(grid(257).grid_dim.0, 2);
        assert_eq!(grid(u64::MAX).grid_dim.0, MAX_BLOCKS as u32);
    }
}
