//! What a sweep or suite leaves when SIGINT or SIGTERM ends it: the resume hint on stderr and,
//! with `-o`, the report of the finished runs (written atomically), its last run noting the
//! interrupt and the runs that are missing. The finished runs are in the journal already.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::interrupt::{self, Signal};
use crate::report::{Report, RunRecord};

/// The finished part of a run, kept up to date as runs finish.
pub(super) struct Partial {
    report: Report,
    /// The runs not finished yet, described (`matmul size=500`), in order.
    missing: Vec<String>,
    output: Option<PathBuf>,
    /// How to go on: printed on the interrupt.
    hint: String,
}

/// A [`Partial`] shared with the signal's thread.
#[derive(Clone)]
pub(super) struct Shared(Arc<Mutex<Partial>>);

impl Shared {
    /// Track `report` (its runs so far) with `missing` still to run, and arm the interrupt
    /// handler to leave what is finished.
    pub(super) fn arm(
        report: &Report,
        missing: Vec<String>,
        output: Option<PathBuf>,
        hint: String,
    ) -> Shared {
        let shared = Shared(Arc::new(Mutex::new(Partial {
            report: report.clone(),
            missing,
            output,
            hint,
        })));
        let on_signal = shared.clone();
        interrupt::on_signal(move |signal| on_signal.leave(signal));
        shared
    }

    /// A run finished (measured now or taken from the journal).
    pub(super) fn finished(&self, run: &RunRecord) {
        let mut p = self.0.lock().unwrap_or_else(|e| e.into_inner());
        p.report.runs.push(run.clone());
        if !p.missing.is_empty() {
            p.missing.remove(0);
        }
    }

    fn leave(&self, signal: Signal) {
        let p = self.0.lock().unwrap_or_else(|e| e.into_inner());
        eprintln!("\n{}", p.hint);
        let (Some(out), Some(report)) = (&p.output, p.interrupted_report(signal)) else {
            return;
        };
        match super::output::write_output(out, &report.to_json()) {
            Ok(()) => eprintln!(
                "wrote {} with the {} finished run(s)",
                super::output::output_name(out),
                report.runs.len()
            ),
            Err(e) => eprintln!("error: {e}"),
        }
    }
}

impl Partial {
    /// The report of the finished runs, its last run saying what was interrupted and what is
    /// missing; `None` before the first run finished.
    fn interrupted_report(&self, signal: Signal) -> Option<Report> {
        let mut report = self.report.clone();
        let last = report.runs.last_mut()?;
        last.notes.push(format!(
            "interrupted by {} after this run: {} run(s) missing ({})",
            signal.name(),
            self.missing.len(),
            self.missing.join("; ")
        ));
        Some(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Environment, GpuInfo};

    #[test]
    fn the_partial_report_notes_the_signal_and_what_is_missing() {
        let env = Environment::capture_without_limits(
            crate::engine::Mode::Threaded,
            GpuInfo::unavailable("test"),
        );
        let mut p = Partial {
            report: Report::new(env, Vec::new()),
            missing: vec!["a".into(), "b x=1".into(), "c".into()],
            output: None,
            hint: String::new(),
        };
        assert!(p.interrupted_report(Signal::Terminate).is_none());
        p.report
            .runs
            .push(RunRecord::new("a", serde_json::Map::new(), vec![]));
        p.missing.remove(0);
        let r = p.interrupted_report(Signal::Terminate).unwrap();
        assert_eq!(
            r.runs[0].notes.last().map(String::as_str),
            Some("interrupted by SIGTERM after this run: 2 run(s) missing (b x=1; c)")
        );
    }
}
