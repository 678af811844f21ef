//! The CUDA device's API: opening it, memory, cuBLAS and cuRAND, copies, and completing an op
//! when the GPU is done with it.

use std::mem::ManuallyDrop;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use cudarc::cublas::{sys::cublasOperation_t, CudaBlas, Gemm, GemmConfig};
use cudarc::curand::CudaRng;
use cudarc::driver::DevicePtrMut;
use cudarc::driver::{sys, CudaContext, CudaSlice, CudaStream};

use super::block_cache::DeviceBuffer;
use super::error::GpuError;
use super::events::CompletionEvent;
use super::memory::DeviceMemory;
use super::pinned::{PinnedBuffer, PinnedPool};
use super::poller::{Pending, Poller};
use super::probe::{context, probe, quietly};
use super::{ops, CudaDevice, GpuOrder, MemoryFraction, PoolUsage, SendRng, Stream};

/// cuBLAS's configuration for the row-major `c (m×n) = a (m×k) · b (k×n)`, with `b` passed
/// first (see [`CudaDevice::matmul`]); shared with the compute streams' products (`streams`).
pub(super) fn row_major_gemm(
    (m, k, n): (usize, usize, usize),
) -> Result<GemmConfig<f32>, GpuError> {
    let dim = |v: usize| i32::try_from(v).map_err(|_| GpuError::TooLarge(v));
    let (mi, ki, ni) = (dim(m)?, dim(k)?, dim(n)?);
    Ok(GemmConfig::<f32> {
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
    })
}

