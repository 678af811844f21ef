//! What a run reports of its GPU: the probe's answer (a usable GPU and its libraries, or why
//! there is none). Shared by the probe (`cuda::probe`) and its callers (`discovery`), so
//! neither names the other for it.

use serde::{Deserialize, Serialize};

/// The GPU seen by the run. Serialises as either `{"available": false, "reason": "..."}` or
/// `{"available": true, "name": .., "driver": .., "cuda": .., "memory_bytes": ..,
/// "compute_capability": ".."}`: a plain struct whose absent fields are skipped, so the JSON
/// stays flat and readers need no tag handling.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuInfo {
    pub available: bool,
    /// Why no GPU is used (only when `available` is false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Driver version, e.g. "550.54.15".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// CUDA version supported by the driver, e.g. "12.4".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// e.g. "9.0".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_capability: Option<String>,
    /// The CUDA libraries in use: driver, cuBLAS, cuRAND, with versions and the files they
    /// were loaded from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub libraries: Vec<LibraryInfo>,
}

/// One library a GPU run depends on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LibraryInfo {
    pub name: String,
    pub version: String,
    /// The file it was loaded from.
    pub path: String,
}

impl GpuInfo {
    /// No GPU, and why (e.g. "no CUDA driver found").
    pub fn unavailable(reason: impl Into<String>) -> Self {
        GpuInfo {
            reason: Some(reason.into()),
            ..GpuInfo::default()
        }
    }

    /// A GPU that was found, with every field filled (so the "available" JSON shape is the
    /// only one this constructor can produce).
    pub fn detected(
        name: impl Into<String>,
        driver: impl Into<String>,
        cuda: impl Into<String>,
        memory_bytes: u64,
        compute_capability: impl Into<String>,
    ) -> Self {
        GpuInfo {
            available: true,
            name: Some(name.into()),
            driver: Some(driver.into()),
            cuda: Some(cuda.into()),
            memory_bytes: Some(memory_bytes),
            compute_capability: Some(compute_capability.into()),
            ..GpuInfo::default()
        }
    }
}

/// Whether processes may share the device (`CU_DEVICE_ATTRIBUTE_COMPUTE_MODE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ComputeMode {
    /// Any number of processes and contexts.
    Default,
    /// No process may create a context.
    Prohibited,
    /// One process at a time.
    ExclusiveProcess,
}

impl ComputeMode {
    /// The mode of the driver's code, `None` for a code this version does not know.
    pub fn from_code(code: i32) -> Option<ComputeMode> {
        match code {
            0 => Some(ComputeMode::Default),
            2 => Some(ComputeMode::Prohibited),
            3 => Some(ComputeMode::ExclusiveProcess),
            _ => None,
        }
    }

    /// The words `devices` prints.
    pub fn as_str(self) -> &'static str {
        match self {
            ComputeMode::Default => "default",
            ComputeMode::Prohibited => "prohibited",
            ComputeMode::ExclusiveProcess => "exclusive process",
        }
    }
}

/// One GPU the driver lists, whether or not parbench opens it: what its attributes say.
/// An attribute the driver does not give (or gives as 0) is absent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuDevice {
    /// The CUDA ordinal (after `CUDA_VISIBLE_DEVICES`), as `--gpu` takes it.
    pub ordinal: usize,
    /// Whether this is the ordinal parbench opens (`--gpu`, default 0).
    pub selected: bool,
    pub name: String,
    /// `cuDeviceGetUuid`'s 16 bytes as `nvidia-smi -L` writes them, "GPU-5f1c…" (the driver
    /// API gives a MIG instance's bytes too, without nvidia-smi's "MIG-" name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// e.g. "0000:19:00.0".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
    pub memory_bytes: u64,
    /// e.g. "9.0".
    pub compute_capability: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_count: Option<u32>,
    /// The SMs' peak clock (`CLOCK_RATE`, deprecated in CUDA 13 but still answered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_sm_clock_mhz: Option<u32>,
    /// The memory's peak clock (`MEMORY_CLOCK_RATE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_clock_mhz: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bus_width_bits: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l2_cache_bytes: Option<u64>,
    /// Copy engines (`ASYNC_ENGINE_COUNT`): 2 or more let H2D and D2H copies overlap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_engines: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_mode: Option<ComputeMode>,
    /// Whether the device is a MIG instance, a slice of a GPU with a share of its SMs and
    /// memory: the driver names one "… MIG 1g.10gb" (or a UUID given as "MIG-…" says so).
    pub mig: bool,
}

impl GpuDevice {
    /// Whether a device of this name and UUID is a MIG instance.
    pub fn is_mig(name: &str, uuid: Option<&str>) -> bool {
        uuid.is_some_and(|u| u.starts_with("MIG-"))
            || name
                .split(|c: char| !c.is_ascii_alphanumeric())
                .any(|w| w == "MIG")
    }

