//! `parbench history DIR`: every report of a folder (or a file of reports, one per line) over
//! time, as one HTML page with a chart per entry, or the steps flagged in it as Markdown; and
//! the history `compare --history` learns its spreads from.

use std::path::Path;

use super::args::{HistoryArgs, HistoryFormat};
use super::error::CliError;
use super::output::{check_output_path, stdout, write_output};
use crate::export::history::{markdown, page, Analysed};
use crate::report::history::{Detector, History};

/// The history at `path`, its reports' missing parameters filled, what was skipped noted.
pub(super) fn load(path: &Path) -> Result<History, CliError> {
    let mut history = History::load(path).map_err(|e| CliError::Usage(e.to_string()))?;
    for dated in &mut history.reports {
        super::reports::fill(&mut dated.report, &dated.name);
    }
    for s in &history.skipped {
        note!("history: skipped {}: {}", s.name, s.reason);
    }
    Ok(history)
}

pub(super) fn run_history(args: HistoryArgs) -> Result<(), CliError> {
    if let Some(out) = &args.output {
        check_output_path(out)?;
    }
    let history = load(&args.reports)?;
    let detector = Detector {
        threshold: args.threshold,
        min_window: usize::try_from(args.min_window).unwrap_or(usize::MAX),
    };
    let max_items = usize::try_from(args.max_items).unwrap_or(usize::MAX);
    let analysed = Analysed::new(&history, detector, max_items);
    let text = match args.format {
        HistoryFormat::Html => page(&analysed, &args.reports.display().to_string()),
        HistoryFormat::Markdown => markdown(&analysed),
    };
    match &args.output {
        Some(out) => {
            write_output(out, &text)?;
            note!("wrote {}", out.display());
        }
        None => stdout(&text)?,
    }
    Ok(())
}
