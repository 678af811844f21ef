//! The thresholds that decide whether a run's machine was busy, each with the measurement
//! behind it, and [`BusyThresholds`]: the set in force, which a report stores with its state so
//! that every later reader judges it as it was judged when written.

use serde::{Deserialize, Serialize};

/// Other processes' share of the machine's CPU time above which a run is busy. An idle
/// machine's daemons, the terminal and the sampler take well under 2%; 5% is one core of
/// twenty kept busy, which a run that uses every core already feels (its slowest thread sets
/// the time), while staying clear of the background noise so a quiet run is not flagged.
pub const OTHER_CPU_LIMIT: f64 = 0.05;

/// Ticks by which the other processes' CPU time must exceed [`OTHER_CPU_LIMIT`]: the kernel
/// charges a process and the CPUs their ticks by separate bookkeeping, which disagree by a tick
/// or two. A run of `deps` at `--size 100` lasts 0.08 s, 16 ticks of a 2-core machine, where
/// one stray tick reads as 6% of its CPU time: five quiet runs here read 0 ticks and one read
/// 1, which the 5% limit alone flagged. Over a run of a second or more (200 ticks and up) the
/// two ticks move the limit by 1% or less.
pub const OTHER_CPU_TICKS: f64 = 2.0;

/// Stolen share of the machine's CPU time above which a run is busy. A healthy virtual machine
/// shows next to none; 3% is about the width of a median's 95% interval in a steady run, so
/// steal beyond it moves figures by more than their own noise.
pub const STEAL_LIMIT: f64 = 0.03;

/// Change of the one-thread FMA probe above which a run is busy: from before to after the run
/// (either way), or of both probes against the peak the machine's limits hold. The probe
/// repeats to within a few percent on a quiet core (around every run of `parbench all` on a
/// quiet 2-core VM, 0.94–1.04 of the limits' peak); 10% is beyond that: a core shared with
/// someone else, a host whose tenants slow this machine for minutes at a time, or a clock that
/// dropped (thermal or power limits).
pub const PROBE_CHANGE_LIMIT: f64 = 0.10;

/// Threads per available core above which a run is oversubscribed, so the scheduler
/// time-slices them and a parallel op waits on the thread that was descheduled. Judged on two
/// counts that must agree: the run's CPU devices have more threads than the cores (a scenario
/// whose devices take turns, one variant at a time, has more without any of them waiting, so
/// this alone does not decide), and parbench's own runnable threads, sampled over the run,
/// averaged more than the cores plus [`FRONT_END_THREADS`].
pub const THREADS_PER_CORE_LIMIT: usize = 1;

/// Runnable threads of parbench's own allowed beyond the cores before the samples count as
/// oversubscription: the front end, which pushes and then waits (spinning briefly), is
/// runnable beside the device threads in a run that is not oversubscribed (a 2-thread matmul
/// on 2 cores averaged 2.0–2.3 over three runs here).
pub const FRONT_END_THREADS: usize = 1;

/// Fraction of the maximum SM clock under which the median clock while the GPU was busy makes
/// the run busy. A clock held at 0.9 of its maximum is not unusual: a dense kernel holds a
/// datacenter GPU at its power limit by design, and the clock settles below the maximum there;
/// the hardware slowdowns (thermal, power brake) cut it by 2x or more, as NVML documents them.
/// 0.75 sits between: a power-capped GPU is expected above it, a slowed-down one well below,
/// and so is one whose clocks an administrator locked low.
pub const SM_CLOCK_LOW_FRACTION: f64 = 0.75;

/// Busy samples (a kernel running) the clock is judged on at least. The clock ramps up from
/// its idle value once work arrives, so a sample or two may catch the ramp; with three the
/// median is a sample taken at speed.
pub const MIN_BUSY_SAMPLES: usize = 3;

/// The thresholds a run's state is judged by: the constants above as this build has them.
/// A report stores the ones in force when it was written (`state.busy_thresholds`), and its
/// busy verdict is always read back against them, so a later build with other thresholds
/// marks an old report as its own warnings do; a report from before they were stored is read
/// against today's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BusyThresholds {
    pub other_cpu: f64,
    /// Absent from reports written before it: read as 0, judged as they were.
    #[serde(default)]
    pub other_cpu_ticks: f64,
    pub steal: f64,
    pub probe_change: f64,
    pub threads_per_core: usize,
    pub front_end_threads: usize,
    pub sm_clock_low: f64,
    pub min_busy_samples: usize,
}

impl BusyThresholds {
    /// This build's thresholds.
    pub const IN_FORCE: BusyThresholds = BusyThresholds {
        other_cpu: OTHER_CPU_LIMIT,
        other_cpu_ticks: OTHER_CPU_TICKS,
        steal: STEAL_LIMIT,
        probe_change: PROBE_CHANGE_LIMIT,
        threads_per_core: THREADS_PER_CORE_LIMIT,
        front_end_threads: FRONT_END_THREADS,
        sm_clock_low: SM_CLOCK_LOW_FRACTION,
        min_busy_samples: MIN_BUSY_SAMPLES,
    };
}
