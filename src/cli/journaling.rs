//! A sweep's or suite's journal from the CLI's side: its default name, how a run starts with
//! it (new, `--fresh`, `--resume` under the same conditions only), and what becomes of it
//! once the report is written (removed, or kept as `<name>.done.jsonl` when it was named).

use std::path::{Path, PathBuf};

use super::args::CommonArgs;
use super::error::CliError;
use crate::engine::Mode;
use crate::report::atomic::writes_in_place;
use crate::report::environment::{rfc3339_utc, GIT_COMMIT};
use crate::report::RunRecord;
use crate::scenario::journal_header::{
    JournalHeader, JournalPlan, RunOptions, SamplingConditions, JOURNAL_FORMAT,
};
use crate::scenario::journal_lock::JournalLock;
use crate::scenario::sweep::{read_journal, Journal, JournalError};

/// How a run starts with its journal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Start {
    /// A new journal; an unfinished one at the path is refused.
    New,
    /// A new journal, replacing any at the path (`--fresh`).
    Fresh,
    /// Continue the journal at the path (`--resume`).
    Resume,
}

impl Start {
    /// From the `--fresh` and `--resume` flags (clap keeps them apart).
    pub(super) fn of(fresh: bool, resume: bool) -> Start {
        match (fresh, resume) {
            (true, _) => Start::Fresh,
            (_, true) => Start::Resume,
            _ => Start::New,
        }
    }
}

/// A journal open for appending: its path, whether the user named it (kept once finished),
/// the points it already holds, and this process's lock on it (none on a device), to hold
/// until the journal is [retired](Opened::retire).
pub(super) struct Opened {
    pub path: PathBuf,
    pub keep: bool,
    pub journal: Journal,
    pub done: Vec<RunRecord>,
    lock: Option<JournalLock>,
}

impl Opened {
    /// Once the report is written (its checks passed or not), the journal is removed, or kept
    /// as `<name>.done.jsonl` when the user named it: either way it no longer blocks the next
    /// run. Its lock is released after that; returns the report's `outcome`.
    pub(super) fn retire(self, outcome: Result<(), CliError>, quiet: bool) -> Result<(), CliError> {
        drop(self.journal);
        if let Ok(()) | Err(CliError::CheckFailed) = &outcome {
            if let (Some(done), false) = (finish(&self.path, self.keep)?, quiet) {
                note!("journal kept as {}", done.display());
            }
        }
        drop(self.lock);
        outcome
    }
}

/// The header of a journal started now, under `common`'s options.
fn header(common: &CommonArgs, sampling: SamplingConditions, plan: JournalPlan) -> JournalHeader {
    JournalHeader {
        journal: JOURNAL_FORMAT.to_string(),
        parbench: env!("CARGO_PKG_VERSION").to_string(),
        commit: GIT_COMMIT.to_string(),
        engine: common.engine.unwrap_or(Mode::Threaded).as_str().to_string(),
        sampling,
        options: RunOptions {
            cpu_threads: common.cpu_threads.map(|n| n as usize),
            max_inflight: common.max_inflight.map(|n| n as usize),
            gpu_order: format!("{:?}", common.gpu_order).to_lowercase(),
            gpu: crate::device::gpu_ordinal::selected(),
            gpu_memory_fraction: common.gpu_memory_fraction.map(|f| f.get()),
        },
        plan,
        started_at: rfc3339_utc(std::time::SystemTime::now()),
    }
}

/// Open the journal at `path` as `start` says, locked first: a journal another process is
/// writing is refused, naming that process. Resuming reads it, and refuses a journal without a
/// header or one whose conditions differ from `header`'s, naming each difference.
fn open(path: &Path, start: Start, header: &JournalHeader) -> Result<Opened, CliError> {
    let shown = || path.display().to_string();
    // A device (`--journal /dev/null`) is written, never resumed: it may exist.
    let device = writes_in_place(path);
    let lock = (!device).then(|| JournalLock::acquire(path)).transpose()?;
    let (journal, done) = match start {
        Start::Resume => {
            let read = read_journal(path)?;
            let Some(old) = read.header else {
                return Err(JournalError::NoHeader { path: shown() }.into());
            };
            let differences = old.differences(header);
            if !differences.is_empty() {
                return Err(JournalError::OtherConditions {
                    path: shown(),
                    differences: differences.join("; "),
                }
                .into());
            }
            (Journal::open(path)?, read.records)
        }
        Start::New if path.exists() && !device => {
            return Err(CliError::Usage(format!(
                "journal {} holds an unfinished run: continue it with --resume, or start over \
                 with --fresh",
                shown()
            )))
        }
        Start::New | Start::Fresh => (Journal::create(path, header)?, Vec::new()),
    };
    Ok(Opened {
        path: path.to_path_buf(),
        keep: false,
        journal,
        done,
        lock,
    })
}

