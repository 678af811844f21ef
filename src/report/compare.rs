//! Comparing reports: the check a CI job may run on stored reports, and what it can tell.
//!
//! Each side is one report or several (reruns of one build). Entries are matched by scenario,
//! parameters and variant name, and each change is judged against that figure's run-to-run
//! spread on that machine ([`super::noise`]): the sides' reruns, the reruns of a history
//! where one is given, never less than each run's own interval. A change counts when it is
//! larger than the threshold and beyond that noise at a family-wise 5% over the entries
//! compared. One report a side has no spread to learn: a change past both runs' intervals is
//! then `inconclusive` unless it clears them by [`super::noise::UNLEARNED_DRIFT`]. A zero or
//! non-finite value makes an entry "n/a", never faster or slower. Derived figures with a
//! direction (speed-ups, GFLOP/s, efficiencies) are judged alike and reported, but only times
//! fail the check. The gate that can tell a small change on a shared machine is `ab`, which
//! measures both builds side by side in pairs.
//!
//! This decides the rows; `export::compare` prints them (table, Markdown, JSON) and
//! `export::html` draws the comparison page.

use serde_json::Value;

use super::noise::{judge, Call, Observation, Rule, Spread};
use super::{Better, Report, Unit, SCHEMA};
#[cfg(test)]
use super::{Figure, RunRecord};

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
    match value.get("schema").and_then(Value::as_str) {
        Some(SCHEMA) => {}
        Some(other) => {
            return Err(match super::provenance::result_kind(other) {
                Some(what) => CompareError::NotAReport { path: p, what },
                None => CompareError::Schema {
                    path: p,
                    found: other.into(),
                },
            })
        }
        None => {
            // Results written before they carried a schema: `ab` (entries, settings) and
            // `compare --format json` (rows, threshold).
            let has = |a: &str, b: &str| value.get(a).is_some() && value.get(b).is_some();
            let older = if has("entries", "settings") {
                super::provenance::result_kind(super::provenance::AB_SCHEMA)
            } else if has("rows", "threshold") {
                super::provenance::result_kind(super::provenance::COMPARE_SCHEMA)
            } else {
                None
            };
            return Err(match older {
                Some(what) => CompareError::NotAReport { path: p, what },
                None => CompareError::Parse {
                    path: p,
                    reason: "no \"schema\" field".into(),
                },
            });
        }
    }
    serde_json::from_value(value).map_err(|e| CompareError::Parse {
        path: p,
        reason: e.to_string(),
    })
}

/// The outcome for one entry.
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
        }
    }

    /// True for the verdicts that fail a regression check: times only. Derived figures are
    /// ratios of medians with no samples of their own, so their noise adds up (±3% on two
    /// times is ±6% on a speed-up), and one moves whenever either of its times does; they
    /// are shown, not gated.
    pub fn is_regression(self) -> bool {
        matches!(self, Verdict::Slower)
    }
}

/// One compared entry.
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
    /// The unit the two values are printed in.
    pub unit: Unit,
    /// Which side's run was measured on a busy machine.
    pub busy: Busy,
    /// The reports on each side that hold the entry.
    pub reports: (usize, usize),
}

impl Row {
    /// The verdict as the tables word it: a change measured with a busy side says so
    /// (`slower (busy base)`), since the machine may explain it.
    pub fn verdict_text(&self) -> String {
        verdict_text(self.verdict, self.busy)
    }
}

/// Which side of a comparison was measured on a busy machine (its run's state gave a
/// [`BusyReason`](crate::machine::BusyReason)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Busy {
    pub base: bool,
    pub new: bool,
}

impl Busy {
    /// The sides of these two runs that were busy.
    pub fn of(base: &super::RunRecord, new: &super::RunRecord) -> Busy {
        Busy {
            base: !base.busy_reasons().is_empty(),
            new: !new.busy_reasons().is_empty(),
        }
    }

    pub fn any(self) -> bool {
        self.base || self.new
    }

    /// `busy base`, `busy new`, `busy both`; `None` when neither was.
    pub fn marker(self) -> Option<&'static str> {
        match (self.base, self.new) {
            (true, true) => Some("busy both"),
            (true, false) => Some("busy base"),
            (false, true) => Some("busy new"),
            (false, false) => None,
        }
    }
}

/// `verdict` as the tables word it, marked with the busy side when it claims a change.
pub fn verdict_text(verdict: Verdict, busy: Busy) -> String {
    let claims_a_change = matches!(
        verdict,
        Verdict::Faster | Verdict::Slower | Verdict::Better | Verdict::Worse
    );
    match busy.marker() {
        Some(marker) if claims_a_change => format!("{} ({marker})", verdict.as_str()),
        _ => verdict.as_str().to_string(),
    }
}

