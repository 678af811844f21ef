//! The machine's state while a run ran: how much of its CPU time other processes took, how much
//! a hypervisor stole, how many other tasks were runnable, the CPUs' clocks before and after,
//! the cgroup's CPU quota, the engine's threads against the cores, and a short FMA probe before
//! and after, and the GPU's state where the run used one (`gpu.rs`). A report keeps it beside each run, so a figure measured on a busy machine says so
//! ([`busy_reasons`](RunState::busy_reasons), in `busy.rs`).
//!
//! Recording is a [`Recording`] started before the run and finished after it: two snapshots of
//! the counters (deltas over the run) and a sampling thread in between.

pub mod gpu;
mod periodic;
mod runnable;
mod snapshot;

use std::fmt;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use gpu::{GpuRunState, GpuSelector, GpuStateError};
pub use runnable::Runnable;
use snapshot::Shares;

/// The machine's state over one run. Each fact that could not be read here is `None`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunState {
    /// The run's wall time, over which the shares are taken.
    pub wall_s: f64,
    /// Cores this process may use (its CPU affinity and cgroup quota, as the standard library
    /// reads them): what the engine's threads share.
    pub cores: usize,
    /// CPUs the machine has online (`/proc/stat`): the CPU time the shares divide by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<usize>,
    /// Share of the machine's CPU time over the run that other processes used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_cpu_fraction: Option<f64>,
    /// The machine's CPU time over the run in the kernel's ticks, which the shares count: a
    /// share is known to within a tick or two of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_ticks: Option<u64>,
    /// Share of the machine's CPU time over the run that this process used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_cpu_fraction: Option<f64>,
    /// Share of the machine's CPU time over the run that a hypervisor stole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_fraction: Option<f64>,
    /// Runnable tasks that were not this process's threads, sampled during the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runnable_others: Option<Runnable>,
    /// This process's own threads that were runnable, sampled alike (the sampling thread
    /// aside): more than the cores on average, and they took turns on them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own_runnable: Option<Runnable>,
    /// Mean clock of the CPUs before and after the run, in MHz (`scaling_cur_freq`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_mhz_before: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_mhz_after: Option<f64>,
    /// CPUs the cgroup's quota allows; absent when there is no quota or none can be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup_cpus: Option<f64>,
    /// Threads of the run's CPU devices in all, against `cores` (for the record: devices a
    /// scenario uses one at a time do not compete; `own_runnable` says what did).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_threads: Option<usize>,
    /// A short one-thread FMA probe before and after the run, in GFLOP/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_before: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_after: Option<f64>,
    /// The one-thread FMA peak the machine's limits hold (measured once, at the start of the
    /// process), in GFLOP/s: the probes above are read against it, so a run on a machine
    /// slower than it was then, or limits measured while it was slow, says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_per_core: Option<f64>,
    /// The run is one rank of an MPI job: the job's other ranks on this host are other
    /// processes to `/proc`, so the other processes' share is recorded but not judged.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mpi: bool,
    /// The GPU's state before, during and after the run, for a run that used the GPU and
    /// where NVML could read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuRunState>,
    /// The thresholds this state is judged by, as in force when it was recorded; absent in
    /// reports older than them (read against this build's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_thresholds: Option<super::thresholds::BusyThresholds>,
}

/// A GFLOP/s probe the caller supplies (a short one-thread FMA loop); `None` where it cannot
/// run. Injected, so this module measures the machine's state without owning a kernel.
pub type Probe<'a> = &'a dyn Fn() -> Option<f64>;

/// A recording under way: started before a run, finished after it.
pub struct Recording {
    start: Instant,
    before: snapshot::Snapshot,
    probe_before: Option<f64>,
    sampler: runnable::Sampler,
    /// The GPU watched, or why it could not be; `None` where no GPU was asked for.
    gpu: Option<Result<gpu::Watch, GpuStateError>>,
}

impl Recording {
    /// Probe, snapshot the GPU (`gpu`, where one is usable: the caller says which) and the
    /// counters, and start sampling, in that order, so the probe's own CPU time is not counted
    /// as the run's.
    ///
    /// The GPU is watched before the run is known to use it (a run's devices are known after
    /// it); [`finish`](Self::finish) keeps its state only for a run that did.
    pub fn start(probe: Probe<'_>, gpu: Option<GpuSelector>) -> Recording {
        let probe_before = probe();
        let gpu = gpu.map(gpu::Watch::start);
        Recording {
            start: Instant::now(),
            before: snapshot::Snapshot::take(),
            probe_before,
            sampler: runnable::Sampler::start(),
            gpu,
        }
    }

    /// Why the GPU asked for is not being watched (NVML could not start, or does not list it);
    /// `None` where it is, or none was asked for.
    pub fn gpu_unwatched(&self) -> Option<&GpuStateError> {
        self.gpu.as_ref().and_then(|g| g.as_ref().err())
    }

