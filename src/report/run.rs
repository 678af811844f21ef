//! One scenario run's record: its variants, derived figures, checks, notes, explanation, the
//! machine's state, the book's figures and its lesson, and how it is written as JSON.

use std::collections::BTreeMap;

use serde::ser::Error;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};

use super::finding::{self, Finding, Role};
use super::lesson::{busy_rule, Held};
use super::{Better, BookFigure, Figure, FigureSpec, Lesson, Unit, WARNING};
use crate::device::record::{Described, DeviceRecord};
use crate::harness::stats::{Percentiles, SAMPLES_FOR_95};
use crate::harness::Summary;
use crate::machine::{BusyReason, RunState};

/// One scenario run.
///
/// Written with `derived_display` beside `derived` (see [`RunRecord::derived_display`]): the
/// text is computed as the record is serialized, from the figures it shows, so it can never
/// disagree with them whoever built or changed the record; reading a report ignores it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub struct RunRecord {
    pub scenario: String,
    /// Parameter values by their option names with underscores (`iterations`, `cpu_size`).
    pub parameters: Map<String, Value>,
    /// The devices used, as `cpu:0 (1 thread)`: for people.
    pub devices: Vec<String>,
    /// The same devices as records (kind, threads, standing in), in the same order: for code;
    /// reports older than them have none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_records: Vec<DeviceRecord>,
    pub variants: Vec<VariantRecord>,
    /// Figures computed from the variants (speed-ups, model predictions, GFLOP/s).
    pub derived: Map<String, Value>,
    /// The unit and direction of each derived figure (absent in reports older than it: then
    /// [`RunRecord::figure`] reads them from the key, see [`Figure::named`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub figures: BTreeMap<String, Figure>,
    /// Why each derived figure that is `null` was not measured in this run (no trace, no
    /// probe of the machine, a ratio of a zero time): a run records the same figures whatever
    /// it measured, so two runs of a scenario with the same parameters compare whole.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unmeasured: BTreeMap<String, String>,
    pub checks: Vec<Check>,
    /// Conditions of the run a reader must know (fallback devices, mode); a figure outside its
    /// physical range is a note that starts with [`WARNING`] ([`RunRecord::warn`]).
    pub notes: Vec<String>,
    /// What the numbers show, in a sentence or three (printed under the table).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub explanation: Vec<String>,
    /// Sentences that quote detail figures (engine internals, machine probes): in the JSON
    /// always, in the table with `--verbose`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub explanation_detail: Vec<String>,
    /// The figures the book printed for this experiment, with their sources; none where its
    /// section printed none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub book: Vec<BookFigure>,
    /// The chapter's lesson and whether it held here; reports older than it have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lesson: Option<Lesson>,
    /// Each judgment of the run — the lesson's criteria, the figures it quotes beside them and
    /// the physical limits its figures were held to — as one value that every surface
    /// renders; reports older than it have none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    /// The machine's state while the run ran (other processes, steal, clocks, threads against
    /// cores), where the command line recorded it; reports older than it have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<RunState>,
    /// How far two runs of this scenario by one binary may read apart beyond their own
    /// intervals, where the scenario declares more than [`super::noise::UNLEARNED_DRIFT`]:
    /// `compare` and `history` judge by the larger of the two sides'. Reports older
    /// than it, and scenarios that declare none, have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_between_runs: Option<f64>,
}

impl Serialize for RunRecord {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let display = self.derived_display().into_iter();
        let display: Map<String, Value> = display.map(|(k, t)| (k.into(), t.into())).collect();
        let extra = (!display.is_empty()).then(|| ("derived_display".into(), display.into()));
        let json = RunRecord::serialize(self, serde_json::value::Serializer);
        super::with_fields(json, Some("derived"), extra, serializer)
    }
}

impl<'de> Deserialize<'de> for RunRecord {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        RunRecord::deserialize(deserializer)
    }
}

