//! GPU checks of parbench's memory pool, its cap and the pinned pool's bounds.

use std::sync::Arc;

use super::{CudaDevice, GpuError, GpuOrder, MemoryFraction};

fn open(fraction: Option<f64>) -> Arc<CudaDevice> {
    let fraction = fraction.map(|f| MemoryFraction::new(f).expect("a valid fraction"));
    Arc::new(CudaDevice::open_capped(0, GpuOrder::Stream, fraction).expect("the GPU opens"))
}

#[test]
#[ignore = "needs a GPU"]
fn gpu_memory_cap_refuses_an_allocation_past_it() {
    let d = open(Some(0.01));
    let cap = d.memory_cap().expect("a cap is set");
    let quarter = (cap / 4 / 4) as usize;
    let kept = d.alloc(quarter).expect("a quarter of the cap fits");
    let past = (cap / 4) as usize; // cap bytes in f32: with the quarter live, past the cap
    match d.alloc(past) {
        Err(GpuError::OverMemoryCap {
            requested,
            live,
            cap: c,
            ..
        }) => {
            assert_eq!(requested, past as u64 * 4);
            assert!(live >= quarter as u64 * 4, "live {live}");
            assert_eq!(c, cap);
        }
        other => panic!("expected OverMemoryCap, got {:?}", other.map(|s| s.len())),
    }
    // The device still works: free space honours the cap, and a small buffer round-trips.
    let free = d.free_memory().expect("free memory is known");
    assert!(free <= cap, "free {free} above the cap {cap}");
    drop(kept);
    d.synchronize().expect("no error after the refusal");
    let mut y = d.alloc(16).expect("a small buffer fits");
    d.fill(&mut y, 2.5).expect("fill");
    // The read is on the copy stream: after the fill's ready event (memcheck's stream-ordered
    // race tracking reports a read without it as use before allocation).
    let filled = d.record_ready().expect("a ready event");
    assert_eq!(
        d.read_back(&y, Some(&filled)).expect("read back"),
        vec![2.5; 16]
    );
}

#[test]
#[ignore = "needs a GPU"]
fn gpu_pool_usage_reports_reserved_and_used() {
    // A tensor's buffer, from the caching allocator: a freed block is kept in the cache, which
    // counts it as reserved but not used.
    let d = open(None);
    d.synchronize().unwrap();
    d.reset_pool_high_water().unwrap();
    let before = d.pool_usage().unwrap();
    let n = 16 << 20; // 64 MiB
    let mut a = d.alloc_buffer(n).unwrap();
    d.fill(&mut a, 1.0).unwrap();
    let during = d.pool_usage().unwrap();
    assert!(
        during.used >= before.used + n as u64 * 4,
        "{before:?} → {during:?}"
    );
    assert!(during.reserved >= during.used, "{during:?}");
    drop(a);
    d.synchronize().unwrap();
    let after = d.pool_usage().unwrap();
    // Given back to the cache: used falls back, reserved stays, the marks stay.
    assert!(after.used < during.used, "{during:?} → {after:?}");
    assert!(after.reserved >= n as u64 * 4, "{after:?}");
    assert!(after.used_high >= n as u64 * 4, "{after:?}");
    assert!(after.reserved_high >= after.used_high, "{after:?}");
    // The cached block counts as free for parbench.
    let (driver_free, _) = d.ctx.mem_get_info().unwrap();
    assert!(d.free_memory().unwrap() >= driver_free as u64 + after.cached());
}

#[test]
#[ignore = "needs a GPU"]
fn gpu_pinned_pool_stays_within_its_bound() {
    let d = open(None);
    let len = 1 << 10;
    let bufs: Vec<_> = (0..super::pinned::PER_LENGTH + 8)
        .map(|_| d.alloc_pinned(len).expect("pinned"))
        .collect();
    drop(bufs);
    let (bytes, count) = d.pinned_kept();
    assert_eq!(
        count,
        super::pinned::PER_LENGTH,
        "kept {count} buffers of one length"
    );
    assert_eq!(bytes, (super::pinned::PER_LENGTH * len * 4) as u64);
    assert!(bytes <= super::pinned::PinnedPool::max_bytes());
    d.trim_pinned();
    assert_eq!(d.pinned_kept(), (0, 0));
}

