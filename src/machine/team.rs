//! A team of threads, one per CPU, pinned where the OS allows and started together: how the
//! all-core probes (FMA peak, memory bandwidth) run, so that their figure is the machine's
//! with every core busy at once rather than the sum of cores measured one after another.

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Instant;

use super::affinity;

/// What a team's run took.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TeamRun {
    /// From the first thread's start to the last thread's end, in seconds.
    pub wall_s: f64,
    /// True when every thread ran pinned to a CPU of its own.
    pub pinned: bool,
}

/// Runs `work(i)` on `threads` threads (`i` in `0..threads`), each pinned to its own allowed
/// CPU where there are enough, released together once all of them exist. Fails only if the OS
/// refuses a thread; the threads already started are then released without working.
pub fn run_team(threads: usize, work: impl Fn(usize) + Sync) -> std::io::Result<TeamRun> {
    let threads = threads.max(1);
    let cpus = affinity::allowed();
    // Not a `Barrier`: a thread the OS refuses would leave the others waiting at it for ever.
    let state = AtomicU8::new(WAIT);
    let spans = std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(threads);
        for i in 0..threads {
            let (state, work, cpu) = (&state, &work, affinity::cpu_for(&cpus, i, threads));
            let spawned = std::thread::Builder::new()
                .name(format!("parbench probe {i}"))
                .spawn_scoped(s, move || {
                    let pinned = affinity::pin(cpu);
                    // Yield while waiting: on a machine with fewer CPUs than threads a spinning
                    // thread would keep the others from starting.
                    while state.load(Ordering::Acquire) == WAIT {
                        std::thread::yield_now();
                    }
                    if state.load(Ordering::Acquire) == ABORT {
                        return None;
                    }
                    let t = Instant::now();
                    work(i);
                    Some((t, Instant::now(), pinned))
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    state.store(ABORT, Ordering::Release);
                    return Err(e);
                }
            }
        }
        state.store(GO, Ordering::Release);
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .ok()
                    .flatten()
                    .ok_or_else(|| std::io::Error::other("a probe thread panicked"))
            })
            .collect::<std::io::Result<Vec<_>>>()
    })?;
    let first = spans.iter().map(|s| s.0).min();
    let last = spans.iter().map(|s| s.1).max();
    Ok(TeamRun {
        wall_s: first.zip(last).map_or(0.0, |(a, b)| (b - a).as_secs_f64()),
        pinned: spans.iter().all(|s| s.2),
    })
}

/// The team's start signal: threads wait, then all go, or all stop when one could not start.
const WAIT: u8 = 0;
const GO: u8 = 1;
const ABORT: u8 = 2;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn every_thread_works_once_and_the_wall_time_covers_them() {
        let done = AtomicUsize::new(0);
        let run = run_team(3, |i| {
            done.fetch_add(1 << (8 * i), Ordering::Relaxed);
        })
        .unwrap();
        assert_eq!(done.into_inner(), 0x01_01_01);
        assert!(run.wall_s.is_finite() && run.wall_s >= 0.0);
    }
}
