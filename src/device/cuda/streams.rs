//! `k` compute streams of one GPU, beside the device's own: what `deps --device cuda --streams
//! k` spreads a DAG's ops over (automatic parallelism on one device).
//!
//! Each stream has a cuBLAS handle of its own, so products on different streams never share a
//! handle's lock. Ops on one stream run in the order they were enqueued; an op that touches a
//! buffer another stream used waits for that stream's event on the device
//! (`cuStreamWaitEvent`), by the rule in [`StreamOrder`]: a read after another stream's write,
//! a write after another stream's write or reads. Every op records one (pooled) event after its
//! work on its stream, which is what later ops on other streams wait for. With `k = 1` nothing
//! ever waits and the code path is the same.
//!
//! The ops are the GPU equivalents of `deps`' program: a copy (`cuMemcpyDtoDAsync`), a scaled
//! product `c = s · (a · b)` (cuBLAS sgemm, row-major as in [`CudaDevice::matmul`], the scale
//! as its alpha) and an average `c = (x + y) / 2` (cuBLAS sgeam, which may write in place over
//! `x` or `y`). parbench's own element-wise kernels are all unary, so the two-operand average
//! goes through cuBLAS.
//!
//! Buffers come from the device's memory pool (allocated and uploaded on its compute stream,
//! which is outside the `k`: the first op on any stream waits for that). A [`StreamMatrix`]'s
//! memory goes back on that compute stream after it waits, on the device, for every event the
//! matrix still holds; a read back waits, on the device, for the last write's event.

use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::cublas::result::CublasError;
use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublas::CudaBlas;
use cudarc::driver::{result, sys, CudaContext, CudaSlice, CudaStream, DevicePtr, DriverError};

use super::device::row_major_gemm;
use super::events::{CompletionEvent, EventPool};
use super::probe::quietly;
use super::{make_current, CudaDevice, GpuError};
use crate::device::stream_order::StreamOrder;

