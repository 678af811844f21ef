//! The CUDA device, through cudarc with dynamic loading (nothing CUDA is linked; the binary
//! runs on machines without a driver).
//!
//! Design, after MXNet's GPU lanes:
//! - one non-blocking stream for compute and one for copies, so a device→host copy overlaps
//!   the next kernel;
//! - an op enqueues its work, records an event, and hands the event to the stream's *poller*
//!   thread, which waits for it and fires the op's completion: no lane worker ever blocks on
//!   the GPU, and the engine sees the op complete when the hardware does;
//! - cudarc's own cross-stream event tracking is switched off right after the context is
//!   created: the engine already orders every access (an op reading a buffer starts only after
//!   the op that wrote it has *completed on the GPU*), so cudarc's two events per allocation
//!   and a wait/record per use would be pure overhead;
//! - device→host copies land in ordinary pinned memory (`alloc_pinned_with_flags(len, 0)`):
//!   cudarc's `alloc_pinned` is write-combined, which the CPU reads very slowly; the buffers
//!   are pooled, since a page-locked allocation is slow and may synchronize streams;
//! - completion events are `BLOCKING_SYNC`, so a poller sleeps instead of spinning a core;
//! - buffers an op uses are kept alive until its event has fired, so nothing is freed while
//!   the GPU still reads it;
//! - with [`GpuOrder::Stream`] (the default), an op on the compute stream completes in the
//!   engine as soon as its work is *enqueued*: a dependent op on the same stream is ordered by
//!   the stream itself, so a chain of kernels pays no host round trip per op. Its output
//!   carries a ready event: a copy on the other stream waits for it on the device
//!   (`cuStreamWaitEvent`), a host reader (`wait_to_read`, `to_vec`) on the host. Buffers are
//!   freed in stream order (`cuMemFreeAsync` on the compute stream), so an input may be
//!   dropped while a queued kernel still reads it. A kernel that fails while running reports
//!   at the next wait rather than on its op, as in any CUDA framework.
//!
//! A missing `libcuda`/`libcublas`/`libcurand` makes cudarc panic rather than return an error,
//! so [`probe`] checks each library with `is_culib_present()` before any other call and still
//! runs the first calls under `catch_unwind` with the panic hook silenced.

use std::collections::HashMap;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::cublas::{sys::cublasOperation_t, CudaBlas, Gemm, GemmConfig};
use cudarc::curand::CudaRng;
use cudarc::driver::DevicePtrMut;
use cudarc::driver::{sys, CudaContext, CudaSlice, CudaStream, DriverError, PinnedHostSlice};

pub mod libs;
pub mod ops;
use super::discovery::{GpuInfo, LibraryInfo};
pub use super::GpuOrder;

/// Run `f`, turning a panic into `Err(message)` without printing it (cudarc panics when a
/// library or symbol is missing). The hook is process-global: probes are serialized.
fn quietly<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    static PROBE_LOCK: Mutex<()> = Mutex::new(());
    let _g = PROBE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = catch_unwind(AssertUnwindSafe(f));
    std::panic::set_hook(previous);
    result.map_err(|p| crate::engine::panic_message(p.as_ref()))
}

pub(crate) fn driver_error(e: &DriverError) -> String {
    // `DriverError`'s Display already names the code and the driver's description.
    e.to_string()
}

/// What [`probe`] found: the report's GPU block and, when usable, the context.
struct Probe {
    info: GpuInfo,
    ctx: Option<Arc<CudaContext>>,
}

/// The reason a `CUDA_VISIBLE_DEVICES` value hides every GPU, if it does.
fn hidden_by_visible_devices(value: Option<&str>) -> Option<String> {
    let v = value?;
    let t = v.trim();
    (t.is_empty() || t == "-1" || t.eq_ignore_ascii_case("none") || t.eq_ignore_ascii_case("void"))
        .then(|| format!("CUDA_VISIBLE_DEVICES is '{v}', which hides every GPU"))
}

