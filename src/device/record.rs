//! A device as a report records it beside its label: what kind it is, how many threads it
//! computes with, and whether it stands in for a GPU. Code that needs to know reads these
//! fields; nothing parses a label (`cpu:0 (2 threads)`), which is for people.

use serde::{Deserialize, Serialize};

/// What kind of device ran a run's work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Host cores of this process.
    Cpu,
    Cuda,
    /// An MPI rank: a process of its own, on this host or another.
    Rank,
}

/// One device of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceRecord {
    pub kind: Kind,
    /// Threads it computes with (a GPU's: the lane threads that enqueue its work).
    pub threads: usize,
    /// A CPU device the run asked for as its GPU.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub standing_in: bool,
}

/// A run's devices: the labels a reader sees and, in the same order, their records.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Described {
    pub labels: Vec<String>,
    pub records: Vec<DeviceRecord>,
}

impl Described {
    /// Devices described by both label and record, in order.
    pub fn of(devices: impl IntoIterator<Item = (String, DeviceRecord)>) -> Described {
        let (labels, records) = devices.into_iter().unzip();
        Described { labels, records }
    }
}

/// Labels alone, for a run built by hand (tests, fixtures): no records.
impl From<Vec<String>> for Described {
    fn from(labels: Vec<String>) -> Described {
        Described {
            labels,
            ..Described::default()
        }
    }
}

/// Whether any of `records` is a GPU.
pub fn uses_gpu(records: &[DeviceRecord]) -> bool {
    records.iter().any(|r| r.kind == Kind::Cuda)
}

/// The threads of the CPU devices of this process among `records`: the threads that compute.
/// A GPU's lane threads are left out (they enqueue kernels and then sleep on events, so they
/// do not compete for cores), and so are other processes' (MPI ranks). `None` when there is
/// no CPU device.
pub fn cpu_threads(records: &[DeviceRecord]) -> Option<usize> {
    let cpus = records.iter().filter(|r| r.kind == Kind::Cpu);
    cpus.clone().next().map(|_| cpus.map(|r| r.threads).sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(kind: Kind, threads: usize) -> DeviceRecord {
        DeviceRecord {
            kind,
            threads,
            standing_in: false,
        }
    }

    #[test]
    fn the_cpu_threads_add_up_the_cpu_devices_only() {
        let run = [rec(Kind::Cpu, 2), rec(Kind::Cuda, 1), rec(Kind::Cpu, 3)];
        assert_eq!(cpu_threads(&run), Some(5));
        assert!(uses_gpu(&run));
        assert_eq!(cpu_threads(&[rec(Kind::Cuda, 1)]), None);
        assert_eq!(cpu_threads(&[rec(Kind::Rank, 4)]), None);
        assert!(!uses_gpu(&[rec(Kind::Cpu, 1)]));
    }

    #[test]
    fn a_record_reads_back_and_says_standing_in_only_when_it_is() {
        let plain = serde_json::to_value(rec(Kind::Cpu, 2)).expect("json");
        assert_eq!(plain, serde_json::json!({"kind": "cpu", "threads": 2}));
        let stand_in = DeviceRecord {
            standing_in: true,
            ..rec(Kind::Cpu, 1)
        };
        let json = serde_json::to_value(stand_in).expect("json");
        assert_eq!(json["standing_in"], true);
        assert_eq!(
            serde_json::from_value::<DeviceRecord>(json).expect("back"),
            stand_in
        );
    }
}
