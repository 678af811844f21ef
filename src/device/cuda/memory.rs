//! parbench's GPU memory: a stream-ordered pool of its own, what it holds (reserved vs used),
//! and the `--gpu-memory-fraction` cap on it.
//!
//! Why a pool of parbench's own (`cuMemPoolCreate`) rather than the device's default pool:
//! freed buffers are kept cached for reuse (release threshold above 0), and that setting is the
//! pool's, so changing the *default* pool would change it for every library in the process;
//! parbench's own pool also makes its reserved/used counters count parbench's buffers only,
//! which is what the cap and the memory figures are about. Buffers come from it through
//! `cuMemAllocFromPoolAsync` and are freed by cudarc's `cuMemFreeAsync`, which returns them to
//! the pool they came from. The pool is destroyed when the device goes; the driver releases it
//! once the last of its buffers (a tensor may outlive the device) is freed.
//!
//! The driver's free memory counts a cached but unused block as used: what parbench can still
//! allocate is the driver's free memory plus the pool's reserved − used bytes, and under a cap
//! no more than cap − used.

use std::sync::Arc;

use cudarc::driver::{sys, CudaContext, CudaSlice, CudaStream};

use super::block_cache::{size_class, BlockCache, DeviceBuffer};
use super::error::GpuError;
use super::MemoryFraction;

/// What a pool holds, in bytes: `reserved` is mapped from the driver (used or cached), `used`
/// is in live buffers; the high-water marks since the pool was created or last reset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolUsage {
    pub reserved: u64,
    pub used: u64,
    pub reserved_high: u64,
    pub used_high: u64,
}

impl PoolUsage {
    /// Reserved but not in a live buffer: memory parbench can reuse at once.
    pub fn cached(&self) -> u64 {
        self.reserved.saturating_sub(self.used)
    }
}

/// What parbench can still allocate: the driver's `free` plus what its pool caches, and under
/// a `cap` no more than the cap's room left.
pub fn free_for_parbench(driver_free: u64, usage: PoolUsage, cap: Option<u64>) -> u64 {
    let free = driver_free.saturating_add(usage.cached());
    match cap {
        Some(cap) => free.min(cap.saturating_sub(usage.used)),
        None => free,
    }
}

/// Refuse a request of `requested` bytes that would take the pool's live bytes past `cap`.
/// `driver_free` only words the error.
pub fn check_cap(
    requested: u64,
    usage: PoolUsage,
    driver_free: u64,
    cap: u64,
) -> Result<(), GpuError> {
    if usage.used.saturating_add(requested) > cap {
        return Err(GpuError::OverMemoryCap {
            requested,
            live: usage.used,
            reserved: usage.reserved,
            free: driver_free,
            cap,
        });
    }
    Ok(())
}

/// Bytes of `len` f32, or the typed error when that overflows.
pub fn f32_bytes(len: usize) -> Result<u64, GpuError> {
    len.checked_mul(std::mem::size_of::<f32>())
        .map(|b| b as u64)
        .ok_or(GpuError::TooLarge(len))
}

/// parbench's memory pool on one device, with its cap.
pub(super) struct DeviceMemory {
    ctx: Arc<CudaContext>,
    pool: sys::CUmemoryPool,
    fraction: Option<MemoryFraction>,
    /// `fraction` of the device's total memory, in bytes.
    cap: Option<u64>,
    /// The caching allocator's blocks (`block_cache`).
    cache: Arc<BlockCache>,
}

// SAFETY: a CUmemoryPool is a driver handle, usable from any thread (the driver serializes
// calls on it); the struct never hands out references into driver-owned memory.
unsafe impl Send for DeviceMemory {}
// SAFETY: as for Send: every method only passes the handle to thread-safe driver calls.
unsafe impl Sync for DeviceMemory {}