fn probe_once() -> Probe {
    let unavailable = |reason: String| Probe {
        info: GpuInfo::unavailable(reason),
        ctx: None,
    };
    // SAFETY: `is_culib_present` only dlopens and dlcloses the library (running its initializers).
    match quietly(|| unsafe { sys::is_culib_present() }) {
        Ok(true) => {}
        Ok(false) => return unavailable(
            "no CUDA driver library (libcuda.so.1) on the loader path: no NVIDIA driver installed"
                .into(),
        ),
        Err(p) => return unavailable(format!("loading the CUDA driver library failed: {p}")),
    }
    if let Some(reason) =
        hidden_by_visible_devices(std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref())
    {
        return unavailable(reason);
    }
    let ctx = match quietly(|| CudaContext::new(0)) {
        Ok(Ok(ctx)) => ctx,
        Ok(Err(DriverError(sys::CUresult::CUDA_ERROR_NO_DEVICE))) => {
            let why = match std::env::var("CUDA_VISIBLE_DEVICES") {
                Ok(v) => {
                    format!("the CUDA driver reports no device (CUDA_VISIBLE_DEVICES is '{v}')")
                }
                Err(_) => "the CUDA driver is installed but reports no device".into(),
            };
            return unavailable(why);
        }
        Ok(Err(e)) => {
            return unavailable(format!("CUDA initialization failed: {}", driver_error(&e)))
        }
        Err(p) => return unavailable(format!("CUDA initialization failed: {p}")),
    };
    // cuBLAS and cuRAND of CUDA 12 or 13, from the loader's path or found elsewhere and
    // opened by full path first (see `libs`), then checked through cudarc's own loader.
    let dirs = libs::search_dirs();
    for lib in [&libs::CUBLAS_LT, &libs::CUBLAS, &libs::CURAND] {
        if !libs::preload(lib, &dirs) {
            return unavailable(format!(
                "a GPU is present but {}",
                libs::missing_reason(lib, &dirs)
            ));
        }
    }
    // SAFETY: as above, dlopen/dlclose only.
    let blas = quietly(|| unsafe { cudarc::cublas::sys::is_culib_present() }).unwrap_or(false);
    let rand = quietly(|| unsafe { cudarc::curand::sys::is_culib_present() }).unwrap_or(false);
    if !blas || !rand {
        let which = if blas { "cuRAND" } else { "cuBLAS" };
        return unavailable(format!(
            "a GPU is present and {which} was found, but cudarc could not open it by name"
        ));
    }
    match quietly(|| describe(&ctx)) {
        Ok(Ok(mut info)) => {
            info.libraries = libraries(&info);
            Probe {
                info,
                ctx: Some(ctx),
            }
        }
        Ok(Err(e)) => unavailable(format!("querying the GPU failed: {}", driver_error(&e))),
        Err(p) => unavailable(format!("querying the GPU failed: {p}")),
    }
}

fn describe(ctx: &Arc<CudaContext>) -> Result<GpuInfo, DriverError> {
    let name = ctx.name()?;
    let memory = ctx.total_mem()?;
    let (major, minor) = ctx.compute_capability()?;
    let mut version: std::ffi::c_int = 0;
    // SAFETY: a plain out-parameter query; the library is loaded (the context exists).
    unsafe { sys::cuDriverGetVersion(&mut version) }.result()?;
    let cuda = libs::cuda_version(version);
    let driver = std::fs::read_to_string("/proc/driver/nvidia/version")
        .ok()
        .and_then(|t| driver_release(&t))
        .unwrap_or_else(|| "unknown".into());
    Ok(GpuInfo::detected(
        name,
        driver,
        cuda,
        memory as u64,
        format!("{major}.{minor}"),
    ))
}

