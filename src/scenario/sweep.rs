//! Sweeps: one scenario over the cartesian product of parameter axes, with a JSON Lines
//! journal so that an interrupted sweep loses no finished point and `--resume` skips them.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::journal_header::{JournalHeader, JOURNAL_FORMAT};
use super::{ParamError, ParamKind, Params, Scenario};
use crate::report::RunRecord;
pub use crate::report::SweepInfo;

/// A `--set` axis that does not parse, or a sweep that cannot be planned (a usage error).
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    /// An axis that does not parse: `why` follows the axis in the message.
    #[error("--set '{spec}': {why}")]
    Axis { spec: String, why: String },
    #[error("--set '{spec}': scenario '{scenario}' has no parameter '{name}' (it takes: {known})")]
    UnknownParameter {
        spec: String,
        scenario: &'static str,
        name: String,
        known: String,
    },
    /// More points than `--max-points` allows (`count` is `None` past `u64::MAX`), refused
    /// before any point is built.
    #[error(
        "the sweep has {} points, more than --max-points {max}: take fewer values or raise --max-points",
        count.map_or_else(|| "more than 18446744073709551615".to_string(), crate::units::grouped)
    )]
    TooManyPoints { count: Option<u64>, max: u64 },
    /// `sweep SCENARIO` without `--set`: what can be swept, and an example.
    #[error(
        "sweep {scenario} needs at least one --set NAME=VALUES axis; its parameters: {params}; \
         e.g. parbench sweep {scenario} --set {example}"
    )]
    NoAxes {
        scenario: &'static str,
        params: String,
        example: String,
    },
    /// A point's value that the scenario's parameter refuses.
    #[error(transparent)]
    Param(#[from] ParamError),
}

/// A journal that cannot be opened, appended to or encoded into (a usage error: the path is
/// the user's).
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The I/O error is part of the message, not a `source()`, so the CLI's one-line error
    /// does not repeat it.
    #[error("cannot write journal {path}: {error}")]
    Write { path: String, error: std::io::Error },
    #[error("cannot encode a journal record: {0}")]
    Encode(String),
    #[error("cannot read journal {path}: {error}")]
    Read { path: String, error: std::io::Error },
    #[error("cannot resume from {path}: not a regular file")]
    NotARegularFile { path: String },
    #[error(
        "cannot resume {path}: it has no header line (an older parbench wrote it), so the \
         conditions of its points are unknown (run with --fresh to start over)"
    )]
    NoHeader { path: String },
    /// Another process writes the journal now (it holds the journal's lock): waiting for it,
    /// or another journal, is the way on; `--resume` is not, while it writes.
    #[error(
        "journal {path} is being written by {holder}: wait for that run to end, or give this one another --journal"
    )]
    Locked { path: String, holder: String },
    #[error("cannot resume {path}: {differences} (run with --fresh to start over)")]
    OtherConditions { path: String, differences: String },
    #[error("{path}:{line}: not a sweep journal line: {reason}")]
    NotAJournalLine {
        path: String,
        line: usize,
        reason: String,
    },
}

/// Parse `--set name=v1,v2,start:stop:step` into an axis. Ranges are inclusive and apply to
/// whole-number parameters.
pub fn parse_axis(
    scenario: &dyn Scenario,
    spec: &str,
) -> Result<(String, Vec<String>), SweepError> {
    let spec_text = || spec.to_string();
    let bad = |why: String| SweepError::Axis {
        spec: spec_text(),
        why,
    };
    let (name, values) = spec
        .split_once('=')
        .ok_or_else(|| bad("expected NAME=VALUE[,VALUE...]".into()))?;
    let name = name.trim().replace('-', "_");
    let param = scenario
        .params()
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| {
            let known: Vec<&str> = scenario.params().iter().map(|p| p.name).collect();
            SweepError::UnknownParameter {
                spec: spec_text(),
                scenario: scenario.name(),
                name: name.clone(),
                known: known.join(", "),
            }
        })?;
    let mut out = Vec::new();
    // A shape's own commas would be read as a list: shapes take `x` (`--set shape=1x2,4x8`).
    for item in values.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let parts: Vec<&str> = item.split(':').collect();
        if parts.len() == 3 {
            let ParamKind::Int { .. } = param.kind else {
                return Err(bad("ranges are for whole-number parameters".into()));
            };
            let num = |s: &str| {
                s.trim()
                    .parse::<u64>()
                    .map_err(|_| bad(format!("'{item}' is not START:STOP:STEP")))
            };
            let (start, stop, step) = (num(parts[0])?, num(parts[1])?, num(parts[2])?);
            if step == 0 || start > stop {
                return Err(bad(format!("'{item}' needs START <= STOP and STEP > 0")));
            }
            if (stop - start) / step >= 10_000 {
                return Err(bad(format!("'{item}' has more than 10000 values")));
            }
            out.extend((start..=stop).step_by(step as usize).map(|v| v.to_string()));
        } else {
            out.push(item.to_string());
        }
    }
    if out.is_empty() {
        return Err(bad("no values".into()));
    }
    Ok((name, out))
}

