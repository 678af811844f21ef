//! Whether the machine was fit to measure on during a run: each reason it was not, as a value
//! with its figures, worded with what it does to the run's figures. A report turns each into a
//! `warning:` note; `compare` and `ab` mark the verdicts a flagged side may explain. The GPU's
//! reasons are in `gpu.rs`.

mod gpu;

use std::fmt;

pub use super::thresholds::*;
pub use gpu::GpuReason;

use super::state::RunState;

/// One reason the machine was not fit to measure on, with its figures.
#[derive(Debug, Clone, PartialEq)]
pub enum BusyReason {
    /// Other processes used this share of the machine's CPU time during the run.
    OtherProcesses {
        fraction: f64,
        runnable_mean: Option<f64>,
    },
    /// A hypervisor stole this share of the machine's CPU time.
    Steal { fraction: f64 },
    /// The FMA probe fell from `before` to `after` GFLOP/s.
    ProbeFell { before: f64, after: f64 },
    /// The FMA probe rose from `before` to `after` GFLOP/s: the run began on a slower machine.
    ProbeRose { before: f64, after: f64 },
    /// Both probes read well below the one-thread `peak` of the machine's limits: the whole
    /// run ran on a machine slower than the one parbench measured at the start.
    Slowed { peak: f64, before: f64, after: f64 },
    /// The engine ran more threads than this process had cores.
    Oversubscribed { runnable_mean: f64, cores: usize },
    /// The GPU the run used was shared, held down or slow.
    Gpu(GpuReason),
}

impl BusyReason {
    /// A short name for the kind of reason (`other-processes`), as tests and scripts match it.
    pub fn kind(&self) -> &'static str {
        match self {
            BusyReason::OtherProcesses { .. } => "other-processes",
            BusyReason::Steal { .. } => "steal",
            BusyReason::ProbeFell { .. } => "probe-fell",
            BusyReason::ProbeRose { .. } => "probe-rose",
            BusyReason::Slowed { .. } => "slowed",
            BusyReason::Oversubscribed { .. } => "oversubscribed",
            BusyReason::Gpu(ref reason) => reason.kind(),
        }
    }
}

impl fmt::Display for BusyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            BusyReason::OtherProcesses {
                fraction,
                runnable_mean,
            } => {
                write!(
                    f,
                    "other processes used {:.0}% of the machine's CPU time during this run",
                    fraction * 100.0
                )?;
                if let Some(n) = runnable_mean {
                    write!(f, " ({n:.1} of their tasks runnable on average)")?;
                }
                write!(f, ": times are inflated and ratios between variants may move")
            }
            BusyReason::Steal { fraction } => write!(
                f,
                "the hypervisor stole {:.1}% of the machine's CPU time during this run: times are \
                 inflated by time this machine did not have",
                fraction * 100.0
            ),
            BusyReason::ProbeFell { before, after } => write!(
                f,
                "a one-thread FMA probe fell from {before:.1} to {after:.1} GFLOP/s ({:.0}%) across \
                 this run: a core was shared or its clock dropped, so later samples ran slower than \
                 earlier ones",
                (after / before - 1.0) * 100.0
            ),
            BusyReason::ProbeRose { before, after } => write!(
                f,
                "a one-thread FMA probe rose from {before:.1} to {after:.1} GFLOP/s (+{:.0}%) \
                 across this run: the machine was slower when the run began (a core shared, or \
                 a lower clock), so earlier samples ran slower than later ones",
                (after / before - 1.0) * 100.0
            ),
            BusyReason::Slowed {
                peak,
                before,
                after,
            } => write!(
                f,
                "a one-thread FMA probe read {before:.1} and {after:.1} GFLOP/s around this run, \
                 {:.0}% below the {peak:.1} GFLOP/s parbench measured at the start: the machine \
                 ran slower than it can (a tenant of the host, or a lowered clock), so times are \
                 inflated and fractions of its limits read low",
                (1.0 - before.max(after) / peak) * 100.0
            ),
            BusyReason::Oversubscribed {
                runnable_mean,
                cores,
            } => write!(
                f,
                "parbench's own threads wanted {runnable_mean:.1} cores at once on average, on \
                 {cores} cores: threads took turns on a core, so times include waiting for a \
                 descheduled thread and scaling figures understate the hardware"
            ),
            BusyReason::Gpu(ref reason) => reason.fmt(f),
        }
    }
}