/// The driver's and the toolkit libraries' versions, and the file each was loaded from.
fn libraries(info: &GpuInfo) -> Vec<LibraryInfo> {
    use cudarc::cublas::sys::{cublasGetProperty, libraryPropertyType};
    let path = |prefix: &str| {
        libs::loaded_path(prefix).map_or_else(|| "?".into(), |p| p.display().to_string())
    };
    let blas_version = quietly(|| {
        let part = |t: libraryPropertyType| {
            let mut v: std::ffi::c_int = 0;
            // SAFETY: an out-parameter query of the loaded library's version.
            let ok = unsafe { cublasGetProperty(t, &mut v) }
                == cudarc::cublas::sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS;
            ok.then_some(v)
        };
        match (
            part(libraryPropertyType::MAJOR_VERSION),
            part(libraryPropertyType::MINOR_VERSION),
            part(libraryPropertyType::PATCH_LEVEL),
        ) {
            (Some(a), Some(b), Some(c)) => format!("{a}.{b}.{c}"),
            _ => "?".into(),
        }
    })
    .unwrap_or_else(|_| "?".into());
    let rand_version = quietly(|| {
        let mut v: std::ffi::c_int = 0;
        // SAFETY: an out-parameter query of the loaded library's version.
        let ok = unsafe { cudarc::curand::sys::curandGetVersion(&mut v) }
            == cudarc::curand::sys::curandStatus_t::CURAND_STATUS_SUCCESS;
        if ok {
            libs::curand_version(v)
        } else {
            "?".into()
        }
    })
    .unwrap_or_else(|_| "?".into());
    vec![
        LibraryInfo {
            name: "CUDA driver".into(),
            version: format!(
                "{} (supports CUDA {})",
                info.driver.as_deref().unwrap_or("?"),
                info.cuda.as_deref().unwrap_or("?")
            ),
            path: path("libcuda.so"),
        },
        LibraryInfo {
            name: "cuBLAS".into(),
            version: blas_version,
            path: path("libcublas.so"),
        },
        LibraryInfo {
            name: "cuRAND".into(),
            version: rand_version,
            path: path("libcurand.so"),
        },
    ]
}

/// The driver release (`550.54.15`) from `/proc/driver/nvidia/version`.
fn driver_release(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("NVRM version"))?;
    let after = line.split("Kernel Module").nth(1)?;
    // "Kernel Module  550.54.15" or "Open Kernel Module for x86_64  550.54.15": the first
    // token that starts with a digit.
    after
        .split_whitespace()
        .find(|t| t.starts_with(|c: char| c.is_ascii_digit()))
        .map(str::to_string)
}

fn probed() -> &'static Probe {
    static PROBE: OnceLock<Probe> = OnceLock::new();
    PROBE.get_or_init(probe_once)
}

/// Probe once per process: the GPU block of the report.
pub fn probe() -> GpuInfo {
    probed().info.clone()
}

/// The probed context, if a usable GPU was found.
pub fn context() -> Option<Arc<CudaContext>> {
    probed().ctx.clone()
}

/// Flags of a completion event: `BLOCKING_SYNC`, so a poller sleeps in the driver instead of
/// spinning a core (which would skew every CPU-side measurement), and `DISABLE_TIMING`, since
/// the event only synchronizes (CUDA's docs: such events are cheaper to record and wait on).
/// cudarc's `new_event` takes a single enum flag, so the event is made with the raw API.
const COMPLETION_EVENT_FLAGS: std::ffi::c_uint = sys::CUevent_flags::CU_EVENT_BLOCKING_SYNC
    as std::ffi::c_uint
    | sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as std::ffi::c_uint;

/// Flags of a ready event (stream order): no `BLOCKING_SYNC`, so a host that waits for one
/// (`wait_to_read`) spins or yields per the context's scheduling, as PyTorch's synchronize
/// does, instead of sleeping until an interrupt wakes it (tens of microseconds per wait).
const READY_EVENT_FLAGS: std::ffi::c_uint =
    sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as std::ffi::c_uint;

/// Ready events are made once per op in stream order: kept for reuse instead of destroyed,
/// since creating and destroying an event costs as much as the kernel launch it marks.
#[derive(Default)]
pub(crate) struct EventPool {
    free: Mutex<Vec<sys::CUevent>>,
}

// SAFETY: the pool only stores event handles, which any thread of the process may use.
unsafe impl Send for EventPool {}
unsafe impl Sync for EventPool {}

impl Drop for EventPool {
    fn drop(&mut self) {
        let free = std::mem::take(self.free.get_mut().unwrap_or_else(|e| e.into_inner()));
        for raw in free {
            // SAFETY: each pooled handle is live and owned by the pool alone.
            let _ = unsafe { sys::cuEventDestroy_v2(raw) };
        }
    }
}

/// An event recorded after an op's work on a stream; destroyed (or returned to its pool)
/// when dropped.
pub struct CompletionEvent {
    raw: sys::CUevent,
    pool: Option<Arc<EventPool>>,
}

// SAFETY: a CUevent handle may be used and destroyed from any thread of its process, and
// waiting on or synchronizing with one event from several threads at once is allowed.
unsafe impl Send for CompletionEvent {}
unsafe impl Sync for CompletionEvent {}

