//! Comparing reports: the check a CI job may run on stored reports, and what it can tell.
//!
//! Each side is one report or several (reruns of one build). Entries are matched by scenario,
//! parameters and variant name, and each change is judged against that figure's run-to-run
//! spread on that machine ([`super::noise`]): the sides' reruns, the reruns of a history
//! where one is given, never less than each run's own interval. A change counts when it is
//! larger than the threshold and beyond that noise at a family-wise 5% over the entries
//! compared. One report a side has no spread to learn: a change past both runs' intervals is
//! then `inconclusive` unless it clears them by [`super::noise::UNLEARNED_DRIFT`] (or the
//! larger drift a scenario declares, recorded in its runs). A zero or
//! non-finite value makes an entry "n/a", never faster or slower. Derived figures with a
//! direction (speed-ups, GFLOP/s, efficiencies) are judged alike and reported, but only times
//! fail the check. The gate that can tell a small change on a shared machine is `ab`, which
//! measures both builds side by side in pairs.
//!
//! This decides the rows; `export::compare` prints them (table, Markdown, JSON) and
//! `export::html` draws the comparison page.

use serde_json::Value;

use super::noise::{judge, Call, Observation, Rule, Spread, UNLEARNED_DRIFT};
use super::provenance::{result_kind, AB_SCHEMA, COMPARE_SCHEMA};
use super::{find_or_push, Better, Figure, Report, RunRecord, Unit, SCHEMA};
use crate::units::count;

