//! Reports: the versioned JSON document and the human table.
//!
//! The JSON contract (`"schema": "parbench/1"`) only grows within a version: fields are added,
//! never renamed or removed, so scripts and baselines keep working.

pub mod atomic;
pub mod compare;
pub mod environment;
pub mod figure;
pub mod paired;
pub mod timeline;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use atomic::write_atomic;
pub use environment::{Environment, GpuInfo, LibraryInfo};
pub use figure::{Better, Figure, Unit};
pub use timeline::Timeline;

use crate::harness::Summary;

/// The ops of one traced repeat of one variant (what `--trace` and `--timeline` show).
#[derive(Debug, Clone)]
pub struct TracedRun {
    pub scenario: String,
    pub variant: String,
    pub records: Vec<crate::engine::TraceRecord>,
}

/// The axes of a sweep, as the report records them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepInfo {
    pub scenario: String,
    /// Axis name → the values swept, in order (as given on the command line).
    pub axes: Vec<(String, Vec<String>)>,
}

/// How a note that flags a figure outside its physical range starts: within `notes`, so the
/// `parbench/1` schema stays as it is and a script can still find them.
pub const WARNING: &str = "warning: ";

/// The schema tag every document carries.
pub const SCHEMA: &str = "parbench/1";

/// A whole report: what ran, where, and the results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    pub tool: Tool,
    pub environment: Environment,
    pub runs: Vec<RunRecord>,
    /// Present when the report is a sweep: the scenario and the axes swept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepInfo>,
    /// The lane timelines of the traced repeat of each variant, present when the runs were
    /// traced (`--html`, `--trace`, `--timeline`); older reports have none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timelines: Vec<Timeline>,
}

/// The program that produced the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    pub name: String,
    pub version: String,
    pub git_commit: String,
}

impl Tool {
    /// This binary.
    pub fn this() -> Tool {
        Tool {
            name: env!("CARGO_PKG_NAME").into(),
            version: env!("CARGO_PKG_VERSION").into(),
            git_commit: environment::GIT_COMMIT.into(),
        }
    }
}

impl Report {
    pub fn new(environment: Environment, runs: Vec<RunRecord>) -> Report {
        Report {
            schema: SCHEMA.into(),
            tool: Tool::this(),
            environment,
            runs,
            sweep: None,
            timelines: Vec::new(),
        }
    }

    /// Pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("a report always serializes");
        s.push('\n');
        s
    }

    /// True when every check of every run passed.
    pub fn all_checks_passed(&self) -> bool {
        self.runs.iter().all(|r| r.checks.iter().all(|c| c.passed))
    }
}

/// One scenario run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub scenario: String,
    /// Parameter values by their option names with underscores (`iterations`, `cpu_size`).
    pub parameters: Map<String, Value>,
    /// The devices used, as `cpu:0 (1 thread)`.
    pub devices: Vec<String>,
    pub variants: Vec<VariantRecord>,
    /// Figures computed from the variants (speed-ups, model predictions, GFLOP/s).
    pub derived: Map<String, Value>,
    /// The unit and direction of each derived figure (absent in reports older than it: then
    /// [`RunRecord::figure`] reads them from the key, see [`Figure::named`]).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub figures: std::collections::BTreeMap<String, Figure>,
    pub checks: Vec<Check>,
    /// Conditions of the run a reader must know (fallback devices, mode); a figure outside its
    /// physical range is a note that starts with [`WARNING`] ([`RunRecord::warn`]).
    pub notes: Vec<String>,
    /// What the numbers show, in a sentence or three (printed under the table).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub explanation: Vec<String>,
}

impl RunRecord {
    pub fn new(scenario: &str, parameters: Map<String, Value>, devices: Vec<String>) -> RunRecord {
        RunRecord {
            scenario: scenario.into(),
            parameters,
            devices,
            variants: Vec::new(),
            derived: Map::new(),
            figures: Default::default(),
            checks: Vec::new(),
            notes: Vec::new(),
            explanation: Vec::new(),
        }
    }

    /// `scenario[param=value,...]`: what identifies a run across reports.
    pub fn key(&self) -> String {
        let params: Vec<String> = self
            .parameters
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!("{}[{}]", self.scenario, params.join(","))
    }

    /// The median of a variant, by name.
    pub fn median(&self, variant: &str) -> Option<f64> {
        self.variants
            .iter()
            .find(|v| v.name == variant)
            .map(|v| v.summary.median_s)
    }