impl CompletionEvent {
    /// Create and record on `stream` (the context must be current on this thread).
    fn record(stream: &CudaStream) -> Result<CompletionEvent, DriverError> {
        let mut raw = std::mem::MaybeUninit::uninit();
        // SAFETY: an out-parameter creation with valid flags; on success `raw` is initialized.
        let raw = unsafe {
            sys::cuEventCreate(raw.as_mut_ptr(), COMPLETION_EVENT_FLAGS).result()?;
            raw.assume_init()
        };
        let event = CompletionEvent { raw, pool: None };
        // SAFETY: both handles are live; the stream belongs to the current context.
        unsafe { sys::cuEventRecord(event.raw, stream.cu_stream()) }.result()?;
        Ok(event)
    }

    /// A ready event from `pool` (or a new one), recorded on `stream`.
    fn record_pooled(
        stream: &CudaStream,
        pool: &Arc<EventPool>,
    ) -> Result<CompletionEvent, DriverError> {
        let reused = pool.free.lock().ok().and_then(|mut f| f.pop());
        let raw = match reused {
            Some(raw) => raw,
            None => {
                let mut raw = std::mem::MaybeUninit::uninit();
                // SAFETY: an out-parameter creation with valid flags.
                unsafe {
                    sys::cuEventCreate(raw.as_mut_ptr(), READY_EVENT_FLAGS).result()?;
                    raw.assume_init()
                }
            }
        };
        let event = CompletionEvent {
            raw,
            pool: Some(pool.clone()),
        };
        // SAFETY: both handles are live; re-recording an event that nothing waits on is allowed.
        unsafe { sys::cuEventRecord(event.raw, stream.cu_stream()) }.result()?;
        Ok(event)
    }

    /// Block (sleeping, for a blocking-sync event) until the GPU has reached the event.
    pub(crate) fn synchronize(&self) -> Result<(), DriverError> {
        // SAFETY: the handle is live until drop.
        unsafe { sys::cuEventSynchronize(self.raw) }.result()
    }

    /// Make `stream` wait, on the device, until the GPU has reached the event.
    pub(crate) fn wait_on(&self, stream: &CudaStream) -> Result<(), DriverError> {
        // SAFETY: both handles are live; flags 0 is the only documented value.
        unsafe { sys::cuStreamWaitEvent(stream.cu_stream(), self.raw, 0) }.result()
    }
}

impl Drop for CompletionEvent {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            if let Ok(mut free) = pool.free.lock() {
                free.push(self.raw);
                return;
            }
        }
        // SAFETY: created by `record`, destroyed once. A failure cannot be acted on here.
        let _ = unsafe { sys::cuEventDestroy_v2(self.raw) };
    }
}

/// Work handed to a poller: the event to wait for, then what to do (complete the op, drop the
/// buffers it kept alive).
struct Pending {
    event: CompletionEvent,
    stream: Arc<CudaStream>,
    then: Box<dyn FnOnce(Result<(), String>) + Send>,
}

/// One thread per stream that waits for events in order and fires completions. Events of one
/// stream complete in the order they were recorded, so a FIFO is exact.
struct Poller {
    tx: crossbeam_channel::Sender<Pending>,
}

impl Poller {
    fn start(name: String, ctx: Arc<CudaContext>) -> std::io::Result<Poller> {
        let (tx, rx) = crossbeam_channel::unbounded::<Pending>();
        std::thread::Builder::new().name(name).spawn(move || {
            // Event waits need the context current on this thread; if binding fails, each
            // wait reports its own error below.
            let _ = ctx.bind_to_thread();
            for p in rx {
                // `synchronize` can fail *without waiting* (cudarc reports an error an earlier
                // drop recorded): then wait on the stream itself before releasing any buffer.
                let r = match p.event.synchronize() {
                    Ok(()) => Ok(()),
                    Err(e) => {
                        let _ = p.stream.synchronize();
                        Err(driver_error(&e))
                    }
                };
                // A panicking completion must not take the poller (and every later op) down.
                let then = p.then;
                let _ = catch_unwind(AssertUnwindSafe(move || then(r)));
            }
        })?;
        Ok(Poller { tx })
    }
}

