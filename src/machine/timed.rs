//! Timing a probe's loop: sized to a target time from a short first run, then the best of a few
//! repeats. Best, not median: an interruption (another process, the hypervisor) only ever slows
//! a loop down, so the fastest repeat is the closest to what the hardware does.

/// Iterations of the first, calibrating run.
const FIRST: u64 = 1_000;
/// No loop runs more iterations than this, whatever a calibration reads.
const MOST: u64 = 1 << 40;

/// The iteration count at which `run` (which runs that many iterations and returns seconds)
/// takes about `target_s`. Runs grow until one takes a tenth of the target, then the count is
/// scaled from the faster of two runs of that size; the growing runs also warm the core up (its clock, a vector unit that powers up on
/// first use).
pub fn calibrate(target_s: f64, mut run: impl FnMut(u64) -> f64) -> u64 {
    let mut n = FIRST;
    loop {
        let t = run(n);
        if t >= target_s / 10.0 || n >= MOST {
            // Once more, keeping the faster: a run the OS interrupted reads slow, and the
            // timed loops sized from it would be too short.
            let t = t.min(run(n));
            let scaled = n as f64 * target_s / t.max(1e-9);
            return (scaled.round() as u64).clamp(1, MOST);
        }
        n = n.saturating_mul(8).min(MOST);
    }
}

/// The highest rate (iterations per second) over `repeats` runs of `n` iterations.
pub fn best_rate(n: u64, repeats: usize, mut run: impl FnMut(u64) -> f64) -> f64 {
    (0..repeats.max(1))
        .map(|_| n as f64 / run(n).max(1e-12))
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loop_is_sized_to_the_target_and_its_best_repeat_kept() {
        // A pretend loop of 1 µs an iteration: 1 ms is 1000 iterations.
        let n = calibrate(1e-3, |n| n as f64 * 1e-6);
        assert_eq!(n, 1000);
        // Its first run interrupted (10× slow): the second sizes the loop.
        let mut slow = [1e-2, 1e-3].into_iter();
        assert_eq!(calibrate(1e-3, |_| slow.next().unwrap_or(1.0)), 1000);
        // A loop of 10 ns an iteration grows past the first runs before scaling.
        let mut runs = Vec::new();
        let n = calibrate(1e-3, |n| {
            runs.push(n);
            n as f64 * 1e-8
        });
        assert_eq!(runs, [1000, 8000, 64_000, 64_000]);
        assert_eq!(n, 100_000);
        let mut times = [2.0, 1.0, 4.0].into_iter();
        assert_eq!(best_rate(10, 3, |_| times.next().unwrap_or(1.0)), 10.0);
    }
}
