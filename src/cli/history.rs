//! `parbench history DIR`: every report of a folder (or a file of reports, one per line) over
//! time, as one HTML page with a chart per entry, or the steps flagged in it as Markdown.

use std::path::PathBuf;

use super::error::CliError;
use super::output::{check_output_path, stdout};
use super::pages::write_page;
use super::values::parse_threshold;
use crate::export::history::{markdown, page, Analysed};
use crate::report::history::{Detector, History};

/// What `parbench history` was asked to do.
#[derive(clap::Args, Debug)]
pub struct HistoryArgs {
    /// A folder of parbench reports (`*.json`; other files are skipped with a note), or a file
    /// of reports, one JSON document per line. They are ordered by when each run started.
    pub(super) reports: PathBuf,
    /// Write to FILE (atomically) instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub(super) output: Option<PathBuf>,
    /// Output format: the self-contained page, or the flagged steps as a Markdown table.
    #[arg(long, value_enum, default_value_t = HistoryFormat::Html)]
    pub(super) format: HistoryFormat,
    /// Smallest change of an entry's median that is a step: a percentage (10%) or a fraction.
    #[arg(long, default_value = "10%", value_parser = parse_threshold)]
    pub(super) threshold: f64,
    /// Fewest reports on each side of a step.
    #[arg(long, value_name = "N", default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub(super) min_window: u64,
}

/// How `history` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum HistoryFormat {
    Html,
    Markdown,
}

pub(super) fn run_history(args: HistoryArgs) -> Result<(), CliError> {
    if let Some(out) = &args.output {
        check_output_path(out)?;
    }
    let history = History::load(&args.reports).map_err(|e| CliError::Usage(e.to_string()))?;
    for s in &history.skipped {
        note!("history: skipped {}: {}", s.name, s.reason);
    }
    let detector = Detector {
        threshold: args.threshold,
        min_window: usize::try_from(args.min_window).unwrap_or(usize::MAX),
    };
    let analysed = Analysed::new(&history, detector);
    let text = match args.format {
        HistoryFormat::Html => page(&analysed, &args.reports.display().to_string()),
        HistoryFormat::Markdown => markdown(&analysed),
    };
    match &args.output {
        Some(out) => {
            write_page(out, &text)?;
            note!("wrote {}", out.display());
        }
        None => stdout(&text)?,
    }
    Ok(())
}