impl RunRecord {
    pub fn new(
        scenario: &str,
        parameters: Map<String, Value>,
        devices: impl Into<Described>,
    ) -> RunRecord {
        let Described { labels, records } = devices.into();
        RunRecord {
            scenario: scenario.into(),
            parameters,
            devices: labels,
            device_records: records,
            ..RunRecord::default()
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

    pub fn variant(&self, name: &str) -> Option<&VariantRecord> {
        self.variants.iter().find(|v| v.name == name)
    }

    pub fn median(&self, variant: &str) -> Option<f64> {
        self.variant(variant).map(|v| v.summary.median_s)
    }

    /// How far the 95% confidence interval of a variant's median reaches from the median,
    /// relative to it (0.1 = ±10% at the wider side).
    pub fn median_uncertainty(&self, variant: &str) -> Option<f64> {
        let s = &self.variant(variant)?.summary;
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

    /// Record a derived figure declared with its unit and direction.
    pub fn record(&mut self, spec: FigureSpec, value: f64) {
        self.derive_as(spec.key, value, spec.figure);
    }

    /// Record a derived figure with its unit and direction stated; a value that is not finite
    /// is `null`, not measured for that reason.
    pub fn derive_as(&mut self, key: &str, value: f64, figure: Figure) {
        match serde_json::Number::from_f64(value) {
            Some(v) => {
                self.derived.insert(key.into(), Value::Number(v));
                self.figures.insert(key.into(), figure);
                self.unmeasured.remove(key);
            }
            None => self.unmeasured_as(key, figure, format!("not finite ({value})")),
        }
    }

    /// Record a declared figure this run could not measure: `null`, with why (see
    /// [`RunRecord::unmeasured`]).
    pub fn unmeasured(&mut self, spec: FigureSpec, reason: impl Into<String>) {
        self.unmeasured_as(spec.key, spec.figure, reason);
    }

    /// Record a figure this run could not measure, its unit and direction stated.
    pub fn unmeasured_as(&mut self, key: &str, figure: Figure, reason: impl Into<String>) {
        self.derived.insert(key.into(), Value::Null);
        self.figures.insert(key.into(), figure);
        self.unmeasured.insert(key.into(), reason.into());
    }

    /// A derived figure's value as every surface words it: in its unit, or `not measured:
    /// <reason>` for a `null` with its reason.
    pub fn worded(&self, key: &str, value: &Value) -> String {
        match self.unmeasured.get(key).filter(|_| value.is_null()) {
            Some(reason) => format!("not measured: {reason}"),
            None => self.figure(key).format(value),
        }
    }

    /// Record a series of points (a loss curve) as a derived figure.
    pub fn derive_series(&mut self, key: &str, points: Value) {
        self.derived.insert(key.into(), points);
        self.figures
            .insert(key.into(), Figure::new(Unit::Series, Better::Neither));
    }

    /// Record a series that is detail (see [`Figure::detail`]).
    pub fn derive_detail_series(&mut self, key: &str, points: Value) {
        self.derive_series(key, points);
        if let Some(f) = self.figures.get_mut(key) {
            f.detail = true;
        }
    }

    /// Whether a derived figure is detail, shown with `--verbose` only.
    pub fn is_detail(&self, key: &str) -> bool {
        self.figure(key).detail
    }

    /// Each derived figure that is a number, worded in its unit as the table words it
    /// (`"4.58×"`, `"185.4 ns"`), in the order of `derived`; `null`s and series are left out.
    /// The JSON writes these as `derived_display`.
    pub fn derived_display(&self) -> Vec<(&str, String)> {
        self.derived
            .iter()
            .filter(|(_, v)| v.as_f64().is_some_and(f64::is_finite))
            .map(|(k, v)| (k.as_str(), self.figure(k).format(v)))
            .collect()
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

    /// Keep the machine's state over the run, with a warning for each reason it gives to doubt
    /// the figures ([`RunState::busy_reasons`]).
    pub fn record_state(&mut self, state: RunState) {
        let reasons = state.busy_reasons();
        for reason in &reasons {
            self.warn(format!("busy machine: {reason}"));
        }
        if let Some(slow) = state.limits_measured_slow() {
            self.warn(slow.to_string());
        }
        if let Some(lesson) = &mut self.lesson {
            lesson.on_busy_machine(&reasons);
        }
        self.state = Some(state);
    }

    /// Why the machine was not fit to measure on during this run; empty for a quiet run or one
    /// without a recorded state.
    pub fn busy_reasons(&self) -> Vec<BusyReason> {
        self.state
            .as_ref()
            .map_or_else(Vec::new, RunState::busy_reasons)
    }

    /// Whether the lesson held, as every surface shows it: decided from the run's findings
    /// where it has them (else as the report recorded it), and inconclusive on a busy machine.
    pub fn lesson_held(&self) -> Option<Held> {
        let lesson = self.lesson.as_ref()?;
        let criteria = self.findings.iter().any(|f| f.role == Role::Criterion);
        let held = if criteria {
            self.held_from_findings()
        } else {
            lesson.held
        };
        Some(busy_rule(held, &self.busy_reasons()))
    }

    /// The verdict of the run's findings, within intervals that reach 95%: a variant timed
    /// fewer than [`SAMPLES_FOR_95`] times has a median interval of lower coverage, which
    /// decides nothing.
    pub fn held_from_findings(&self) -> Held {
        match self.fewest_samples() {
            Some(n) if n < SAMPLES_FOR_95 => Held::Inconclusive,
            _ => finding::all_held(&self.findings),
        }
    }

    /// The fewest samples any variant was timed; `None` without variants.
    pub fn fewest_samples(&self) -> Option<usize> {
        self.variants
            .iter()
            .map(|v| v.summary.samples_s.len())
            .min()
    }

    /// Whether every check of the run passed (true for a run with none).
    pub fn checks_passed(&self) -> bool {
        self.checks.iter().all(|c| c.passed)
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
///
/// Written with `median_display` (see [`VariantRecord::median_display`]), computed as the
/// record is serialized; reading a report ignores it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(remote = "Self")]
pub struct VariantRecord {
    pub name: String,
    /// A warning or gloss shown next to the variant (e.g. that `push-only` is not the cost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(flatten)]
    pub summary: Summary,
}

impl VariantRecord {
    /// The median as the table words it (`"848.6 µs"`); the JSON writes it as
    /// `median_display`.
    pub fn median_display(&self) -> String {
        crate::units::human_time(self.summary.median_s)
    }

    /// The 50th, 90th and 99th percentiles of the samples; the JSON writes them as `p50_s`,
    /// `p90_s`, `p99_s`. `None` when a sample is not finite.
    pub fn percentiles(&self) -> Option<Percentiles> {
        Percentiles::of(&self.summary.samples_s)
    }
}

impl Serialize for VariantRecord {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let percentiles = serde_json::to_value(self.percentiles()).map_err(Error::custom)?;
        let percentiles = match percentiles {
            Value::Object(p) => p,
            _ => Map::new(),
        };
        let extra = [("median_display".into(), self.median_display().into())];
        let json = VariantRecord::serialize(self, serde_json::value::Serializer);
        super::with_fields(json, None, extra.into_iter().chain(percentiles), serializer)
    }
}

impl<'de> Deserialize<'de> for VariantRecord {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        VariantRecord::deserialize(deserializer)
    }
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
    use crate::report::Report;

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
    fn a_busy_state_is_kept_with_a_warning_per_reason_and_reads_back() {
        let mut run = RunRecord::new("x", Map::new(), vec![]);
        run.record_state(RunState {
            other_cpu_fraction: Some(0.48),
            engine_threads: Some(4),
            own_runnable: crate::machine::state::Runnable::of(&[4, 4, 4]),
            ..RunState::unknown(1.0, 2)
        });
        let warnings: Vec<&str> = run.warnings().collect();
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].starts_with("busy machine: other processes used 48%"));
        assert!(warnings[1].starts_with(
            "busy machine: parbench's own threads wanted 4.0 cores at once on average, on 2 cores"
        ));
        let kinds: Vec<&str> = run.busy_reasons().iter().map(BusyReason::kind).collect();
        assert_eq!(kinds, ["other-processes", "oversubscribed"]);

        let json = serde_json::to_value(&run).expect("serializes");
        assert_eq!(json["state"]["other_cpu_fraction"], 0.48);
        let back: RunRecord = serde_json::from_value(json.clone()).expect("reads");
        assert_eq!(back, run);
        // A run from before the state reads back without one, and writes none.
        let mut older = json;
        older.as_object_mut().expect("run").remove("state");
        let back: RunRecord = serde_json::from_value(older).expect("an older run reads");
        assert_eq!(back.state, None);
        assert!(back.busy_reasons().is_empty());
        assert!(serde_json::to_value(&back)
            .expect("serializes")
            .get("state")
            .is_none());
    }

    /// A run with two variants and derived figures of every kind: numbers in several units, a
    /// non-finite number (`null`) and a series.
    fn run_with_figures() -> RunRecord {
        let mut run = RunRecord::new("x", Map::new(), vec!["cpu:0 (1 thread)".into()]);
        run.add_variants(
            vec!["sync".into(), "async".into()],
            vec![
                Summary::from_samples(&[848.6e-6, 848.6e-6, 900e-6]).expect("samples"),
                Summary::from_samples(&[185.4e-9]).expect("samples"),
            ],
            [None, Some("a label".to_string())],
        );
        let spec = |key, unit, better| FigureSpec::new(key, unit, better);
        run.record(spec("async_speedup", Unit::Ratio, Better::Higher), 4.5768);
        run.record(spec("t1_s", Unit::Seconds, Better::Neither), 185.4e-9);
        let peak = spec("peak_bytes", Unit::Bytes, Better::Neither);
        run.record(peak, 3.0 * 1024.0 * 1024.0);
        run.record(spec("gflops", Unit::Gflops, Better::Higher), 35.04);
        run.record(spec("ops_per_pass", Unit::Number, Better::Neither), 12.0);
        let to_target = spec("time_to_target_s", Unit::Seconds, Better::Lower);
        run.record(to_target, f64::NAN);
        run.derive_series("loss_curve", serde_json::json!([[0.0, 1.0], [1.0, 0.5]]));
        run
    }

    #[test]
    fn display_fields_word_the_figures_as_the_table_does() {
        let run = run_with_figures();
        let json = serde_json::to_value(&run).expect("serializes");
        let table = crate::export::table::render_run(&run);

        let medians: Vec<&str> = json["variants"]
            .as_array()
            .expect("variants")
            .iter()
            .map(|v| v["median_display"].as_str().expect("median_display"))
            .collect();
        assert_eq!(medians, ["848.6 µs", "185.4 ns"]);
        for (v, shown) in run.variants.iter().zip(&medians) {
            assert_eq!(*shown, crate::units::human_time(v.summary.median_s));
            let row = table
                .lines()
                .find(|l| l.trim_start().starts_with(&v.name))
                .expect("the variant's row");
            assert!(row.contains(shown), "{row:?} lacks {shown:?}");
        }

        let display = json["derived_display"]
            .as_object()
            .expect("derived_display");
        let display: Vec<(&str, &str)> = display
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str().expect("a string")))
            .collect();
        // Numbers only, in the order of `derived`: no `null`, no series.
        let want = [
            ("async_speedup", "4.58×"),
            ("t1_s", "185.4 ns"),
            ("peak_bytes", "3.0 MiB"),
            ("gflops", "35.0 GFLOP/s"),
            ("ops_per_pass", "12"),
        ];
        assert_eq!(display, want);
        for &(key, shown) in &display {
            assert_eq!(shown, run.figure(key).format(&run.derived[key]));
            let line = table
                .lines()
                .find(|l| l.trim_start().starts_with(&format!("{key} ")))
                .expect("the figure's line");
            assert!(line.trim_end().ends_with(shown), "{line:?} lacks {shown:?}");
        }
        let words = run.derived_display();
        assert!(words.iter().map(|(k, w)| (*k, w.as_str())).eq(want));
    }