/// A run's journal, opened as `start` says under a [`header`] of `sampling` and `plan`: the
/// one `named` (`--journal`, `--resume FILE`), else beside the report (its path with
/// `.jsonl`), else [`default_path`]; refused where it is the report.
pub(super) fn open_at_path(
    named: Option<PathBuf>,
    common: &CommonArgs,
    (what, key): (&str, &str),
    sampling: SamplingConditions,
    plan: JournalPlan,
    start: Start,
) -> Result<Opened, CliError> {
    let keep = named.is_some();
    let path = named.unwrap_or_else(|| match &common.output {
        // Beside a report on a device (`-o /dev/null`) would be a stray file in /dev.
        Some(o) if !writes_in_place(o) => o.with_extension("jsonl"),
        _ => default_path(what, key),
    });
    if common.output.as_ref() == Some(&path) {
        return Err(CliError::Usage(format!(
            "the journal and the report would both be {}: choose another --journal",
            path.display()
        )));
    }
    let opened = open(&path, start, &header(common, sampling, plan))?;
    Ok(Opened { keep, ..opened })
}

/// The default journal of a run without `-o` or `--journal`: `parbench-<what>-<hash>.jsonl`
/// in the working directory, the hash of `key` (a sweep's scenario and axes, a suite's runs)
/// so that two different runs never share one.
fn default_path(what: &str, key: &str) -> PathBuf {
    PathBuf::from(format!("parbench-{what}-{:08x}.jsonl", short_hash(key)))
}

/// 32 bits of FNV-1a: stable across builds and platforms, unlike std's hasher.
fn short_hash(key: &str) -> u32 {
    let h = key.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    (h ^ (h >> 32)) as u32
}

/// Where a finished journal named with `--journal` is kept: `s.jsonl` → `s.done.jsonl`.
fn done_path(path: &Path) -> PathBuf {
    let stem = path
        .file_stem()
        .map_or_else(|| "journal".into(), |s| s.to_string_lossy().into_owned());
    path.with_file_name(format!("{stem}.done.jsonl"))
}

/// Once the report is written, the journal is no longer needed to go on: remove it, or, when
/// the user named it (`keep`), rename it to [`done_path`], so the next run with the same
/// options starts afresh. A device is left alone. Returns where a kept journal now is.
fn finish(path: &Path, keep: bool) -> Result<Option<PathBuf>, CliError> {
    if writes_in_place(path) {
        return Ok(None);
    }
    let fail = |error: std::io::Error| {
        CliError::Journal(JournalError::Write {
            path: path.display().to_string(),
            error,
        })
    };
    if keep {
        let done = done_path(path);
        std::fs::rename(path, &done).map_err(fail)?;
        Ok(Some(done))
    } else {
        std::fs::remove_file(path).map_err(fail)?;
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_names_differ_by_plan_and_are_stable() {
        let a = default_path("sweep-matmul", "size=16,32");
        assert_eq!(a, default_path("sweep-matmul", "size=16,32"));
        assert_ne!(a, default_path("sweep-matmul", "size=16,48"));
        let name = a.to_string_lossy();
        assert!(name.starts_with("parbench-sweep-matmul-") && name.ends_with(".jsonl"));
        assert_eq!(short_hash(""), 0xcbf2_9ce4 ^ 0x8422_2325);
    }

    #[test]
    fn a_finished_journal_is_kept_as_done_or_removed() {
        assert_eq!(
            done_path(Path::new("d/s.jsonl")),
            Path::new("d/s.done.jsonl")
        );
        let dir = tempfile::tempdir().unwrap();
        let j = dir.path().join("s.jsonl");
        std::fs::write(&j, "x\n").unwrap();
        assert_eq!(
            finish(&j, true).unwrap(),
            Some(dir.path().join("s.done.jsonl"))
        );
        assert!(!j.exists() && dir.path().join("s.done.jsonl").exists());
        std::fs::write(&j, "x\n").unwrap();
        assert_eq!(finish(&j, false).unwrap(), None);
        assert!(!j.exists());
    }

    #[test]
    fn an_unfinished_journal_blocks_a_new_run_and_a_fresh_one_replaces_it() {
        let dir = tempfile::tempdir().unwrap();
        let j = dir.path().join("s.jsonl");
        let common = CommonArgs::default();
        let plan = || JournalPlan::Suite {
            suite: "s".into(),
            runs: vec![],
        };
        let h = header(&common, SamplingConditions::default(), plan());
        open(&j, Start::New, &h).unwrap();
        let e = open(&j, Start::New, &h).err().expect("refused");
        assert!(e
            .line()
            .unwrap()
            .contains("--resume, or start over with --fresh"));
        assert_eq!(e.exit_code(), 2);
        assert!(open(&j, Start::Resume, &h).unwrap().done.is_empty());
        let naive = CommonArgs {
            engine: Some(Mode::Naive),
            min_samples: Some(3),
            ..CommonArgs::default()
        };
        let now = header(
            &naive,
            SamplingConditions {
                min_samples: Some(3),
                ..SamplingConditions::default()
            },
            plan(),
        );
        let e = open(&j, Start::Resume, &now).err().expect("refused");
        assert_eq!(
            e.line().unwrap(),
            format!(
                "cannot resume {}: engine was threaded, now naive; samples per point (at \
                 least) was the default, now 3 (run with --fresh to start over)",
                j.display()
            )
        );
        open(&j, Start::Fresh, &now).unwrap();
        assert!(open(&j, Start::Resume, &now).is_ok());
    }
}
