//! Counting the runnable tasks, ours and not ours, a few times a second over a run, on a
//! background thread that sleeps between samples. CPU time (`snapshot.rs`) says how much else
//! ran; this says how many competed at once, which is what makes a thread of ours wait, and
//! how many of our own threads wanted a core at once (more than the cores: they took turns).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::periodic::Periodic;
use super::snapshot;

/// Time between samples: a few a second, so a run of a second has several, while the reads
/// (one `/proc/stat` and a `stat` per thread of ours, some tens of microseconds) cost well
/// under 0.1% of a core.
pub const INTERVAL: Duration = Duration::from_millis(200);

/// Runnable tasks that were not ours, over the run's samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Runnable {
    pub mean: f64,
    pub max: u32,
    pub samples: usize,
}

impl Runnable {
    /// The summary of `counts`; `None` for no sample.
    pub fn of(counts: &[u32]) -> Option<Runnable> {
        let max = *counts.iter().max()?;
        let mean = counts.iter().map(|&c| f64::from(c)).sum::<f64>() / counts.len() as f64;
        Some(Runnable {
            mean,
            max,
            samples: counts.len(),
        })
    }
}

/// The sampling thread; [`finish`](Sampler::finish) stops it and returns what it saw. Dropped
/// unfinished (the run failed), it stops the thread too.
pub struct Sampler {
    thread: Periodic<(u32, u32)>,
}

impl Sampler {
    /// Start sampling now. Where the thread cannot start, the sampler samples nothing.
    pub fn start() -> Sampler {
        Sampler {
            thread: Periodic::start("parbench state", INTERVAL, snapshot::runnable_now),
        }
    }

    /// Stop the thread and summarize what it saw: runnable tasks that were not ours, and our
    /// own threads that were runnable (the sampling thread aside).
    pub fn finish(mut self) -> (Option<Runnable>, Option<Runnable>) {
        let counts = self.thread.finish();
        let (others, ours): (Vec<u32>, Vec<u32>) = counts.into_iter().unzip();
        (Runnable::of(&others), Runnable::of(&ours))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn counts_summarize_as_mean_and_max() {
        let r = Runnable::of(&[0, 2, 4, 2]).expect("samples");
        assert_eq!((r.mean, r.max, r.samples), (2.0, 4, 4));
        assert_eq!(Runnable::of(&[]), None);
    }

    #[test]
    fn the_sampler_stops_at_once_when_the_run_ends() {
        let start = Instant::now();
        let sampler = Sampler::start();
        std::thread::sleep(Duration::from_millis(450));
        let seen = sampler.finish().0;
        // Stopped by its message, not at the end of a sleep.
        assert!(
            start.elapsed() < Duration::from_millis(450) + INTERVAL,
            "{:?}",
            start.elapsed()
        );
        if cfg!(target_os = "linux") {
            let seen = seen.expect("samples on Linux");
            assert!((2..=4).contains(&seen.samples), "{seen:?}");
        }
        // Dropped without finishing, it stops too.
        let dropped = Instant::now();
        drop(Sampler::start());
        assert!(dropped.elapsed() < INTERVAL, "{:?}", dropped.elapsed());
    }
}