/// Why two reports cannot be compared (a usage error).
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("cannot read {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("{path} is not a parbench report: {reason}")]
    Parse { path: String, reason: String },
    #[error("{path} has schema '{found}', this parbench reads '{SCHEMA}'")]
    Schema { path: String, found: String },
    #[error("nothing to compare: no scenario, parameters and variant appear in both reports")]
    NothingMatched,
    /// One of parbench's results (a `compare` or `ab` JSON) where a report was expected.
    #[error("{path} is {what}")]
    NotAReport { path: String, what: &'static str },
    /// A report holding an entry twice, which a comparison could pair with the wrong copy.
    #[error("{path} holds {} more than once (a report compares only with each entry once; rerun it, or edit the copies out)", .entries.join(", "))]
    Duplicates { path: String, entries: Vec<String> },
}

/// What a journal given where a report was expected is, and the command that turns it into
/// one: a sweep's (its header, or its first run record, names the scenario) or a suite's (its
/// header names the suite; `parbench all`'s is the built-in one). `None` when `text` is no
/// journal (JSON Lines of a header and run records, no schema).
fn journal_hint(text: &str, path: &str) -> Option<String> {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let first: Value = serde_json::from_str(lines.next()?).ok()?;
    lines.next()?;
    if first.get("schema").is_some() {
        return None;
    }
    if first.get("kind").and_then(Value::as_str) == Some("suite") {
        let suite = first.get("suite")?.as_str()?;
        let command = match suite.strip_suffix(" (built in)") {
            Some(_) => "parbench all".to_string(),
            None => format!("parbench run {suite}"),
        };
        return Some(format!(
            "it is a suite's journal (one finished run per line), not a report; `{command} \
             --journal {path} --resume -o report.json` writes the report"
        ));
    }
    let scenario = first.get("scenario")?.as_str()?;
    Some(format!(
        "it is a sweep journal (one finished point per line), not a report; `parbench sweep \
         {scenario} --set ... --resume {path} -o report.json` with the sweep's axes writes the \
         report"
    ))
}

/// Load a report, checking its schema version first.
pub fn load(path: &std::path::Path) -> Result<Report, CompareError> {
    let p = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| CompareError::Read {
        path: p.clone(),
        reason: e.to_string(),
    })?;
    let value: Value = serde_json::from_str(&text).map_err(|e| CompareError::Parse {
        path: p.clone(),
        reason: journal_hint(&text, &p).unwrap_or_else(|| e.to_string()),
    })?;
    // Results written before they carried a schema: `ab` (entries, settings) and
    // `compare --format json` (rows, threshold).
    let has = |a: &str, b: &str| value.get(a).is_some() && value.get(b).is_some();
    let schema = match value.get("schema").and_then(Value::as_str) {
        Some(schema) => schema,
        None if has("entries", "settings") => AB_SCHEMA,
        None if has("rows", "threshold") => COMPARE_SCHEMA,
        None => {
            return Err(CompareError::Parse {
                path: p,
                reason: "no \"schema\" field".into(),
            })
        }
    };
    if schema != SCHEMA {
        return Err(match result_kind(schema) {
            Some(what) => CompareError::NotAReport { path: p, what },
            None => CompareError::Schema {
                path: p,
                found: schema.into(),
            },
        });
    }
    serde_json::from_value(value).map_err(|e| CompareError::Parse {
        path: p,
        reason: e.to_string(),
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Faster,
    Slower,
    Same,
    Noise,
    /// Past the runs' own intervals, but not beyond the machine's drift (one report a side
    /// cannot learn it) or not by enough evidence: rerun, or compare more reports a side.
    Inconclusive,
    /// A derived figure that moved the good way / the bad way.
    Better,
    Worse,
    /// No meaningful change can be computed (a zero or non-finite baseline or value).
    NotComparable,
    /// A derived figure that moved, shown but not scored: its row's [`Mark`] says why.
    Marked,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::Same => "same",
            Verdict::Noise => "noise",
            Verdict::Inconclusive => "inconclusive",
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::NotComparable => "n/a",
            Verdict::Marked => "marked",
        }
    }

    /// A change beyond the noise, `up` or down, of a figure that improves as `better` says:
    /// slower or faster for a time, worse or better for any other figure.
    pub fn moved(up: bool, better: Better, is_time: bool) -> Verdict {
        let lower = better == Better::Lower;
        match (is_time && lower, up == lower) {
            (true, true) => Verdict::Slower,
            (true, false) => Verdict::Faster,
            (false, true) => Verdict::Worse,
            (false, false) => Verdict::Better,
        }
    }

    /// True for the verdicts that fail a regression check: times only. Derived figures are
    /// ratios of medians with no samples of their own, so their noise adds up (±3% on two
    /// times is ±6% on a speed-up), and one moves whenever either of its times does; they
    /// are shown, not gated.
    pub fn is_regression(self) -> bool {
        matches!(self, Verdict::Slower)
    }

    /// `word` as a table shows this verdict: with `marker` (why the machine may explain it,
    /// `busy new`) in brackets where the verdict claims a change.
    pub fn hedged(self, word: String, marker: Option<String>) -> String {
        let claims_a_change = matches!(
            self,
            Verdict::Faster | Verdict::Slower | Verdict::Better | Verdict::Worse
        );
        match marker {
            Some(marker) if claims_a_change => format!("{word} ({marker})"),
            _ => word,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Row {
    /// `scenario[params] variant` or `scenario[params] derived:key`.
    pub entry: String,
    pub base: f64,
    pub new: f64,
    /// (new − base) / base, of each side's geometric mean over its reports.
    pub change: f64,
    /// The p of the change against the entry's run-to-run spread; `None` where no spread
    /// is known (one report a side, no history).
    pub p_value: Option<f64>,
    pub verdict: Verdict,
    /// True for times (seconds), false for derived figures (their own units).
    pub is_time: bool,
    pub unit: Unit,
    /// How many reports of each side measured it on a busy machine.
    pub busy: Busy,
    /// The reports on each side that hold the entry.
    pub reports: (usize, usize),
    /// Why a [`Verdict::Marked`] row is not scored; `None` for every other verdict.
    pub mark: Option<Mark>,
    /// The key of the entry's run (`scenario[params]`).
    pub run: String,
}

impl Row {
    /// The verdict as the tables word it: a change measured with a busy side says so
    /// (`slower (busy base)`, `slower (busy in 2 of 3 new reports)`), since the machine may
    /// explain it; a marked row says why (`marked: follows sequential (slower)`).
    pub fn verdict_text(&self) -> String {
        let word = match &self.mark {
            Some(mark) => format!("{}: {mark}", self.verdict.as_str()),
            None => self.verdict.as_str().to_string(),
        };
        self.verdict.hedged(word, self.busy.marker(self.reports))
    }
}

/// Why a derived figure that moved is shown but not scored ([`Verdict::Marked`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mark {
    /// Times of its run moved beyond their noise (each variant with its verdict): the figure
    /// is computed from its run's medians, so it moves when they do, and they carry the
    /// verdict.
    Follows(Vec<(String, Verdict)>),
    /// It is read against the machine's limits, and a side's run was busy or its limits were
    /// measured while the machine ran slower ([`RunState::limits_measured_slow`]).
    ///
    /// [`RunState::limits_measured_slow`]: crate::machine::RunState::limits_measured_slow
    LimitsUnderLoad,
}

impl std::fmt::Display for Mark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mark::Follows(times) => {
                let moved: Vec<String> = times
                    .iter()
                    .map(|(variant, v)| format!("{variant} ({})", v.as_str()))
                    .collect();
                write!(f, "follows {}", moved.join(", "))
            }
            Mark::LimitsUnderLoad => write!(f, "limits measured under load"),
        }
    }
}

