//! The list of output formats: the one place a format is named. The CLI's `--format` choices,
//! their help and the renderer each runs all come from [`Format`]; a comparison (`compare`,
//! `ab`) offers three of them, [`ComparisonFormat`], by the same names.

use super::{csv_rows, github_bench, html, markdown, pretty, svg, table, ExportError};
use crate::report::Report;

/// An output format of `parbench export`, in the order `--help` lists them; each one's doc
/// line is its help there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// customSmallerIsBetter JSON for github-action-benchmark
    GithubActionBenchmark,
    /// customBiggerIsBetter JSON: the figures that improve upwards (GFLOP/s, samples/s, speed-ups)
    GithubActionBenchmarkBigger,
    /// CSV: a row per variant (median, CI, p50/p90/p99, n) and per derived figure
    Csv,
    /// Markdown: a table per run, its variants and derived figures
    Markdown,
    /// The table a person at a terminal reads
    Table,
    /// An SVG chart (as `parbench plot` draws)
    Svg,
    /// A self-contained HTML page (as `parbench report` writes)
    Html,
    /// The parbench/1 JSON document itself
    Json,
}

impl Format {
    pub fn render(self, report: &Report) -> Result<String, ExportError> {
        Ok(match self {
            Format::GithubActionBenchmark => pretty(&github_bench::entries(report)),
            Format::GithubActionBenchmarkBigger => pretty(&github_bench::bigger_entries(report)),
            Format::Csv => csv_rows::render(report)?,
            Format::Markdown => markdown::render(report),
            Format::Table => table::render(report),
            Format::Svg => svg::svg(report).map_err(|e| ExportError(e.to_string()))?,
            Format::Html => html::page(report),
            Format::Json => report.to_json(),
        })
    }
}

/// The formats of a comparison of two reports (`compare`) or two builds (`ab`): a terminal
/// table, Markdown for a pull request, or JSON; named as [`Format`] names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ComparisonFormat {
    #[default]
    Table,
    Markdown,
    /// The rows, verdicts and any environment differences as JSON
    Json,
}
