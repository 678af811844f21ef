//! The list of output formats: the one place a format is named. The CLI's `--format` choices,
//! their help and the renderer each runs all come from [`Format`]; a comparison (`compare`,
//! `ab`) offers three of them, [`ComparisonFormat`], by the same names.

use clap::builder::PossibleValue;

use super::{csv_rows, github_bench, html, markdown, pretty, svg, table, ExportError};
use crate::report::Report;

/// An output format of `parbench export`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    GithubActionBenchmark,
    GithubActionBenchmarkBigger,
    Csv,
    Markdown,
    Table,
    Svg,
    Html,
    Json,
}

impl Format {
    /// Every format, in the order `--help` lists them.
    pub const ALL: [Format; 8] = [
        Format::GithubActionBenchmark,
        Format::GithubActionBenchmarkBigger,
        Format::Csv,
        Format::Markdown,
        Format::Table,
        Format::Svg,
        Format::Html,
        Format::Json,
    ];

    /// The name `--format` takes, and the line `--help` shows beside it.
    fn spec(self) -> (&'static str, &'static str) {
        match self {
            Format::GithubActionBenchmark => (
                "github-action-benchmark",
                "customSmallerIsBetter JSON for github-action-benchmark",
            ),
            Format::GithubActionBenchmarkBigger => (
                "github-action-benchmark-bigger",
                "customBiggerIsBetter JSON: the figures that improve upwards (GFLOP/s, samples/s, speed-ups)",
            ),
            Format::Csv => (
                "csv",
                "CSV: a row per variant (median, CI, p50/p90/p99, n) and per derived figure",
            ),
            Format::Markdown => (
                "markdown",
                "Markdown: a table per run, its variants and derived figures",
            ),
            Format::Table => ("table", "The table a person at a terminal reads"),
            Format::Svg => ("svg", "An SVG chart (as `parbench plot` draws)"),
            Format::Html => (
                "html",
                "A self-contained HTML page (as `parbench report` writes)",
            ),
            Format::Json => ("json", "The parbench/1 JSON document itself"),
        }
    }

    /// The format's name, as the command line spells it.
    pub fn name(self) -> &'static str {
        self.spec().0
    }

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

impl clap::ValueEnum for Format {
    fn value_variants<'a>() -> &'a [Self] {
        &Format::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let (name, help) = self.spec();
        Some(PossibleValue::new(name).help(help))
    }
}

/// The formats of a comparison of two reports (`compare`) or two builds (`ab`): a terminal
/// table, Markdown for a pull request, or JSON; named as [`Format`] names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ComparisonFormat {
    #[default]
    Table,
    Markdown,
    Json,
}

impl ComparisonFormat {
    const ALL: [ComparisonFormat; 3] = [
        ComparisonFormat::Table,
        ComparisonFormat::Markdown,
        ComparisonFormat::Json,
    ];

    /// The report format of the same name.
    fn format(self) -> Format {
        match self {
            ComparisonFormat::Table => Format::Table,
            ComparisonFormat::Markdown => Format::Markdown,
            ComparisonFormat::Json => Format::Json,
        }
    }
}

impl clap::ValueEnum for ComparisonFormat {
    fn value_variants<'a>() -> &'a [Self] {
        &ComparisonFormat::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let value = PossibleValue::new(self.format().name());
        Some(match self {
            ComparisonFormat::Json => {
                value.help("The rows, verdicts and any environment differences as JSON")
            }
            _ => value,
        })
    }
}