/// How many reports of each side measured an entry's run on a busy machine (its run's state
/// gave a [`BusyReason`](crate::machine::BusyReason)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Busy {
    pub base: usize,
    pub new: usize,
}

impl Busy {
    pub fn any(self) -> bool {
        self.base + self.new > 0
    }

    /// With one report a side: `busy base`, `busy new`, `busy both`; with more, how many of
    /// `reports` (each side's) were busy: `busy in 2 of 3 new reports`. `None` when none was.
    pub fn marker(self, reports: (usize, usize)) -> Option<String> {
        if reports == (1, 1) {
            return match (self.base > 0, self.new > 0) {
                (true, true) => Some("busy both".into()),
                (true, false) => Some("busy base".into()),
                (false, true) => Some("busy new".into()),
                (false, false) => None,
            };
        }
        let parts: Vec<String> = [("base", self.base, reports.0), ("new", self.new, reports.1)]
            .into_iter()
            .filter(|&(_, k, _)| k > 0)
            .map(|(side, k, n)| format!("{k} of {}", count(n, &format!("{side} report"))))
            .collect();
        (!parts.is_empty()).then(|| format!("busy in {}", parts.join(" and ")))
    }
}

/// Each report's machine state for every run matched on both sides where any report was busy:
/// `matmul[size=256] base (busy): other processes 48.0% of CPU time, …`, or with several reports
/// a side `… base, report 2 of 3 (busy): …`. Empty when no matched run was busy.
pub fn busy_states(base: &[&Report], new: &[&Report]) -> Vec<String> {
    fn runs<'a>(side: &[&'a Report], key: &str) -> Vec<&'a RunRecord> {
        side.iter()
            .filter_map(|r| r.runs.iter().find(|run| run.key() == key))
            .collect()
    }
    let mut keys: Vec<String> = Vec::new();
    for run in new.iter().flat_map(|r| &r.runs) {
        let key = run.key();
        if !keys.contains(&key) && !runs(base, &key).is_empty() {
            keys.push(key);
        }
    }
    let busy = |r: &RunRecord| !r.busy_reasons().is_empty();
    let mut lines = Vec::new();
    for key in keys {
        let sides = [("base", runs(base, &key)), ("new", runs(new, &key))];
        if !sides.iter().flat_map(|(_, r)| r).any(|r| busy(r)) {
            continue;
        }
        for (side, side_runs) in &sides {
            for (i, run) in side_runs.iter().enumerate() {
                let which = match side_runs.len() {
                    1 => side.to_string(),
                    n => format!("{side}, report {} of {n}", i + 1),
                };
                let mark = if busy(run) { " (busy)" } else { "" };
                let state = run
                    .state
                    .as_ref()
                    .map_or_else(|| "no state recorded".to_string(), |s| s.to_string());
                lines.push(format!("{key} {which}{mark}: {state}"));
            }
        }
    }
    lines
}

/// One figure of one report, as a comparison or a history matches it: its entry name
/// (`scenario[params] variant` or `scenario[params] derived:key`), value with the run's own
/// interval, unit and direction, and whether its run was measured on a busy machine.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    /// The key of its run (`scenario[params]`); `name` is this, a space and the variant or
    /// `derived:key`.
    pub run: String,
    pub observed: Observation,
    pub is_time: bool,
    pub unit: Unit,
    pub better: Better,
    pub busy: bool,
    /// A figure read against the machine's limits whose run was busy or whose limits were
    /// measured while the machine ran slower ([`Mark::LimitsUnderLoad`]).
    pub limits_under_load: bool,
    /// The drift between runs its scenario declared, where more than the default
    /// ([`RunRecord::drift_between_runs`]).
    pub drift: Option<f64>,
}

