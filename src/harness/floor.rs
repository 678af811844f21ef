//! The machine's floor for handing work to another thread, measured without the engine: what
//! any asynchronous engine pays at least per op on this machine, so the engine's own per-op
//! cost can be quoted as a ratio to it from the same run (an absolute time drifts with the
//! machine; the ratio does not).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// One round: `n` boxed closures sent through a crossbeam channel to one other thread, which
/// calls each (it bumps a counter) and frees it, timed until the counter shows all `n` ran.
/// That is the mechanism every engine op includes (an allocation on the pushing thread, a
/// hand-off, a call and a free on the worker, a completion the front end can see) and
/// nothing else. Fails only if the OS refuses a thread.
pub fn channel_round(n: u64) -> std::io::Result<Duration> {
    type Job<'a> = Box<dyn FnOnce() + Send + 'a>;
    let done = AtomicU64::new(0);
    let (tx, rx) = crossbeam_channel::unbounded::<Job<'_>>();
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("parbench channel floor".into())
            .spawn_scoped(s, move || {
                while let Ok(job) = rx.recv() {
                    job();
                }
            })?;
        // Send `k` closures, then spin until the counter reaches `total`. A send fails only
        // if the worker is gone, and it lives until `tx` is dropped.
        let run = |k: u64, total: u64| {
            for _ in 0..k {
                let d = &done;
                let _ = tx.send(Box::new(move || {
                    d.fetch_add(1, Ordering::Release);
                }));
            }
            while done.load(Ordering::Acquire) < total {
                std::hint::spin_loop();
            }
        };
        // Warm the thread and the channel: the first message pays the thread's start.
        run(1, 1);
        let t = Instant::now();
        run(n, n + 1);
        let elapsed = t.elapsed();
        drop(tx);
        Ok(elapsed)
    })
}

/// The median over `rounds` rounds of [`channel_round`], in seconds per closure.
pub fn channel_floor_per_op(n: u64, rounds: usize) -> std::io::Result<f64> {
    let mut per_op = Vec::with_capacity(rounds);
    for _ in 0..rounds.max(1) {
        per_op.push(channel_round(n.max(1))?.as_secs_f64() / n.max(1) as f64);
    }
    Ok(super::stats::median(&per_op).unwrap_or(f64::NAN))
}

/// Hops of a cache line in one [`line_round`].
pub const LINE_HOPS: u64 = 20_000;

/// Spins on the line before a waiting thread yields its CPU: on a machine with one CPU the
/// other thread cannot move the line until this one gives the CPU up.
const LINE_SPINS: u32 = 10_000;

/// The line probe's counter value that tells the answering thread to stop.
const ABORT: u64 = u64::MAX;

/// A counter alone on its pair of cache lines (x86 prefetches lines in pairs).
#[repr(align(128))]
struct Line(AtomicU64);

