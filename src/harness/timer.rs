//! The Benchmark timer.
//!
//! Timing asynchronous work without synchronizing measures only how fast ops were *pushed*
//! (the "timing without synchronization" pitfall of the book). The timer therefore always
//! waits for the engine before it reads the clock.

use std::time::{Duration, Instant};

use crate::engine::{Engine, EngineError};

/// A scoped timer like the book's `d2l.Benchmark`: created before the work, it prints
/// `description: 0.1234 sec` when dropped, after `wait_all` on the engine.
///
/// ```
/// use parbench::engine::{Engine, Mode};
/// use parbench::harness::Benchmark;
/// let (engine, _lanes) = Engine::with_thread_lanes(Mode::Threaded, 1).unwrap();
/// let elapsed = Benchmark::new(&engine, "nothing").stop().unwrap(); // `stop` returns instead of printing
/// assert!(elapsed.as_secs() < 1);
/// ```
pub struct Benchmark<'e> {
    engine: &'e Engine,
    description: String,
    start: Instant,
    stopped: bool,
}

impl<'e> Benchmark<'e> {
    /// Start timing.
    pub fn new(engine: &'e Engine, description: impl Into<String>) -> Self {
        Benchmark {
            engine,
            description: description.into(),
            start: Instant::now(),
            stopped: false,
        }
    }

    /// Synchronize, stop, and return the elapsed time without printing.
    pub fn stop(mut self) -> Result<Duration, EngineError> {
        self.stopped = true;
        self.engine.wait_all()?;
        Ok(self.start.elapsed())
    }
}

impl Drop for Benchmark<'_> {
    fn drop(&mut self) {
        if self.stopped {
            return;
        }
        match self.engine.wait_all() {
            Ok(()) => println!(
                "{}: {:.4} sec",
                self.description,
                self.start.elapsed().as_secs_f64()
            ),
            Err(e) => println!(
                "{}: failed after {:.4} sec: {e}",
                self.description,
                self.start.elapsed().as_secs_f64()
            ),
        }
    }
}

/// Time `work` (which pushes ops and returns their outputs), then wait for the engine, and
/// return the time up to the end of the wait. The outputs are dropped after the clock stops,
/// so freeing them is not part of the measurement.
pub fn synced<T, E: From<EngineError>>(
    engine: &Engine,
    work: impl FnOnce() -> Result<T, E>,
) -> Result<Duration, E> {
    let start = Instant::now();
    let outputs = work()?;
    engine.wait_all()?;
    let elapsed = start.elapsed();
    drop(outputs);
    Ok(elapsed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Mode, Var};

    #[test]
    fn the_timer_waits_for_pushed_work() {
        let (engine, lanes) = Engine::with_thread_lanes(Mode::Threaded, 1).unwrap();
        let b = Benchmark::new(&engine, "sleepy");
        engine.push("sleep", lanes[0], &[], &[&Var::new()], || {
            std::thread::sleep(Duration::from_millis(40));
            Ok(())
        });
        let t = b.stop().unwrap();
        assert!(
            t >= Duration::from_millis(40),
            "stopped before the work finished: {t:?}"
        );
    }

    #[test]
    fn synced_reports_engine_errors() {
        let (engine, lanes) = Engine::with_thread_lanes(Mode::Threaded, 1).unwrap();
        let r: Result<Duration, EngineError> = synced(&engine, || {
            engine.push("bad", lanes[0], &[], &[&Var::new()], || {
                Err(crate::engine::OpError::msg("nope"))
            });
            Ok(())
        });
        assert!(r.is_err());
    }
}