impl RunState {
    /// Each reason the machine was not fit to measure on during the run; empty for a quiet run
    /// or one whose facts could not be read.
    pub fn busy_reasons(&self) -> Vec<BusyReason> {
        let t = self.busy_thresholds.unwrap_or(BusyThresholds::IN_FORCE);
        let mut reasons = Vec::new();
        if let (Some(fraction), false) = (self.other_cpu_fraction, self.mpi) {
            // The counters' resolution: a tick or two of the run's CPU time.
            let slack = self
                .cpu_ticks
                .filter(|&n| n > 0)
                .map_or(0.0, |n| t.other_cpu_ticks / n as f64);
            if fraction > t.other_cpu + slack {
                reasons.push(BusyReason::OtherProcesses {
                    fraction,
                    runnable_mean: self.runnable_others.map(|r| r.mean),
                });
            }
        }
        if let Some(fraction) = self.steal_fraction.filter(|&s| s > t.steal) {
            reasons.push(BusyReason::Steal { fraction });
        }
        if let (Some(before), Some(after)) = (self.probe_before, self.probe_after) {
            if before > 0.0 && after.is_finite() {
                if after < before * (1.0 - t.probe_change) {
                    reasons.push(BusyReason::ProbeFell { before, after });
                } else if after > before * (1.0 + t.probe_change) {
                    reasons.push(BusyReason::ProbeRose { before, after });
                }
            }
            // An MPI job's other ranks share the cores with the probes, as they share the
            // machine's CPU time: recorded, not judged.
            if let (Some(peak), false) = (self.peak_per_core, self.mpi) {
                if before.max(after) < peak * (1.0 - t.probe_change) {
                    reasons.push(BusyReason::Slowed {
                        peak,
                        before,
                        after,
                    });
                }
            }
        }
        if let (Some(threads), Some(own)) = (self.engine_threads, self.own_runnable) {
            let cores = self.cores * t.threads_per_core;
            if threads > cores && own.mean > (cores + t.front_end_threads) as f64 {
                reasons.push(BusyReason::Oversubscribed {
                    runnable_mean: own.mean,
                    cores: self.cores,
                });
            }
        }
        if let Some(gpu) = &self.gpu {
            reasons.extend(GpuReason::of(gpu, &t).into_iter().map(BusyReason::Gpu));
        }
        reasons
    }

    /// The machine's limits, when they were measured on a slower machine than this run's: both
    /// probes around the run read well above the limits' one-thread peak. The run's times are
    /// fine; the figures read against the limits (`fraction_of_peak`) read high.
    pub fn limits_measured_slow(&self) -> Option<LimitsMeasuredSlow> {
        let (Some(peak), Some(before), Some(after)) =
            (self.peak_per_core, self.probe_before, self.probe_after)
        else {
            return None;
        };
        let t = self.busy_thresholds.unwrap_or(BusyThresholds::IN_FORCE);
        (!self.mpi && peak > 0.0 && before.min(after) > peak * (1.0 + t.probe_change)).then_some(
            LimitsMeasuredSlow {
                peak,
                before,
                after,
            },
        )
    }

    /// True when the run has a reason to doubt its figures.
    pub fn is_busy(&self) -> bool {
        !self.busy_reasons().is_empty()
    }
}

/// The machine's limits were measured while it ran slower than during a run: the one-thread
/// `peak` they hold against the probes `before` and `after` the run, in GFLOP/s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LimitsMeasuredSlow {
    pub peak: f64,
    pub before: f64,
    pub after: f64,
}

