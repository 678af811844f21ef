//! The machine's floor for handing work to another thread, measured without the engine: what
//! any asynchronous engine pays at least per op on this machine, so the engine's own per-op
//! cost can be quoted as a ratio to it from the same run (an absolute time drifts with the
//! machine; the ratio does not). The other machine figure the `async` scenario quotes, the
//! latency of a cache line between two cores, is one of the machine's limits
//! (`machine::line`).

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
}