/// cuRAND's generator is not `Send`; it is only ever used under the mutex, by one thread at a
/// time, on its own stream.
struct SendRng(CudaRng);
// SAFETY: the generator handle may be used from any thread as long as calls do not overlap;
// the surrounding Mutex guarantees that.
unsafe impl Send for SendRng {}

/// A CUDA device: context, streams, cuBLAS handle, RNG and pollers.
pub struct CudaDevice {
    pub ctx: Arc<CudaContext>,
    pub compute: Arc<CudaStream>,
    pub copy: Arc<CudaStream>,
    /// `ManuallyDrop`: cudarc's drops of these unwrap; see `Drop for CudaDevice`.
    blas: ManuallyDrop<Mutex<CudaBlas>>,
    rng: ManuallyDrop<Mutex<SendRng>>,
    pinned: PinnedPool,
    /// parbench's element-wise kernels, loaded from PTX when the device opens.
    pub(crate) kernels: ops::Kernels,
    order: GpuOrder,
    ready_events: Arc<EventPool>,
    compute_poller: Poller,
    copy_poller: Poller,
    /// The first error cudarc recorded on the context from a drop (a buffer freed, an event
    /// destroyed) rather than from an op: taken off the context at op boundaries so it is
    /// not handed to an innocent op, and reported by `synchronize` as what it is.
    deferred: Mutex<Option<String>>,
}

/// Pinned buffers by length, kept for reuse.
#[derive(Default)]
struct PinnedPool {
    free: Mutex<HashMap<usize, Vec<PinnedHostSlice<f32>>>>,
    /// Fill reused buffers with NaN before handing them out (see
    /// [`Device::poison_reused_host_buffers`](super::Device::poison_reused_host_buffers)).
    poison: AtomicBool,
}

impl PinnedPool {
    fn take(&self, len: usize) -> Option<PinnedHostSlice<f32>> {
        let mut buf = self.free.lock().ok()?.get_mut(&len)?.pop()?;
        if self.poison.load(Ordering::Acquire) {
            // The buffer's last copy completed before it came back (its op's event fired).
            if let Ok(values) = buf.as_mut_slice() {
                values.fill(f32::NAN);
            }
        }
        Some(buf)
    }

    fn give(&self, buf: PinnedHostSlice<f32>) {
        if let Ok(mut pool) = self.free.lock() {
            pool.entry(buf.len()).or_default().push(buf);
        }
    }
}

/// A pinned host buffer that returns to its device's pool when dropped.
pub struct PinnedBuffer {
    buf: Option<PinnedHostSlice<f32>>,
    device: Arc<CudaDevice>,
}

impl PinnedBuffer {
    /// The values. Only read after the copy that filled it has completed (the engine orders
    /// that: readers of a tensor start after its producing op completed on the GPU).
    pub fn as_slice(&self) -> Result<&[f32], String> {
        let buf = self.buf.as_ref().ok_or("pinned buffer already released")?;
        buf.as_slice().map_err(|e| driver_error(&e))
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        if let Some(buf) = self.buf.take() {
            self.device.pinned.give(buf);
        }
    }
}

impl Drop for CudaDevice {
    fn drop(&mut self) {
        // SAFETY: each field is taken exactly once, here, and never used again.
        let (blas, rng) = unsafe {
            (
                ManuallyDrop::take(&mut self.blas),
                ManuallyDrop::take(&mut self.rng),
            )
        };
        if std::thread::panicking() {
            // cudarc's drops unwrap; a second panic while unwinding would abort the process.
            std::mem::forget((blas, rng));
        } else {
            let _ = quietly(move || drop(blas));
            let _ = quietly(move || drop(rng));
        }
    }
}

/// Why a completion event could not be made: the driver's error, or a message.
enum DriverErrorOrText {
    Driver(DriverError),
    Text(String),
}

impl std::fmt::Display for DriverErrorOrText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DriverErrorOrText::Driver(e) => f.write_str(&driver_error(e)),
            DriverErrorOrText::Text(t) => f.write_str(t),
        }
    }
}