impl DeviceMemory {
    /// Create the pool on `ctx`'s device (bound to this thread), capped at `fraction` of the
    /// device's memory, and keeping freed memory cached up to the cap (all of it without one):
    /// otherwise each op after a synchronization maps fresh memory, which costs more than the
    /// op (PyTorch's caching allocator keeps it too). Freed buffers of `compute`, the compute
    /// stream, are cached on it (the caching allocator).
    pub(super) fn create(
        ctx: &Arc<CudaContext>,
        fraction: Option<MemoryFraction>,
        compute: &Arc<CudaStream>,
    ) -> Result<DeviceMemory, GpuError> {
        let supported =
            ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)?;
        if supported == 0 {
            return Err(GpuError::NoMemoryPools);
        }
        let cap = match fraction {
            Some(f) => Some(f.of(ctx.total_mem()? as u64)),
            None => None,
        };
        let props = sys::CUmemPoolProps {
            allocType: sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED,
            handleTypes: sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE,
            location: sys::CUmemLocation {
                type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                id: ctx.cu_device(),
            },
            win32SecurityAttributes: std::ptr::null_mut(),
            // 0: the pool may grow to the device's memory; the cap is parbench's own check,
            // so that going past it is a typed error naming the figures.
            maxSize: 0,
            usage: 0,
            reserved: [0; 54],
        };
        let mut pool = std::ptr::null_mut();
        ctx.bind_to_thread()?;
        // SAFETY: `props` is a fully initialized CUmemPoolProps for this device and `pool` an
        // out-parameter the driver writes on success.
        unsafe { sys::cuMemPoolCreate(&mut pool, &props) }.result()?;
        let memory = DeviceMemory {
            ctx: ctx.clone(),
            pool,
            fraction,
            cap,
            cache: Arc::new(BlockCache::new(compute.clone())),
        };
        let mut threshold: u64 = cap.unwrap_or(u64::MAX);
        // SAFETY: the release threshold is a u64 (CUDA's documented type), passed by pointer,
        // on the live pool just created.
        unsafe {
            sys::cuMemPoolSetAttribute(
                memory.pool,
                sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                (&mut threshold as *mut u64).cast(),
            )
        }
        .result()?;
        Ok(memory)
    }

    /// The cap's fraction, as asked for.
    pub(super) fn fraction(&self) -> Option<MemoryFraction> {
        self.fraction
    }

    /// The cap in bytes.
    pub(super) fn cap(&self) -> Option<u64> {
        self.cap
    }

    /// Bytes the caching allocator holds.
    #[cfg(test)]
    pub(super) fn cache_bytes(&self) -> u64 {
        self.cache.bytes()
    }

    fn attribute(&self, attr: sys::CUmemPool_attribute) -> Result<u64, GpuError> {
        let mut value: u64 = 0;
        // SAFETY: the four usage attributes are u64 values (cuuint64_t) the driver writes
        // through the pointer; the pool is live while `self` is.
        unsafe { sys::cuMemPoolGetAttribute(self.pool, attr, (&mut value as *mut u64).cast()) }
            .result()?;
        Ok(value)
    }

    /// What parbench holds now, and its high-water marks: the pool's figures, with the caching
    /// allocator's blocks counted as reserved but not used. The pool's own mark of used bytes
    /// counts a cached block as used: the mark is the cache's count of its blocks in live
    /// buffers, plus what other buffers hold now.
    pub(super) fn usage(&self) -> Result<PoolUsage, GpuError> {
        let mut usage = self.pool_usage()?;
        let cache = &self.cache;
        usage.used = usage.used.saturating_sub(cache.bytes());
        let others = usage.used.saturating_sub(cache.lent.now());
        usage.used_high = cache.lent.high().saturating_add(others);
        Ok(usage)
    }

    /// What the pool holds now, and its high-water marks.
    fn pool_usage(&self) -> Result<PoolUsage, GpuError> {
        use sys::CUmemPool_attribute::*;
        Ok(PoolUsage {
            reserved: self.attribute(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)?,
            used: self.attribute(CU_MEMPOOL_ATTR_USED_MEM_CURRENT)?,
            reserved_high: self.attribute(CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH)?,
            used_high: self.attribute(CU_MEMPOOL_ATTR_USED_MEM_HIGH)?,
        })
    }

    /// Start the high-water marks again from the current values (the driver's reset: a zero
    /// written to each mark).
    pub(super) fn reset_high_water(&self) -> Result<(), GpuError> {
        use sys::CUmemPool_attribute::*;
        self.cache.lent.reset();
        for attr in [
            CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH,
            CU_MEMPOOL_ATTR_USED_MEM_HIGH,
        ] {
            let mut zero: u64 = 0;
            // SAFETY: the high-water marks take a u64 zero by pointer to reset; the pool is
            // live while `self` is.
            unsafe { sys::cuMemPoolSetAttribute(self.pool, attr, (&mut zero as *mut u64).cast()) }
                .result()?;
        }
        Ok(())
    }

    /// The driver's free bytes on the device.
    fn driver_free(&self) -> Result<u64, GpuError> {
        Ok(self.ctx.mem_get_info()?.0 as u64)
    }

    /// What parbench can still allocate (see [`free_for_parbench`]).
    pub(super) fn free(&self) -> Result<u64, GpuError> {
        Ok(free_for_parbench(
            self.driver_free()?,
            self.usage()?,
            self.cap,
        ))
    }

    /// A buffer of `len` f32 from the pool, allocated in `order`'s stream order and owned by
    /// `owner` (cudarc frees it there with `cuMemFreeAsync`). Use on `owner` must be ordered
    /// after `order`'s allocation point (the same stream, or a wait on an event of `order`).
    /// Refused with [`GpuError::OverMemoryCap`] past the cap.
    pub(super) fn alloc(
        &self,
        order: &CudaStream,
        owner: &Arc<CudaStream>,
        len: usize,
    ) -> Result<CudaSlice<f32>, GpuError> {
        let bytes = f32_bytes(len)?;
        // Not cudarc's bind_to_thread, which would hand this allocation an error a drop
        // recorded on the context (see `current`).
        super::make_current(&self.ctx);
        if let Some(cap) = self.cap {
            check_cap(
                bytes,
                self.pool_usage()?,
                self.driver_free().unwrap_or(0),
                cap,
            )?;
        }
        let mut ptr: sys::CUdeviceptr = 0;
        // An empty buffer still gets a distinct (minimal) allocation: a zero-byte request is
        // not one the driver promises to accept.
        let request = usize::try_from(bytes.max(4)).map_err(|_| GpuError::TooLarge(len))?;
        // SAFETY: `ptr` is an out-parameter; the pool and the stream are live; the memory is
        // uninitialized, and every buffer is fully written by the op that allocates it before
        // any read.
        unsafe { sys::cuMemAllocFromPoolAsync(&mut ptr, request, self.pool, order.cu_stream()) }
            .result()?;
        // SAFETY: `ptr` is a live allocation of at least `len` f32 from this context; event
        // tracking is off, so the upgrade creates no events (and cannot panic).
        Ok(unsafe { owner.upgrade_device_ptr(ptr, len) })
    }

    /// A buffer of `len` f32 on `stream` (allocated in its order and owned by it) from the
    /// caching allocator: a cached block of its size class when there is one, else a new one
    /// of the class's size, tried again after the cache is given back when the pool or the
    /// cap has no room.
    pub(super) fn alloc_buffer(
        &self,
        stream: &Arc<CudaStream>,
        len: usize,
    ) -> Result<DeviceBuffer, GpuError> {
        let cache = &self.cache;
        let class = size_class(f32_bytes(len)?);
        if let Some(ptr) = cache.take(class) {
            // SAFETY: a live block of `class` ≥ 4·len bytes from this pool, reused on the
            // stream it was freed on (see `block_cache`); event tracking is off, so the
            // upgrade makes no driver call.
            let slice = unsafe { stream.upgrade_device_ptr(ptr, len) };
            return Ok(DeviceBuffer::cached(slice, cache.clone(), class));
        }
        let class_len = usize::try_from(class / 4).map_err(|_| GpuError::TooLarge(len))?;
        let block = match self.alloc(stream, stream, class_len) {
            Err(e) if lacks_room(&e) && cache.bytes() > 0 => {
                cache.trim();
                self.alloc(stream, stream, class_len)?
            }
            other => other?,
        };
        cache.lend_new(class);
        // The block is `class_len` long; the buffer shows `len` of it.
        let ptr = block.leak();
        // SAFETY: as above, for a block just allocated on `stream`.
        let slice = unsafe { stream.upgrade_device_ptr(ptr, len) };
        Ok(DeviceBuffer::cached(slice, cache.clone(), class))
    }
}