    #[test]
    fn a_run_without_numbers_writes_no_derived_display() {
        let mut run = RunRecord::new("x", Map::new(), vec![]);
        let json = serde_json::to_value(&run).expect("serializes");
        assert!(json.get("derived_display").is_none(), "{json}");
        // The fields skipped when empty stay skipped.
        assert!(json.get("figures").is_none(), "{json}");
        assert!(json.get("explanation").is_none(), "{json}");
        let seconds = Figure::new(Unit::Seconds, Better::Neither);
        run.derive_as("unknown_s", f64::INFINITY, seconds);
        let json = serde_json::to_value(&run).expect("serializes");
        assert!(json.get("derived_display").is_none(), "{json}");
        assert_eq!(json["derived"]["unknown_s"], Value::Null);
    }

    #[test]
    fn reports_with_or_without_display_fields_read_back_the_same() {
        let mut report = crate::report::fixtures::report(vec![run_with_figures()]);
        report.runs[0].explanation.push("why".into());
        let text = report.to_json();
        let written: Value = serde_json::from_str(&text).expect("json");
        assert!(written["runs"][0].get("derived_display").is_some());
        assert!(written["runs"][0]["variants"][0]
            .get("median_display")
            .is_some());
        let back: Report = serde_json::from_str(&text).expect("a report with them reads");
        assert_eq!(back, report);
        assert_eq!(back.to_json(), text, "written again, the same text");

        // A report from before the display fields.
        let mut older = written.clone();
        for run in older["runs"].as_array_mut().expect("runs") {
            run.as_object_mut().expect("run").remove("derived_display");
            for v in run["variants"].as_array_mut().expect("variants") {
                v.as_object_mut().expect("variant").remove("median_display");
            }
        }
        assert!(!older.to_string().contains("_display"));
        let back: Report = serde_json::from_value(older).expect("an older report reads");
        assert_eq!(back, report);
        // Written again, it gains them.
        assert_eq!(back.to_json(), text);
    }

