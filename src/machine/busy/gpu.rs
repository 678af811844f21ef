//! Whether the GPU was fit to measure on during a run: another compute process on it, a clock
//! held down by heat or a hardware slowdown, or an SM clock well below its maximum while
//! parbench's kernels ran. Each is a [`GpuReason`], one of the run's busy reasons.

use std::fmt;

use crate::machine::state::gpu::{not_ours, ClockLimit, GpuProcess, GpuRunState};
use crate::units::human_bytes;

#[derive(Debug, Clone, PartialEq)]
pub enum GpuReason {
    /// Other compute processes were on the GPU before or after the run. `own_among_them`: the
    /// pids are from another pid namespace, and one of them is parbench.
    OtherProcesses {
        others: Vec<GpuProcess>,
        own_among_them: bool,
    },
    /// NVML held the clocks down for these reasons (each [`ClockLimit::is_unfit`]).
    Throttled { limits: Vec<ClockLimit> },
    /// The median SM clock while the GPU was busy, against its maximum.
    ClockLow { median_mhz: u32, max_mhz: u32 },
}

impl GpuReason {
    /// A short name for the kind of reason (`gpu-other-processes`).
    pub fn kind(&self) -> &'static str {
        match self {
            GpuReason::OtherProcesses { .. } => "gpu-other-processes",
            GpuReason::Throttled { .. } => "gpu-throttled",
            GpuReason::ClockLow { .. } => "gpu-clock-low",
        }
    }

    /// Each reason the GPU was unfit to measure on over the run `gpu`.
    pub fn of(gpu: &GpuRunState, t: &super::BusyThresholds) -> Vec<GpuReason> {
        let mut reasons = Vec::new();
        let (others, own_among_them) = gpu.other_processes();
        if not_ours(&others, own_among_them) > 0 {
            reasons.push(GpuReason::OtherProcesses {
                others,
                own_among_them,
            });
        }
        let limits: Vec<ClockLimit> = gpu
            .clock_limits()
            .into_iter()
            .filter(|l| l.is_unfit())
            .collect();
        if !limits.is_empty() {
            reasons.push(GpuReason::Throttled { limits });
        }
        // The clocks before and after the run are an idle GPU's, which drop by design: only
        // the samples taken while a kernel ran say what clock the run had.
        let max = gpu.after.sm_mhz_max.or(gpu.before.sm_mhz_max);
        if let (Some(during), Some(max_mhz)) = (&gpu.during, max) {
            if let Some(median_mhz) = during
                .sm_mhz_median
                .filter(|_| during.busy_samples >= t.min_busy_samples)
            {
                if f64::from(median_mhz) < t.sm_clock_low * f64::from(max_mhz) {
                    reasons.push(GpuReason::ClockLow {
                        median_mhz,
                        max_mhz,
                    });
                }
            }
        }
        reasons
    }
}

/// `pid 1234, 2.1 GiB`, or the pid alone where NVML gives no memory.
fn describe(p: &GpuProcess) -> String {
    match p.used_bytes {
        Some(bytes) => format!("pid {}, {}", p.pid, human_bytes(bytes)),
        None => format!("pid {}", p.pid),
    }
}

