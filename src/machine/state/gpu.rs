//! The GPU's state over a run: its clocks, power, temperature, utilization, memory, the reasons
//! its clocks were held down, and the other compute processes on it, before and after the run,
//! with the SM clock sampled during it. On a shared GPU another process's kernels or a held-down
//! clock make a GPU figure false without a word; this says so ([`busy_reasons`] judges it).
//!
//! The values here are plain data, read back from any report whatever the build. They are read
//! through NVML (`nvml.rs`, feature `cuda`), which opens `libnvidia-ml.so` at run time: where it
//! cannot be opened (no driver) the state is absent, never an error that stops a run.
//!
//! [`busy_reasons`]: super::RunState::busy_reasons

#[cfg(feature = "cuda")]
mod nvml;

use std::fmt;

use serde::{Deserialize, Serialize};

#[cfg(feature = "cuda")]
pub use nvml::Watch;

/// Which GPU to read: the one parbench's CUDA context is on, by its UUID where CUDA gives it
/// (CUDA's ordinals and NVML's indices differ under `CUDA_VISIBLE_DEVICES` or CUDA's
/// fastest-first order), else by NVML index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuSelector {
    /// NVML's form, `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
    Uuid(String),
    Index(u32),
}

/// The 16 bytes of `cuDeviceGetUuid` as NVML and `nvidia-smi -L` write a GPU's: `GPU-` and the
/// bytes in order as lowercase hex, grouped 4-2-2-2-6 ("GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx").
pub fn uuid_string(bytes: [u8; 16]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

impl fmt::Display for GpuSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GpuSelector::Uuid(uuid) => write!(f, "the GPU {uuid}"),
            GpuSelector::Index(i) => write!(f, "the GPU at NVML index {i}"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GpuStateError {
    /// NVML could not start: no driver, no `libnvidia-ml.so`, or no permission.
    #[error("NVML could not start: {0}")]
    Init(String),
    /// NVML started but does not list the GPU asked for.
    #[error("NVML does not list {which}: {why}")]
    NoDevice { which: GpuSelector, why: String },
    /// This binary was built without the `cuda` feature, so without NVML.
    #[error("this binary was built without the `cuda` feature")]
    NotBuilt,
}

/// Where the `cuda` feature is off there is no watch to start: a type with no value.
#[cfg(not(feature = "cuda"))]
pub enum Watch {}

#[cfg(not(feature = "cuda"))]
impl Watch {
    pub fn start(_which: GpuSelector) -> Result<Watch, GpuStateError> {
        Err(GpuStateError::NotBuilt)
    }

    pub fn finish(self) -> GpuRunState {
        match self {}
    }
}

/// A reason NVML gives for holding the clocks below their maximum ("clocks event reasons").
/// The GPU being idle and the clocks an administrator set (application clocks) are left out:
/// they are settings and rest, not events of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClockLimit {
    /// The software power cap: the board is at its power limit.
    SwPowerCap,
    /// Hardware slowdown (clocks cut by 2x or more): too hot, an external power brake, or a
    /// power spike.
    HwSlowdown,
    /// Software thermal slowdown: the GPU or its memory above its operating temperature.
    SwThermal,
    /// Hardware thermal slowdown (clocks cut by 2x or more).
    HwThermal,
    /// Hardware power brake slowdown, asserted from outside (the system's power supply).
    HwPowerBrake,
    /// Held to the slowest GPU of its sync boost group.
    SyncBoost,
    /// Held by the display clock setting.
    DisplayClock,
}

impl ClockLimit {
    /// The name as reports write it (`hw-thermal`).
    pub fn name(self) -> &'static str {
        match self {
            ClockLimit::SwPowerCap => "sw-power-cap",
            ClockLimit::HwSlowdown => "hw-slowdown",
            ClockLimit::SwThermal => "sw-thermal",
            ClockLimit::HwThermal => "hw-thermal",
            ClockLimit::HwPowerBrake => "hw-power-brake",
            ClockLimit::SyncBoost => "sync-boost",
            ClockLimit::DisplayClock => "display-clock",
        }
    }

    /// Whether the limit says the GPU was unfit to measure on: heat, a power brake or a
    /// hardware slowdown. The power cap is left out: a dense kernel holds a datacenter GPU at
    /// its power limit by design, so a figure taken there is what this GPU does. Sync boost and
    /// display clocks are configurations, not events.
    pub fn is_unfit(self) -> bool {
        matches!(
            self,
            ClockLimit::HwSlowdown
                | ClockLimit::SwThermal
                | ClockLimit::HwThermal
                | ClockLimit::HwPowerBrake
        )
    }
}