    #[test]
    fn a_figure_not_measured_is_null_with_its_reason_everywhere() {
        let mut run = run_with_figures();
        let handoff = FigureSpec::new("handoff_p50_s", Unit::Seconds, Better::Lower);
        run.unmeasured(handoff, "no trace");
        let json = serde_json::to_value(&run).expect("serializes");
        assert_eq!(json["derived"]["handoff_p50_s"], Value::Null);
        assert_eq!(json["unmeasured"]["handoff_p50_s"], "no trace");
        // A value that is not finite says so; a series is not a figure measured or not.
        assert_eq!(json["unmeasured"]["time_to_target_s"], "not finite (NaN)");
        assert_eq!(json["unmeasured"].as_object().map(|u| u.len()), Some(2));
        let back: RunRecord = serde_json::from_value(json.clone()).expect("reads");
        assert_eq!(back, run);
        let table = crate::export::table::render_run(&run);
        assert!(table.contains("not measured: no trace"), "{table}");
        // Measured after all, the reason goes.
        run.record(handoff, 2e-6);
        assert!(!run.unmeasured.contains_key("handoff_p50_s"));
        // A report from before `unmeasured` reads its nulls as before.
        let mut older = json;
        older.as_object_mut().expect("run").remove("unmeasured");
        let back: RunRecord = serde_json::from_value(older).expect("an older run reads");
        assert!(back.unmeasured.is_empty());
        assert_eq!(back.worded("handoff_p50_s", &Value::Null), "n/a");
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
