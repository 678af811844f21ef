//! Devices: where tensors live and ops run.
//!
//! A CPU device is a rayon thread pool with a fixed share of the cores plus a lane whose
//! worker runs inside that pool, so a device's ops (and their inner parallelism) use its
//! threads only. A [`Runtime`] is an engine together with the devices whose lanes it serves.

pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod cuda_env;
pub mod cuda_source;
pub mod discovery;
pub mod gpu_info;
pub mod gpu_limits;
pub mod gpu_ordinal;
pub mod gpu_selector;
pub mod memory;
pub mod memory_fraction;
pub mod record;
#[cfg(target_arch = "x86_64")]
pub mod sgemm;
pub mod stream_order;

use std::sync::Arc;

#[cfg(feature = "cuda")]
use crate::engine::LaneSpec;
use crate::engine::{Engine, EngineBuilder, LaneId, Mode};
pub use crate::machine::affinity::available_cores;
pub use memory_fraction::MemoryFraction;

/// What kind of hardware stands behind a device.
#[derive(Clone)]
pub enum DeviceKind {
    /// Host cores, through the device's own rayon pool.
    Cpu { pool: Arc<rayon::ThreadPool> },
    /// A CUDA GPU: its streams, cuBLAS, cuRAND and event pollers.
    #[cfg(feature = "cuda")]
    Cuda(Arc<cuda::CudaDevice>),
}

/// One device: its name, its lanes in the engine, and its hardware.
pub struct Device {
    /// `cpu:0`, `cuda:0`, ...
    pub name: String,
    /// Threads the device computes with.
    pub threads: usize,
    pub compute: LaneId,
    /// Lane for copies off the device (a separate worker, so copies overlap compute).
    pub copy: LaneId,
    pub kind: DeviceKind,
    /// Live and peak bytes of the device's tensor buffers (host buffers; GPU buffers are
    /// counted by the GPU's own allocator).
    pub memory: Arc<memory::MemTracker>,
    /// For a GPU, the CPU device its copies to host memory belong to (ops on a host copy run
    /// there); `None` for a CPU device, which is its own host.
    pub host: Option<Arc<Device>>,
}

impl Device {
    /// `cpu:0 (2 threads)`: the name as reports list it.
    pub fn describe(&self) -> String {
        #[cfg(feature = "cuda")]
        if let DeviceKind::Cuda(dev) = &self.kind {
            let gpu = cuda::probe().name.unwrap_or_default();
            let order = match dev.order() {
                GpuOrder::Stream => "stream order",
                GpuOrder::Host => "host order",
            };
            return match dev.memory_fraction() {
                Some(f) => format!("{} ({gpu}, {order}, memory capped at {f})", self.name),
                None => format!("{} ({gpu}, {order})", self.name),
            };
        }
        self.describe_cpu(false)
    }

    /// The device as a report records it beside its label.
    pub fn record(&self, standing_in: bool) -> record::DeviceRecord {
        use record::Kind;
        let gpu = self.is_gpu();
        record::DeviceRecord {
            kind: if gpu { Kind::Cuda } else { Kind::Cpu },
            threads: self.threads,
            standing_in: standing_in && !gpu,
        }
    }

    /// A CPU device's description, `cpu:1 (1 thread)`, or with `stand_in`
    /// `cpu:1 (1 thread, standing in for the GPU)`: the device a run asked for as its GPU.
    pub fn describe_cpu(&self, stand_in: bool) -> String {
        let role = stand_in.then_some(", standing in for the GPU");
        let role = role.unwrap_or_default();
        let threads = crate::units::count(self.threads, "thread");
        format!("{} ({threads}{role})", self.name)
    }

    /// When this device's compute ops complete in the engine; `None` for a CPU device.
    pub fn gpu_order(&self) -> Option<GpuOrder> {
        match &self.kind {
            #[cfg(feature = "cuda")]
            DeviceKind::Cuda(dev) => Some(dev.order()),
            _ => None,
        }
    }