/// Why an op on the compute streams could not be enqueued.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    #[error(transparent)]
    Gpu(#[from] GpuError),
    /// An op failed (or a wait for one did): the engine's error.
    #[error(transparent)]
    Engine(#[from] crate::engine::EngineError),
    #[error("no compute stream {stream}: the device has {streams}")]
    NoStream { stream: usize, streams: usize },
    /// Operands whose shapes the op cannot combine.
    #[error("{0}")]
    Shapes(String),
    #[error("cuBLAS sgemm: {0}")]
    Sgemm(#[source] CublasError),
    #[error("cuBLAS sgeam: {0}")]
    Sgeam(#[source] CublasError),
}

impl From<DriverError> for StreamError {
    fn from(e: DriverError) -> StreamError {
        StreamError::Gpu(e.into())
    }
}

/// An op the compute streams run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StreamOp {
    /// `out = x`.
    Copy,
    /// `out = scale · (x · y) + shift`, row-major (`out` must be neither input): `out` is
    /// filled with `shift` on the op's stream and cuBLAS adds the scaled product to it
    /// (`beta = 1`), so the shift costs one memset, not another kernel over `out`.
    Product { scale: f32, shift: f32 },
    /// `out = (x + y) / 2`; `out` may be `x` or `y` (in place).
    Average,
}

impl StreamOp {
    /// The op's name in traces.
    pub fn name(self) -> &'static str {
        match self {
            StreamOp::Copy => "copy",
            StreamOp::Product { .. } => "product",
            StreamOp::Average => "average",
        }
    }
}

/// The markers every op leaves on the buffers it touches: its event on its stream.
type Marker = Arc<CompletionEvent>;

/// `k` compute streams of one GPU, each with its own cuBLAS handle.
pub struct ComputeStreams {
    dev: Arc<CudaDevice>,
    streams: Vec<Arc<CudaStream>>,
    /// `ManuallyDrop`: cudarc's drop of a handle unwraps; see `Drop`.
    blas: ManuallyDrop<Vec<Mutex<CudaBlas>>>,
    events: Arc<EventPool>,
    /// Event waits enqueued so far (one per event an op waited for on another stream).
    waits: AtomicU64,
}

impl Drop for ComputeStreams {
    fn drop(&mut self) {
        let _ = self.synchronize();
        // Destroying handles and streams breaks a capture in progress on another thread.
        let _outside = super::capture_guard::outside_captures();
        // SAFETY: taken exactly once, here, and never used again.
        let blas = unsafe { ManuallyDrop::take(&mut self.blas) };
        if std::thread::panicking() {
            // cudarc's drops unwrap; a second panic while unwinding would abort the process.
            std::mem::forget(blas);
        } else {
            let _ = quietly(move || drop(blas));
        }
        drop(std::mem::take(&mut self.streams));
    }
}

impl ComputeStreams {
    /// `k` (at least 1) new non-blocking streams on `dev`'s context.
    pub fn open(dev: &Arc<CudaDevice>, k: usize) -> Result<ComputeStreams, GpuError> {
        dev.bind()?;
        // Creating streams and handles breaks a capture in progress on another thread.
        let _outside = super::capture_guard::outside_captures();
        let mut streams = Vec::with_capacity(k);
        let mut blas = Vec::with_capacity(k);
        for _ in 0..k.max(1) {
            let stream = dev.ctx.new_stream()?;
            let handle = CudaBlas::new(stream.clone()).map_err(GpuError::Blas)?;
            super::device::fp32_math(&handle)?;
            blas.push(Mutex::new(handle));
            streams.push(stream);
        }
        Ok(ComputeStreams {
            dev: dev.clone(),
            streams,
            blas: ManuallyDrop::new(blas),
            events: Arc::default(),
            waits: AtomicU64::new(0),
        })
    }

    /// The number of streams.
    pub fn len(&self) -> usize {
        self.streams.len()
    }

    /// Always false: there is at least one stream.
    pub fn is_empty(&self) -> bool {
        self.streams.is_empty()
    }

    /// The device the streams belong to.
    pub fn device(&self) -> &Arc<CudaDevice> {
        &self.dev
    }

    /// Event waits enqueued so far: how often an op waited for another stream.
    pub fn waits(&self) -> u64 {
        self.waits.load(Ordering::Relaxed)
    }

    /// A `rows`×`cols` matrix holding `values`, uploaded on the device's compute stream.
    pub fn upload(
        &self,
        values: &[f32],
        (rows, cols): (usize, usize),
    ) -> Result<StreamMatrix, StreamError> {
        if rows.checked_mul(cols) != Some(values.len()) {
            return Err(StreamError::Shapes(format!(
                "{} values for a {rows}×{cols} matrix",
                values.len()
            )));
        }
        self.dev.bind()?;
        let mut slice = self.dev.alloc(values.len())?;
        self.dev.upload(values, &mut slice)?;
        self.matrix(slice, (rows, cols))
    }

    /// A `rows`×`cols` matrix whose values the first op that writes it sets.
    pub fn empty(&self, (rows, cols): (usize, usize)) -> Result<StreamMatrix, StreamError> {
        let len = rows
            .checked_mul(cols)
            .ok_or_else(|| StreamError::Shapes(format!("a {rows}×{cols} matrix overflows")))?;
        self.dev.bind()?;
        let slice = self.dev.alloc(len)?;
        self.matrix(slice, (rows, cols))
    }

    /// Wrap a buffer allocated (and maybe written) on the device's compute stream.
    fn matrix(
        &self,
        slice: CudaSlice<f32>,
        shape: (usize, usize),
    ) -> Result<StreamMatrix, StreamError> {
        let ready = self.dev.record_ready()?;
        let (ptr, _) = slice.device_ptr(&self.dev.compute);
        Ok(StreamMatrix {
            ctx: self.dev.ctx.clone(),
            ptr,
            shape,
            order: Mutex::new(StreamOrder::written_outside(Arc::new(ready))),
            slice: Some(slice),
        })
    }

    /// Enqueue `op` on stream `stream`: `out = op(inputs)`, after what [`StreamOrder`] says it
    /// must wait for. The caller (the engine) guarantees that no other op writes an input or
    /// touches `out` meanwhile. The context must be current on this thread.
    pub fn enqueue(
        &self,
        stream: usize,
        op: StreamOp,
        inputs: &[&StreamMatrix],
        out: &StreamMatrix,
    ) -> Result<(), StreamError> {
        let s = self.streams.get(stream).ok_or(StreamError::NoStream {
            stream,
            streams: self.len(),
        })?;
        // Checked before anything is enqueued.
        let launch = Launch::of(op, inputs, out)?;
        // The inputs other than `out` (whose write covers its read), each once.
        let mut reads: Vec<&StreamMatrix> = Vec::with_capacity(inputs.len());
        for &x in inputs {
            if !std::ptr::eq(x, out) && !reads.iter().any(|r| std::ptr::eq(*r, x)) {
                reads.push(x);
            }
        }
        for x in &reads {
            if let Some(e) = x.order().before_read(stream) {
                e.wait_on(s)?;
                self.waits.fetch_add(1, Ordering::Relaxed);
            }
        }
        {
            let order = out.order();
            for e in order.before_write(stream) {
                e.wait_on(s)?;
                self.waits.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.launch(stream, s, launch)?;
        let done = Arc::new(CompletionEvent::record_pooled(s, &self.events)?);
        for x in &reads {
            x.order().read(stream, done.clone());
        }
        out.order().written(stream, done);
        Ok(())
    }

    fn launch(&self, stream: usize, s: &CudaStream, launch: Launch) -> Result<(), StreamError> {
        match launch {
            Launch::Copy { src, dst, bytes } => {
                // SAFETY: both addresses hold `bytes` bytes of live allocations (checked by
                // `Launch::of`), ordered on this stream by the waits above.
                unsafe { result::memcpy_dtod_async(dst, src, bytes, s.cu_stream()) }?;
            }
            Launch::Product {
                a,
                b,
                c,
                dims,
                scale,
                shift,
            } => {
                let mut cfg = row_major_gemm(dims)?;
                cfg.alpha = scale;
                if shift != 0.0 {
                    cfg.beta = 1.0;
                    // SAFETY: c holds m·n live f32 elements (checked by `Launch::of`), ordered
                    // on this stream by the waits above; a 32-bit memset writes `shift`'s bits
                    // into each of them.
                    unsafe {
                        sys::cuMemsetD32Async(c, shift.to_bits(), dims.0 * dims.2, s.cu_stream())
                    }
                    .result()?;
                }
                let blas = self.blas(stream)?;
                // SAFETY: a is m·k, b k·n and c m·n live f32 elements (checked by
                // `Launch::of`); c is neither input; the handle's stream is `s`. Row-major as
                // in `CudaDevice::matmul`: b is passed first.
                unsafe {
                    cudarc::cublas::result::sgemm(
                        *blas.handle(),
                        cfg.transa,
                        cfg.transb,
                        cfg.m,
                        cfg.n,
                        cfg.k,
                        &cfg.alpha,
                        b as *const f32,
                        cfg.lda,
                        a as *const f32,
                        cfg.ldb,
                        &cfg.beta,
                        c as *mut f32,
                        cfg.ldc,
                    )
                }
                .map_err(StreamError::Sgemm)?;
            }
            Launch::Average {
                x,
                y,
                c,
                rows,
                cols,
            } => {
                let dim = |v: usize| i32::try_from(v).map_err(|_| GpuError::TooLarge(v));
                let (r, k) = (dim(rows)?, dim(cols)?);
                let half = 0.5f32;
                let blas = self.blas(stream)?;
                // SAFETY: x, y and c are rows·cols live f32 elements (checked by
                // `Launch::of`); cuBLAS allows c to be x or y with the same leading dimension
                // and no transposition (in place). The handle's stream is `s`.
                unsafe {
                    cudarc::cublas::sys::cublasSgeam(
                        *blas.handle(),
                        cublasOperation_t::CUBLAS_OP_N,
                        cublasOperation_t::CUBLAS_OP_N,
                        k,
                        r,
                        &half,
                        x as *const f32,
                        k,
                        &half,
                        y as *const f32,
                        k,
                        c as *mut f32,
                        k,
                    )
                }
                .result()
                .map_err(StreamError::Sgeam)?;
            }
        }
        Ok(())
    }

    fn blas(&self, stream: usize) -> Result<MutexGuard<'_, CudaBlas>, GpuError> {
        self.blas
            .get(stream)
            .ok_or(GpuError::Poisoned("cuBLAS handle of a compute stream"))?
            .lock()
            .map_err(|_| GpuError::Poisoned("cuBLAS handle of a compute stream"))
    }

    /// Block until `m`'s last write is done on the GPU (an op-by-op wait: call after the
    /// engine says the op that writes it has run).
    pub fn wait_written(&self, m: &StreamMatrix) -> Result<(), GpuError> {
        self.dev.bind()?;
        if let Some(e) = m.order().last_write() {
            e.synchronize()?;
        }
        Ok(())
    }

    /// `m`'s values, read back once its last write is done (call after the engine says the
    /// op that writes it has run).
    ///
    /// The copy runs on the device's copy stream, which is none of the `k`: it waits on the
    /// device for the last write's event (an op's on one of the streams, or the allocation and
    /// upload's on the compute stream), not only on the host. A host wait alone orders the
    /// copy after the write in time but in no stream order, which is what memcheck's
    /// stream-ordered race tracking reports as a use before allocation.
    pub fn read(&self, m: &StreamMatrix) -> Result<Vec<f32>, GpuError> {
        self.dev.bind()?;
        let slice = m.slice.as_ref().ok_or(GpuError::PinnedReleased)?;
        let ready = m.order().last_write().cloned();
        // Blocking: the copy stream is synchronized before the values are returned, so the
        // read needs no marker of its own for later writers.
        self.dev.read_back(slice, ready.as_deref())
    }

    /// Wait for every stream (what `wait_all` adds for them).
    pub fn synchronize(&self) -> Result<(), GpuError> {
        self.dev.bind()?;
        for s in &self.streams {
            s.synchronize()?;
        }
        Ok(())
    }
}

/// An op's operands, checked, as device addresses.
enum Launch {
    Copy {
        src: sys::CUdeviceptr,
        dst: sys::CUdeviceptr,
        bytes: usize,
    },
    Product {
        a: sys::CUdeviceptr,
        b: sys::CUdeviceptr,
        c: sys::CUdeviceptr,
        dims: (usize, usize, usize),
        scale: f32,
        shift: f32,
    },
    Average {
        x: sys::CUdeviceptr,
        y: sys::CUdeviceptr,
        c: sys::CUdeviceptr,
        rows: usize,
        cols: usize,
    },
}

impl Launch {
    fn of(
        op: StreamOp,
        inputs: &[&StreamMatrix],
        out: &StreamMatrix,
    ) -> Result<Launch, StreamError> {
        let shapes = |why: String| StreamError::Shapes(format!("{}: {why}", op.name()));
        let wanted = if op == StreamOp::Copy { 1 } else { 2 };
        if inputs.len() != wanted {
            return Err(shapes(format!("{} inputs, wanted {wanted}", inputs.len())));
        }
        let (x, o) = (inputs[0], out.shape);
        Ok(match op {
            StreamOp::Copy => {
                if x.shape != o {
                    return Err(shapes(format!("{:?} into {o:?}", x.shape)));
                }
                Launch::Copy {
                    src: x.ptr,
                    dst: out.ptr,
                    bytes: o.0 * o.1 * std::mem::size_of::<f32>(),
                }
            }
            StreamOp::Product { scale, shift } => {
                let y = inputs[1];
                if x.shape.1 != y.shape.0 || o != (x.shape.0, y.shape.1) {
                    return Err(shapes(format!("{:?} · {:?} into {o:?}", x.shape, y.shape)));
                }
                if std::ptr::eq(x, out) || std::ptr::eq(y, out) {
                    return Err(shapes("the output is an input".into()));
                }
                Launch::Product {
                    a: x.ptr,
                    b: y.ptr,
                    c: out.ptr,
                    dims: (x.shape.0, x.shape.1, y.shape.1),
                    scale,
                    shift,
                }
            }
            StreamOp::Average => {
                let y = inputs[1];
                if x.shape != o || y.shape != o {
                    return Err(shapes(format!("{:?} + {:?} into {o:?}", x.shape, y.shape)));
                }
                Launch::Average {
                    x: x.ptr,
                    y: y.ptr,
                    c: out.ptr,
                    rows: o.0,
                    cols: o.1,
                }
            }
        })
    }
}

/// A row-major f32 matrix in GPU memory that ops on the compute streams read and write, with
/// the events that order them ([`StreamOrder`]).
pub struct StreamMatrix {
    ctx: Arc<CudaContext>,
    ptr: sys::CUdeviceptr,
    shape: (usize, usize),
    order: Mutex<StreamOrder<Marker>>,
    /// Dropped after every event above is reached (see `Drop`).
    slice: Option<CudaSlice<f32>>,
}

impl StreamMatrix {
    /// (rows, cols).
    pub fn shape(&self) -> (usize, usize) {
        self.shape
    }

    fn order(&self) -> MutexGuard<'_, StreamOrder<Marker>> {
        // Every change is one assignment: a poisoned lock's value is still good.
        self.order.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for StreamMatrix {
    fn drop(&mut self) {
        // The memory goes back in the order of the stream that owns it (the device's compute
        // stream: cudarc frees with `cuMemFreeAsync` there), which knows nothing of the `k`
        // streams: that stream waits, on the device, for every event the matrix still holds,
        // and the free is enqueued after the waits. No host wait: the free is ordered in
        // stream order, as memcheck's stream-ordered race tracking checks it.
        make_current(&self.ctx);
        let order = std::mem::take(self.order.get_mut().unwrap_or_else(|e| e.into_inner()));
        if let Some(slice) = self.slice.take() {
            for e in order.pending() {
                if e.wait_on(slice.stream()).is_err() {
                    // No stream wait could be enqueued: wait on the host instead.
                    let _ = e.synchronize();
                }
            }
            // The events may go back to their pool now: a stream wait already enqueued keeps
            // waiting for the record it saw.
            drop(order);
            drop(slice);
        }
    }
}
