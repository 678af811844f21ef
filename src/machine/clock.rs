//! The core clock, from a chain of dependent 64-bit multiplies: `imul r64, r64` takes 3 cycles
//! on every x86-64 core of the last decade (Intel and AMD), so cycles are 3 × multiplies and
//! the clock is cycles over time. Not an `add reg, imm` chain: recent Intel cores fold those at
//! rename and the figure reads several GHz too high. The chain is inline assembly so that the
//! compiler cannot fold or reorder it.

use serde::{Deserialize, Serialize};

use super::probe::Probe;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Clock {
    /// Core clock in GHz (10^9 cycles per second) while one thread runs integer code.
    pub ghz: f64,
    pub method: String,
}

/// Multiplies per iteration of the chain's loop (the `.rept` count below).
#[cfg(target_arch = "x86_64")]
const MULTIPLIES: u64 = 10;
/// Cycles of one dependent `imul r64, r64`.
#[cfg(target_arch = "x86_64")]
const IMUL_CYCLES: u64 = 3;

/// Seconds `iterations` trips of a chain of [`MULTIPLIES`] dependent multiplies take.
#[cfg(target_arch = "x86_64")]
fn imul_chain(iterations: u64) -> f64 {
    let t = std::time::Instant::now();
    // SAFETY: the assembly reads and writes only the two registers it is given (and the
    // flags, which `asm!` assumes clobbered); it touches no memory and no stack, and the loop
    // ends because the counter starts at 1 or more and counts down.
    unsafe {
        std::arch::asm!(
            "2:",
            ".rept 10",
            "imul {x}, {x}",
            ".endr",
            "dec {n}",
            "jnz 2b",
            x = inout(reg) 3u64 => _,
            n = inout(reg) iterations.max(1) => _,
            options(nomem, nostack),
        );
    }
    t.elapsed().as_secs_f64()
}

/// The clock from chains of about `target_s` seconds, best of `repeats`.
#[cfg(target_arch = "x86_64")]
pub fn measure(target_s: f64, repeats: usize) -> Probe<Clock> {
    use super::timed::{best_rate, calibrate};
    let n = calibrate(target_s, imul_chain);
    let per_second = best_rate(n, repeats, imul_chain);
    Probe::Measured(Clock {
        ghz: per_second * (MULTIPLIES * IMUL_CYCLES) as f64 / 1e9,
        method: format!(
            "a dependent chain of imul r64, r64 ({IMUL_CYCLES} cycles each), best of {repeats} \
             runs of about {:.0} ms",
            target_s * 1e3
        ),
    })
}

/// Elsewhere no instruction's latency is known well enough to turn a time into cycles.
#[cfg(not(target_arch = "x86_64"))]
pub fn measure(_target_s: f64, _repeats: usize) -> Probe<Clock> {
    Probe::NotMeasured(format!(
        "the clock probe times a chain of x86-64 imul instructions; this is {}",
        std::env::consts::ARCH
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_is_a_positive_finite_figure_or_says_why_not() {
        match measure(1e-3, 2) {
            Probe::Measured(c) => {
                assert!(c.ghz.is_finite() && c.ghz > 0.0, "{c:?}");
                assert!(c.method.contains("imul"), "{}", c.method);
            }
            Probe::NotMeasured(why) => {
                let x86 = std::env::consts::ARCH == "x86_64";
                assert!(!x86, "{why}");
            }
        }
    }
}