    /// True when `thread` (a thread's name, as a trace records it) is one of this device's:
    /// a CPU device's pool threads (`cpu:0 t0`, ...), or a GPU's compute-lane worker, the
    /// thread that enqueues its kernels. Checks where ops *actually* ran by this.
    pub fn owns_thread(&self, thread: &str) -> bool {
        match &self.kind {
            DeviceKind::Cpu { .. } => thread
                .strip_prefix(&self.name)
                .and_then(|rest| rest.strip_prefix(" t"))
                .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit())),
            #[cfg(feature = "cuda")]
            DeviceKind::Cuda(_) => thread
                .strip_prefix(&self.name)
                .is_some_and(|rest| rest.starts_with(" worker ")),
        }
    }

    /// While on, host buffers a device reuses for copies (a GPU's pooled pinned buffers) are
    /// filled with NaN before each reuse, so a copy that moved nothing cannot pass a check
    /// with a previous copy's values. Off while timing; CPU devices never reuse buffers.
    pub fn poison_reused_host_buffers(&self, on: bool) {
        match &self.kind {
            DeviceKind::Cpu { .. } => {}
            #[cfg(feature = "cuda")]
            DeviceKind::Cuda(d) => d.poison_reused_pinned(on),
        }
        #[cfg(not(feature = "cuda"))]
        let _ = on;
    }

    /// The device a copy of `this`'s values to host memory lives on: `this` for a CPU device.
    pub fn host_device(&self, this: &Arc<Device>) -> Arc<Device> {
        self.host.clone().unwrap_or_else(|| this.clone())
    }

    pub fn is_gpu(&self) -> bool {
        !matches!(self.kind, DeviceKind::Cpu { .. })
    }

    /// Bytes this device can still allocate, when it knows (GPU memory); `None` for host memory,
    /// which [`memory::available_bytes`] covers.
    pub fn free_memory(&self) -> Option<u64> {
        match &self.kind {
            DeviceKind::Cpu { .. } => None,
            #[cfg(feature = "cuda")]
            DeviceKind::Cuda(d) => d.free_memory(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("cannot start a thread pool for {device}: {reason}")]
    Pool { device: String, reason: String },
    #[error("cannot start engine workers: {0}")]
    Workers(#[from] std::io::Error),
    #[error("cannot open the GPU: {0}")]
    Gpu(String),
    /// Setting up the CUDA device failed.
    #[cfg(feature = "cuda")]
    #[error("cannot open the GPU: {0}")]
    Cuda(#[from] cuda::GpuError),
}

/// An element-wise map `y = f(x)`: the kernel a GPU runs for a tensor op whose host twin is a
/// closure.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Map {
    AddScalar(f32),
    Scale(f32),
    Relu,
}

/// A device a scenario asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceRequest {
    /// A CPU device with this many threads.
    Cpu { threads: usize },
    /// The first CUDA GPU (only after [`discovery::probe_gpu`] said it is available).
    Cuda,
}

/// When a GPU op on the compute stream completes in the engine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GpuOrder {
    /// When its work is enqueued: dependants on the same stream are ordered by the stream,
    /// others wait for the output's ready event (see `device::cuda`).
    #[default]
    Stream,
    /// When the GPU has finished it (the host poller saw its event): every dependant, on the
    /// device or not, is dispatched only then, and a traced op spans its GPU time.
    Host,
}

/// Options that apply to every runtime a scenario builds.
#[derive(Clone, Debug, Default)]
pub struct RuntimeOptions {
    pub mode: Option<Mode>,
    pub max_inflight: Option<usize>,
    pub log_placement: bool,
    /// When a GPU's compute ops complete in the engine (no effect on CPU devices).
    pub gpu_order: GpuOrder,
    /// The share of a GPU's memory its allocations may take (`--gpu-memory-fraction`); `None`
    /// for no cap. No effect on CPU devices.
    pub gpu_memory_fraction: Option<MemoryFraction>,
}

/// An engine and the devices it drives.
pub struct Runtime {
    pub engine: Engine,
    pub devices: Vec<Arc<Device>>,
}