/// Keep memory freed with `cuMemFreeAsync` in the device's pool instead of returning it to the
/// driver at every synchronization (the default threshold, 0): otherwise each op after a wait
/// maps fresh memory, which costs more than the op. PyTorch's caching allocator does the same.
fn keep_freed_memory_pooled(ctx: &Arc<CudaContext>) -> Result<(), String> {
    let mut pool = std::mem::MaybeUninit::uninit();
    let mut threshold = u64::MAX;
    // SAFETY: an out-parameter query for a live device, then an attribute whose value is a
    // u64 (CUDA's documented type for the release threshold), passed by pointer.
    unsafe {
        sys::cuDeviceGetDefaultMemPool(pool.as_mut_ptr(), ctx.cu_device())
            .result()
            .map_err(|e| driver_error(&e))?;
        sys::cuMemPoolSetAttribute(
            pool.assume_init(),
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            (&mut threshold as *mut u64).cast(),
        )
        .result()
        .map_err(|e| driver_error(&e))
    }
}

/// Which stream of the device an op runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Compute,
    Copy,
}

impl CudaDevice {
    /// Set up device 0 (after a successful [`probe`]).
    pub fn open(seed: u64, order: GpuOrder) -> Result<CudaDevice, String> {
        let ctx = context().ok_or_else(|| probe().reason.unwrap_or_else(|| "no GPU".into()))?;
        quietly(|| Self::open_with(ctx, seed, order)).and_then(|r| r)
    }

    fn open_with(ctx: Arc<CudaContext>, seed: u64, order: GpuOrder) -> Result<CudaDevice, String> {
        // SAFETY: the first device opened on this context calls it before any stream or slice
        // exists (later ones find tracking already off); from then on the engine orders every
        // access (see the module docs).
        unsafe { ctx.disable_event_tracking() };
        let compute = ctx.new_stream().map_err(|e| driver_error(&e))?;
        let copy = ctx.new_stream().map_err(|e| driver_error(&e))?;
        let blas = CudaBlas::new(compute.clone()).map_err(|e| format!("cuBLAS: {e}"))?;
        let rng = CudaRng::new(seed, compute.clone()).map_err(|e| format!("cuRAND: {e}"))?;
        let kernels = ops::Kernels::load(&ctx)?;
        keep_freed_memory_pooled(&ctx)?;
        Ok(CudaDevice {
            ctx: ctx.clone(),
            compute,
            copy,
            blas: ManuallyDrop::new(Mutex::new(blas)),
            rng: ManuallyDrop::new(Mutex::new(SendRng(rng))),
            pinned: PinnedPool::default(),
            kernels,
            order,
            ready_events: Arc::default(),
            compute_poller: Poller::start("cuda:0 compute poller".into(), ctx.clone())
                .map_err(|e| e.to_string())?,
            copy_poller: Poller::start("cuda:0 copy poller".into(), ctx.clone())
                .map_err(|e| e.to_string())?,
            deferred: Mutex::new(None),
        })
    }

    /// When this device's compute ops complete in the engine.
    pub fn order(&self) -> GpuOrder {
        self.order
    }

    /// Record a ready event after the work enqueued so far on the compute stream (for
    /// [`GpuOrder::Stream`]: what a consumer elsewhere waits for).
    pub(crate) fn record_ready(&self) -> Result<CompletionEvent, String> {
        CompletionEvent::record_pooled(&self.compute, &self.ready_events)
            .map_err(|e| driver_error(&e))
    }

    /// Poison reused pinned buffers with NaN (for checks; off while timing).
    pub fn poison_reused_pinned(&self, on: bool) {
        self.pinned.poison.store(on, Ordering::Release);
    }

    /// Bytes free on the device, for checking sizes before allocating.
    pub fn free_memory(&self) -> Option<u64> {
        self.ctx.mem_get_info().ok().map(|(free, _)| free as u64)
    }

    fn stream(&self, s: Stream) -> &Arc<CudaStream> {
        match s {
            Stream::Compute => &self.compute,
            Stream::Copy => &self.copy,
        }
    }

    /// Uninitialized device buffer of `len` f32, on the compute stream.
    pub fn alloc(&self, len: usize) -> Result<CudaSlice<f32>, String> {
        // SAFETY: every buffer is fully written by the op that allocates it before any read.
        unsafe { self.compute.alloc::<f32>(len) }.map_err(|e| driver_error(&e))
    }