/// The default `--max-points`.
pub const MAX_POINTS: u64 = 10_000;

/// How many points the axes make: the product of their lengths, `None` past `u64::MAX`.
pub fn point_count(axes: &[(String, Vec<String>)]) -> Option<u64> {
    axes.iter()
        .try_fold(1u64, |n, (_, values)| n.checked_mul(values.len() as u64))
}

/// The error for a sweep without axes: the scenario's parameters, each with its range and
/// default, and an example axis.
pub fn no_axes(scenario: &dyn Scenario) -> SweepError {
    let params: Vec<String> = scenario
        .params()
        .iter()
        .map(|p| {
            let range = match p.kind {
                ParamKind::Int { min, max } => format!("whole number {min}..{max}"),
                ParamKind::Float { min, max } => format!("number {min}..{max}"),
                ParamKind::Shape { max_dims } => format!("shape of up to {max_dims} dims"),
                ParamKind::Choice(words) => words.join("|"),
                ParamKind::Sizes { max, .. } => format!("byte sizes 1..{max}"),
            };
            format!("{} ({range}, default {})", p.name, p.default)
        })
        .collect();
    let example = scenario
        .params()
        .iter()
        .find_map(|p| match p.kind {
            ParamKind::Int { min, max } => {
                let d: u64 = p.default.parse().ok()?;
                let mut values = vec![(d / 2).max(min), d, d.saturating_mul(2).min(max)];
                values.dedup();
                let values: Vec<String> = values.iter().map(u64::to_string).collect();
                Some(format!("{}={}", p.name, values.join(",")))
            }
            _ => None,
        })
        .or_else(|| {
            let p = scenario.params().first()?;
            Some(match p.kind {
                ParamKind::Choice(words) => format!("{}={}", p.name, words.join(",")),
                _ => format!("{}={}", p.name, p.default),
            })
        })
        .unwrap_or_else(|| "NAME=VALUES".to_string());
    SweepError::NoAxes {
        scenario: scenario.name(),
        params: if params.is_empty() {
            "none".to_string()
        } else {
            params.join(", ")
        },
        example,
    }
}

/// Every point of the cartesian product, as parsed parameters (checked: a bad value fails
/// here, before anything runs). More than `max` points are refused before any is built.
pub fn points(
    scenario: &dyn Scenario,
    axes: &[(String, Vec<String>)],
    max: u64,
) -> Result<Vec<Params>, SweepError> {
    match point_count(axes) {
        Some(n) if n <= max => {}
        count => return Err(SweepError::TooManyPoints { count, max }),
    }
    let mut combos: Vec<Vec<(String, String)>> = vec![Vec::new()];
    for (name, values) in axes {
        combos = combos
            .into_iter()
            .flat_map(|c| {
                values.iter().map(move |v| {
                    let mut c = c.clone();
                    c.push((name.clone(), v.clone()));
                    c
                })
            })
            .collect();
    }
    combos
        .iter()
        .map(|given| Ok(Params::parse(scenario.name(), scenario.params(), given)?))
        .collect()
}

