//! Reading the GPU's state through NVML (`nvml-wrapper`): a snapshot before the run, a thread
//! that samples the SM clock during it, a snapshot after it.
//!
//! NVML is opened once per process (`libnvidia-ml.so`, loaded at run time): where it cannot
//! be (no driver), every watch fails to start with the reason, and the run goes on without the
//! GPU's state. A value NVML cannot give on this GPU is `None` in the snapshot.
//!
//! The sampling thread is the GPU's own, not the CPU sampler's (`runnable.rs`): an NVML call
//! can block for milliseconds while the driver is busy, which would delay the runnable-task
//! samples.

use std::sync::OnceLock;

use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::{Device, Nvml};

use super::{
    ClockLimit, GpuDuring, GpuProcess, GpuProcesses, GpuRunState, GpuSample, GpuSelector, GpuState,
    GpuStateError,
};
use crate::machine::state::periodic::Periodic;
use crate::machine::state::runnable::INTERVAL;

/// NVML, opened on first use and kept for the process (or why it could not be opened).
fn nvml() -> Result<&'static Nvml, GpuStateError> {
    static NVML: OnceLock<Result<Nvml, String>> = OnceLock::new();
    NVML.get_or_init(|| Nvml::init().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|why| GpuStateError::Init(why.clone()))
}

fn device(which: &GpuSelector) -> Result<Device<'static>, GpuStateError> {
    let nvml = nvml()?;
    let found = match which {
        GpuSelector::Uuid(uuid) => nvml.device_by_uuid(uuid.as_str()),
        GpuSelector::Index(i) => nvml.device_by_index(*i),
    };
    found.map_err(|e| GpuStateError::NoDevice {
        which: which.clone(),
        why: e.to_string(),
    })
}

/// The named clock limits in NVML's reasons, idle and settings left out.
fn clock_limits(reasons: ThrottleReasons) -> Vec<ClockLimit> {
    [
        (ThrottleReasons::SW_POWER_CAP, ClockLimit::SwPowerCap),
        (ThrottleReasons::HW_SLOWDOWN, ClockLimit::HwSlowdown),
        (ThrottleReasons::SW_THERMAL_SLOWDOWN, ClockLimit::SwThermal),
        (ThrottleReasons::HW_THERMAL_SLOWDOWN, ClockLimit::HwThermal),
        (
            ThrottleReasons::HW_POWER_BRAKE_SLOWDOWN,
            ClockLimit::HwPowerBrake,
        ),
        (ThrottleReasons::SYNC_BOOST, ClockLimit::SyncBoost),
        (
            ThrottleReasons::DISPLAY_CLOCK_SETTING,
            ClockLimit::DisplayClock,
        ),
    ]
    .into_iter()
    .filter(|(flag, _)| reasons.contains(*flag))
    .map(|(_, limit)| limit)
    .collect()
}

/// The GPU now. `has_context`: this process holds a CUDA context on it.
pub fn snapshot(device: &Device<'_>, has_context: bool) -> GpuState {
    let utilization = device.utilization_rates().ok();
    let memory = device.memory_info().ok();
    let processes = device.running_compute_processes().ok().map(|listed| {
        let listed: Vec<GpuProcess> = listed
            .into_iter()
            .map(|p| GpuProcess {
                pid: p.pid,
                used_bytes: match p.used_gpu_memory {
                    UsedGpuMemory::Used(bytes) => Some(bytes),
                    UsedGpuMemory::Unavailable => None,
                },
            })
            .collect();
        GpuProcesses::split(&listed, std::process::id(), has_context)
    });
    GpuState {
        sm_mhz: device.clock_info(Clock::SM).ok(),
        sm_mhz_max: device.max_clock_info(Clock::SM).ok(),
        memory_mhz: device.clock_info(Clock::Memory).ok(),
        memory_mhz_max: device.max_clock_info(Clock::Memory).ok(),
        power_w: device.power_usage().ok().map(|mw| f64::from(mw) / 1000.0),
        power_limit_w: device
            .enforced_power_limit()
            .ok()
            .map(|mw| f64::from(mw) / 1000.0),
        temperature_c: device.temperature(TemperatureSensor::Gpu).ok(),
        utilization_gpu_pct: utilization.as_ref().map(|u| u.gpu),
        utilization_memory_pct: utilization.as_ref().map(|u| u.memory),
        clock_limits: device
            .current_throttle_reasons()
            .map(clock_limits)
            .unwrap_or_default(),
        memory_used_bytes: memory.as_ref().map(|m| m.used),
        memory_total_bytes: memory.as_ref().map(|m| m.total),
        processes,
    }
}

