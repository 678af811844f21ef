//! The first line of a journal (a sweep's or a suite's): the build and the conditions its
//! points are measured under. Resuming compares them with the current ones and refuses a
//! difference, so one report never mixes points measured under two conditions.

use serde::{Deserialize, Serialize};

use super::SamplingOverrides;
use crate::harness::SamplerConfig;

pub const JOURNAL_FORMAT: &str = "parbench-journal/1";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JournalHeader {
    /// Always [`JOURNAL_FORMAT`].
    pub journal: String,
    /// The parbench version that started the journal.
    pub parbench: String,
    /// The commit it was built from (`report::environment::GIT_COMMIT`).
    pub commit: String,
    /// The engine mode (`threaded`, `naive`).
    pub engine: String,
    pub sampling: SamplingConditions,
    pub options: RunOptions,
    /// What is journaled: a sweep (scenario and axes) or a suite (its runs).
    #[serde(flatten)]
    pub plan: JournalPlan,
    /// When the journal was started (RFC 3339, UTC).
    pub started_at: String,
}

/// The sampling options in force: for a sweep, the scenario's sampling with the command
/// line's overrides applied; for a suite, the command line's overrides (`None`: each run's
/// own, from the suite or its scenario).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SamplingConditions {
    pub warmup: Option<usize>,
    pub min_samples: Option<usize>,
    pub max_samples: Option<usize>,
    pub min_time_s: Option<f64>,
    pub max_time_s: Option<f64>,
}

impl From<&SamplingOverrides> for SamplingConditions {
    fn from(o: &SamplingOverrides) -> SamplingConditions {
        SamplingConditions {
            warmup: o.warmup,
            min_samples: o.min_samples,
            max_samples: o.max_samples,
            min_time_s: o.min_time.map(|d| d.as_secs_f64()),
            max_time_s: o.max_time.map(|d| d.as_secs_f64()),
        }
    }
}

impl From<&SamplerConfig> for SamplingConditions {
    fn from(c: &SamplerConfig) -> SamplingConditions {
        SamplingConditions {
            warmup: Some(c.warmup),
            min_samples: Some(c.min_samples),
            max_samples: Some(c.max_samples),
            min_time_s: Some(c.min_time.as_secs_f64()),
            max_time_s: Some(c.max_time.as_secs_f64()),
        }
    }
}

/// The run options that change what a point measures. An option an earlier build recorded and
/// this one does not (how GPU ops were issued) is an unknown field, ignored when read.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunOptions {
    pub cpu_threads: Option<usize>,
    pub max_inflight: Option<usize>,
    pub gpu_order: String,
    /// The GPU ordinal (`--gpu`).
    #[serde(default)]
    pub gpu: usize,
    /// `--gpu-memory-fraction`, when given.
    #[serde(default)]
    pub gpu_memory_fraction: Option<f64>,
}

/// What a journal records the points of.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum JournalPlan {
    /// A sweep: one scenario over its axes (`NAME`, values).
    Sweep {
        scenario: String,
        axes: Vec<(String, Vec<String>)>,
    },
    /// A suite (`all`, `run`): its name and its runs, described as `matmul size=500`.
    Suite { suite: String, runs: Vec<String> },
}

impl JournalHeader {
    /// How the conditions of `now` differ from this header's, one phrase each ("engine was
    /// threaded, now naive"); empty when a resume may go on. A sweep's axes and a suite's runs
    /// are not compared here: the points themselves are matched against the plan.
    pub fn differences(&self, now: &JournalHeader) -> Vec<String> {
        type Of = fn(&JournalHeader) -> String;
        let compared: [(&str, Of); 15] = [
            ("the journal format", |h| h.journal.clone()),
            ("parbench", |h| h.parbench.clone()),
            ("the build's commit", |h| h.commit.clone()),
            ("engine", |h| h.engine.clone()),
            ("what is journaled", |h| h.plan.kind()),
            ("warm-up rounds", |h| shown(h.sampling.warmup)),
            ("samples per point (at least)", |h| {
                shown(h.sampling.min_samples)
            }),
            ("samples per point (at most)", |h| {
                shown(h.sampling.max_samples)
            }),
            ("--min-time", |h| shown(h.sampling.min_time_s.map(seconds))),
            ("--max-time", |h| shown(h.sampling.max_time_s.map(seconds))),
            ("--cpu-threads", |h| shown(h.options.cpu_threads)),
            ("--max-inflight", |h| shown(h.options.max_inflight)),
            ("--gpu-order", |h| h.options.gpu_order.clone()),
            ("--gpu", |h| h.options.gpu.to_string()),
            ("--gpu-memory-fraction", |h| {
                shown(h.options.gpu_memory_fraction)
            }),
        ];
        compared
            .iter()
            .filter_map(|(what, of)| {
                let (was, is) = (of(self), of(now));
                (was != is).then(|| format!("{what} was {was}, now {is}"))
            })
            .collect()
    }
}