/// Every measured figure of `report` with a direction ([`run_entries`] without the figures
/// a run could not measure).
pub fn entries(report: &Report) -> Vec<Entry> {
    let entries = report.runs.iter().flat_map(run_entries);
    entries
        .filter(|e| e.is_time || !e.observed.value.is_nan())
        .collect()
}

/// Every figure of `run` with a direction: each variant's median time with its 95% interval,
/// and each derived figure with a direction (no interval of its own; `NaN` for one the run
/// could not measure, `null`).
pub fn run_entries(run: &RunRecord) -> Vec<Entry> {
    let key = run.key();
    let busy = !run.busy_reasons().is_empty();
    let limits_slow = run
        .state
        .as_ref()
        .is_some_and(|s| s.limits_measured_slow().is_some());
    let entry = |item: &str, observed, figure: Figure| Entry {
        name: format!("{key} {item}"),
        run: key.clone(),
        observed,
        is_time: true,
        unit: figure.unit,
        better: figure.better,
        busy,
        limits_under_load: false,
        drift: run.drift_between_runs,
    };
    let seconds = Figure::new(Unit::Seconds, Better::Lower);
    let mut out: Vec<Entry> = run
        .variants
        .iter()
        .map(|v| entry(&v.name, Observation::median_of(&v.summary), seconds))
        .collect();
    for (k, value) in &run.derived {
        let figure = run.figure(k);
        let x = value.as_f64().or(value.is_null().then_some(f64::NAN));
        let Some(x) = x.filter(|_| figure.better != Better::Neither) else {
            continue;
        };
        out.push(Entry {
            is_time: false,
            limits_under_load: figure.against_limits && (busy || limits_slow),
            ..entry(&format!("derived:{k}"), Observation::exact(x), figure)
        });
    }
    out
}

/// What the reports of each side hold of one entry; `first` gathers every report's
/// `limits_under_load` mark and the larger drift either side's scenario declared.
struct Matched {
    first: Entry,
    base: Vec<Observation>,
    new: Vec<Observation>,
    busy: Busy,
}

impl Matched {
    /// One more report's entry: its observation and busy count on its side, its mark and drift.
    fn add(&mut self, e: &Entry, new: bool) {
        let (side, busy) = match new {
            true => (&mut self.new, &mut self.busy.new),
            false => (&mut self.base, &mut self.busy.base),
        };
        side.push(e.observed);
        *busy += usize::from(e.busy);
        self.first.limits_under_load |= e.limits_under_load;
        self.first.drift = super::noise::larger_drift(self.first.drift, e.drift);
    }
}

/// Compare the `new` reports against the `base` reports (one or more a side, reruns of one
/// build each), judging each entry in both against its run-to-run spread
/// ([`super::noise`]): the sides' own reruns pooled with `learned` (a history's reruns, by
/// entry). `threshold` is a fraction (0.05 for 5%).
pub fn compare(
    base: &[&Report],
    new: &[&Report],
    learned: &dyn Fn(&str) -> Spread,
    threshold: f64,
) -> Result<Vec<Row>, CompareError> {
    let mut matched: Vec<Matched> = Vec::new();
    for e in base.iter().flat_map(|r| entries(r)) {
        let m = find_or_push(
            &mut matched,
            |m| m.first.name == e.name,
            || Matched {
                first: e.clone(),
                base: Vec::new(),
                new: Vec::new(),
                busy: Busy::default(),
            },
        );
        m.add(&e, false);
    }
    for e in new.iter().flat_map(|r| entries(r)) {
        if let Some(m) = matched.iter_mut().find(|m| m.first.name == e.name) {
            m.add(&e, true);
        }
    }
    matched.retain(|m| !m.new.is_empty());
    // The times share the family's false alarms among themselves (only they fail the check),
    // and the derived figures among themselves.
    let times = matched.iter().filter(|m| m.first.is_time).count();
    let derived = matched.len() - times;
    let rule = |is_time: bool| Rule::new(threshold, if is_time { times } else { derived });
    let mut rows: Vec<Row> = matched
        .into_iter()
        .map(|m| {
            let rule = Rule {
                drift: m.first.drift.unwrap_or(UNLEARNED_DRIFT),
                ..rule(m.first.is_time)
            };
            let j = judge(&m.base, &m.new, learned(&m.first.name), rule);
            let verdict = match j.call {
                // One report a side and no history: a busy machine's drift has no bound.
                Call::Up | Call::Down if j.p.is_none() && m.busy.any() => Verdict::Inconclusive,
                Call::Same => Verdict::Same,
                Call::Noise => Verdict::Noise,
                Call::Inconclusive => Verdict::Inconclusive,
                Call::NotComparable => Verdict::NotComparable,
                Call::Up | Call::Down => {
                    Verdict::moved(j.call == Call::Up, m.first.better, m.first.is_time)
                }
            };
            let claims_a_change = matches!(verdict, Verdict::Better | Verdict::Worse);
            let mark =
                (claims_a_change && m.first.limits_under_load).then_some(Mark::LimitsUnderLoad);
            Row {
                entry: m.first.name,
                base: j.base,
                new: j.new,
                change: j.change,
                p_value: j.p,
                is_time: m.first.is_time,
                unit: m.first.unit,
                busy: m.busy,
                reports: (m.base.len(), m.new.len()),
                verdict: mark.as_ref().map_or(verdict, |_| Verdict::Marked),
                mark,
                run: m.first.run,
            }
        })
        .collect();
    if rows.is_empty() {
        return Err(CompareError::NothingMatched);
    }
    mark_followers(&mut rows);
    Ok(rows)
}