impl fmt::Display for GpuReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GpuReason::OtherProcesses {
                others,
                own_among_them,
            } => {
                let listed: Vec<String> = others.iter().map(describe).collect();
                let n = not_ours(others, *own_among_them);
                if *own_among_them {
                    write!(
                        f,
                        "{n} other compute process{} ran on the GPU during this run ({}; pids of \
                         the host's pid namespace, one of them parbench's)",
                        if n == 1 { "" } else { "es" },
                        listed.join("; ")
                    )?;
                } else if n == 1 {
                    write!(
                        f,
                        "another process ({}) ran on the GPU during this run",
                        listed[0]
                    )?;
                } else {
                    write!(
                        f,
                        "{n} other processes ({}) ran on the GPU during this run",
                        listed.join("; ")
                    )?;
                }
                write!(
                    f,
                    ": the GPU time-slices between processes, so their kernels may have taken \
                     turns with parbench's and GPU times are inflated"
                )
            }
            GpuReason::Throttled { limits } => {
                let names: Vec<&str> = limits.iter().map(|l| l.name()).collect();
                write!(
                    f,
                    "the GPU held its clocks down during this run ({}): GPU times are longer \
                     than this GPU gives at its rated clocks",
                    names.join(", ")
                )
            }
            GpuReason::ClockLow {
                median_mhz,
                max_mhz,
            } => write!(
                f,
                "the GPU's SM clock ran at {median_mhz} MHz (median while busy) of its \
                 {max_mhz} MHz maximum during this run ({:.0}%): GPU times are longer than \
                 this GPU gives at speed",
                f64::from(*median_mhz) / f64::from(*max_mhz) * 100.0
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::says;
    use super::*;
    use crate::machine::state::gpu::tests::{full, p as process, sample};
    use crate::machine::state::gpu::{GpuDuring, GpuProcesses};
    use crate::machine::thresholds::{MIN_BUSY_SAMPLES, SM_CLOCK_LOW_FRACTION};

    /// A quiet GPU run: only parbench (pid 4242) on it, full clocks while busy (1980 MHz, three
    /// busy samples), the power cap seen (a dense kernel's normal state), no other limit.
    fn quiet() -> GpuRunState {
        let busy = |mhz| sample(mhz, 90, &[]);
        GpuRunState {
            during: GpuDuring::of(&[busy(1980), busy(1755), busy(1900)]),
            ..full()
        }
    }

    fn reasons(gpu: &GpuRunState) -> Vec<GpuReason> {
        GpuReason::of(gpu, &crate::machine::thresholds::BusyThresholds::IN_FORCE)
    }

    fn kinds(gpu: &GpuRunState) -> Vec<&'static str> {
        reasons(gpu).iter().map(GpuReason::kind).collect()
    }

    #[test]
    fn each_reason_alone_and_none_on_a_quiet_gpu() {
        let mut other = quiet();
        other.after.processes = Some(GpuProcesses::split(
            &[process(4242, None), process(1234, Some(2.1))],
            4242,
            true,
        ));
        let mut hot = quiet();
        hot.during.as_mut().expect("samples").clock_limits = vec![ClockLimit::HwThermal];
        let mut slow = quiet();
        slow.during.as_mut().expect("samples").sm_mhz_median = Some(990);
        for (gpu, expected) in [
            (quiet(), &[][..]),
            (GpuRunState::default(), &[]),
            (other, &["gpu-other-processes"]),
            (hot, &["gpu-throttled"]),
            (slow, &["gpu-clock-low"]),
        ] {
            assert_eq!(kinds(&gpu), expected, "{gpu:?}");
        }
    }

    #[test]
    fn each_unfit_limit_fires_and_the_power_cap_does_not() {
        for limit in [
            ClockLimit::HwSlowdown,
            ClockLimit::SwThermal,
            ClockLimit::HwThermal,
            ClockLimit::HwPowerBrake,
        ] {
            let mut gpu = quiet();
            gpu.before.clock_limits.push(limit);
            let limits = vec![limit];
            assert_eq!(reasons(&gpu), [GpuReason::Throttled { limits }]);
        }
        for limit in [
            ClockLimit::SwPowerCap,
            ClockLimit::SyncBoost,
            ClockLimit::DisplayClock,
        ] {
            let mut gpu = quiet();
            gpu.after.clock_limits.push(limit);
            assert_eq!(kinds(&gpu), Vec::<&str>::new(), "{limit}");
        }
    }

    #[test]
    fn the_clock_threshold_is_where_the_reason_starts() {
        let at = |median: u32| {
            let mut gpu = quiet();
            gpu.during.as_mut().expect("samples").sm_mhz_median = Some(median);
            kinds(&gpu).len()
        };
        let limit = (SM_CLOCK_LOW_FRACTION * 1980.0) as u32;
        assert_eq!((at(limit), at(limit - 1)), (0, 1));
        // Too few busy samples to judge: the clock may have been ramping.
        let mut few = quiet();
        let during = few.during.as_mut().expect("samples");
        during.sm_mhz_median = Some(990);
        during.busy_samples = MIN_BUSY_SAMPLES - 1;
        assert_eq!(kinds(&few), Vec::<&str>::new());
    }

    #[test]
    fn in_a_foreign_pid_namespace_one_process_is_ours() {
        let mut gpu = quiet();
        // Our pid 4242 is not among the host's pids 900 and 901: one of them is us.
        gpu.before.processes = Some(GpuProcesses::split(&[process(900, None)], 4242, true));
        assert_eq!(kinds(&gpu), Vec::<&str>::new());
        gpu.after.processes = Some(GpuProcesses::split(
            &[process(900, None), process(901, Some(1.0))],
            4242,
            true,
        ));
        let reasons = reasons(&gpu);
        assert_eq!(reasons.len(), 1);
        assert_eq!(
            reasons[0].to_string(),
            "1 other compute process ran on the GPU during this run (pid 900; pid 901, 1.0 GiB; \
             pids of the host's pid namespace, one of them parbench's): the GPU time-slices \
             between processes, so their kernels may have taken turns with parbench's and GPU \
             times are inflated"
        );
    }

    #[test]
    fn reasons_say_what_they_do_to_the_figures() {
        let other = GpuReason::OtherProcesses {
            others: vec![process(1234, Some(2.1))],
            own_among_them: false,
        };
        let text = other.to_string();
        let one = "another process (pid 1234, 2.1 GiB) ran on the GPU during this run";
        assert!(text.starts_with(one), "{text}");
        let hot = GpuReason::Throttled {
            limits: vec![ClockLimit::HwSlowdown, ClockLimit::HwThermal],
        };
        says(&hot, "(hw-slowdown, hw-thermal)");
        let slow = GpuReason::ClockLow {
            median_mhz: 990,
            max_mhz: 1980,
        };
        says(&slow, "(50%)");
    }
}
