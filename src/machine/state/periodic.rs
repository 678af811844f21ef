//! A thread that takes a sample every [`INTERVAL`](super::runnable::INTERVAL) until it is
//! stopped, and hands back what it took: the runnable tasks' sampler and the GPU's watch both
//! run one. Stopped by [`Periodic::finish`], or by being dropped (a run that failed).

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

/// A sampling thread and the way to stop it.
pub struct Periodic<T: Send + 'static> {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<Vec<T>>>,
}

impl<T: Send + 'static> Periodic<T> {
    /// Start a thread named `name` that calls `take` now and every `every` after, keeping the
    /// samples it returns. Where the thread cannot start, nothing is sampled.
    pub fn start(
        name: &str,
        every: Duration,
        mut take: impl FnMut() -> Option<T> + Send + 'static,
    ) -> Periodic<T> {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let mut samples = Vec::new();
                loop {
                    samples.extend(take());
                    // A message or a dropped sender both end the run.
                    match stopped.recv_timeout(every) {
                        Err(RecvTimeoutError::Timeout) => continue,
                        Ok(()) | Err(RecvTimeoutError::Disconnected) => return samples,
                    }
                }
            })
            .ok();
        Periodic {
            stop: Some(stop),
            thread,
        }
    }

    /// Stop the thread and take its samples (none where it never started or panicked).
    pub fn finish(&mut self) -> Vec<T> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default()
    }
}

impl<T: Send + 'static> Drop for Periodic<T> {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_samples_until_stopped_and_keeps_what_it_took() {
        let mut n = 0;
        let mut p = Periodic::start("test sampler", Duration::from_millis(1), move || {
            n += 1;
            (n % 2 == 1).then_some(n)
        });
        // However soon it is stopped, the first sample is taken before the first wait.
        let samples = p.finish();
        assert!(!samples.is_empty());
        assert!(samples.iter().all(|s| s % 2 == 1), "{samples:?}");
        assert!(p.finish().is_empty(), "a second finish takes nothing");
    }
}