    /// How far the 95% confidence interval of a variant's median reaches from the median,
    /// relative to it (0.1 = ±10% at the wider side).
    pub fn median_uncertainty(&self, variant: &str) -> Option<f64> {
        let s = &self.variants.iter().find(|v| v.name == variant)?.summary;
        let [lo, hi] = s.ci95_s;
        Some(((s.median_s - lo).max(hi - s.median_s)) / s.median_s)
    }

    /// Add the sampled variants, in order, each with its optional label.
    pub fn add_variants(
        &mut self,
        names: Vec<String>,
        summaries: Vec<Summary>,
        labels: impl IntoIterator<Item = Option<String>>,
    ) {
        for ((name, summary), label) in names.into_iter().zip(summaries).zip(labels) {
            self.variants.push(VariantRecord {
                name,
                label,
                summary,
            });
        }
    }

    /// Record a derived figure; non-finite values become `null` (JSON has no NaN).
    /// Record a derived figure; its unit and direction follow from its key ([`Figure::named`]).
    pub fn derive(&mut self, key: &str, value: f64) {
        self.derive_as(key, value, Figure::named(key));
    }

    /// Record a derived figure with its unit and direction stated.
    pub fn derive_as(&mut self, key: &str, value: f64, figure: Figure) {
        let v = serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number);
        self.derived.insert(key.into(), v);
        self.figures.insert(key.into(), figure);
    }

    /// Record a series of points (a loss curve) as a derived figure.
    pub fn derive_series(&mut self, key: &str, points: Value) {
        self.derived.insert(key.into(), points);
        self.figures
            .insert(key.into(), Figure::new(Unit::Series, Better::Neither));
    }

    /// The unit and direction of a derived figure: as the run stated it, else from its key.
    pub fn figure(&self, key: &str) -> Figure {
        self.figures
            .get(key)
            .copied()
            .unwrap_or_else(|| Figure::named(key))
    }

    /// Flag a figure outside its physical range (an efficiency above 1, a time below its bound),
    /// with its likely cause: a note starting with [`WARNING`], shown as a warning in the table.
    pub fn warn(&mut self, text: impl Into<String>) {
        self.notes.push(format!("{WARNING}{}", text.into()));
    }

    /// The warnings among the notes, without their prefix.
    pub fn warnings(&self) -> impl Iterator<Item = &str> {
        self.notes.iter().filter_map(|n| n.strip_prefix(WARNING))
    }

    pub fn check(&mut self, name: &str, passed: bool, detail: impl Into<String>) {
        self.checks.push(Check {
            name: name.into(),
            passed,
            detail: detail.into(),
        });
    }
}

/// One variant's samples and statistics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantRecord {
    pub name: String,
    /// A warning or gloss shown next to the variant (e.g. that `push-only` is not the cost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(flatten)]
    pub summary: Summary,
}

/// A correctness check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub name: String,
    pub passed: bool,
    pub detail: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::stats::Summary;

    #[test]
    fn median_uncertainty_is_the_wider_reach_of_the_interval() {
        let mut run = RunRecord::new("x", Map::new(), vec![]);
        let tight = Summary::from_samples(&[1.0; 9]).expect("samples");
        let loose =
            Summary::from_samples(&[0.5, 0.9, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 2.0]).expect("samples");
        run.add_variants(
            vec!["tight".into(), "loose".into()],
            vec![tight, loose.clone()],
            [None, None],
        );
        assert_eq!(run.median_uncertainty("tight"), Some(0.0));
        let [lo, hi] = loose.ci95_s;
        let want = (1.0 - lo).max(hi - 1.0);
        assert_eq!(run.median_uncertainty("loose"), Some(want));
        assert!(
            want > 0.0,
            "this interval must not be degenerate: {lo}..{hi}"
        );
        assert_eq!(run.median_uncertainty("missing"), None);
    }

    #[test]
    fn a_warning_is_a_note_with_its_prefix() {
        let mut run = RunRecord::new("x", Map::new(), vec![]);
        run.notes.push("engine: threaded".into());
        run.warn("efficiency 1.07 above 1");
        assert_eq!(run.notes[1], "warning: efficiency 1.07 above 1");
        assert_eq!(
            run.warnings().collect::<Vec<_>>(),
            ["efficiency 1.07 above 1"]
        );
    }

    #[test]
    fn figures_read_back_from_json_are_the_figures_written() {
        // A value that serde_json's default (fast) float parser reads one ulp off, and that
        // four significant digits then round the other way (2.216 µs written, 2.215 µs read):
        // `report` of a saved run must print what `--html` printed.
        let x = 2.2155000000000002e-6_f64;
        let text = serde_json::to_string(&x).unwrap();
        let back: f64 = serde_json::from_str(&text).unwrap();
        assert_eq!(back.to_bits(), x.to_bits(), "{text}");
    }
}