impl Runtime {
    /// Build an engine with the requested devices, named `cpu:0`, `cpu:1`, ... and `cuda:0`.
    pub fn new(
        options: &RuntimeOptions,
        requests: &[DeviceRequest],
    ) -> Result<Runtime, DeviceError> {
        Runtime::with_lanes(options, requests, |_, _| Ok(())).map(|(rt, ())| rt)
    }

    /// [`new`](Self::new), with `more` adding lanes and `wait_all` hooks of its own once the
    /// devices are open and before the engine starts: a GPU's extra compute streams
    /// (`cuda::stream_lanes`). Its result comes back beside the runtime.
    pub fn with_lanes<T>(
        options: &RuntimeOptions,
        requests: &[DeviceRequest],
        more: impl FnOnce(&mut EngineBuilder, &[Device]) -> Result<T, DeviceError>,
    ) -> Result<(Runtime, T), DeviceError> {
        let mut builder = Engine::builder(options.mode.unwrap_or(Mode::Threaded));
        builder.max_inflight(options.max_inflight);
        builder.log_placement(options.log_placement);
        let mut devices = Vec::new();
        let mut cpus = 0;
        for request in requests {
            match *request {
                DeviceRequest::Cpu { threads } => {
                    let name = format!("cpu:{cpus}");
                    devices.push(cpu::add_named_cpu_device(&mut builder, name, threads)?);
                    cpus += 1;
                }
                DeviceRequest::Cuda => devices.push(add_cuda_device(&mut builder, options)?),
            }
        }
        let extra = more(&mut builder, &devices)?;
        let engine = builder.build()?;
        let rt = Runtime {
            engine,
            devices: devices.into_iter().map(Arc::new).collect(),
        };
        Ok((rt, extra))
    }

    /// One CPU device per entry of `threads`, each with that many threads.
    pub fn cpu(options: &RuntimeOptions, threads: &[usize]) -> Result<Runtime, DeviceError> {
        let cpu = |&threads: &usize| DeviceRequest::Cpu { threads };
        Runtime::new(options, &threads.iter().map(cpu).collect::<Vec<_>>())
    }

    /// The devices as reports list them: labels and records.
    pub fn describe_devices(&self) -> record::Described {
        self.describe_devices_standing_in(None)
    }

    /// [`describe_devices`](Self::describe_devices), with the device at `stand_in` (if any)
    /// described as a CPU device standing in for the GPU.
    pub fn describe_devices_standing_in(&self, stand_in: Option<usize>) -> record::Described {
        record::Described::of(self.devices.iter().enumerate().map(|(i, d)| {
            let standing_in = Some(i) == stand_in && !d.is_gpu();
            let label = match standing_in {
                true => d.describe_cpu(true),
                false => d.describe(),
            };
            (label, d.record(standing_in))
        }))
    }
}

#[cfg(feature = "cuda")]
fn add_cuda_device(
    builder: &mut EngineBuilder,
    options: &RuntimeOptions,
) -> Result<Device, DeviceError> {
    let dev = Arc::new(cuda::CudaDevice::open_capped(
        0,
        options.gpu_order,
        options.gpu_memory_fraction,
    )?);
    // Host copies of the GPU's values live on a CPU device of their own ("host"), whose pool
    // threads sleep unless an op runs on a host copy.
    let host = cpu::add_named_cpu_device(builder, "host".into(), available_cores())?;
    // Lanes of plain threads: they only enqueue work and hand events to the pollers.
    let compute = builder.lane(LaneSpec::threads("cuda:0", 1));
    let copy = builder.lane(LaneSpec::threads("cuda:0 copy", 1));
    let sync = dev.clone();
    // The engine's hook reports a message (the engine knows no device error types).
    builder.on_wait_all(Box::new(move || {
        sync.synchronize().map_err(|e| e.to_string())
    }));
    Ok(Device {
        name: "cuda:0".into(),
        threads: 1,
        compute,
        copy,
        kind: DeviceKind::Cuda(dev),
        memory: Default::default(),
        host: Some(Arc::new(host)),
    })
}