fn sample(device: &Device<'_>) -> GpuSample {
    GpuSample {
        sm_mhz: device.clock_info(Clock::SM).ok(),
        utilization_gpu_pct: device.utilization_rates().ok().map(|u| u.gpu),
        clock_limits: device
            .current_throttle_reasons()
            .map(clock_limits)
            .unwrap_or_default(),
    }
}

/// The GPU watched over a run: the snapshot before and the sampling thread.
pub struct Watch {
    which: GpuSelector,
    device: Device<'static>,
    before: GpuState,
    thread: Periodic<GpuSample>,
}

impl Watch {
    /// Snapshot `which` and start sampling it. This process is taken to hold a CUDA context on
    /// it (as [`selected`] ensures), which tells a foreign pid namespace apart.
    pub fn start(which: GpuSelector) -> Result<Watch, GpuStateError> {
        let device = device(&which)?;
        let before = snapshot(&device, true);
        // The thread's own handle on the same GPU (NVML's handles are plain pointers, safe
        // to use from any thread).
        let sampled = self::device(&which)?;
        Ok(Watch {
            which,
            device,
            before,
            thread: Periodic::start("parbench gpu state", INTERVAL, move || {
                Some(sample(&sampled))
            }),
        })
    }

    /// Stop sampling and snapshot the GPU again: its state over the run.
    pub fn finish(mut self) -> GpuRunState {
        let samples = self.thread.finish();
        GpuRunState {
            uuid: match &self.which {
                GpuSelector::Uuid(uuid) => Some(uuid.clone()),
                GpuSelector::Index(_) => self.device.uuid().ok(),
            },
            before: std::mem::take(&mut self.before),
            after: snapshot(&self.device, true),
            during: GpuDuring::of(&samples),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_limits_are_named_without_idle_or_settings() {
        let reasons = ThrottleReasons::GPU_IDLE
            | ThrottleReasons::APPLICATIONS_CLOCKS_SETTING
            | ThrottleReasons::SW_POWER_CAP
            | ThrottleReasons::HW_THERMAL_SLOWDOWN;
        assert_eq!(
            clock_limits(reasons),
            [ClockLimit::SwPowerCap, ClockLimit::HwThermal]
        );
        assert_eq!(clock_limits(ThrottleReasons::NONE), []);
    }

    #[test]
    fn without_a_driver_a_watch_says_why_and_never_panics() {
        // On a machine without NVML this is the reason a run gives; with one, a watch of a
        // GPU that does not exist fails just as plainly.
        let missing = GpuSelector::Uuid("GPU-00000000-0000-0000-0000-000000000000".into());
        match Watch::start(missing) {
            Err(GpuStateError::Init(why)) => assert!(!why.is_empty()),
            Err(GpuStateError::NoDevice { why, .. }) => assert!(!why.is_empty()),
            Err(other) => panic!("unexpected error: {other}"),
            Ok(_) => panic!("a GPU with an all-zero UUID was found"),
        }
    }

    #[test]
    #[ignore = "needs a GPU"]
    fn gpu_state_is_read_through_nvml() {
        let which = crate::device::gpu_selector::selected()
            .expect("a usable GPU (the CUDA probe found none)");
        let watch = Watch::start(which.clone()).expect("NVML starts and lists the GPU");
        std::thread::sleep(INTERVAL * 2);
        let state = watch.finish();
        if let GpuSelector::Uuid(uuid) = &which {
            assert_eq!(state.uuid.as_deref(), Some(uuid.as_str()));
        }
        for s in [&state.before, &state.after] {
            assert!(s.sm_mhz.is_some_and(|x| x > 0), "{s:?}");
            assert!(s.sm_mhz_max.is_some_and(|x| x > 0), "{s:?}");
            assert!(s.memory_total_bytes.is_some_and(|x| x > 0), "{s:?}");
            let processes = s.processes.as_ref().expect("NVML lists compute processes");
            let own = std::process::id();
            assert!(
                processes.others.iter().all(|p| p.pid != own),
                "{processes:?}"
            );
            // This process holds a context: listed under its pid, or the pids are the host's
            // (or, where the driver hides other namespaces' processes, none is listed).
            let listed = processes.own.iter().count() + processes.others.len();
            assert!(
                processes.own.is_some() || processes.pid_namespace_differs || listed == 0,
                "{processes:?}"
            );
        }
        let during = state.during.as_ref().expect("samples during the watch");
        assert!(during.samples >= 2, "{during:?}");
        eprintln!(
            "{state}\n{}",
            serde_json::to_string_pretty(&state).unwrap_or_default()
        );
    }
}