/// A derived figure is computed from its run's medians, so it moves when they do: where it
/// reads better or worse while a time of its run moved beyond its noise (faster or slower), it
/// is marked as following those times, which carry the verdict, rather than scored on its own.
/// A figure that moved while none of its run's times did keeps its verdict.
fn mark_followers(rows: &mut [Row]) {
    let moved: Vec<(String, String, Verdict)> = rows
        .iter()
        .filter(|r| r.is_time && matches!(r.verdict, Verdict::Faster | Verdict::Slower))
        .map(|r| {
            let variant = r.entry.strip_prefix(&format!("{} ", r.run));
            let variant = variant.unwrap_or(&r.entry).to_string();
            (r.run.clone(), variant, r.verdict)
        })
        .collect();
    for row in rows.iter_mut() {
        if row.is_time || !matches!(row.verdict, Verdict::Better | Verdict::Worse) {
            continue;
        }
        let times: Vec<(String, Verdict)> = moved
            .iter()
            .filter(|(run, _, _)| *run == row.run)
            .map(|(_, variant, v)| (variant.clone(), *v))
            .collect();
        if !times.is_empty() {
            row.verdict = Verdict::Marked;
            row.mark = Some(Mark::Follows(times));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures::timed;

    /// Rows of `new` against `base` with a 2% spread learned from a history.
    fn judged(base: &[&Report], new: &[&Report]) -> Vec<Row> {
        let spread = |_: &str| Spread::of_sigma(0.02, 10.0);
        compare(base, new, &spread, 0.05).expect("rows")
    }

    fn row<'a>(rows: &'a [Row], name: &str) -> &'a Row {
        rows.iter().find(|r| r.entry.ends_with(name)).expect(name)
    }

    /// One report a side: ×2 past both runs' intervals is slower by the default drift,
    /// inconclusive where either side's scenario declared a drift up to ×5, and
    /// slower again past that.
    #[test]
    fn a_declared_drift_between_runs_widens_what_one_report_a_side_leaves_open() {
        let none = |_: &str| Spread::default();
        let d = Some(4.0);
        // Each side's declared drift, the new `par` time, the reports a side, the verdict.
        for (drift, par, n, want) in [
            ([None, None], 1.0, [1, 1], Verdict::Slower),
            ([None, d], 1.0, [1, 1], Verdict::Inconclusive),
            ([d, None], 1.0, [1, 1], Verdict::Inconclusive),
            ([d, d], 3.0, [1, 1], Verdict::Slower),
            // Reruns a side learn a tight spread, but a change within the declared drift is
            // still inconclusive (reruns minutes apart can share one thread placement); past
            // it, slower.
            ([d, None], 1.0, [2, 2], Verdict::Inconclusive),
            ([d, None], 3.0, [2, 2], Verdict::Slower),
            ([None, None], 1.0, [2, 1], Verdict::Slower),
        ] {
            let (mut base, mut new) = (timed(1.0, 0.5, 0.5, None), timed(1.0, par, 0.5, None));
            base.runs[0].drift_between_runs = drift[0];
            new.runs[0].drift_between_runs = drift[1];
            let rows = compare(&vec![&base; n[0]], &vec![&new; n[1]], &none, 0.05);
            let got = row(&rows.expect("rows"), " par").verdict;
            assert_eq!(got, want, "{drift:?} {par} {n:?}");
        }
    }

    #[test]
    fn a_ratio_that_moved_with_a_time_of_its_run_follows_it() {
        let base = timed(1.0, 0.5, 0.5, None);
        // The sequential variant alone slowed down: the speed-up rose only because of it.
        let rows = judged(&[&base], &[&timed(1.6, 0.5, 0.5, None)]);
        assert_eq!(row(&rows, " seq").verdict, Verdict::Slower);
        let speedup = row(&rows, "derived:speedup");
        assert_eq!(speedup.verdict, Verdict::Marked);
        assert_eq!(speedup.verdict_text(), "marked: follows seq (slower)");
        // The speed-up moved while neither time did beyond its noise: its own verdict.
        let mut new = timed(1.0, 0.5, 0.5, None);
        new.runs[0].derive_as("speedup", 3.0, Figure::new(Unit::Ratio, Better::Higher));
        let rows = judged(&[&base], &[&new]);
        assert_eq!(row(&rows, "derived:speedup").verdict, Verdict::Better);
        assert!(row(&rows, "derived:speedup").mark.is_none());
    }

    #[test]
    fn a_figure_against_limits_measured_under_load_is_marked_not_scored() {
        let base = timed(1.0, 0.5, 0.5, None);
        // The limits' one-thread peak was measured at 20 GFLOP/s; the run's probes read 30.
        let slow_limits = crate::machine::RunState {
            probe_before: Some(30.0),
            probe_after: Some(30.0),
            peak_per_core: Some(20.0),
            ..crate::machine::RunState::unknown(1.0, 2)
        };
        let rows = judged(&[&base], &[&timed(1.0, 0.5, 1.07, Some(slow_limits))]);
        let fraction = row(&rows, "derived:fraction_of_peak");
        assert_eq!(fraction.verdict, Verdict::Marked);
        assert_eq!(
            fraction.verdict_text(),
            "marked: limits measured under load"
        );
        assert!(!fraction.verdict.is_regression());
        // On a quiet machine the same rise is scored.
        let rows = judged(&[&base], &[&timed(1.0, 0.5, 1.07, None)]);
        assert_eq!(
            row(&rows, "derived:fraction_of_peak").verdict,
            Verdict::Better
        );
    }

    #[test]
    fn busy_marks_count_the_reports_of_each_side() {
        let busy = crate::machine::RunState {
            other_cpu_fraction: Some(0.48),
            ..crate::machine::RunState::unknown(1.0, 2)
        };
        let quiet = timed(1.0, 0.5, 0.5, None);
        let loaded = timed(1.0, 0.5, 0.5, Some(busy));
        let slower = timed(1.0, 0.8, 0.5, None);
        let rows = judged(&[&quiet, &loaded, &quiet], &[&slower, &slower]);
        assert_eq!(
            row(&rows, " par").verdict_text(),
            "slower (busy in 1 of 3 base reports)"
        );
        let states = busy_states(&[&quiet, &loaded, &quiet], &[&slower, &slower]);
        assert_eq!(states.len(), 5, "{states:?}");
        assert!(
            states[1].starts_with("s[] base, report 2 of 3 (busy): "),
            "{states:?}"
        );
        // The busy report last on its side is seen all the same.
        assert_eq!(busy_states(&[&quiet, &loaded], &[&slower]).len(), 3);
    }

    #[test]
    fn a_figure_better_lower_is_worse_when_it_rises() {
        let doc = |v: f64| {
            crate::report::fixtures::deriving(|run| {
                run.derive_as("chain_ratio", v, Figure::new(Unit::Ratio, Better::Lower));
                run.derive_as("t1_s", v, Figure::new(Unit::Seconds, Better::Neither));
            })
        };
        let none = |_: &str| Spread::default();
        let (one, two) = (doc(1.0), doc(2.0));
        let rows = compare(&[&one], &[&two], &none, 0.1).expect("rows");
        assert_eq!(row(&rows, "derived:chain_ratio").verdict, Verdict::Worse);
        let no_direction = rows.iter().find(|r| r.entry.ends_with("derived:t1_s"));
        assert!(no_direction.is_none(), "no direction, no verdict");
        let rows = compare(&[&two], &[&one], &none, 0.1).expect("rows");
        assert_eq!(row(&rows, "derived:chain_ratio").verdict, Verdict::Better);
    }
}