    /// One line of `parbench devices`: "cuda:1  NVIDIA H200: 140 GiB, …".
    pub fn line(&self) -> String {
        let mut parts = vec![
            crate::units::human_bytes(self.memory_bytes),
            format!("compute capability {}", self.compute_capability),
        ];
        parts.extend(
            [
                self.sm_count.map(|n| format!("{n} SMs")),
                self.max_sm_clock_mhz.map(|sm| format!("SM clock {sm} MHz")),
                self.memory_clock_mhz
                    .map(|mem| format!("memory clock {mem} MHz")),
                self.memory_bus_width_bits.map(|w| format!("{w}-bit bus")),
                self.l2_cache_bytes
                    .map(|l2| format!("L2 {}", crate::units::human_bytes(l2))),
                self.copy_engines
                    .map(|c| crate::units::count(c as usize, "copy engine")),
                self.compute_mode
                    .map(|m| format!("compute mode {}", m.as_str())),
                self.pci_bus_id.as_ref().map(|pci| format!("PCI {pci}")),
                self.mig.then(|| "MIG instance".into()),
            ]
            .into_iter()
            .flatten(),
        );
        format!(
            "{}{} {}: {}",
            if self.selected { "*" } else { " " },
            self.ordinal,
            self.name,
            parts.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::state::gpu::uuid_string;

    fn h200(ordinal: usize, selected: bool) -> GpuDevice {
        GpuDevice {
            ordinal,
            selected,
            name: "NVIDIA H200".into(),
            uuid: Some("GPU-01234567-89ab-cdef-0123-456789abcdef".into()),
            pci_bus_id: Some("0000:19:00.0".into()),
            memory_bytes: 150_754_820_096,
            compute_capability: "9.0".into(),
            sm_count: Some(132),
            max_sm_clock_mhz: Some(1980),
            memory_clock_mhz: Some(3201),
            memory_bus_width_bits: Some(6144),
            l2_cache_bytes: Some(50 << 20),
            copy_engines: Some(3),
            compute_mode: Some(ComputeMode::Default),
            mig: false,
        }
    }

    #[test]
    fn a_gpu_line_names_each_attribute_it_has() {
        let line = h200(1, true).line();
        assert!(line.starts_with("*1 NVIDIA H200: "), "{line}");
        for part in [
            "compute capability 9.0",
            "132 SMs",
            "SM clock 1980 MHz, memory clock 3201 MHz",
            "6144-bit bus",
            "3 copy engines",
            "compute mode default",
            "PCI 0000:19:00.0",
        ] {
            assert!(line.contains(part), "{part} in {line}");
        }
        assert!(!line.contains("MIG"), "{line}");
        let bare = GpuDevice {
            sm_count: None,
            max_sm_clock_mhz: None,
            memory_clock_mhz: None,
            memory_bus_width_bits: None,
            l2_cache_bytes: None,
            copy_engines: Some(1),
            compute_mode: None,
            pci_bus_id: None,
            mig: true,
            ..h200(0, false)
        }
        .line();
        assert!(bare.starts_with(" 0 NVIDIA H200: "), "{bare}");
        assert!(bare.ends_with("1 copy engine, MIG instance"), "{bare}");
        assert!(!bare.contains("clock") && !bare.contains("SMs"), "{bare}");
    }

    #[test]
    fn gpu_device_json_round_trips_and_skips_absent_attributes() {
        let gpu = h200(0, true);
        let v = serde_json::to_value(&gpu).expect("json");
        assert_eq!(v["compute_mode"], "default");
        assert_eq!(v["sm_count"], 132);
        let back: GpuDevice = serde_json::from_value(v).expect("parse");
        assert_eq!(back, gpu);
        let v = serde_json::to_value(GpuDevice {
            sm_count: None,
            ..gpu
        })
        .expect("json");
        assert!(v.get("sm_count").is_none(), "{v}");
    }

    #[test]
    fn mig_instances_are_recognised_by_uuid_or_name() {
        assert!(GpuDevice::is_mig("NVIDIA H100 80GB HBM3", Some("MIG-4b1e")));
        assert!(GpuDevice::is_mig("NVIDIA A100-SXM4-40GB MIG 1g.5gb", None));
        assert!(!GpuDevice::is_mig("NVIDIA H200", Some("GPU-0123")));
        assert!(!GpuDevice::is_mig("NVIDIA MIGHTY", None));
    }

    #[test]
    fn compute_modes_and_uuids_are_worded() {
        assert_eq!(ComputeMode::from_code(0), Some(ComputeMode::Default));
        assert_eq!(
            ComputeMode::from_code(3),
            Some(ComputeMode::ExclusiveProcess)
        );
        assert_eq!(ComputeMode::from_code(1), None);
        let mut bytes = [0u8; 16];
        bytes[0] = 0xab;
        bytes[15] = 0x01;
        assert_eq!(
            uuid_string(bytes),
            "GPU-ab000000-0000-0000-0000-000000000001"
        );
    }

    #[test]
    fn gpu_info_json_shapes_and_round_trip() {
        let v = serde_json::to_value(GpuInfo::unavailable("no CUDA driver found")).expect("json");
        assert_eq!(
            v,
            serde_json::json!({"available": false, "reason": "no CUDA driver found"})
        );
        let gpu = GpuInfo::detected("NVIDIA H100", "550.54.15", "12.4", 85_520_809_984, "9.0");
        let v = serde_json::to_value(&gpu).expect("json");
        assert_eq!(
            v,
            serde_json::json!({
                "available": true, "name": "NVIDIA H100", "driver": "550.54.15", "cuda": "12.4",
                "memory_bytes": 85_520_809_984u64, "compute_capability": "9.0"
            })
        );
        let back: GpuInfo = serde_json::from_value(v).expect("parse");
        assert_eq!(back, gpu);
        let back: GpuInfo =
            serde_json::from_str(r#"{"available": false, "reason": "x"}"#).expect("parse");
        assert_eq!(back, GpuInfo::unavailable("x"));
    }
}