/// A reused pinned buffer read right after its copy was enqueued, with no engine to order the
/// read: its own event makes the read wait for the copy, so it sees the product and not the
/// poison the pool filled it with.
#[test]
#[ignore = "needs a GPU"]
fn gpu_a_pinned_buffer_waits_for_its_own_copy() {
    let d = open(None);
    d.poison_reused_pinned(true);
    let n = 4096;
    let len = n * n;
    drop(d.alloc_pinned(len).unwrap()); // into the pool: the next one is reused, and poisoned
    let mut a = d.alloc(len).unwrap();
    d.fill(&mut a, 1.0).unwrap();
    let mut c = d.alloc(len).unwrap();
    // Products that keep the GPU busy for milliseconds after this thread moves on.
    for _ in 0..4 {
        d.matmul(&a, &a, &mut c, (n, n, n)).unwrap();
    }
    let ready = d.record_ready().unwrap();
    let mut host = d.alloc_pinned(len).unwrap();
    assert!(
        host.buf.as_ref().unwrap().as_slice().unwrap()[0].is_nan(),
        "a reused buffer comes poisoned"
    );
    d.copy_to_host(&c, Some(&ready), &mut host).unwrap();
    let values = host.as_slice().unwrap();
    assert!(
        values.iter().all(|&v| v == n as f32),
        "the read waited for the copy: {:?}",
        &values[..4]
    );
    d.synchronize().unwrap();
}

/// The caching allocator: a freed buffer's block is kept (reserved, not used), the next
/// allocation of its size class takes the same block back, and when the cap has no room the
/// cache gives its blocks back and the allocation goes through.
#[test]
#[ignore = "needs a GPU"]
fn gpu_the_caching_allocator_reuses_blocks_and_gives_them_back_for_room() {
    use cudarc::driver::DevicePtr;
    let d = open(Some(0.0001));
    let cap = d.memory_cap().expect("a cap is set");
    let addr = |b: &super::DeviceBuffer| b.device_ptr(&d.compute).0;
    // Buffers of one 2 MiB class; as many as the cap holds.
    let unit: u64 = 2 << 20;
    let (len, fit) = ((unit / 4) as usize, cap / unit);
    assert!(fit >= 3, "cap {cap} too small for the test");
    let mut first = d.alloc_buffer(len).expect("fits");
    d.fill(&mut first, 1.0).unwrap();
    let first_at = addr(&first);
    drop(first);
    let cached = d.memory.usage().unwrap();
    assert_eq!(cached.used, 0, "a cached block is not used: {cached:?}");
    assert!(cached.reserved >= unit, "{cached:?}");
    let again = d.alloc_buffer(len).expect("fits");
    assert_eq!(addr(&again), first_at, "the cached block is reused");
    drop(again);
    // The cap filled, then cached: a buffer of two blocks fits only with the cache given back.
    let held: Vec<_> = (0..fit).map(|_| d.alloc_buffer(len).unwrap()).collect();
    drop(held);
    assert_eq!(d.memory.cache_bytes(), fit * unit);
    // The marks count live buffers, not cached blocks: none live since the reset.
    d.reset_pool_high_water().unwrap();
    let marks = d.pool_usage().unwrap();
    assert_eq!((marks.used, marks.used_high), (0, 0), "{marks:?}");
    assert!(marks.reserved >= fit * unit, "{marks:?}");
    let one = d.alloc_buffer(len).unwrap();
    drop(one);
    assert_eq!(d.pool_usage().unwrap().used_high, unit);
    let mut two = d
        .alloc_buffer(2 * len)
        .expect("room made by giving the cache back");
    assert_eq!(d.memory.cache_bytes(), 0, "the cache was given back");
    d.fill(&mut two, 2.5).unwrap();
    let filled = d.record_ready().unwrap();
    assert_eq!(d.read_back(&two, Some(&filled)).unwrap()[..4], [2.5; 4]);
    // Past the cap with nothing cached: the cap's error, as without the cache.
    match d.alloc_buffer((cap / 4) as usize) {
        Err(GpuError::OverMemoryCap { .. }) => {}
        other => panic!("expected OverMemoryCap, got {:?}", other.map(|b| b.len())),
    }
    drop(two);
    d.synchronize().expect("no error recorded");
}
