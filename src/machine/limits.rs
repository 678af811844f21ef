//! The machine's limits, measured by parbench itself: the f32 FMA peak (one core and all), the
//! core clock, the memory bandwidth (copy and triad), the cross-core cache-line latency and the
//! cost of handing a closure to another thread through a channel. A
//! figure such as "364.6 GFLOP/s" means little without "76% of this machine's 480 GFLOP/s peak
//! on 2 cores", on laptops, CI runners and VMs alike.
//!
//! Measured once per process ([`limits`]) and cheaply: short loops, few repeats, 64 MiB
//! arrays, about 0.3 s in all in a release build (the budget is 0.5 s), so every report can
//! carry them.

use std::sync::OnceLock;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::channel::{self, ChannelHandoff};
use super::clock::{self, Clock};
use super::fma::{self, FmaPeak};
use super::line::{self, LineLatency};
use super::memory::{self, Bandwidth};
use super::probe::Probe;

/// What the machine can do, and how each figure was taken.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// The f32 fused multiply-add peak, one core and all cores.
    pub fma: Probe<FmaPeak>,
    pub clock: Probe<Clock>,
    /// The memory bandwidth: STREAM copy and triad.
    pub memory: Probe<Bandwidth>,
    /// The latency of a cache line between two cores.
    pub line: Probe<LineLatency>,
    /// A closure handed to another thread through a channel. Reports written before parbench
    /// measured it read back as not measured, saying so.
    #[serde(default = "channel_not_recorded")]
    pub channel: Probe<ChannelHandoff>,
    /// Wall time of all the probes together, in seconds (0 when none ran).
    pub probe_s: f64,
}

/// How long the probes run: their loops' lengths and repeats, the memory probe's arrays.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    /// Length of one timed loop of the clock probe, in seconds.
    pub clock_loop_s: f64,
    /// Length of one timed loop of the FMA probe (one thread, then all cores), in seconds.
    pub fma_loop_s: f64,
    /// Timed loops of each of the clock and FMA probes; the best is kept.
    pub repeats: usize,
    /// Bytes of each of the memory probe's three arrays.
    pub array_bytes: u64,
    /// Timed passes of each memory kernel per thread count; the best is kept.
    pub memory_passes: usize,
    /// Rounds of the cache-line probe; the median is kept.
    pub line_rounds: usize,
    /// Closures per round of the channel probe.
    pub channel_closures: u64,
    /// Rounds of the channel probe; the median is kept.
    pub channel_rounds: usize,
}

impl Budget {
    /// What every process spends: about 0.3 s in a release build, within the 0.5 s budget
    /// (the memory probe's ~150 ms is most of it). Short loops, several of them: on a busy
    /// machine a loop of a few milliseconds often runs within one time slice, so the best of
    /// five short loops finds the hardware where three long ones would each be interrupted.
    pub const PROCESS: Budget = Budget {
        clock_loop_s: 0.002,
        fma_loop_s: 0.004,
        repeats: 5,
        array_bytes: memory::ARRAY_BYTES,
        memory_passes: 2,
        line_rounds: 3,
        channel_closures: 10_000,
        channel_rounds: 5,
    };

    /// The least that still runs every probe (tests, where only the figures' shape matters).
    pub const TINY: Budget = Budget {
        clock_loop_s: 0.000_5,
        fma_loop_s: 0.000_5,
        repeats: 1,
        array_bytes: 64 << 10,
        memory_passes: 1,
        line_rounds: 1,
        channel_closures: 100,
        channel_rounds: 1,
    };
}

/// Why a debug build records no limits. The crate itself is compiled at opt-level 0 there
/// (only its dependencies are optimized, see Cargo.toml), so the probes' loops run several
/// times below the hardware, and a figure from them would be presented as the machine's peak.
/// Building the loops optimized in debug builds too would take a crate of their own (a
/// workspace member with its own profile); it is not worth it, since a debug build's timings
/// are not the ones to quote anyway, and the tests, which run debug builds of parbench as many
/// processes, stay as fast as they were.
pub const DEBUG_BUILD: &str = "debug build: parbench's own code is not optimized, so its \
    probes would read far below the hardware; a release build (cargo build --release) measures";