impl fmt::Display for LimitsMeasuredSlow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the machine's limits were measured while it ran slower: a one-thread FMA probe read \
             {:.1} and {:.1} GFLOP/s around this run, {:.0}% above the {:.1} GFLOP/s a core \
             measured at the start, so the report's limits understate this machine and figures \
             read against them (fraction_of_peak) read high; parbench devices --probe on a \
             quiet machine measures them again",
            self.before,
            self.after,
            (self.before.min(self.after) / self.peak - 1.0) * 100.0,
            self.peak
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::state::Runnable;

    /// A quiet two-core run with every fact read.
    fn quiet() -> RunState {
        RunState {
            cpus: Some(2),
            other_cpu_fraction: Some(0.01),
            own_cpu_fraction: Some(0.95),
            steal_fraction: Some(0.0),
            runnable_others: Runnable::of(&[0, 0, 1]),
            cpu_mhz_before: Some(2400.0),
            cpu_mhz_after: Some(2400.0),
            engine_threads: Some(2),
            own_runnable: Runnable::of(&[2, 1, 2]),
            probe_before: Some(30.0),
            probe_after: Some(29.0),
            peak_per_core: Some(30.5),
            ..RunState::unknown(1.0, 2)
        }
    }

    /// `what`'s words contain `words`.
    pub(super) fn says(what: &impl fmt::Display, words: &str) {
        let text = what.to_string();
        assert!(text.contains(words), "{text}");
    }

    fn kinds(state: &RunState) -> Vec<&'static str> {
        state.busy_reasons().iter().map(BusyReason::kind).collect()
    }

    /// A state is judged by the thresholds it was recorded under, so a build with other
    /// thresholds reads an old report as its own warnings did; one recorded before thresholds
    /// were stored is read against this build's.
    #[test]
    fn a_state_is_judged_by_the_thresholds_it_was_recorded_under() {
        let state = RunState {
            other_cpu_fraction: Some(0.08),
            ..quiet()
        };
        assert_eq!(kinds(&state), vec!["other-processes"]);
        let looser = BusyThresholds {
            other_cpu: 0.10,
            ..BusyThresholds::IN_FORCE
        };
        let recorded = RunState {
            busy_thresholds: Some(looser),
            ..state.clone()
        };
        assert_eq!(kinds(&recorded), Vec::<&str>::new());
        let json = serde_json::to_value(&recorded).expect("json");
        assert_eq!(json["busy_thresholds"]["other_cpu"], 0.10);
        let back: RunState = serde_json::from_value(json).expect("back");
        assert!(!back.is_busy());
        let old = RunState {
            busy_thresholds: None,
            ..state
        };
        assert_eq!(kinds(&old), vec!["other-processes"]);
    }

    #[test]
    fn a_quiet_run_and_an_unread_one_have_no_reason() {
        assert_eq!(kinds(&quiet()), Vec::<&str>::new());
        assert!(!quiet().is_busy());
        assert_eq!(kinds(&RunState::unknown(1.0, 2)), Vec::<&str>::new());
    }

    #[test]
    fn each_reason_alone() {
        type Set = fn(&mut RunState);
        let cases: [(Set, &str); 6] = [
            (
                |s| (s.other_cpu_fraction, s.runnable_others) = (Some(0.48), Runnable::of(&[2, 2])),
                "other-processes",
            ),
            (|s| s.steal_fraction = Some(0.08), "steal"),
            (|s| s.probe_after = Some(24.0), "probe-fell"),
            (
                |s| (s.probe_before, s.probe_after) = (Some(29.0), Some(33.0)),
                "probe-rose",
            ),
            (|s| s.peak_per_core = Some(40.0), "slowed"),
            // More device threads than cores, and more of its own threads runnable than the
            // cores and the front end on average.
            (
                |s| (s.engine_threads, s.own_runnable) = (Some(4), Runnable::of(&[4, 4, 3])),
                "oversubscribed",
            ),
        ];
        for (set, kind) in cases {
            let mut state = quiet();
            set(&mut state);
            assert_eq!(kinds(&state), [kind], "{state:?}");
        }
    }

    /// Just above (`above`) or just below `limit`.
    fn nudge(limit: f64, above: bool) -> f64 {
        limit + if above { 1e-6 } else { -1e-6 }
    }

    #[test]
    fn device_threads_that_take_turns_or_a_busy_front_end_are_not_oversubscription() {
        // Four device threads used one device at a time: few runnable at once.
        let turns = RunState {
            engine_threads: Some(4),
            own_runnable: Runnable::of(&[2, 3, 2]),
            ..quiet()
        };
        assert!(turns.busy_reasons().is_empty(), "{turns:?}");
        // As many device threads as cores, with the front end runnable beside them.
        let front_end = RunState {
            engine_threads: Some(2),
            own_runnable: Runnable::of(&[4, 4, 4]),
            ..quiet()
        };
        assert!(front_end.busy_reasons().is_empty(), "{front_end:?}");
    }

    #[test]
    fn each_threshold_is_where_a_reason_starts() {
        let setters: [fn(&mut RunState, bool); 6] = [
            |s, a| s.other_cpu_fraction = Some(nudge(OTHER_CPU_LIMIT, a)),
            |s, a| s.steal_fraction = Some(nudge(STEAL_LIMIT, a)),
            |s, a| s.probe_after = Some(30.0 * (1.0 - nudge(PROBE_CHANGE_LIMIT, a))),
            |s, a| s.probe_after = Some(30.0 * (1.0 + nudge(PROBE_CHANGE_LIMIT, a))),
            // Both probes below the limits' peak: judged on the higher of the two.
            |s, a| {
                (s.probe_before, s.probe_after) = (Some(29.0), Some(30.0));
                s.peak_per_core = Some(30.0 / (1.0 - nudge(PROBE_CHANGE_LIMIT, a)));
            },
            |s, a| {
                s.engine_threads = Some(s.cores + 2);
                let mean = nudge((s.cores + FRONT_END_THREADS) as f64, a);
                s.own_runnable = Some(Runnable {
                    mean,
                    max: 3,
                    samples: 5,
                })
            },
        ];
        for (i, set) in setters.into_iter().enumerate() {
            let (mut under, mut over) = (quiet(), quiet());
            set(&mut under, false);
            set(&mut over, true);
            let found = (kinds(&under).len(), kinds(&over).len());
            assert_eq!(found, (0, 1), "threshold {i}");
        }
    }

    /// Other processes' share is known to a tick or two of the run's CPU time: one stray tick
    /// of a 16-tick run (6%) is no busy machine, four are (25%); over 2,000 ticks the limit
    /// stands almost where it was. A report recorded before the slack was stored is judged
    /// without it, as it was.
    #[test]
    fn a_short_runs_other_share_is_judged_beyond_the_counters_ticks() {
        let run = |ticks: u64, other: f64| RunState {
            cpu_ticks: Some(ticks),
            other_cpu_fraction: Some(other),
            ..quiet()
        };
        assert!(kinds(&run(16, 1.0 / 16.0)).is_empty());
        assert_eq!(kinds(&run(16, 4.0 / 16.0)), ["other-processes"]);
        assert_eq!(
            kinds(&run(2000, OTHER_CPU_LIMIT + 0.002)),
            ["other-processes"]
        );
        let mut old = run(16, 1.0 / 16.0);
        old.busy_thresholds = Some(BusyThresholds {
            other_cpu_ticks: 0.0,
            ..BusyThresholds::IN_FORCE
        });
        assert_eq!(kinds(&old), ["other-processes"]);
        let stored: BusyThresholds = serde_json::from_value(serde_json::json!({
            "other_cpu": 0.05, "steal": 0.03, "probe_change": 0.1, "threads_per_core": 1,
            "front_end_threads": 1, "sm_clock_low": 0.75, "min_busy_samples": 3
        }))
        .expect("thresholds stored before the slack");
        assert_eq!(stored.other_cpu_ticks, 0.0);
    }

    #[test]
    fn the_gpus_reasons_join_the_runs() {
        use crate::machine::state::gpu::{ClockLimit, GpuRunState, GpuState};
        let gpu = |limits: Vec<ClockLimit>| GpuRunState {
            after: GpuState {
                clock_limits: limits,
                ..GpuState::default()
            },
            ..GpuRunState::default()
        };
        let quiet_gpu = RunState {
            gpu: Some(gpu(vec![ClockLimit::SwPowerCap])),
            ..quiet()
        };
        assert!(!quiet_gpu.is_busy(), "{:?}", quiet_gpu.busy_reasons());
        let hot = RunState {
            gpu: Some(gpu(vec![ClockLimit::HwThermal])),
            ..quiet()
        };
        assert_eq!(kinds(&hot), ["gpu-throttled"]);
        says(&hot.busy_reasons()[0], "hw-thermal");
    }

    #[test]
    fn limits_measured_on_a_slower_machine_are_named_not_judged_busy() {
        // The limits' peak read in a slow spell; both probes around the run well above it.
        let state = RunState {
            probe_before: Some(30.0),
            probe_after: Some(31.0),
            peak_per_core: Some(24.0),
            ..quiet()
        };
        assert!(!state.is_busy(), "{:?}", state.busy_reasons());
        let slow = state.limits_measured_slow().expect("limits measured slow");
        says(&slow, "25% above the 24.0 GFLOP/s");
        // One probe near the peak: the machine may have been as slow as then.
        let near = RunState {
            probe_before: Some(25.0),
            ..state.clone()
        };
        assert_eq!(near.limits_measured_slow(), None);
        assert_eq!(quiet().limits_measured_slow(), None);
        assert_eq!(RunState { mpi: true, ..state }.limits_measured_slow(), None);
    }

    #[test]
    fn reasons_say_what_they_do_to_the_figures() {
        let rose = BusyReason::ProbeRose {
            before: 183.0,
            after: 241.0,
        };
        says(&rose, "rose from 183.0 to 241.0 GFLOP/s (+32%)");
        let slowed = BusyReason::Slowed {
            peak: 240.0,
            before: 180.0,
            after: 170.0,
        };
        says(
            &slowed,
            "read 180.0 and 170.0 GFLOP/s around this run, 25% below",
        );
        says(&slowed, "times are inflated");
        let fell = BusyReason::ProbeFell {
            before: 30.0,
            after: 24.0,
        };
        says(&fell, "(-20%)");
        let reason = BusyReason::OtherProcesses {
            fraction: 0.48,
            runnable_mean: None,
        };
        assert_eq!(
            reason.to_string(),
            "other processes used 48% of the machine's CPU time during this run: times are \
             inflated and ratios between variants may move"
        );
    }

    #[test]
    fn an_mpi_rank_judges_neither_other_processes_nor_its_probes_against_the_peak() {
        let others = RunState {
            other_cpu_fraction: Some(0.5),
            mpi: true,
            ..quiet()
        };
        assert!(others.busy_reasons().is_empty());
        says(&others, "other ranks");
        let slow = RunState {
            peak_per_core: Some(60.0),
            mpi: true,
            ..quiet()
        };
        assert!(slow.busy_reasons().is_empty(), "{:?}", slow.busy_reasons());
    }
}