    /// Fill with uniform values in (0, 1] from `seed` (cuRAND, on the compute stream): the same
    /// seed gives the same values.
    pub fn fill_uniform(&self, dst: &mut CudaSlice<f32>, seed: u64) -> Result<(), String> {
        self.bind()?;
        let mut rng = self
            .rng
            .lock()
            .map_err(|_| "cuRAND generator poisoned".to_string())?;
        rng.0.set_seed(seed).map_err(|e| format!("cuRAND: {e}"))?;
        rng.0.set_offset(0).map_err(|e| format!("cuRAND: {e}"))?;
        rng.0
            .fill_with_uniform(dst)
            .map_err(|e| format!("cuRAND: {e}"))
    }

    /// Fill with a constant, asynchronously on the compute stream (a 32-bit memset).
    pub fn fill(&self, dst: &mut CudaSlice<f32>, value: f32) -> Result<(), String> {
        self.bind()?;
        let len = dst.len();
        let (ptr, _record) = dst.device_ptr_mut(&self.compute);
        // SAFETY: `ptr` addresses `len` f32 (4-byte) elements of a live allocation that this
        // op owns exclusively; the memset is ordered on the compute stream like every other use.
        unsafe { sys::cuMemsetD32Async(ptr, value.to_bits(), len, self.compute.cu_stream()) }
            .result()
            .map_err(|e| driver_error(&e))
    }

    /// Row-major `c (m×n) = a (m×k) · b (k×n)` with cuBLAS on the compute stream.
    ///
    /// cuBLAS is column-major: a row-major matrix is its transpose, so compute
    /// `cᵀ = bᵀ · aᵀ` by passing `b` first with m and n swapped.
    pub fn matmul(
        &self,
        a: &CudaSlice<f32>,
        b: &CudaSlice<f32>,
        c: &mut CudaSlice<f32>,
        (m, k, n): (usize, usize, usize),
    ) -> Result<(), String> {
        let dim = |v: usize| {
            i32::try_from(v).map_err(|_| format!("dimension {v} exceeds cuBLAS's i32 range"))
        };
        let (mi, ki, ni) = (dim(m)?, dim(k)?, dim(n)?);
        let cfg = GemmConfig::<f32> {
            transa: cublasOperation_t::CUBLAS_OP_N,
            transb: cublasOperation_t::CUBLAS_OP_N,
            m: ni,
            n: mi,
            k: ki,
            alpha: 1.0,
            lda: ni,
            ldb: ki,
            beta: 0.0,
            ldc: ni,
        };
        // cuBLAS does not bind the context itself.
        self.bind()?;
        let blas = self
            .blas
            .lock()
            .map_err(|_| "cuBLAS handle poisoned".to_string())?;
        // SAFETY: the lengths match the configuration (checked by the caller: a is m·k, b is
        // k·n, c is m·n) and the engine guarantees no other op writes these buffers meanwhile.
        unsafe { blas.gemm(cfg, b, a, c) }.map_err(|e| format!("cuBLAS sgemm: {e}"))
    }

    /// Ordinary (not write-combined) pinned host memory for device→host copies, reused: a
    /// page-locked allocation is slow and can synchronize streams, which would spoil the very
    /// overlap `run-copy` measures.
    pub fn alloc_pinned(self: &Arc<Self>, len: usize) -> Result<PinnedBuffer, String> {
        let reused = self.pinned.take(len);
        let buf = match reused {
            Some(b) => b,
            // SAFETY: the buffer is fully written by the copy before anything reads it.
            None => unsafe { self.ctx.alloc_pinned_with_flags::<f32>(len, 0) }
                .map_err(|e| driver_error(&e))?,
        };
        Ok(PinnedBuffer {
            buf: Some(buf),
            device: self.clone(),
        })
    }

    /// Enqueue a device→host copy on the copy stream, after `ready` (the source's producer)
    /// when there is one.
    pub fn copy_to_host(
        &self,
        src: &CudaSlice<f32>,
        ready: Option<&CompletionEvent>,
        dst: &mut PinnedBuffer,
    ) -> Result<(), String> {
        let dst = dst.buf.as_mut().ok_or("pinned buffer already released")?;
        if let Some(ready) = ready {
            ready.wait_on(&self.copy).map_err(|e| driver_error(&e))?;
        }
        self.copy
            .memcpy_dtoh(src, dst)
            .map_err(|e| driver_error(&e))
    }