/// One round: two threads pass a counter back and forth `hops` times (each waits for the
/// other's increment, then increments), each pinned to one of the first two CPUs this process
/// may use where the OS allows it (Linux). Returns seconds per one-way hop: the latency of
/// moving one cache line between the two CPUs. An engine op moves several lines between the
/// pushing thread and a worker (the op, its output, reference and memory counts), so on a VM
/// whose host changes this latency from minute to minute, per-op figures follow it. Unpinned,
/// two new threads often share a CPU for a while and the figure reads a scheduler's hand-over
/// instead. The caller's own thread is left as it was. Fails only if the OS refuses a thread.
pub fn line_round(hops: u64) -> std::io::Result<f64> {
    // The counter ends at an even value (the other thread's turns are the odd ones), at
    // least 4, so that at least two hops are timed after the first answer.
    let end = hops.max(4).next_multiple_of(2);
    let line = Line(AtomicU64::new(0));
    let cpus = affinity::allowed();
    let cpu = |i: usize| (cpus.len() >= 2).then(|| cpus[i]);
    // Wait until the counter reaches `want` and return it: spin, yielding now and then so that
    // a machine with fewer CPUs than threads still finishes (slowly) instead of hanging a time
    // slice per hop. The counter only grows; `ABORT` passes every wait.
    let wait_for = |want: u64| {
        let mut spins = 0u32;
        loop {
            let now = line.0.load(Ordering::Acquire);
            if now >= want {
                return now;
            }
            spins += 1;
            if spins.is_multiple_of(LINE_SPINS) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    };
    std::thread::scope(|s| {
        let answering = std::thread::Builder::new()
            .name("parbench line probe B".into())
            .spawn_scoped(s, || {
                affinity::pin(cpu(1));
                // Odd values are this thread's turn.
                let mut v = 1;
                while v < end {
                    if wait_for(v) == ABORT {
                        break;
                    }
                    line.0.store(v + 1, Ordering::Release);
                    v += 2;
                }
            })?;
        let timing = std::thread::Builder::new()
            .name("parbench line probe A".into())
            .spawn_scoped(s, || {
                affinity::pin(cpu(0));
                // The first hop (0 → 1) starts the other thread's loop, which may still be
                // starting: time from the first answer on.
                line.0.store(1, Ordering::Release);
                wait_for(2);
                let t = Instant::now();
                let mut v = 2;
                while v < end {
                    line.0.store(v + 1, Ordering::Release);
                    wait_for(v + 2);
                    v += 2;
                }
                t.elapsed().as_secs_f64() / (end - 2) as f64
            });
        let timing = match timing {
            Ok(t) => t,
            Err(e) => {
                // Release the answering thread, so the scope can end.
                line.0.store(ABORT, Ordering::Release);
                return Err(e);
            }
        };
        let _ = answering.join();
        timing
            .join()
            .map_err(|_| std::io::Error::other("the line probe's timing thread panicked"))
    })
}

/// Which CPUs this process may run on, and pinning a thread to one.
#[cfg(target_os = "linux")]
mod affinity {
    /// The CPUs in this thread's affinity mask, in order; empty if the OS does not say.
    pub(super) fn allowed() -> Vec<usize> {
        // SAFETY: `cpu_set_t` is plain data, all zeros is an empty set, and the call writes at
        // most `size_of::<cpu_set_t>()` bytes into it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
                return Vec::new();
            }
            (0..libc::CPU_SETSIZE as usize)
                .filter(|&c| libc::CPU_ISSET(c, &set))
                .collect()
        }
    }

    /// Pin the calling thread to `cpu`; nothing when `None` or when the OS refuses (the probe
    /// then runs unpinned).
    pub(super) fn pin(cpu: Option<usize>) {
        let Some(cpu) = cpu else { return };
        // SAFETY: as above; `cpu` came from the allowed set, below `CPU_SETSIZE`.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            let _ = libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
    }
}

/// Elsewhere the probe's threads run where the OS puts them.
#[cfg(not(target_os = "linux"))]
mod affinity {
    pub(super) fn allowed() -> Vec<usize> {
        Vec::new()
    }

    pub(super) fn pin(_cpu: Option<usize>) {}
}

/// Every round of [`line_round`] over `rounds` rounds, in seconds per hop, or `None` on a
/// machine with fewer than two CPUs, where the two threads would share one and the figure
/// would be a scheduler's time slice, not a cache line's trip.
pub fn line_rounds(hops: u64, rounds: usize) -> std::io::Result<Option<Vec<f64>>> {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return Ok(None);
    }
    (0..rounds.max(1))
        .map(|_| line_round(hops))
        .collect::<std::io::Result<Vec<f64>>>()
        .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_runs_every_closure_and_takes_time() {
        let t = channel_round(1000).unwrap();
        assert!(t > Duration::ZERO);
        let per_op = channel_floor_per_op(100, 3).unwrap();
        assert!(per_op.is_finite() && per_op > 0.0);
    }

    #[test]
    fn a_line_round_counts_every_hop_and_takes_time() {
        // Odd and even hop counts both end (each side stops at its last turn).
        for hops in [2, 3, 1001, 1002] {
            let per_hop = line_round(hops).unwrap();
            assert!(per_hop.is_finite() && per_hop > 0.0, "{hops}: {per_hop}");
        }
        if let Some(rounds) = line_rounds(1000, 3).unwrap() {
            assert_eq!(rounds.len(), 3);
        }
    }
}
