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
//! so [`probe`] (`probe.rs`) checks each library with `is_culib_present()` before any other
//! call and still runs the first calls under `catch_unwind` with the panic hook silenced.
//!
//! Each device opens its own handle on the GPU's primary context, so an error a drop records
//! on it (cudarc keeps one error slot per handle) is reported by that device and not blamed
//! on an op of another. A sticky fault makes the GPU unusable for the rest of the process
//! (`fault`); the probe then says so.
//!
//! Device buffers come from a stream-ordered pool of parbench's own, whose reserved and used
//! bytes are read from the driver and which `--gpu-memory-fraction` caps (`memory.rs`);
//! host→device copies run on an upload stream beside the download (`copy`) stream
//! (`upload.rs`).
//!
//! One concept per file: `probe` (finding the GPU), `events` (completion and ready events),
//! `poller` (the threads that complete ops), `pinned` (the pinned host pool), `memory` (the
//! device memory pool and its cap), `upload` (host→device copies), `device` (the
//! device's API: opening it, memory, cuBLAS, cuRAND, copies, completion), `ops` (parbench's
//! kernels and CUDA graphs), `floor` (the driver's own cost per launch, in tiers), `timing`
//! (timing events: the GPU's own clock), `libs` (finding the CUDA libraries), `error` (what
//! fails), `limits` (the GPU's limits: launches, copies, cuBLAS's rate), `fault` (sticky
//! faults, and planting one), `capture_guard` (captures against synchronizing calls),
//! `current` (binding a context on any thread), `block_cache` (the caching allocator),
//! `streams` (`k` compute streams beside the device's own, ordered by events), `stream_lanes`
//! (a runtime with each of them an engine lane).

use std::mem::ManuallyDrop;
use std::sync::{Arc, Mutex};

use cudarc::cublas::CudaBlas;
use cudarc::curand::CudaRng;
use cudarc::driver::{CudaContext, CudaStream, DriverError};

mod block_cache;
mod capture_guard;
mod current;
mod device;
mod error;
mod events;
mod fault;
mod floor;
pub mod libs;
mod limits;
mod memory;
#[cfg(test)]
mod memory_gpu_tests;
pub mod mlp;
pub mod nccl;
pub mod ops;
mod pinned;
mod poller;
mod probe;
pub mod stream_lanes;
pub mod streams;
mod timing;
mod upload;

pub use super::GpuOrder;
pub use super::MemoryFraction;
pub use block_cache::DeviceBuffer;
pub(crate) use current::make_current;
pub use error::GpuError;
pub use events::CompletionEvent;
use events::EventPool;
pub use fault::{poisoned, INJECT_FAULT_ENV};
pub use floor::DriverFloor;
pub use limits::measure_limits;
pub use memory::{free_for_parbench, PoolUsage};
pub use pinned::PinnedBuffer;
use pinned::PinnedPool;
use poller::Poller;
pub use probe::{context, gpus, probe};
pub use timing::GpuTimer;
pub use upload::UploadSource;

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
    /// Host→device copies (`run-copy --direction h2d|both`): a stream of their own beside
    /// `copy` (device→host), so that on a GPU with a copy engine per direction an upload, a
    /// kernel and a download run at once.
    pub upload: Arc<CudaStream>,
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
    deferred: Mutex<Option<DriverError>>,
    /// parbench's own memory pool, its usage and its cap (`memory.rs`).
    memory: memory::DeviceMemory,
}

/// Which stream of the device an op runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    Compute,
    Copy,
}