    /// Read a device buffer back (blocking), on the copy stream so it does not queue behind
    /// compute work.
    pub fn read_back(
        &self,
        src: &CudaSlice<f32>,
        ready: Option<&CompletionEvent>,
    ) -> Result<Vec<f32>, String> {
        self.bind()?;
        if let Some(ready) = ready {
            ready.wait_on(&self.copy).map_err(|e| driver_error(&e))?;
        }
        let v = self.copy.clone_dtoh(src).map_err(|e| driver_error(&e))?;
        self.copy.synchronize().map_err(|e| driver_error(&e))?;
        Ok(v)
    }

    /// Record an event after the work enqueued so far on `stream`, and call `then` with the
    /// outcome once the GPU has reached it (on the stream's poller thread). `then` owns
    /// whatever must outlive the GPU work.
    pub fn on_done(&self, stream: Stream, then: impl FnOnce(Result<(), String>) + Send + 'static) {
        let poller = match stream {
            Stream::Compute => &self.compute_poller,
            Stream::Copy => &self.copy_poller,
        };
        let s = self.stream(stream);
        let event = self
            .bind()
            .map_err(DriverErrorOrText::Text)
            .and_then(|()| CompletionEvent::record(s).map_err(DriverErrorOrText::Driver));
        match event {
            Ok(event) => {
                if let Err(crossbeam_channel::SendError(p)) = poller.tx.send(Pending {
                    event,
                    stream: s.clone(),
                    then: Box::new(then),
                }) {
                    let _ = s.synchronize();
                    (p.then)(Err("the device's poller thread is gone".into()));
                }
            }
            Err(e) => {
                // Without an event, wait for the whole stream before the buffers are released.
                let _ = s.synchronize();
                then(Err(e.to_string()));
            }
        }
    }

    /// Start of an op's CUDA work: move an error that a drop left on the context into
    /// `deferred` (it is not this op's), then make the context current on this thread.
    pub fn bind(&self) -> Result<(), String> {
        self.take_deferred();
        self.ctx.bind_to_thread().map_err(|e| driver_error(&e))
    }

    fn take_deferred(&self) {
        if let Err(e) = self.ctx.check_err() {
            if let Ok(mut slot) = self.deferred.lock() {
                slot.get_or_insert_with(|| {
                    format!(
                        "a CUDA error was recorded while releasing a resource (not by an op): {}",
                        driver_error(&e)
                    )
                });
            }
        }
    }

    /// Wait for both streams (what `wait_all` adds for a GPU).
    pub fn synchronize(&self) -> Result<(), String> {
        self.take_deferred();
        let streams = self
            .compute
            .synchronize()
            .and_then(|()| self.copy.synchronize())
            .map_err(|e| driver_error(&e));
        self.take_deferred();
        let deferred = self.deferred.lock().ok().and_then(|mut d| d.take());
        streams?;
        deferred.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_never_panics_and_explains_absence() {
        let info = probe();
        if !info.available {
            let reason = info.reason.expect("an unavailable GPU has a reason");
            assert!(!reason.is_empty());
        }
        // A second probe gives the same answer (cached, no second load attempt).
        assert_eq!(probe(), probe());
    }

    #[test]
    fn completion_events_block_without_timing() {
        assert_eq!(COMPLETION_EVENT_FLAGS, 0x1 | 0x2);
    }

    #[test]
    fn quietly_turns_panics_into_errors() {
        assert_eq!(quietly(|| 1), Ok(1));
        let e = quietly(|| -> i32 { panic!("no libcuda") }).unwrap_err();
        assert_eq!(e, "no libcuda");
    }

    #[test]
    fn visible_devices_that_hide_every_gpu_are_named() {
        assert_eq!(
            hidden_by_visible_devices(Some("")).as_deref(),
            Some("CUDA_VISIBLE_DEVICES is '', which hides every GPU")
        );
        assert!(hidden_by_visible_devices(Some("-1")).is_some());
        assert!(hidden_by_visible_devices(Some("0")).is_none());
        assert!(hidden_by_visible_devices(Some("GPU-1234")).is_none());
        assert!(hidden_by_visible_devices(None).is_none());
    }

    #[test]
    fn driver_version_is_read_from_the_kernel_module_line() {
        let text = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\nGCC version: gcc";
        assert_eq!(driver_release(text).as_deref(), Some("550.54.15"));
        assert_eq!(driver_release("garbage"), None);
        let open =
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  560.35.03  Release Build";
        assert_eq!(driver_release(open).as_deref(), Some("560.35.03"));
    }
}
