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
    /// An error of work pushed before the timer started: reported by `stop`, since that
    /// earlier work was drained, not timed.
    earlier: Option<EngineError>,
}

impl<'e> Benchmark<'e> {
    /// Wait for work pushed earlier (so it is not billed to this timer), then start timing.
    pub fn new(engine: &'e Engine, description: impl Into<String>) -> Self {
        let earlier = engine.wait_all().err();
        Benchmark {
            engine,
            description: description.into(),
            start: Instant::now(),
            stopped: false,
            earlier,
        }
    }

    /// Synchronize, stop, and return the elapsed time without printing.
    pub fn stop(mut self) -> Result<Duration, EngineError> {
        self.stopped = true;
        self.engine.wait_all()?;
        let elapsed = self.start.elapsed();
        self.earlier.take().map_or(Ok(elapsed), Err)
    }
}

impl Drop for Benchmark<'_> {
    fn drop(&mut self) {
        if self.stopped {
            return;
        }
        let outcome = self
            .engine
            .wait_all()
            .and(self.earlier.take().map_or(Ok(()), Err));
        let (what, s) = (&self.description, self.start.elapsed().as_secs_f64());
        match outcome {
            Ok(()) => println!("{what}: {s:.4} sec"),
            Err(e) => println!("{what}: failed after {s:.4} sec: {e}"),
        }
    }
}

/// Time `work` (which pushes ops and returns their outputs), then wait for the engine, and
/// return the time up to the end of the wait. Work pushed earlier is drained before the clock
/// starts, so leftovers are not billed to this sample. The outputs are dropped after the
/// clock stops, so freeing them is not part of the measurement.
pub fn synced<T, E: From<EngineError>>(
    engine: &Engine,
    work: impl FnOnce() -> Result<T, E>,
) -> Result<Duration, E> {
    engine.wait_all()?;
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
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

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

    /// Push an op that sets a flag when done, after a pause long enough that the timer under
    /// test would start before it ends if it did not drain.
    fn leftover(engine: &Engine, lane: crate::engine::LaneId) -> Arc<AtomicBool> {
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        engine.push("leftover", lane, &[], &[&Var::new()], move || {
            std::thread::sleep(Duration::from_millis(30));
            d.store(true, Ordering::SeqCst);
            Ok(())
        });
        done
    }

    #[test]
    fn timers_drain_earlier_work_before_the_clock_starts() {
        let (engine, lanes) = Engine::with_thread_lanes(Mode::Threaded, 1).unwrap();
        let done = leftover(&engine, lanes[0]);
        let r: Result<Duration, EngineError> = synced(&engine, || {
            // The clock has started: the earlier op must already be finished.
            assert!(
                done.load(Ordering::SeqCst),
                "leftover work billed to this sample"
            );
            Ok(())
        });
        r.unwrap();
        let done = leftover(&engine, lanes[0]);
        let b = Benchmark::new(&engine, "after leftovers");
        assert!(done.load(Ordering::SeqCst), "Benchmark::new did not drain");
        b.stop().unwrap();
    }

    #[test]
    fn engine_errors_are_reported_and_earlier_ones_not_timed() {
        let (engine, lanes) = Engine::with_thread_lanes(Mode::Threaded, 1).unwrap();
        engine.push("bad", lanes[0], &[], &[&Var::new()], || {
            Err(crate::engine::OpError::msg("earlier"))
        });
        let b = Benchmark::new(&engine, "after a failure");
        assert!(b.stop().unwrap_err().to_string().contains("earlier"));
        engine.push("bad", lanes[0], &[], &[&Var::new()], || {
            Err(crate::engine::OpError::msg("earlier"))
        });
        let r: Result<Duration, EngineError> = synced(&engine, || Ok(()));
        assert!(r.is_err());
        // An error of the timed work itself is reported too (on a fresh engine).
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