impl Limits {
    /// Runs every probe now, on the CPUs this process may use, spending `budget`. Never
    /// fails: a probe that cannot run says why.
    pub fn measure(budget: &Budget) -> Limits {
        let t = Instant::now();
        let cores = super::affinity::available_cores();
        let elements = usize::try_from(budget.array_bytes / 4).unwrap_or(usize::MAX);
        // The probes run in the fields' order here: the clock first, while the core runs
        // integer code only (on some cores a long run of wide vector code lowers the clock for
        // a while), and the wall time of them all last.
        Limits {
            clock: clock::measure(budget.clock_loop_s, budget.repeats),
            fma: fma::measure(budget.fma_loop_s, budget.repeats, cores),
            memory: memory::measure(elements, budget.memory_passes, cores),
            line: line::measure(budget.line_rounds),
            channel: channel::measure(budget.channel_closures, budget.channel_rounds),
            probe_s: t.elapsed().as_secs_f64(),
        }
    }

    /// Limits with every probe not taken, for `reason`.
    pub fn not_measured(reason: &str) -> Limits {
        Limits {
            fma: Probe::NotMeasured(reason.into()),
            clock: Probe::NotMeasured(reason.into()),
            memory: Probe::NotMeasured(reason.into()),
            line: Probe::NotMeasured(reason.into()),
            channel: Probe::NotMeasured(reason.into()),
            probe_s: 0.0,
        }
    }
}

/// The channel probe of a report written before parbench measured it.
fn channel_not_recorded() -> Probe<ChannelHandoff> {
    Probe::NotMeasured("not in this report: written before parbench measured it".into())
}

/// This process's limits: measured on the first call (in a release build; a debug build
/// records [`DEBUG_BUILD`] instead), the same answer after. Call it before a timed run starts,
/// so the probes' threads do not compete with the run's: the CLI does, when it captures the
/// environment.
pub fn limits() -> &'static Limits {
    static LIMITS: OnceLock<Limits> = OnceLock::new();
    LIMITS.get_or_init(|| {
        if cfg!(debug_assertions) {
            Limits::not_measured(DEBUG_BUILD)
        } else {
            Limits::measure(&Budget::PROCESS)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_round_trip_through_json() {
        // Measured for real (at opt-level 0 in a debug test build: the figures are low, and
        // only their shape is checked).
        let limits = Limits::measure(&Budget::TINY);
        for (what, measured) in [
            ("fma", limits.fma.measured().is_some()),
            ("memory", limits.memory.measured().is_some()),
            ("channel", limits.channel.measured().is_some()),
        ] {
            assert!(measured, "{what}: {limits:?}");
        }
        assert!(limits.probe_s > 0.0);
        let json = serde_json::to_string(&limits).unwrap();
        let back: Limits = serde_json::from_str(&json).unwrap();
        assert_eq!(back, limits);
        let none = Limits::not_measured("debug build");
        let back: Limits = serde_json::from_str(&serde_json::to_string(&none).unwrap()).unwrap();
        assert_eq!(back, none);
        // Limits written before the channel probe still read.
        let mut json = serde_json::to_value(Limits::not_measured("debug build")).unwrap();
        json.as_object_mut().unwrap().remove("channel");
        let back: Limits = serde_json::from_value(json).unwrap();
        assert_eq!(back.channel, channel_not_recorded());
        assert_eq!(back.line, Probe::NotMeasured("debug build".into()));
    }

    #[test]
    fn a_debug_build_presents_no_figure_as_the_machines() {
        let limits = limits();
        assert!(std::ptr::eq(limits, super::limits()), "measured once");
        if cfg!(debug_assertions) {
            assert_eq!(limits, &Limits::not_measured(DEBUG_BUILD));
        } else {
            assert!(limits.fma.measured().is_some());
        }
    }
}
