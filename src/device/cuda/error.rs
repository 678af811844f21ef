//! The CUDA layer's errors: what failed, with the driver's or the library's own error as the
//! source. Each message is worded as the user reads it in a report or on the command line.

use cudarc::cublas::result::CublasError;
use cudarc::curand::result::CurandError;
use cudarc::driver::DriverError;

use crate::units::human_bytes;

/// Why a CUDA call of parbench's failed.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// No usable GPU: the probe's reason.
    #[error("{0}")]
    Unavailable(String),
    /// A driver call failed (`DriverError`'s Display names the code and the driver's text).
    #[error(transparent)]
    Driver(DriverError),
    /// cudarc panicked (a library or a symbol is missing); the panic's message.
    #[error("{0}")]
    Panicked(String),
    #[error("cuBLAS: {0}")]
    Blas(#[source] CublasError),
    #[error("cuBLAS sgemm: {0}")]
    Sgemm(#[source] CublasError),
    #[error("cuRAND: {0}")]
    Rand(#[from] CurandError),
    /// A poller thread could not be started.
    #[error("{0}")]
    Thread(#[from] std::io::Error),
    #[error("cannot load parbench's element-wise kernels (PTX ISA 7.5, sm_75): {0}")]
    LoadKernels(#[source] DriverError),
    #[error("kernel {name} missing from the PTX: {source}")]
    MissingKernel {
        name: String,
        #[source]
        source: DriverError,
    },
    /// A lock around a handle was poisoned by a panic; names the handle.
    #[error("{0} poisoned")]
    Poisoned(&'static str),
    #[error("dimension {0} exceeds cuBLAS's i32 range")]
    TooLarge(usize),
    /// Buffers of lengths an operation cannot combine.
    #[error("{0}")]
    Lengths(String),
    #[error("pinned buffer already released")]
    PinnedReleased,
    #[error("the device's poller thread is gone")]
    PollerGone,
    /// An error a drop left on the context, reported by the next synchronization.
    #[error("a CUDA error was recorded while releasing a resource (not by an op): {0}")]
    Deferred(#[source] DriverError),
    #[error("cannot start a stream capture: {0}")]
    CaptureStart(#[source] DriverError),
    #[error("the stream capture recorded nothing")]
    EmptyCapture,
    #[error("cannot instantiate the captured graph: {0}")]
    Instantiate(#[source] DriverError),
    /// A graph's capture failed, so it cannot be replayed.
    #[error("the graph's capture failed")]
    NotCaptured,
    #[error("a graph needs at least one layer")]
    NoLayers,
    /// A device allocation that would take parbench's live GPU memory past
    /// `--gpu-memory-fraction`'s cap.
    #[error(
        "GPU memory cap: requested {} with {} live and {} reserved by parbench ({} free on the \
         device) would pass the cap of {} (--gpu-memory-fraction)",
        human_bytes(*requested),
        human_bytes(*live),
        human_bytes(*reserved),
        human_bytes(*free),
        human_bytes(*cap)
    )]
    OverMemoryCap {
        requested: u64,
        live: u64,
        reserved: u64,
        free: u64,
        cap: u64,
    },
    #[error("the GPU does not support stream-ordered memory pools (cuMemPoolCreate)")]
    NoMemoryPools,
    #[error("cannot record or read a GPU timing event: {0}")]
    Timing(#[source] DriverError),
    /// A timer read without a start and a stop recorded since its last reading.
    #[error("the GPU timer was read without a start and a stop recorded since its last reading")]
    TimerIdle,
    /// NCCL is missing or one of its calls failed: what, and why (one line).
    #[error("{0}")]
    Nccl(String),
    /// A measurement that gave no finite time; names it.
    #[error("{0} gave no finite time")]
    NoTime(&'static str),
}

/// Every driver error becomes a [`GpuError`] here, so a sticky fault is noted wherever it
/// surfaces (see `fault`).
impl From<DriverError> for GpuError {
    fn from(e: DriverError) -> GpuError {
        super::fault::note(&e);
        GpuError::Driver(e)
    }
}
