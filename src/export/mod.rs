//! Output formats of a report: each one file, each an [`Exporter`] that turns a whole
//! [`Report`] into text. The terminal table also renders piece by piece (`table::render_run`),
//! so a run's table can be printed as soon as it finishes. The Chrome trace and the text
//! timeline render the engine's op records of a traced repeat, which a report does not
//! carry, so they are functions of those records (`chrome_trace`) rather than exporters.
//!
//! [`Format`] (`format.rs`) is the one list of the formats: each one's name, help line and
//! exporter, from which the CLI's `--format` choices come. A comparison of two reports prints
//! from `compare.rs` (text) and `html.rs` (the page); charts are drawn by `chart/`.

pub mod chart;
pub mod chrome_trace;
pub mod compare;
pub mod csv_rows;
mod format;
pub mod github_bench;
pub mod history;
pub mod html;
pub mod html_compare;
pub mod lesson;
pub mod markdown;
pub mod paired;
pub mod pr_markdown;
pub mod significant;
pub mod summary;
pub mod svg;
pub mod table;
pub mod unit_symbol;

pub use format::{ComparisonFormat, Format};

use crate::report::Report;

/// Why a report could not be rendered in a format.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ExportError(pub String);

/// One output format of a whole report.
pub trait Exporter: Sync {
    /// The report in this format.
    fn render(&self, report: &Report) -> Result<String, ExportError>;
}

/// The `parbench/1` JSON document.
pub struct Json;
/// The table a person at a terminal reads.
pub struct Table;
/// github-action-benchmark's `customSmallerIsBetter` entries.
pub struct GithubActionBenchmark;
/// github-action-benchmark's `customBiggerIsBetter` entries: the figures that improve upwards.
pub struct GithubActionBenchmarkBigger;
/// One CSV row per variant and per derived figure.
pub struct Csv;
/// A Markdown table per run.
pub struct Markdown;
/// An SVG chart of every run's variants (or loss curves).
pub struct Svg;
/// A self-contained HTML page: every run's tables, checks and figures.
pub struct Html;

impl Exporter for Json {
    fn render(&self, report: &Report) -> Result<String, ExportError> {
        Ok(report.to_json())
    }
}

impl Exporter for Table {
    fn render(&self, report: &Report) -> Result<String, ExportError> {
        Ok(table::render(report))
    }
}

/// `value` as pretty JSON text ending in a newline.
fn pretty(value: &serde_json::Value) -> Result<String, ExportError> {
    serde_json::to_string_pretty(value)
        .map(|mut text| {
            text.push('\n');
            text
        })
        .map_err(|e| ExportError(e.to_string()))
}

impl Exporter for GithubActionBenchmark {
    fn render(&self, report: &Report) -> Result<String, ExportError> {
        pretty(&github_bench::entries(report))
    }
}

impl Exporter for GithubActionBenchmarkBigger {
    fn render(&self, report: &Report) -> Result<String, ExportError> {
        pretty(&github_bench::bigger_entries(report))
    }
}

impl Exporter for Csv {
    fn render(&self, report: &Report) -> Result<String, ExportError> {
        csv_rows::render(report)
    }
}

impl Exporter for Markdown {
    fn render(&self, report: &Report) -> Result<String, ExportError> {
        Ok(markdown::render(report))
    }
}

impl Exporter for Svg {
    fn render(&self, report: &Report) -> Result<String, ExportError> {
        svg::svg(report).map_err(|e| ExportError(e.to_string()))
    }
}

impl Exporter for Html {
    fn render(&self, report: &Report) -> Result<String, ExportError> {
        Ok(html::page(report))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Environment, GpuInfo};

    #[test]
    fn every_format_is_found_by_its_name_and_renders_an_empty_report() {
        let report = Report::new(
            Environment::capture(crate::engine::Mode::Threaded, GpuInfo::unavailable("test")),
            vec![],
        );
        for f in Format::ALL {
            assert_eq!(Format::by_name(f.name()), Some(f));
            if f != Format::Svg {
                assert!(f.exporter().render(&report).is_ok(), "{}", f.name());
            }
        }
        assert!(Format::by_name("pdf").is_none());
        // An SVG of nothing is an error, not an empty picture.
        assert!(Svg.render(&report).is_err());
    }
}