/// Each side's machine state, one line a side, for every run matched in both reports where
/// either side was busy: `matmul[size=256] base (busy): other processes 48.0% of CPU time, …`.
/// Empty when no matched run was busy.
pub fn busy_states(base: &Report, new: &Report) -> Vec<String> {
    let mut lines = Vec::new();
    for nr in &new.runs {
        let key = nr.key();
        let Some(br) = base.runs.iter().find(|b| b.key() == key) else {
            continue;
        };
        let busy = Busy::of(br, nr);
        if !busy.any() {
            continue;
        }
        for (side, run, flagged) in [("base", br, busy.base), ("new", nr, busy.new)] {
            let mark = if flagged { " (busy)" } else { "" };
            let state = run
                .state
                .as_ref()
                .map_or_else(|| "no state recorded".to_string(), |s| s.to_string());
            lines.push(format!("{key} {side}{mark}: {state}"));
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
    pub observed: Observation,
    pub is_time: bool,
    pub unit: Unit,
    pub better: Better,
    pub busy: bool,
}

/// Every figure of `report` with a direction: each variant's median time with its 95%
/// interval, and each derived figure with a direction (no interval of its own).
pub fn entries(report: &Report) -> Vec<Entry> {
    let mut out = Vec::new();
    for run in &report.runs {
        let key = run.key();
        let busy = !run.busy_reasons().is_empty();
        for v in &run.variants {
            let s = &v.summary;
            out.push(Entry {
                name: format!("{key} {}", v.name),
                observed: Observation {
                    value: s.median_s,
                    low: s.ci95_s[0],
                    high: s.ci95_s[1],
                },
                is_time: true,
                unit: Unit::Seconds,
                better: Better::Lower,
                busy,
            });
        }
        for (k, value) in &run.derived {
            let figure = run.figure(k);
            let Some(x) = value.as_f64().filter(|_| figure.better != Better::Neither) else {
                continue;
            };
            out.push(Entry {
                name: format!("{key} derived:{k}"),
                observed: Observation::exact(x),
                is_time: false,
                unit: figure.unit,
                better: figure.better,
                busy,
            });
        }
    }
    out
}

/// What the reports of one side hold of one entry.
struct Matched {
    first: Entry,
    base: Vec<Observation>,
    new: Vec<Observation>,
    busy: Busy,
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
    for (is_new, side) in [(false, base), (true, new)] {
        for report in side {
            for e in entries(report) {
                let i = match matched.iter().position(|m| m.first.name == e.name) {
                    Some(i) => i,
                    None if is_new => continue,
                    None => {
                        matched.push(Matched {
                            first: e.clone(),
                            base: Vec::new(),
                            new: Vec::new(),
                            busy: Busy::default(),
                        });
                        matched.len() - 1
                    }
                };
                let m = &mut matched[i];
                if is_new {
                    m.new.push(e.observed);
                    m.busy.new |= e.busy;
                } else {
                    m.base.push(e.observed);
                    m.busy.base |= e.busy;
                }
            }
        }
    }
    matched.retain(|m| !m.new.is_empty());
    // The times share the family's false alarms among themselves (only they fail the check),
    // and the derived figures among themselves.
    let times = matched.iter().filter(|m| m.first.is_time).count();
    let derived = matched.len() - times;
    let rule = |is_time: bool| Rule::new(threshold, if is_time { times } else { derived });
    let rows: Vec<Row> = matched
        .into_iter()
        .map(|m| {
            let j = judge(
                &m.base,
                &m.new,
                learned(&m.first.name),
                rule(m.first.is_time),
            );
            let up_is_worse = m.first.better == Better::Lower;
            let verdict = match (j.call, m.first.is_time) {
                // One report a side and no history: a busy machine's drift has no bound.
                (Call::Up | Call::Down, _) if j.p.is_none() && m.busy.any() => {
                    Verdict::Inconclusive
                }
                (Call::Same, _) => Verdict::Same,
                (Call::Noise, _) => Verdict::Noise,
                (Call::Inconclusive, _) => Verdict::Inconclusive,
                (Call::NotComparable, _) => Verdict::NotComparable,
                (Call::Up, true) => Verdict::Slower,
                (Call::Down, true) => Verdict::Faster,
                (Call::Up, false) if up_is_worse => Verdict::Worse,
                (Call::Down, false) if !up_is_worse => Verdict::Worse,
                (Call::Up | Call::Down, false) => Verdict::Better,
            };
            Row {
                entry: m.first.name,
                base: j.base,
                new: j.new,
                change: j.change,
                p_value: j.p,
                verdict,
                is_time: m.first.is_time,
                unit: m.first.unit,
                busy: m.busy,
                reports: (m.base.len(), m.new.len()),
            }
        })
        .collect();
    if rows.is_empty() {
        return Err(CompareError::NothingMatched);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report of one run with one variant and the derived figures `derive` adds.
    fn report_deriving(derive: impl FnOnce(&mut RunRecord)) -> Report {
        let mut run = RunRecord::new("s", serde_json::Map::new(), vec![]);
        run.add_variants(
            vec!["v".into()],
            vec![crate::harness::Summary::from_samples(&[1.0; 5]).expect("samples")],
            [None],
        );
        derive(&mut run);
        Report::new(
            crate::report::Environment::capture(
                crate::engine::Mode::Threaded,
                crate::report::GpuInfo::unavailable("x"),
            ),
            vec![run],
        )
    }

    #[test]
    fn a_figure_better_lower_is_worse_when_it_rises() {
        let doc = |v: f64| {
            report_deriving(|run| {
                run.derive_as("chain_ratio", v, Figure::new(Unit::Ratio, Better::Lower));
                run.derive_as("t1_s", v, Figure::new(Unit::Seconds, Better::Neither));
            })
        };
        let none = |_: &str| Spread::default();
        let (one, two) = (doc(1.0), doc(2.0));
        let rows = compare(&[&one], &[&two], &none, 0.1).expect("rows");
        let row = |name: &str| rows.iter().find(|r| r.entry.ends_with(name));
        assert_eq!(
            row("derived:chain_ratio").map(|r| r.verdict),
            Some(Verdict::Worse)
        );
        assert!(row("derived:t1_s").is_none(), "no direction, no verdict");
        let rows = compare(&[&two], &[&one], &none, 0.1).expect("rows");
        let row = |name: &str| rows.iter().find(|r| r.entry.ends_with(name));
        assert_eq!(
            row("derived:chain_ratio").map(|r| r.verdict),
            Some(Verdict::Better)
        );
    }
}