#[cfg(not(feature = "cuda"))]
fn add_cuda_device(
    _builder: &mut EngineBuilder,
    _options: &RuntimeOptions,
) -> Result<Device, DeviceError> {
    Err(DeviceError::Gpu(
        "this binary was built without the `cuda` feature".into(),
    ))
}

/// Split `cores` between `devices` as evenly as possible, each getting at least one thread.
pub fn split_cores(cores: usize, devices: usize) -> Vec<usize> {
    let cores = cores.max(1);
    (0..devices)
        .map(|k| (cores / devices + usize::from(k < cores % devices)).max(1))
        .collect()
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
    fn a_devices_ops_and_their_inner_parallelism_stay_on_its_threads() {
        use rayon::prelude::*;
        use std::collections::BTreeSet;
        use std::sync::Mutex;
        let rt = Runtime::cpu(&RuntimeOptions::default(), &[2, 1]).unwrap();
        let seen: Arc<Mutex<Vec<(String, String)>>> = Arc::new(Mutex::new(Vec::new()));
        for round in 0..20 {
            for d in &rt.devices {
                let (seen, name) = (seen.clone(), d.name.clone());
                let v = crate::engine::Var::new();
                rt.engine.push("where", d.compute, &[], &[&v], move || {
                    // Inner parallelism: every thread that joins in is recorded.
                    let threads: BTreeSet<String> = (0..64u64 * (round + 1))
                        .into_par_iter()
                        .map(|_| std::thread::current().name().unwrap_or("?").to_string())
                        .collect();
                    let mut s = seen.lock().unwrap();
                    s.extend(threads.into_iter().map(|t| (name.clone(), t)));
                    Ok(())
                });
            }
        }
        rt.engine.wait_all().unwrap();
        let seen = seen.lock().unwrap();
        assert!(!seen.is_empty());
        for (device, thread) in seen.iter() {
            assert!(
                thread.starts_with(&format!("{device} t")),
                "an op of {device} ran on thread {thread}"
            );
        }
        // The two-thread device never used more than its two threads.
        let cpu0: BTreeSet<&String> = seen
            .iter()
            .filter(|(d, _)| d == "cpu:0")
            .map(|(_, t)| t)
            .collect();
        assert!(cpu0.len() <= 2, "{cpu0:?}");
    }

    #[test]
    fn a_device_owns_its_pool_threads_only() {
        let rt = Runtime::cpu(&RuntimeOptions::default(), &[2, 1]).unwrap();
        let (a, b) = (&rt.devices[0], &rt.devices[1]);
        assert!(a.owns_thread("cpu:0 t0") && a.owns_thread("cpu:0 t1"));
        assert!(!a.owns_thread("cpu:1 t0"));
        assert!(!a.owns_thread("cpu:0 copy worker 0"));
        assert!(!a.owns_thread("cpu:0 t"));
        assert!(!a.owns_thread("main"));
        assert!(b.owns_thread("cpu:1 t0") && !b.owns_thread("cpu:10 t0"));
    }

    #[test]
    fn runtime_names_its_devices() {
        let rt = Runtime::cpu(&RuntimeOptions::default(), &[1, 2]).unwrap();
        let described = rt.describe_devices();
        assert_eq!(
            described.labels,
            vec!["cpu:0 (1 thread)", "cpu:1 (2 threads)"]
        );
        let threads: Vec<usize> = described.records.iter().map(|r| r.threads).collect();
        assert_eq!(threads, vec![1, 2]);
        let standing_in = rt.describe_devices_standing_in(Some(1));
        assert_eq!(
            standing_in.labels[1],
            "cpu:1 (2 threads, standing in for the GPU)"
        );
        assert!(!standing_in.records[0].standing_in && standing_in.records[1].standing_in);
        assert_eq!(
            rt.engine.lane_names(),
            vec!["cpu:0", "cpu:0 copy", "cpu:1", "cpu:1 copy"]
        );
    }
}
