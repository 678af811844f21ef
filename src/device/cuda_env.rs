//! The CUDA environment a run had: the variables that change what the driver and the CUDA
//! libraries do (which devices are visible and in what order, blocking launches, lazy module
//! loading, the JIT cache, hardware queues, TF32, cuBLAS's workspace), and the ordinal
//! parbench opened. Recorded in every report, since each can move a GPU timing.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The variables recorded, when set.
pub const VARIABLES: [&str; 8] = [
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "CUDA_LAUNCH_BLOCKING",
    "CUDA_MODULE_LOADING",
    "CUDA_CACHE_DISABLE",
    "CUDA_DEVICE_MAX_CONNECTIONS",
    "NVIDIA_TF32_OVERRIDE",
    "CUBLAS_WORKSPACE_CONFIG",
];

/// The report's `cuda_env`: `{"ordinal": 0, "variables": {"CUDA_VISIBLE_DEVICES": "1"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CudaEnv {
    /// The GPU ordinal parbench opens (`--gpu`, default 0).
    pub ordinal: usize,
    /// Those of [`VARIABLES`] that were set, with their values (an empty value included: an
    /// empty `CUDA_VISIBLE_DEVICES` hides every GPU).
    pub variables: BTreeMap<String, String>,
}

impl CudaEnv {
    /// From `lookup` (a variable's value, if set): pure, so tests give it a map.
    pub fn from_lookup(ordinal: usize, lookup: impl Fn(&str) -> Option<String>) -> CudaEnv {
        let variables = VARIABLES
            .iter()
            .filter_map(|&name| lookup(name).map(|v| (name.to_string(), v)))
            .collect();
        CudaEnv { ordinal, variables }
    }

    /// This process's: the selected ordinal and its environment (a non-UTF-8 value is
    /// recorded lossily).
    pub fn capture() -> CudaEnv {
        CudaEnv::from_lookup(super::gpu_ordinal::selected(), |name| {
            std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
        })
    }

    /// "CUDA_VISIBLE_DEVICES=1 CUDA_LAUNCH_BLOCKING=1", or "none set".
    pub fn variables_line(&self) -> String {
        if self.variables.is_empty() {
            return "none set".into();
        }
        self.variables
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_variables_set_are_recorded_and_none_reads_as_none_set() {
        let set = BTreeMap::from([
            ("CUDA_VISIBLE_DEVICES", ""),
            ("CUDA_LAUNCH_BLOCKING", "1"),
            ("PATH", "/usr/bin"),
        ]);
        let env = CudaEnv::from_lookup(2, |k| set.get(k).map(|v| v.to_string()));
        assert_eq!(env.ordinal, 2);
        assert_eq!(
            env.variables.keys().collect::<Vec<_>>(),
            ["CUDA_LAUNCH_BLOCKING", "CUDA_VISIBLE_DEVICES"]
        );
        assert_eq!(env.variables["CUDA_VISIBLE_DEVICES"], "");
        assert_eq!(
            env.variables_line(),
            "CUDA_LAUNCH_BLOCKING=1 CUDA_VISIBLE_DEVICES="
        );
        let json = serde_json::to_value(&env).expect("json");
        assert_eq!(
            json,
            serde_json::json!({"ordinal": 2, "variables":
                {"CUDA_LAUNCH_BLOCKING": "1", "CUDA_VISIBLE_DEVICES": ""}})
        );
        let back: CudaEnv = serde_json::from_value(json).expect("parse");
        assert_eq!(back, env);
        let env = CudaEnv::from_lookup(0, |_| None);
        assert!(env.variables.is_empty());
        assert_eq!(env.variables_line(), "none set");
    }
}