/// Finished points read back from a journal. A line counts once its newline is written; an
/// unterminated last line is a torn write (the process was killed while writing it) and is
/// ignored unless it is a whole record, in which case [`Journal::open`] completes it. A torn
/// line may end inside a multi-byte character, so lines are split as bytes, not text. A
/// malformed line elsewhere is an error.
///
/// Only a regular file can be resumed (its points are appended to it again): a device such as
/// `/dev/zero` would be read forever.
pub fn read_journal(path: &Path) -> Result<JournalRead, JournalError> {
    let shown = || path.display().to_string();
    let fail = |error: std::io::Error| JournalError::Read {
        path: shown(),
        error,
    };
    let mut file = File::open(path).map_err(fail)?;
    if !file.metadata().map_err(fail)?.is_file() {
        return Err(JournalError::NotARegularFile { path: shown() });
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(fail)?;
    let (whole, tail) = split_torn_tail(&bytes);
    let mut records = Vec::new();
    let mut header = None;
    for (i, line) in whole.split(|&b| b == b'\n').enumerate() {
        if line.trim_ascii().is_empty() {
            continue;
        }
        if i == 0 {
            if let Some(h) = parse_header(line).map_err(|reason| JournalError::NotAJournalLine {
                path: shown(),
                line: 1,
                reason,
            })? {
                header = Some(h);
                continue;
            }
        }
        let record = serde_json::from_slice::<RunRecord>(line).map_err(|e| {
            JournalError::NotAJournalLine {
                path: shown(),
                line: i + 1,
                reason: e.to_string(),
            }
        })?;
        records.push(record);
    }
    if let Ok(record) = serde_json::from_slice::<RunRecord>(tail) {
        records.push(record);
    }
    Ok(JournalRead { header, records })
}

/// What a journal holds: its header (`None` in a journal an older parbench wrote) and its
/// finished points.
#[derive(Debug)]
pub struct JournalRead {
    pub header: Option<JournalHeader>,
    pub records: Vec<RunRecord>,
}

/// A first line that is a header (`{"journal": ...}`) as a header; `Ok(None)` for a point's
/// line; an error for a header of another format.
fn parse_header(line: &[u8]) -> Result<Option<JournalHeader>, String> {
    let Ok(Value::Object(fields)) = serde_json::from_slice::<Value>(line) else {
        return Ok(None);
    };
    match fields.get("journal") {
        None => Ok(None),
        Some(Value::String(f)) if f == JOURNAL_FORMAT => {
            serde_json::from_value(Value::Object(fields))
                .map(Some)
                .map_err(|e| e.to_string())
        }
        Some(other) => Err(format!(
            "a journal of format {other}, which this parbench ({JOURNAL_FORMAT}) does not read"
        )),
    }
}

/// Splits a journal into its newline-terminated lines and an unterminated tail (maybe empty).
fn split_torn_tail(bytes: &[u8]) -> (&[u8], &[u8]) {
    let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    bytes.split_at(whole)
}

/// Appends finished points, one JSON line each, flushed and synced as they come.
pub struct Journal {
    file: File,
    path: PathBuf,
    /// False for a special file: fsync on `/dev/null` or a FIFO fails with EINVAL.
    sync: bool,
}

impl Journal {
    /// Open for appending. An unterminated last line is completed with its newline when it
    /// is a whole record (as [`read_journal`] counts it), and cut off when it is torn, so the
    /// next record starts on a line of its own.
    ///
    /// Only a regular file is read back for that: a special file (`/dev/null`, a FIFO) is
    /// only appended to, since reading `/dev/full` never ends and a FIFO would block.
    pub fn open(path: &Path) -> Result<Journal, JournalError> {
        let fail = write_error(path);
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(fail)?;
        let regular = file.metadata().map_err(fail)?.is_file();
        if regular {
            let text = std::fs::read(path).map_err(fail)?;
            let (whole, tail) = split_torn_tail(&text);
            if serde_json::from_slice::<RunRecord>(tail).is_ok() {
                file.write_all(b"\n").map_err(fail)?;
                file.sync_data().map_err(fail)?;
            } else if !tail.is_empty() {
                file.set_len(whole.len() as u64).map_err(fail)?;
            }
        }
        Ok(Journal {
            file,
            path: path.to_path_buf(),
            sync: regular,
        })
    }

    /// Start a journal at `path` with its header line, replacing any journal there (a special
    /// file is only appended to).
    pub fn create(path: &Path, header: &JournalHeader) -> Result<Journal, JournalError> {
        let fail = write_error(path);
        let existing = std::fs::metadata(path).ok();
        let special = existing.as_ref().is_some_and(|m| !m.is_file());
        let file = if special {
            OpenOptions::new().append(true).open(path)
        } else {
            OpenOptions::new()
                .create(true)
                .write(true)
                .truncate(true)
                .open(path)
        }
        .map_err(fail)?;
        let mut journal = Journal {
            file,
            path: path.to_path_buf(),
            sync: !special,
        };
        journal.append(header)?;
        Ok(journal)
    }

    /// Append one line: a finished point (or the header). The error names the journal (a full
    /// disk, `/dev/full`).
    pub fn append(&mut self, value: &impl serde::Serialize) -> Result<(), JournalError> {
        let mut line =
            serde_json::to_string(value).map_err(|e| JournalError::Encode(e.to_string()))?;
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .and_then(|()| match self.sync {
                true => self.file.sync_data(),
                false => Ok(()),
            })
            .map_err(write_error(&self.path))
    }
}

/// The error of a failed write to the journal at `path`.
pub(super) fn write_error(path: &Path) -> impl Fn(std::io::Error) -> JournalError + Copy + '_ {
    move |error| JournalError::Write {
        path: path.display().to_string(),
        error,
    }
}

