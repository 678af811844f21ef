//! What handing work to another thread costs on this machine, without any engine: boxed
//! closures sent through a channel to one other thread, which runs and frees them. Every engine
//! op includes that mechanism (an allocation on the pushing thread, a hand-off, a call and a
//! free on the worker, a completion the front end can see), so an engine's per-op cost reads as
//! a multiple of it: a reference, not a bound (an engine may batch where the channel does not).
//! One of the machine's limits; `async` reads it from there.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::probe::Probe;

/// Spins before a waiting thread yields its CPU: on a machine with one CPU the other thread
/// cannot move on until this one gives the CPU up.
const SPINS: u32 = 10_000;

/// Spin until `done()`, yielding the CPU every [`SPINS`] spins, so that a machine with fewer
/// CPUs than threads still finishes (slowly) instead of hanging a time slice per wait.
pub(super) fn spin_until(mut done: impl FnMut() -> bool) {
    let mut spins = 0u32;
    while !done() {
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(SPINS) {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

/// One round: `n` boxed closures sent through a crossbeam channel to one other thread, which
/// calls each (it bumps a counter) and frees it, timed until the counter shows all `n` ran.
/// Fails only if the OS refuses a thread.
pub fn channel_round(n: u64) -> std::io::Result<Duration> {
    type Job<'a> = Box<dyn FnOnce() + Send + 'a>;
    let done = AtomicU64::new(0);
    let (tx, rx) = crossbeam_channel::unbounded::<Job<'_>>();
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("parbench channel probe".into())
            .spawn_scoped(s, move || {
                while let Ok(job) = rx.recv() {
                    job();
                }
            })?;
        // Send `k` closures, then spin until the counter reaches `total`. A send fails only if
        // the worker is gone, and it lives until `tx` is dropped.
        let run = |k: u64, total: u64| {
            for _ in 0..k {
                let d = &done;
                let _ = tx.send(Box::new(move || {
                    d.fetch_add(1, Ordering::Release);
                }));
            }
            spin_until(|| done.load(Ordering::Acquire) >= total);
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelHandoff {
    /// Seconds per closure: the median over the rounds.
    pub per_op_s: f64,
    pub method: String,
}

/// The median of `rounds` rounds of [`channel_round`] with `closures` closures each; not
/// measured if the OS refuses a thread.
pub fn measure(closures: u64, rounds: usize) -> Probe<ChannelHandoff> {
    let (closures, rounds) = (closures.max(1), rounds.max(1));
    let per_op: std::io::Result<Vec<f64>> = (0..rounds)
        .map(|_| channel_round(closures).map(|t| t.as_secs_f64() / closures as f64))
        .collect();
    match per_op {
        Ok(mut each) => {
            each.sort_by(f64::total_cmp);
            Probe::Measured(ChannelHandoff {
                per_op_s: each[each.len() / 2],
                method: format!(
                    "{} boxed closures sent through a channel to one other thread, which runs \
                     and frees them; the median of {rounds} rounds",
                    crate::units::grouped(closures)
                ),
            })
        }
        Err(e) => Probe::NotMeasured(format!("the channel probe failed: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_runs_every_closure_and_takes_time() {
        let t = channel_round(1000).unwrap();
        assert!(t > Duration::ZERO);
        match measure(100, 3) {
            Probe::Measured(c) => {
                assert!(c.per_op_s.is_finite() && c.per_op_s > 0.0, "{c:?}");
                assert!(c.method.contains("median of 3 rounds"), "{c:?}");
            }
            Probe::NotMeasured(why) => panic!("{why}"),
        }
    }
}