impl JournalPlan {
    /// `sweep of matmul` or `suite`.
    fn kind(&self) -> String {
        match self {
            JournalPlan::Sweep { scenario, .. } => format!("a sweep of {scenario}"),
            JournalPlan::Suite { .. } => "a suite".to_string(),
        }
    }
}

fn shown<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "the default".to_string(), |v| v.to_string())
}

fn seconds(s: f64) -> String {
    format!("{s} s")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A sweep's header, for tests.
    pub(crate) fn header() -> JournalHeader {
        JournalHeader {
            journal: JOURNAL_FORMAT.into(),
            parbench: "0.1.0".into(),
            commit: "abc1234".into(),
            engine: "threaded".into(),
            sampling: SamplingConditions {
                min_samples: Some(50),
                ..SamplingConditions::default()
            },
            options: RunOptions::default(),
            plan: JournalPlan::Sweep {
                scenario: "matmul".into(),
                axes: vec![("size".into(), vec!["16".into()])],
            },
            started_at: "2024-01-01T00:00:00Z".into(),
        }
    }

    #[test]
    fn each_difference_is_named_with_both_values() {
        let old = header();
        let mut now = header();
        now.engine = "naive".into();
        now.sampling.min_samples = Some(3);
        now.started_at = "2025-01-01T00:00:00Z".into();
        assert_eq!(
            old.differences(&now),
            [
                "engine was threaded, now naive",
                "samples per point (at least) was 50, now 3"
            ]
        );
        // The GPU a run uses changes what it measures too.
        let mut gpu = header();
        gpu.options.gpu = 1;
        gpu.options.gpu_memory_fraction = Some(0.5);
        assert_eq!(
            old.differences(&gpu),
            [
                "--gpu was 0, now 1",
                "--gpu-memory-fraction was the default, now 0.5"
            ]
        );
        assert!(old.differences(&old).is_empty());
        // Other axes are not a difference of conditions; another kind of plan is.
        now = header();
        now.plan = JournalPlan::Sweep {
            scenario: "matmul".into(),
            axes: vec![("size".into(), vec!["16".into(), "32".into()])],
        };
        assert!(old.differences(&now).is_empty());
        now.plan = JournalPlan::Suite {
            suite: "s.toml".into(),
            runs: vec![],
        };
        assert_eq!(
            old.differences(&now),
            ["what is journaled was a sweep of matmul, now a suite"]
        );
    }

    #[test]
    fn the_header_is_one_json_object_tagged_with_its_format() {
        let text = serde_json::to_string(&header()).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["journal"], JOURNAL_FORMAT);
        assert_eq!(v["kind"], "sweep");
        assert_eq!(v["scenario"], "matmul");
        assert_eq!(
            serde_json::from_str::<JournalHeader>(&text).unwrap(),
            header()
        );
        // A journal of an earlier build, whose options hold one this build no longer records
        // (as builds that recorded how GPU ops were issued did), still reads, under the same
        // conditions.
        let mut v = serde_json::to_value(header()).unwrap();
        v["options"]["removed_option"] = "caching-allocator".into();
        let old: JournalHeader = serde_json::from_value(v).unwrap();
        assert_eq!(old, header());
        assert!(old.differences(&header()).is_empty());
    }
}