/// Whether an allocation failed for want of room (the device's or the cap's), so that giving
/// cached blocks back may let it through.
fn lacks_room(e: &GpuError) -> bool {
    match e {
        GpuError::OverMemoryCap { .. } => true,
        GpuError::Driver(d) => d.0 == sys::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY,
        _ => false,
    }
}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        // Cached blocks go back first, so the pool can go once the live buffers are freed.
        self.cache.trim();
        super::make_current(&self.ctx);
        // SAFETY: the pool was created by `create` and is destroyed once, here; buffers still
        // out are released by the driver when they are freed (cuMemPoolDestroy's documented
        // behaviour), so a tensor outliving the device stays valid.
        let _ = unsafe { sys::cuMemPoolDestroy(self.pool) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn usage(reserved: u64, used: u64) -> PoolUsage {
        PoolUsage {
            reserved,
            used,
            reserved_high: reserved,
            used_high: used,
        }
    }

    #[test]
    fn cached_pool_memory_counts_as_free_for_parbench() {
        // 10 GiB free by the driver's count, 6 GiB reserved of which 2 GiB live: 4 GiB more.
        let u = usage(6 * GIB, 2 * GIB);
        assert_eq!(u.cached(), 4 * GIB);
        assert_eq!(free_for_parbench(10 * GIB, u, None), 14 * GIB);
        // Under a 5 GiB cap, 3 GiB are left whatever the driver says.
        assert_eq!(free_for_parbench(10 * GIB, u, Some(5 * GIB)), 3 * GIB);
        // A cap already exceeded leaves nothing rather than wrapping around.
        assert_eq!(
            free_for_parbench(10 * GIB, usage(8 * GIB, 8 * GIB), Some(5 * GIB)),
            0
        );
        // Inconsistent counters (used above reserved) never add memory.
        assert_eq!(free_for_parbench(GIB, usage(GIB, 2 * GIB), None), GIB);
    }

    #[test]
    fn the_cap_refuses_what_would_go_past_it_and_names_the_figures() {
        let u = usage(3 * GIB, 2 * GIB);
        assert!(check_cap(GIB, u, 70 * GIB, 3 * GIB).is_ok());
        let err = check_cap(GIB + 1, u, 70 * GIB, 3 * GIB).unwrap_err();
        assert!(matches!(
            err,
            GpuError::OverMemoryCap {
                requested,
                live,
                reserved,
                cap,
                ..
            } if requested == GIB + 1 && live == 2 * GIB && reserved == 3 * GIB && cap == 3 * GIB
        ));
        let text = err.to_string();
        assert!(!text.contains('\n'), "{text}");
        for part in [
            "requested 1.0 GiB",
            "2.0 GiB live",
            "3.0 GiB reserved",
            "70.0 GiB free",
            "cap of 3.0 GiB",
        ] {
            assert!(text.contains(part), "{part:?} missing from {text:?}");
        }
        // A request that overflows a byte count is refused too.
        assert!(check_cap(u64::MAX, u, 0, 3 * GIB).is_err());
        assert!(matches!(f32_bytes(usize::MAX), Err(GpuError::TooLarge(_))));
        assert_eq!(f32_bytes(10).unwrap(), 40);
    }
}
