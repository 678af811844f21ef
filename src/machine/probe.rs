//! One probe's outcome: its figures, or why it was not taken (a debug build, an architecture
//! without the instruction, a machine with one CPU, a thread the OS refused). The reason is part
//! of the record, so a report never shows a missing figure without saying why.

use serde::{Deserialize, Serialize};

/// A probe's figures, or the reason there are none. In JSON `{"measured": {...}}` or
/// `{"not_measured": "reason"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Probe<T> {
    Measured(T),
    NotMeasured(String),
}

impl<T> Probe<T> {
    /// The figures, if the probe ran.
    pub fn measured(&self) -> Option<&T> {
        match self {
            Probe::Measured(v) => Some(v),
            Probe::NotMeasured(_) => None,
        }
    }

    /// The probe's result, or its failure as the reason it was not taken.
    pub fn from_result<E: std::fmt::Display>(what: &str, r: Result<T, E>) -> Probe<T> {
        match r {
            Ok(v) => Probe::Measured(v),
            Err(e) => Probe::NotMeasured(format!("{what} failed: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_back_both_shapes() {
        let m: Probe<u32> = Probe::Measured(3);
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(json, r#"{"measured":3}"#);
        assert_eq!(serde_json::from_str::<Probe<u32>>(&json).unwrap(), m);
        let n: Probe<u32> = Probe::NotMeasured("debug build".into());
        let json = serde_json::to_string(&n).unwrap();
        assert_eq!(json, r#"{"not_measured":"debug build"}"#);
        assert_eq!(serde_json::from_str::<Probe<u32>>(&json).unwrap(), n);
        assert_eq!(n.measured(), None);
        let failed = Probe::<u32>::from_result("spawn", Err("no threads"));
        assert_eq!(
            failed,
            Probe::NotMeasured("spawn failed: no threads".into())
        );
    }
}