    /// Stop sampling, snapshot the counters and the GPU, then probe again: the state over the
    /// run. `used_gpu`: the run used the GPU (the run's device records name a GPU), so its state is kept.
    pub fn finish(self, probe: Probe<'_>, used_gpu: bool) -> RunState {
        let wall_s = self.start.elapsed().as_secs_f64();
        let after = snapshot::Snapshot::take();
        let (runnable_others, own_runnable) = self.sampler.finish();
        let gpu = match self.gpu {
            Some(Ok(watch)) => Some(watch.finish()).filter(|_| used_gpu),
            _ => None,
        };
        let shares = Shares::between(&self.before, &after);
        let cores = super::affinity::available_cores();
        RunState {
            cpus: after.kernel.map(|k| k.cpus),
            other_cpu_fraction: shares.map(|s| s.other),
            cpu_ticks: shares.map(|s| s.ticks),
            own_cpu_fraction: shares.map(|s| s.own),
            steal_fraction: shares.map(|s| s.steal),
            runnable_others,
            own_runnable,
            cpu_mhz_before: self.before.mean_mhz,
            cpu_mhz_after: after.mean_mhz,
            cgroup_cpus: snapshot::cgroup_cpus(),
            probe_before: self.probe_before,
            probe_after: probe(),
            gpu,
            ..RunState::unknown(wall_s, cores)
        }
    }
}

impl RunState {
    /// A state with nothing read but the wall time and cores (the tests' starting point).
    pub fn unknown(wall_s: f64, cores: usize) -> RunState {
        RunState {
            wall_s,
            cores,
            busy_thresholds: Some(super::thresholds::BusyThresholds::IN_FORCE),
            ..RunState::default()
        }
    }
}

/// The state in one line, what could be read of it: `other processes 48% of CPU time, steal
/// 0.0%, 2.4 runnable others (max 3), 2 engine threads on 2 cores, 2400 → 2100 MHz`.
impl fmt::Display for RunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(x) = self.other_cpu_fraction {
            let mpi = if self.mpi {
                " (the job's other ranks among them)"
            } else {
                ""
            };
            parts.push(format!(
                "other processes {:.1}% of CPU time{mpi}",
                x * 100.0
            ));
        }
        if let Some(x) = self.steal_fraction {
            parts.push(format!("steal {:.1}%", x * 100.0));
        }
        if let Some(r) = self.runnable_others {
            parts.push(format!("{:.1} runnable others (max {})", r.mean, r.max));
        }
        if let Some(r) = self.own_runnable {
            parts.push(format!(
                "{:.1} of its own threads runnable (max {})",
                r.mean, r.max
            ));
        }
        let threads = self.engine_threads.map_or(String::new(), |t| {
            format!("{} on ", crate::units::count(t, "engine thread"))
        });
        parts.push(format!(
            "{threads}{}",
            crate::units::count(self.cores, "core")
        ));
        if let Some(q) = self.cgroup_cpus {
            parts.push(format!("cgroup quota {q:.2} CPUs"));
        }
        match (self.cpu_mhz_before, self.cpu_mhz_after) {
            (Some(b), Some(a)) => parts.push(format!("{b:.0} → {a:.0} MHz")),
            (Some(x), None) | (None, Some(x)) => parts.push(format!("{x:.0} MHz")),
            (None, None) => {}
        }
        if let (Some(b), Some(a)) = (self.probe_before, self.probe_after) {
            parts.push(format!("FMA probe {b:.1} → {a:.1} GFLOP/s"));
        }
        if let Some(peak) = self.peak_per_core {
            parts.push(format!("peak {peak:.1} GFLOP/s a core"));
        }
        if let Some(gpu) = &self.gpu {
            parts.push(gpu.to_string());
        }
        write!(f, "{}", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recording_reads_what_this_machine_has() {
        let probe = || Some(10.0);
        let recording = Recording::start(&probe, None);
        assert!(recording.gpu_unwatched().is_none());
        // Some CPU time of our own, so the shares have ticks to divide.
        let spin = Instant::now();
        let mut x = 0u64;
        while spin.elapsed().as_millis() < 60 {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let state = recording.finish(&|| Some(9.0), true);
        assert_eq!(state.gpu, None, "no GPU was asked for");
        assert!(state.wall_s >= 0.06, "{state:?}");
        assert!(state.cores >= 1);
        assert_eq!(
            (state.probe_before, state.probe_after),
            (Some(10.0), Some(9.0))
        );
        if cfg!(target_os = "linux") {
            assert!(state.cpus.is_some(), "{state:?}");
            let runnable = state.runnable_others.expect("a sample at the start");
            assert!(runnable.samples >= 1, "{runnable:?}");
        }
        for share in [
            state.other_cpu_fraction,
            state.own_cpu_fraction,
            state.steal_fraction,
        ]
        .into_iter()
        .flatten()
        {
            assert!((0.0..=1.0).contains(&share), "{state:?}");
        }
    }

    #[test]
    fn a_state_reads_back_and_skips_what_is_unknown() {
        let state = RunState::unknown(1.5, 4);
        let json = serde_json::to_value(&state).expect("serializes");
        let thresholds = serde_json::to_value(crate::machine::thresholds::BusyThresholds::IN_FORCE)
            .expect("thresholds");
        assert_eq!(
            json,
            serde_json::json!({"wall_s": 1.5, "cores": 4, "busy_thresholds": thresholds})
        );
        let back: RunState = serde_json::from_value(json).expect("reads");
        assert_eq!(back, state);
        assert_eq!(state.to_string(), "4 cores");
    }

    #[test]
    fn the_line_says_what_was_read() {
        let state = RunState {
            other_cpu_fraction: Some(0.48),
            steal_fraction: Some(0.0),
            runnable_others: Runnable::of(&[2, 3, 2]),
            engine_threads: Some(2),
            cpu_mhz_before: Some(2400.0),
            cpu_mhz_after: Some(2100.0),
            ..RunState::unknown(1.0, 2)
        };
        assert_eq!(
            state.to_string(),
            "other processes 48.0% of CPU time, steal 0.0%, 2.3 runnable others (max 3), \
             2 engine threads on 2 cores, 2400 → 2100 MHz"
        );
    }
}
