//! The latency of moving one cache line between two cores: two pinned threads pass a counter
//! back and forth. An engine op moves several lines between the pushing thread and a worker (the
//! op, its output, reference and memory counts), so per-op figures follow this latency, on a VM
//! whose host changes it from minute to minute too; the machine's limits record it, and the
//! `async` scenario reads it from there beside its own.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::affinity;
use super::probe::Probe;

/// Hops of a cache line in one [`line_round`].
pub const LINE_HOPS: u64 = 20_000;

/// The line probe's counter value that tells the answering thread to stop.
const ABORT: u64 = u64::MAX;

/// A counter alone on its pair of cache lines (x86 prefetches lines in pairs).
#[repr(align(128))]
struct Line(AtomicU64);

/// One round: two threads pass a counter back and forth `hops` times (each waits for the
/// other's increment, then increments), each pinned to one of the first two CPUs this process
/// may use where the OS allows it (Linux). Returns seconds per one-way hop: the latency of
/// moving one cache line between the two CPUs. Unpinned, two new threads often share a CPU for
/// a while and the figure reads a scheduler's hand-over instead. The caller's own thread is
/// left as it was. Fails only if the OS refuses a thread.
pub fn line_round(hops: u64) -> std::io::Result<f64> {
    // The counter ends at an even value (the other thread's turns are the odd ones), at
    // least 4, so that at least two hops are timed after the first answer.
    let end = hops.max(4).next_multiple_of(2);
    let line = Line(AtomicU64::new(0));
    let cpus = affinity::allowed();
    let cpu = |i: usize| affinity::cpu_for(&cpus, i, 2);
    // Wait until the counter reaches `want` and return it. The counter only grows; `ABORT`
    // passes every wait.
    let wait_for = |want: u64| {
        let mut now = 0;
        super::channel::spin_until(|| {
            now = line.0.load(Ordering::Acquire);
            now >= want
        });
        now
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

/// Every round of [`line_round`] over `rounds` rounds, in seconds per hop, or `None` on a
/// machine with fewer than two CPUs, where the two threads would share one and the figure
/// would be a scheduler's time slice, not a cache line's trip.
pub fn line_rounds(hops: u64, rounds: usize) -> std::io::Result<Option<Vec<f64>>> {
    if super::affinity::available_cores() < 2 {
        return Ok(None);
    }
    (0..rounds.max(1))
        .map(|_| line_round(hops))
        .collect::<std::io::Result<Vec<f64>>>()
        .map(Some)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LineLatency {
    /// Seconds one cache line takes from one core to another: the median over the rounds.
    pub one_way_s: f64,
    pub method: String,
}

/// The median of `rounds` rounds of [`LINE_HOPS`] hops; not measured on a machine with one
/// CPU, or if the OS refuses a thread.
pub fn measure(rounds: usize) -> Probe<LineLatency> {
    let rounds = rounds.max(1);
    match line_rounds(LINE_HOPS, rounds) {
        Ok(Some(mut each)) => {
            each.sort_by(f64::total_cmp);
            Probe::Measured(LineLatency {
                one_way_s: each[each.len() / 2],
                method: format!(
                    "two threads pinned to two CPUs pass a counter back and forth {} times; \
                     the median of {rounds} rounds",
                    crate::units::grouped(LINE_HOPS)
                ),
            })
        }
        Ok(None) => Probe::NotMeasured(
            "this process has one CPU: two threads would share it and read a time slice".into(),
        ),
        Err(e) => Probe::NotMeasured(format!("the line probe failed: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        match measure(1) {
            Probe::Measured(l) => assert!(l.one_way_s.is_finite() && l.one_way_s > 0.0),
            Probe::NotMeasured(why) => assert!(why.contains("one CPU"), "{why}"),
        }
    }
}