impl fmt::Display for ClockLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuProcess {
    /// The pid as NVML gives it: the driver's, which is the host's pid namespace, so inside a
    /// container it need not be a pid of this machine's `/proc`.
    pub pid: u32,
    /// GPU memory it uses, in bytes, where NVML reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_bytes: Option<u64>,
}

/// The compute processes NVML lists, split into this process and the others.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuProcesses {
    /// This process, where it is listed under its own pid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub own: Option<GpuProcess>,
    /// Every other compute process listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub others: Vec<GpuProcess>,
    /// This process holds a CUDA context but its pid is not listed: NVML gives the driver's
    /// pids, from the host's pid namespace, and this process runs in another (a container).
    /// One of `others` is then this process, and which one cannot be told.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pid_namespace_differs: bool,
}

impl GpuProcesses {
    /// Split `listed` into `own_pid` and the others. `has_context`: this process holds a CUDA
    /// context on the GPU, so it must be listed; when it is not (and something is), the pids
    /// are from another pid namespace.
    pub fn split(listed: &[GpuProcess], own_pid: u32, has_context: bool) -> GpuProcesses {
        let own = listed.iter().copied().find(|p| p.pid == own_pid);
        let others: Vec<GpuProcess> = listed
            .iter()
            .copied()
            .filter(|p| p.pid != own_pid)
            .collect();
        GpuProcesses {
            pid_namespace_differs: own.is_none() && has_context && !others.is_empty(),
            own,
            others,
        }
    }
}

/// The GPU at one instant. Each value NVML could not give (not supported on this GPU, no
/// permission) is `None`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuState {
    /// SM clock now and its maximum, in MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_mhz: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_mhz_max: Option<u32>,
    /// Memory clock now and its maximum, in MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mhz: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mhz_max: Option<u32>,
    /// Power drawn and the limit enforced, in watts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_w: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_limit_w: Option<f64>,
    /// Die temperature, in °C.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_c: Option<u32>,
    /// Percent of NVML's last sample period with a kernel running, and with device memory
    /// being read or written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization_gpu_pct: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utilization_memory_pct: Option<u32>,
    /// Why the clocks were held below their maximum, now (idle and settings left out).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clock_limits: Vec<ClockLimit>,
    /// Device memory in use (every process's) and installed, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_used_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_total_bytes: Option<u64>,
    /// The compute processes on the GPU; `None` where NVML could not list them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<GpuProcesses>,
}

/// The SM clock sampled during the run, a few times a second.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuDuring {
    /// Samples taken, and those with a kernel running (utilization above zero): the clock of
    /// an idle GPU drops by design and says nothing of the run.
    pub samples: usize,
    pub busy_samples: usize,
    /// Lowest and median SM clock over the busy samples, in MHz.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_mhz_min: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_mhz_median: Option<u32>,
    /// Every clock limit seen in any sample.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clock_limits: Vec<ClockLimit>,
}

/// One sample of the sampling thread: SM clock, utilization and clock limits, each `None`
/// where it could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuSample {
    pub sm_mhz: Option<u32>,
    pub utilization_gpu_pct: Option<u32>,
    pub clock_limits: Vec<ClockLimit>,
}

impl GpuDuring {
    /// The summary of `samples`; `None` for none.
    pub fn of(samples: &[GpuSample]) -> Option<GpuDuring> {
        if samples.is_empty() {
            return None;
        }
        let mut busy: Vec<u32> = samples
            .iter()
            .filter(|s| s.utilization_gpu_pct.is_some_and(|u| u > 0))
            .filter_map(|s| s.sm_mhz)
            .collect();
        busy.sort_unstable();
        let clock_limits = distinct(samples.iter().flat_map(|s| &s.clock_limits));
        Some(GpuDuring {
            samples: samples.len(),
            busy_samples: busy.len(),
            sm_mhz_min: busy.first().copied(),
            // The lower median for an even count: a figure that was measured.
            sm_mhz_median: (!busy.is_empty()).then(|| busy[(busy.len() - 1) / 2]),
            clock_limits,
        })
    }
}

