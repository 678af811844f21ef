//! Devices: where tensors live and ops run.
//!
//! A CPU device is a rayon thread pool with a fixed share of the cores plus a lane whose
//! worker runs inside that pool, so a device's ops (and their inner parallelism) use its
//! threads only. A [`Runtime`] is an engine together with the devices whose lanes it serves.

pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod discovery;
pub mod memory;

use std::sync::Arc;

use crate::engine::{Engine, EngineBuilder, LaneId, LaneSpec, Mode};

/// What kind of hardware stands behind a device.
#[derive(Clone)]
pub enum DeviceKind {
    /// Host cores, through the device's own rayon pool.
    Cpu { pool: Arc<rayon::ThreadPool> },
}

/// One device: its name, its lanes in the engine, and its hardware.
pub struct Device {
    /// `cpu:0`, `cuda:0`, ...
    pub name: String,
    /// Threads the device computes with.
    pub threads: usize,
    /// Lane for compute ops.
    pub compute: LaneId,
    /// Lane for copies off the device (a separate worker, so copies overlap compute).
    pub copy: LaneId,
    pub kind: DeviceKind,
}

impl Device {
    /// `cpu:0 (2 threads)`: the name as reports list it.
    pub fn describe(&self) -> String {
        let s = if self.threads == 1 { "" } else { "s" };
        format!("{} ({} thread{s})", self.name, self.threads)
    }

    /// The device's pool, for running host code with the device's threads.
    pub fn pool(&self) -> Option<&rayon::ThreadPool> {
        match &self.kind {
            DeviceKind::Cpu { pool } => Some(pool),
        }
    }
}

/// Errors setting up devices.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("cannot start a thread pool for {device}: {reason}")]
    Pool { device: String, reason: String },
    #[error("cannot start engine workers: {0}")]
    Workers(#[from] std::io::Error),
}

/// Options that apply to every runtime a scenario builds.
#[derive(Clone, Debug, Default)]
pub struct RuntimeOptions {
    pub mode: Option<Mode>,
    pub max_inflight: Option<usize>,
    pub log_placement: bool,
}

/// An engine and the devices it drives.
pub struct Runtime {
    pub engine: Engine,
    pub devices: Vec<Arc<Device>>,
}

impl Runtime {
    /// One CPU device per entry of `threads`, each with that many threads, named `cpu:0`, ...
    pub fn cpu(options: &RuntimeOptions, threads: &[usize]) -> Result<Runtime, DeviceError> {
        let mut builder = Engine::builder(options.mode.unwrap_or(Mode::Threaded));
        builder.max_inflight(options.max_inflight);
        builder.log_placement(options.log_placement);
        let mut pending = Vec::new();
        for (k, &t) in threads.iter().enumerate() {
            pending.push(cpu::add_cpu_device(&mut builder, k, t)?);
        }
        let engine = builder.build()?;
        Ok(Runtime {
            engine,
            devices: pending.into_iter().map(Arc::new).collect(),
        })
    }

    /// The devices as reports list them.
    pub fn describe_devices(&self) -> Vec<String> {
        self.devices.iter().map(|d| d.describe()).collect()
    }
}

/// Split `cores` between `devices` as evenly as possible, each getting at least one thread.
pub fn split_cores(cores: usize, devices: usize) -> Vec<usize> {
    let cores = cores.max(1);
    (0..devices)
        .map(|k| (cores / devices + usize::from(k < cores % devices)).max(1))
        .collect()
}

/// The machine's usable cores (affinity and cgroup limits honoured).
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Add a device's compute lane (inside its pool) and copy lane (its own thread).
pub(crate) fn add_lanes(
    builder: &mut EngineBuilder,
    name: &str,
    pool: &Arc<rayon::ThreadPool>,
) -> (LaneId, LaneId) {
    let compute = builder.lane(LaneSpec::in_pool(name, pool.clone(), 1));
    let copy = builder.lane(LaneSpec::threads(format!("{name} copy"), 1));
    (compute, copy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cores_are_split_evenly() {
        assert_eq!(split_cores(2, 1), vec![2]);
        assert_eq!(split_cores(2, 2), vec![1, 1]);
        assert_eq!(split_cores(5, 2), vec![3, 2]);
        assert_eq!(split_cores(2, 3), vec![1, 1, 1]);
        assert_eq!(split_cores(0, 1), vec![1]);
    }

    #[test]
    fn runtime_names_its_devices() {
        let rt = Runtime::cpu(&RuntimeOptions::default(), &[1, 2]).unwrap();
        assert_eq!(
            rt.describe_devices(),
            vec!["cpu:0 (1 thread)", "cpu:1 (2 threads)"]
        );
        assert_eq!(
            rt.engine.lane_names(),
            vec!["cpu:0", "cpu:0 copy", "cpu:1", "cpu:1 copy"]
        );
    }
}