impl Drop for CudaDevice {
    fn drop(&mut self) {
        // Destroying handles and freeing pinned memory synchronize (see `capture_guard`).
        let _outside = super::capture_guard::outside_captures();
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

impl CudaDevice {
    /// Set up device 0 (after a successful [`probe`]).
    pub fn open(seed: u64, order: GpuOrder) -> Result<CudaDevice, GpuError> {
        Self::open_capped(seed, order, None)
    }

    /// [`open`](Self::open), with parbench's device allocations capped at `fraction` of the
    /// device's memory (`--gpu-memory-fraction`).
    pub fn open_capped(
        seed: u64,
        order: GpuOrder,
        fraction: Option<MemoryFraction>,
    ) -> Result<CudaDevice, GpuError> {
        let device = Self::open_unplanted(seed, order, fraction)?;
        if super::fault::fault_requested() {
            device.plant_fault()?;
        }
        Ok(device)
    }

    /// [`open_capped`](Self::open_capped) without the fault `PARBENCH_GPU_INJECT_FAULT` plants:
    /// for the GPU's limits, measured before a run, so that the planted fault is met by the
    /// run's own device (`fault`).
    pub(super) fn open_unplanted(
        seed: u64,
        order: GpuOrder,
        fraction: Option<MemoryFraction>,
    ) -> Result<CudaDevice, GpuError> {
        let ctx = context().ok_or_else(|| {
            GpuError::Unavailable(probe().reason.unwrap_or_else(|| "no GPU".into()))
        })?;
        // Creating a context handle, streams, a module and library handles synchronizes (see
        // `capture_guard`).
        let _outside = super::capture_guard::outside_captures();
        let ordinal = ctx.ordinal();
        quietly(|| Self::open_with(ordinal, seed, order, fraction)).and_then(|r| r)
    }

    /// Set up the GPU of CUDA ordinal `ordinal` (0 is [`open`](Self::open)'s), after a
    /// successful [`probe`]: the further GPUs of data-parallel training over NCCL. No memory
    /// cap and no planted fault (those apply to cuda:0, the run's own device).
    pub fn open_ordinal(
        ordinal: usize,
        seed: u64,
        order: GpuOrder,
    ) -> Result<CudaDevice, GpuError> {
        if context().is_none() {
            return Err(GpuError::Unavailable(
                probe().reason.unwrap_or_else(|| "no GPU".into()),
            ));
        }
        let present = super::probe::gpus().len();
        if ordinal >= present.max(1) {
            return Err(GpuError::Unavailable(format!(
                "no GPU cuda:{ordinal}: the driver lists {present}"
            )));
        }
        let _outside = super::capture_guard::outside_captures();
        quietly(|| Self::open_with(ordinal, seed, order, None)).and_then(|r| r)
    }

    fn open_with(
        ordinal: usize,
        seed: u64,
        order: GpuOrder,
        fraction: Option<MemoryFraction>,
    ) -> Result<CudaDevice, GpuError> {
        // A handle of the device's own on the same primary context: cudarc keeps the error a
        // drop records in the handle, so this device's drops report to this device alone.
        let ctx = CudaContext::new(ordinal)?;
        // SAFETY: the first device opened on this context calls it before any stream or slice
        // exists (later ones find tracking already off); from then on the engine orders every
        // access (see `device::cuda`'s docs).
        unsafe { ctx.disable_event_tracking() };
        let compute = ctx.new_stream()?;
        let copy = ctx.new_stream()?;
        let upload = ctx.new_stream()?;
        let blas = CudaBlas::new(compute.clone()).map_err(GpuError::Blas)?;
        fp32_math(&blas)?;
        let rng = CudaRng::new(seed, compute.clone())?;
        let kernels = ops::Kernels::load(&ctx)?;
        let memory = DeviceMemory::create(&ctx, fraction, &compute)?;
        let device = CudaDevice {
            ctx: ctx.clone(),
            compute,
            copy,
            upload,
            blas: ManuallyDrop::new(Mutex::new(blas)),
            rng: ManuallyDrop::new(Mutex::new(SendRng(rng))),
            pinned: PinnedPool::default(),
            kernels,
            order,
            ready_events: Arc::default(),
            compute_poller: Poller::start(format!("cuda:{ordinal} compute poller"), ctx.clone())?,
            copy_poller: Poller::start(format!("cuda:{ordinal} copy poller"), ctx.clone())?,
            deferred: Mutex::new(None),
            memory,
        };
        Ok(device)
    }

    /// When this device's compute ops complete in the engine.
    pub fn order(&self) -> GpuOrder {
        self.order
    }

    /// Record a ready event after the work enqueued so far on the compute stream (for
    /// [`GpuOrder::Stream`]: what a consumer elsewhere waits for).
    pub(crate) fn record_ready(&self) -> Result<CompletionEvent, GpuError> {
        Ok(CompletionEvent::record_pooled(
            &self.compute,
            &self.ready_events,
        )?)
    }

    /// Poison reused pinned buffers with NaN (for checks; off while timing).
    pub fn poison_reused_pinned(&self, on: bool) {
        self.pinned.poison.store(on, Ordering::Release);
    }

    /// Bytes parbench can still allocate on the device, for checking sizes before allocating:
    /// the driver's free memory plus what parbench's pool caches, within the cap (see
    /// [`free_for_parbench`](super::free_for_parbench)).
    pub fn free_memory(&self) -> Option<u64> {
        self.memory.free().ok()
    }

    /// What parbench's memory pool holds (reserved vs used, and their high-water marks).
    pub fn pool_usage(&self) -> Result<PoolUsage, GpuError> {
        self.memory.usage()
    }

    /// Start the pool's high-water marks again from what it holds now.
    pub fn reset_pool_high_water(&self) -> Result<(), GpuError> {
        self.memory.reset_high_water()
    }

    /// `--gpu-memory-fraction`, when a cap is set.
    pub fn memory_fraction(&self) -> Option<MemoryFraction> {
        self.memory.fraction()
    }

    /// The cap on parbench's live device memory in bytes, when one is set.
    pub fn memory_cap(&self) -> Option<u64> {
        self.memory.cap()
    }

    /// Bytes and buffers the pinned host pool keeps for reuse now.
    pub fn pinned_kept(&self) -> (u64, usize) {
        self.pinned.kept()
    }

    /// Free the pinned buffers the pool keeps.
    pub fn trim_pinned(&self) {
        self.pinned.trim();
    }

    fn stream(&self, s: Stream) -> &Arc<CudaStream> {
        match s {
            Stream::Compute => &self.compute,
            Stream::Copy => &self.copy,
        }
    }

    /// Uninitialized device buffer of `len` f32 from parbench's pool, on the compute stream;
    /// [`GpuError::OverMemoryCap`] past `--gpu-memory-fraction`'s cap. Every buffer is fully
    /// written by the op that allocates it before any read.
    pub fn alloc(&self, len: usize) -> Result<CudaSlice<f32>, GpuError> {
        self.memory.alloc(&self.compute, &self.compute, len)
    }

    /// [`alloc`](Self::alloc), through the caching allocator: the buffer of a tensor, which
    /// goes back to the cache when it is freed.
    pub fn alloc_buffer(&self, len: usize) -> Result<DeviceBuffer, GpuError> {
        self.memory.alloc_buffer(&self.compute, len)
    }

    /// Fill with uniform values in (0, 1] from `seed` (cuRAND, on the compute stream): the same
    /// seed gives the same values.
    pub fn fill_uniform(&self, dst: &mut CudaSlice<f32>, seed: u64) -> Result<(), GpuError> {
        self.bind()?;
        // cuRAND sets up its states with synchronizing calls after a new seed (see
        // `capture_guard`).
        let _outside = super::capture_guard::outside_captures();
        let mut rng = self
            .rng
            .lock()
            .map_err(|_| GpuError::Poisoned("cuRAND generator"))?;
        rng.0.set_seed(seed)?;
        rng.0.set_offset(0)?;
        Ok(rng.0.fill_with_uniform(dst)?)
    }

    /// Fill with a constant, asynchronously on the compute stream (a 32-bit memset).
    pub fn fill(&self, dst: &mut CudaSlice<f32>, value: f32) -> Result<(), GpuError> {
        self.bind()?;
        let len = dst.len();
        let (ptr, _record) = dst.device_ptr_mut(&self.compute);
        // SAFETY: `ptr` addresses `len` f32 (4-byte) elements of a live allocation that this
        // op owns exclusively; the memset is ordered on the compute stream like every other use.
        unsafe { sys::cuMemsetD32Async(ptr, value.to_bits(), len, self.compute.cu_stream()) }
            .result()?;
        Ok(())
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
    ) -> Result<(), GpuError> {
        let cfg = row_major_gemm((m, k, n))?;
        // cuBLAS does not bind the context itself.
        self.bind()?;
        let mut blas = self
            .blas
            .lock()
            .map_err(|_| GpuError::Poisoned("cuBLAS handle"))?;
        let capturing =
            self.with_launch_stream(|s| (!Arc::ptr_eq(s, &self.compute)).then(|| s.clone()));
        let Some(side) = capturing else {
            // SAFETY: the lengths match the configuration (checked by the caller: a is m·k, b
            // is k·n, c is m·n) and the engine guarantees no other op writes these buffers
            // meanwhile.
            return unsafe { blas.gemm(cfg, b, a, c) }.map_err(GpuError::Sgemm);
        };
        // This thread is capturing a graph: the product goes to the capture's side stream,
        // and the handle goes back to the compute stream before the lock is released.
        // SAFETY: both streams belong to the handle's context; as above for the product.
        let r = unsafe { blas.set_stream(side).and_then(|()| blas.gemm(cfg, b, a, c)) };
        // SAFETY: as above.
        let back = unsafe { blas.set_stream(self.compute.clone()) };
        r.and(back).map_err(GpuError::Sgemm)
    }

    /// Ordinary (not write-combined) pinned host memory for device→host copies, reused: a
    /// page-locked allocation is slow and can synchronize streams, which would spoil the very
    /// overlap `run-copy` measures.
    pub fn alloc_pinned(self: &Arc<Self>, len: usize) -> Result<PinnedBuffer, GpuError> {
        let reused = self.pinned.take(len);
        let buf = match reused {
            Some(b) => b,
            // SAFETY: the buffer is fully written by the copy before anything reads it.
            None => {
                // A page-locked allocation synchronizes (see `capture_guard`).
                let _outside = super::capture_guard::outside_captures();
                unsafe { self.ctx.alloc_pinned_with_flags::<f32>(len, 0) }?
            }
        };
        Ok(PinnedBuffer {
            buf: Some(buf),
            device: self.clone(),
            written: None,
        })
    }

    /// Enqueue a device→host copy on the copy stream, after `ready` (the source's producer)
    /// when there is one.
    pub fn copy_to_host(
        &self,
        src: &CudaSlice<f32>,
        ready: Option<&CompletionEvent>,
        dst: &mut PinnedBuffer,
    ) -> Result<(), GpuError> {
        let buf = dst.buf.as_mut().ok_or(GpuError::PinnedReleased)?;
        if let Some(ready) = ready {
            ready.wait_on(&self.copy)?;
        }
        self.copy.memcpy_dtoh(src, buf)?;
        // The buffer's own event: a host read waits for it, whatever the engine's order.
        dst.written = Some(CompletionEvent::record_pooled(
            &self.copy,
            &self.ready_events,
        )?);
        Ok(())
    }

    /// Read a device buffer back (blocking), on the copy stream so it does not queue behind
    /// compute work, after `ready` (the source's producer on another stream; `None` only
    /// where the host has already waited for that work).
    pub fn read_back(
        &self,
        src: &CudaSlice<f32>,
        ready: Option<&CompletionEvent>,
    ) -> Result<Vec<f32>, GpuError> {
        self.bind()?;
        if let Some(ready) = ready {
            ready.wait_on(&self.copy)?;
        }
        let v = self.copy.clone_dtoh(src)?;
        self.copy.synchronize()?;
        Ok(v)
    }

    /// Record an event after the work enqueued so far on `stream`, and call `then` with the
    /// outcome once the GPU has reached it (on the stream's poller thread). `then` owns
    /// whatever must outlive the GPU work.
    pub fn on_done(
        &self,
        stream: Stream,
        then: impl FnOnce(Result<(), GpuError>) + Send + 'static,
    ) {
        let poller = match stream {
            Stream::Compute => &self.compute_poller,
            Stream::Copy => &self.copy_poller,
        };
        let s = self.stream(stream);
        let event = self.bind().and_then(|()| Ok(CompletionEvent::record(s)?));
        match event {
            Ok(event) => {
                if let Err(crossbeam_channel::SendError(p)) = poller.tx.send(Pending {
                    event,
                    stream: s.clone(),
                    then: Box::new(then),
                }) {
                    let _ = s.synchronize();
                    (p.then)(Err(GpuError::PollerGone));
                }
            }
            Err(e) => {
                // Without an event, wait for the whole stream before the buffers are released.
                let _ = s.synchronize();
                then(Err(e));
            }
        }
    }

    /// Start of an op's CUDA work: move an error that a drop left on the context into
    /// `deferred` (it is not this op's), then make the context current on this thread.
    pub fn bind(&self) -> Result<(), GpuError> {
        self.take_deferred();
        Ok(self.ctx.bind_to_thread()?)
    }

    fn take_deferred(&self) {
        if let Err(e) = self.ctx.check_err() {
            if let Ok(mut slot) = self.deferred.lock() {
                slot.get_or_insert(e);
            }
        }
    }

    /// Wait for both streams (what `wait_all` adds for a GPU).
    pub fn synchronize(&self) -> Result<(), GpuError> {
        self.take_deferred();
        let streams = self
            .compute
            .synchronize()
            .and_then(|()| self.copy.synchronize());
        self.take_deferred();
        let deferred = self.deferred.lock().ok().and_then(|mut d| d.take());
        streams?;
        deferred.map_or(Ok(()), |e| {
            super::fault::note(&e);
            Err(GpuError::Deferred(e))
        })
    }
}

/// fp32 products in fp32: cuBLAS's default math mode, which never uses TF32 for sgemm (set
/// explicitly on every handle, so that no default of a later cuBLAS changes what parbench
/// times).
pub(super) fn fp32_math(blas: &CudaBlas) -> Result<(), GpuError> {
    // SAFETY: a live handle, used by this thread alone until it is shared.
    unsafe {
        cudarc::cublas::sys::cublasSetMathMode(
            *blas.handle(),
            cudarc::cublas::sys::cublasMath_t::CUBLAS_DEFAULT_MATH,
        )
    }
    .result()
    .map_err(GpuError::Blas)
}