/// Each clock limit of `limits` once, in order.
fn distinct<'a>(limits: impl Iterator<Item = &'a ClockLimit>) -> Vec<ClockLimit> {
    let mut all: Vec<ClockLimit> = limits.copied().collect();
    all.sort_unstable();
    all.dedup();
    all
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuRunState {
    /// Which GPU was read: its NVML UUID where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    pub before: GpuState,
    pub after: GpuState,
    /// The SM clock during the run; `None` where no sample was taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub during: Option<GpuDuring>,
}

impl GpuRunState {
    /// Every clock limit seen before, during or after the run, each once.
    pub fn clock_limits(&self) -> Vec<ClockLimit> {
        let during = self.during.iter().flat_map(|d| &d.clock_limits);
        distinct(
            (self.before.clock_limits.iter())
                .chain(during)
                .chain(&self.after.clock_limits),
        )
    }

    /// Other compute processes seen before or after the run, each pid once with the most
    /// memory it was seen using, and whether the pids are from another namespace (one of them
    /// is then this process).
    pub fn other_processes(&self) -> (Vec<GpuProcess>, bool) {
        let mut seen: Vec<GpuProcess> = Vec::new();
        let mut foreign = false;
        for processes in [&self.before.processes, &self.after.processes]
            .into_iter()
            .flatten()
        {
            foreign |= processes.pid_namespace_differs;
            for p in &processes.others {
                match seen.iter_mut().find(|s| s.pid == p.pid) {
                    Some(s) => s.used_bytes = s.used_bytes.max(p.used_bytes),
                    None => seen.push(*p),
                }
            }
        }
        (seen, foreign)
    }
}

/// How many of `others` are not this process: one fewer than listed where `own_among_them`
/// (the pids are from another namespace, one of them this process's).
pub fn not_ours(others: &[GpuProcess], own_among_them: bool) -> usize {
    others.len().saturating_sub(usize::from(own_among_them))
}

/// The GPU's state in a few words: `GPU 1980 → 1755 MHz SM (min 1410 during), 61 °C, 412 W of
/// 700 W, limits sw-power-cap, 1 other compute process`.
impl fmt::Display for GpuRunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        let (b, a) = (&self.before, &self.after);
        match (b.sm_mhz, a.sm_mhz) {
            (Some(x), Some(y)) => parts.push(format!("GPU SM {x} → {y} MHz")),
            (Some(x), None) | (None, Some(x)) => parts.push(format!("GPU SM {x} MHz")),
            (None, None) => parts.push("GPU".into()),
        }
        if let Some(max) = a.sm_mhz_max.or(b.sm_mhz_max) {
            parts.push(format!("max {max} MHz"));
        }
        if let Some(min) = self.during.as_ref().and_then(|d| d.sm_mhz_min) {
            parts.push(format!("min {min} MHz while busy"));
        }
        if let Some(t) = a.temperature_c {
            parts.push(format!("{t} °C"));
        }
        if let (Some(w), Some(limit)) = (a.power_w, a.power_limit_w) {
            parts.push(format!("{w:.0} W of {limit:.0} W"));
        }
        let limits = self.clock_limits();
        if !limits.is_empty() {
            let names: Vec<&str> = limits.iter().map(|l| l.name()).collect();
            parts.push(format!("clock limits {}", names.join(", ")));
        }
        let (others, foreign) = self.other_processes();
        let n = not_ours(&others, foreign);
        if n > 0 {
            let s = if n == 1 { "" } else { "es" };
            parts.push(format!("{n} other compute process{s}"));
        }
        write!(f, "{}", parts.join(", "))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn p(pid: u32, gib: Option<f64>) -> GpuProcess {
        GpuProcess {
            pid,
            used_bytes: gib.map(|g| (g * (1u64 << 30) as f64) as u64),
        }
    }

    #[test]
    fn a_cuda_uuid_reads_as_nvmls() {
        let bytes = [
            0x5a, 0x1b, 0x2c, 0x3d, 0x4e, 0x5f, 0x60, 0x71, 0x82, 0x93, 0xa4, 0xb5, 0xc6, 0xd7,
            0xe8, 0xf9,
        ];
        assert_eq!(
            uuid_string(bytes),
            "GPU-5a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9"
        );
    }

    #[test]
    fn processes_split_into_ours_and_others() {
        let listed = [p(10, Some(0.5)), p(20, Some(2.0)), p(30, None)];
        let split = GpuProcesses::split(&listed, 20, true);
        assert_eq!(split.own, Some(listed[1]));
        assert_eq!(split.others, [listed[0], listed[2]]);
        assert!(!split.pid_namespace_differs);
        // Our pid unlisted while we hold a context: the pids are the host's.
        let foreign = GpuProcesses::split(&listed[..1], 7, true);
        assert!(foreign.pid_namespace_differs);
        // Without a context of ours, an unlisted pid says nothing.
        let none = GpuProcesses::split(&listed[..1], 7, false);
        assert!(!none.pid_namespace_differs && none.others.len() == 1);
        assert_eq!(GpuProcesses::split(&[], 7, true), GpuProcesses::default());
    }

    pub(crate) fn sample(sm: u32, util: u32, limits: &[ClockLimit]) -> GpuSample {
        GpuSample {
            sm_mhz: Some(sm),
            utilization_gpu_pct: Some(util),
            clock_limits: limits.to_vec(),
        }
    }

    #[test]
    fn the_clock_during_counts_busy_samples_only() {
        let during = GpuDuring::of(&[
            sample(345, 0, &[]),
            sample(1980, 90, &[]),
            sample(1410, 100, &[ClockLimit::SwPowerCap]),
            sample(1755, 95, &[ClockLimit::SwPowerCap, ClockLimit::HwThermal]),
            sample(1800, 80, &[]),
        ])
        .expect("samples");
        assert_eq!((during.samples, during.busy_samples), (5, 4));
        assert_eq!(during.sm_mhz_min, Some(1410));
        assert_eq!(during.sm_mhz_median, Some(1755));
        assert_eq!(
            during.clock_limits,
            [ClockLimit::SwPowerCap, ClockLimit::HwThermal]
        );
        assert_eq!(GpuDuring::of(&[]), None);
        let idle = GpuDuring::of(&[sample(345, 0, &[])]).expect("a sample");
        assert_eq!((idle.busy_samples, idle.sm_mhz_min), (0, None));
    }

    pub(crate) fn full() -> GpuRunState {
        let state = GpuState {
            sm_mhz: Some(1980),
            sm_mhz_max: Some(1980),
            memory_mhz: Some(2619),
            memory_mhz_max: Some(2619),
            power_w: Some(120.5),
            power_limit_w: Some(700.0),
            temperature_c: Some(41),
            utilization_gpu_pct: Some(0),
            utilization_memory_pct: Some(0),
            clock_limits: Vec::new(),
            memory_used_bytes: Some(1 << 30),
            memory_total_bytes: Some(141 << 30),
            processes: Some(GpuProcesses {
                own: Some(p(4242, Some(0.5))),
                ..GpuProcesses::default()
            }),
        };
        GpuRunState {
            uuid: Some("GPU-5a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9".into()),
            before: state.clone(),
            after: GpuState {
                clock_limits: vec![ClockLimit::SwPowerCap],
                ..state
            },
            during: GpuDuring::of(&[sample(1980, 99, &[])]),
        }
    }

    #[test]
    fn a_gpu_state_reads_back_and_skips_what_is_unknown() {
        let state = full();
        let json = serde_json::to_value(&state).expect("serializes");
        assert_eq!(
            json["after"]["clock_limits"],
            serde_json::json!(["sw-power-cap"])
        );
        let back: GpuRunState = serde_json::from_value(json).expect("reads");
        assert_eq!(back, state);
        let bare = GpuRunState::default();
        assert_eq!(
            serde_json::to_value(&bare).expect("serializes"),
            serde_json::json!({"before": {}, "after": {}})
        );
        assert_eq!(bare.to_string(), "GPU");
    }

    #[test]
    fn the_line_says_what_was_read() {
        let mut state = full();
        state.after.processes = Some(GpuProcesses::split(
            &[p(4242, None), p(99, Some(2.1))],
            4242,
            true,
        ));
        assert_eq!(
            state.to_string(),
            "GPU SM 1980 → 1980 MHz, max 1980 MHz, min 1980 MHz while busy, 41 °C, 120 W of \
             700 W, clock limits sw-power-cap, 1 other compute process"
        );
    }

    #[test]
    fn other_processes_merge_before_and_after() {
        let mut state = full();
        state.before.processes = Some(GpuProcesses::split(&[p(99, Some(1.0))], 1, false));
        state.after.processes = Some(GpuProcesses::split(
            &[p(99, Some(2.0)), p(98, None)],
            1,
            false,
        ));
        let (others, foreign) = state.other_processes();
        assert_eq!(others, [p(99, Some(2.0)), p(98, None)]);
        assert!(!foreign);
    }
}