/// A scenario and its parameters as reports record them, as `matmul size=500 threads=2`.
pub fn describe_params(scenario: &str, parameters: &Map<String, Value>) -> String {
    let mut out = scenario.to_string();
    for (k, v) in parameters {
        let v = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        out.push_str(&format!(" {k}={v}"));
    }
    out
}

/// True when `record` is the run of a point whose parameters, as reports record them
/// ([`Scenario::resolved_params`]), are `resolved` (same scenario, same values).
pub fn same_point(record: &RunRecord, scenario: &str, resolved: &Map<String, Value>) -> bool {
    record.scenario == scenario && &record.parameters == resolved
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::find;

    /// A run of `matmul` with no parameters: what a journal holds.
    fn record() -> RunRecord {
        RunRecord::new("matmul", serde_json::Map::new(), vec![])
    }

    /// A journal's path in a directory of its own, removed when the directory is dropped.
    fn journal_path() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.jsonl");
        (dir, path)
    }

    #[test]
    fn axes_take_lists_and_inclusive_ranges_into_checked_points() {
        let m = find("matmul").unwrap();
        assert_eq!(
            parse_axis(m, "size=500,1000:2000:500").unwrap(),
            (
                "size".to_string(),
                vec!["500".into(), "1000".into(), "1500".into(), "2000".into()]
            )
        );
        assert_eq!(parse_axis(m, "ops=3").unwrap().1, vec!["3".to_string()]);
        assert!(parse_axis(m, "bogus=1")
            .unwrap_err()
            .to_string()
            .contains("no parameter 'bogus'"));
        for bad in ["size", "size=5:1:1", "size=1:5:0", "device=cpu:cuda:1"] {
            assert!(parse_axis(m, bad).is_err(), "{bad}");
        }
        // Points are the cartesian product of the axes, and are checked.
        let axes = vec![
            parse_axis(m, "size=100,200").unwrap(),
            parse_axis(m, "ops=1,2,3").unwrap(),
        ];
        let p = points(m, &axes, MAX_POINTS).unwrap();
        assert_eq!(p.len(), 6);
        assert_eq!((p[0].int("size"), p[0].int("ops")), (Ok(100), Ok(1)));
        assert_eq!((p[5].int("size"), p[5].int("ops")), (Ok(200), Ok(3)));
        let bad = vec![parse_axis(m, "size=100,0").unwrap()];
        assert!(points(m, &bad, MAX_POINTS)
            .unwrap_err()
            .to_string()
            .contains("--size"));
    }

    #[test]
    fn points_past_the_limit_or_past_u64_are_refused_before_any_is_built() {
        let m = find("matmul").unwrap();
        let axis = |n: u64| ("size".to_string(), (1..=n).map(|v| v.to_string()).collect());
        // 10^8 points: counted, not built (building them took gigabytes).
        let big = vec![axis(100), axis(100), axis(100), axis(100)];
        assert_eq!(point_count(&big), Some(100_000_000));
        let e = points(m, &big, MAX_POINTS).unwrap_err().to_string();
        assert_eq!(
            e,
            "the sweep has 100,000,000 points, more than --max-points 10000: take fewer \
             values or raise --max-points"
        );
        // 100^10 overflows u64.
        let huge = vec![axis(100); 10];
        assert_eq!(point_count(&huge), None);
        let e = points(m, &huge, u64::MAX).unwrap_err().to_string();
        assert!(e.contains("more than 18446744073709551615 points"), "{e}");
        // Raised, the limit lets them through.
        assert_eq!(points(m, &[axis(3), axis(4)], 12).unwrap().len(), 12);
        assert!(points(m, &[axis(3), axis(4)], 11).is_err());
    }

    #[test]
    fn a_sweep_without_axes_names_what_can_be_swept() {
        let e = no_axes(find("matmul").unwrap()).to_string();
        assert_eq!(e, "sweep matmul needs at least one --set NAME=VALUES axis; its parameters: size (whole number 1..100000, default 2000), m (whole number 0..100000, default 0), k (whole number 0..100000, default 0), n (whole number 0..100000, default 0), ops (whole number 1..10000, default 10), device (cpu|cuda, default cpu), threads (whole number 0..4096, default 0); e.g. parbench sweep matmul --set size=1000,2000,4000");
        // Every scenario's example is a command the CLI accepts.
        for sc in crate::scenario::registry() {
            let e = no_axes(*sc).to_string();
            let example = e.split("--set ").last().unwrap();
            assert!(parse_axis(*sc, example).is_ok(), "{e}");
        }
    }

    #[test]
    fn a_journal_starts_with_its_header_and_reads_it_back() {
        let (_dir, path) = journal_path();
        let header = crate::scenario::journal_header::tests::header();
        let rec = record();
        Journal::create(&path, &header)
            .unwrap()
            .append(&rec)
            .unwrap();
        let read = read_journal(&path).unwrap();
        assert_eq!(read.header.as_ref(), Some(&header));
        assert_eq!(read.records.len(), 1);
        // Created again, it starts over.
        Journal::create(&path, &header).unwrap();
        assert!(read_journal(&path).unwrap().records.is_empty());
        // A header of a format this build does not read is refused, not taken for a point.
        std::fs::write(&path, "{\"journal\": \"parbench-journal/9\"}\n").unwrap();
        let e = read_journal(&path).unwrap_err().to_string();
        assert!(e.contains("does not read"), "{e}");
    }

    /// An unterminated last line: a whole record (a write cut just before its newline) is
    /// counted by reading and kept by appending, or a second resume would lose it; a torn one,
    /// even cut inside a character, is ignored and cut off, so the next record starts a line.
    #[test]
    fn an_unterminated_last_line_is_kept_when_whole_and_ignored_when_torn() {
        let mut params = serde_json::Map::new();
        params.insert("size".into(), Value::from(1));
        let rec = RunRecord::new("matmul", params, vec![]);
        let mut in_a_char = b"{\"scenario\": \"matmul\", \"x\": \"3.4".to_vec();
        in_a_char.push("×".as_bytes()[0]);
        let tails = [
            (serde_json::to_vec(&rec).unwrap(), 1),
            (in_a_char, 0),
            (b"{\"scenario\": \"mat".to_vec(), 0),
        ];
        for (tail, kept) in tails {
            let (_dir, path) = journal_path();
            let mut j = Journal::open(&path).unwrap();
            j.append(&rec).unwrap();
            j.append(&rec).unwrap();
            // Appended as a write the process did not finish.
            let mut file = OpenOptions::new().append(true).open(&path).unwrap();
            file.write_all(&tail).unwrap();
            assert_eq!(read_journal(&path).unwrap().records.len(), 2 + kept);
            Journal::open(&path).unwrap().append(&rec).unwrap();
            assert_eq!(read_journal(&path).unwrap().records.len(), 3 + kept);
            let text = std::fs::read_to_string(&path).unwrap();
            assert_eq!(text.lines().count(), 3 + kept);
            // A broken line in the middle is not silently dropped.
            std::fs::write(&path, format!("garbage\n{text}")).unwrap();
            assert!(read_journal(&path).unwrap_err().to_string().contains(":1:"));
        }
    }

    #[cfg(unix)]
    #[test]
    fn devices_are_appended_to_never_read_or_resumed() {
        let null = Path::new("/dev/null");
        if null.exists() {
            Journal::open(null).unwrap().append(&record()).unwrap();
        }
        let zero = Path::new("/dev/zero");
        if zero.exists() {
            let err = read_journal(zero).unwrap_err();
            assert_eq!(
                err.to_string(),
                "cannot resume from /dev/zero: not a regular file"
            );
            // Opening must not read it (that would never end).
            let _ = Journal::open(zero);
        }
    }
}
