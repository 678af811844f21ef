//! What a run warns of: a figure outside its physical range, with its likely cause. Each is a
//! value (hyperfine's `Warnings` is the model), computed by a scenario's pure `explain` from
//! its typed summary and recorded in one place ([`Explained::record`](super::kit::Explained::record)),
//! so a test can ask which warning a run raised, not only how it was worded.

use std::fmt;

use super::kit::BETWEEN_ROUNDS;
use crate::units::{human_percent, human_time};

/// A figure outside its physical range.
#[derive(Debug, Clone, PartialEq)]
pub enum Warning {
    /// `async`: push-only took longer than async beyond both medians' intervals, though async
    /// makes the same pushes and then waits.
    PushOnlyAboveAsync { push_s: f64, async_s: f64 },
    /// `cpu-gpu`: max(a, b) / parallel above 1: both workloads finished before the slower one
    /// alone.
    OverlapAboveOne { overlap: f64, speedup: f64 },
    /// `run-copy`: overlapped below max(run, copy) + one copy.
    OverlappedBelowIdeal {
        overlapped_s: f64,
        ideal_s: f64,
        efficiency: f64,
        perfect: f64,
    },
    /// `run-copy`: run-then-copy / overlapped above the lanes that share the work.
    SpeedupAboveLanes { speedup: f64, lanes: f64 },
    /// `run-copy`: samples shorter than their own busier lane's busy time, in the same trace.
    BelowOwnBusyLane { ratio: f64 },
    /// `hybridize`: a speed-up above the ops per pass that replaying saves.
    HybridizeAboveOpsPerPass { speedup: f64, ops_per_pass: usize },
    /// `data-parallel`: a scaling efficiency above 1.1.
    ScalingEfficiencyAboveOne { variant: &'static str },
    /// `matmul`: products faster than the FMA peak measured before the run.
    AboveFmaPeak { fraction: f64 },
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Warning::PushOnlyAboveAsync { push_s, async_s } => write!(
                f,
                "push-only ({}) took longer than async ({}), beyond both medians' 95% intervals, though async makes \
                 the same pushes and then waits: {BETWEEN_ROUNDS}.",
                human_time(push_s),
                human_time(async_s),
            ),
            Warning::OverlapAboveOne { overlap, speedup } => write!(
                f,
                "overlap efficiency max(a, b)/parallel = {overlap:.2} is above 1.0 (parallel speed-up {speedup:.2}×): \
                 two devices cannot finish both workloads before the slower one alone; {BETWEEN_ROUNDS}."
            ),
            Warning::OverlappedBelowIdeal {
                overlapped_s,
                ideal_s,
                efficiency,
                perfect,
            } => write!(
                f,
                "overlapped ({}) is below max(run, copy) + one copy ({}), {:.2}× it, so the overlap \
                 efficiency {efficiency:.2} is above the {perfect:.2} that perfect overlap allows; {BETWEEN_ROUNDS}.",
                human_time(overlapped_s),
                human_time(ideal_s),
                overlapped_s / ideal_s,
            ),
            Warning::SpeedupAboveLanes { speedup, lanes } => write!(
                f,
                "run-then-copy / overlapped = {speedup:.2} is above {lanes}: two lanes can at most halve the time of \
                 the same work done one after the other; {BETWEEN_ROUNDS}."
            ),
            Warning::BelowOwnBusyLane { ratio } => write!(
                f,
                "the overlapped samples took {ratio:.2}× the busy time of their own busier lane, below 1: \
                 bound and time come from the same sample, so this is not noise but a clock or trace that \
                 disagree (a bug to report)."
            ),
            Warning::HybridizeAboveOpsPerPass {
                speedup,
                ops_per_pass,
            } => write!(
                f,
                "hybridize_speedup {speedup:.2}× is above the {ops_per_pass} ops per pass that replaying saves: one \
                 replayed pass, all its kernels in one engine op, would have cost less than one imperative op; \
                 {BETWEEN_ROUNDS}."
            ),
            Warning::ScalingEfficiencyAboveOne { variant } => {
                write!(f, "{variant}'s scaling efficiency above 1.1: {BETWEEN_ROUNDS}")
            }
            Warning::AboveFmaPeak { fraction } => write!(
                f,
                "the products ran at {} of the FMA peak measured before the run: the machine was \
                 busier while the peak was measured (another process on its cores) than during the \
                 run, so the peak, and fraction_of_peak, read wrong; parbench devices --probe on a \
                 quiet machine measures it again",
                human_percent(fraction)
            ),
        }
    }
}
