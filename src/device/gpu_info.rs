//! What a run reports of its GPU: the probe's answer (a usable GPU and its libraries, or why
//! there is none). Shared by the probe (`cuda::probe`) and its callers (`discovery`), so
//! neither names the other for it.

use serde::{Deserialize, Serialize};

/// The GPU seen by the run. Serialises as either `{"available": false, "reason": "..."}` or
/// `{"available": true, "name": .., "driver": .., "cuda": .., "memory_bytes": ..,
/// "compute_capability": ".."}`: a plain struct whose absent fields are skipped, so the JSON
/// stays flat and readers need no tag handling.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
            available: false,
            reason: Some(reason.into()),
            name: None,
            driver: None,
            cuda: None,
            memory_bytes: None,
            compute_capability: None,
            libraries: Vec::new(),
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
            reason: None,
            name: Some(name.into()),
            driver: Some(driver.into()),
            cuda: Some(cuda.into()),
            memory_bytes: Some(memory_bytes),
            compute_capability: Some(compute_capability.into()),
            libraries: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_unavailable_json_shape() {
        let v = serde_json::to_value(GpuInfo::unavailable("no CUDA driver found")).expect("json");
        assert_eq!(
            v,
            serde_json::json!({"available": false, "reason": "no CUDA driver found"})
        );
    }

    #[test]
    fn gpu_available_json_shape_and_round_trip() {
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
