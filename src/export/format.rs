//! The list of output formats: the one place a format is named. The CLI's `--format` choices,
//! their help and the exporter each runs all come from [`Format`]; a comparison (`compare`,
//! `ab`) offers three of them, [`ComparisonFormat`], by the same names.

use clap::builder::PossibleValue;

use super::{
    Csv, Exporter, GithubActionBenchmark, GithubActionBenchmarkBigger, Html, Json, Markdown, Svg,
    Table,
};

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

/// What the command line shows and runs for a format.
struct Spec {
    /// The name `--format` takes.
    name: &'static str,
    /// The line `--help` shows beside it.
    help: &'static str,
    exporter: &'static dyn Exporter,
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

    fn spec(self) -> Spec {
        match self {
            Format::GithubActionBenchmark => Spec {
                name: "github-action-benchmark",
                help: "customSmallerIsBetter JSON for github-action-benchmark",
                exporter: &GithubActionBenchmark,
            },
            Format::GithubActionBenchmarkBigger => Spec {
                name: "github-action-benchmark-bigger",
                help: "customBiggerIsBetter JSON: the figures that improve upwards (GFLOP/s, samples/s, speed-ups)",
                exporter: &GithubActionBenchmarkBigger,
            },
            Format::Csv => Spec {
                name: "csv",
                help: "CSV: a row per variant (median, CI, p50/p90/p99, n) and per derived figure",
                exporter: &Csv,
            },
            Format::Markdown => Spec {
                name: "markdown",
                help: "Markdown: a table per run, its variants and derived figures",
                exporter: &Markdown,
            },
            Format::Table => Spec {
                name: "table",
                help: "The table a person at a terminal reads",
                exporter: &Table,
            },
            Format::Svg => Spec {
                name: "svg",
                help: "An SVG chart (as `parbench plot` draws)",
                exporter: &Svg,
            },
            Format::Html => Spec {
                name: "html",
                help: "A self-contained HTML page (as `parbench report` writes)",
                exporter: &Html,
            },
            Format::Json => Spec {
                name: "json",
                help: "The parbench/1 JSON document itself",
                exporter: &Json,
            },
        }
    }

    /// The format's name, as the command line spells it.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The exporter that renders a report in this format.
    pub fn exporter(self) -> &'static dyn Exporter {
        self.spec().exporter
    }

    /// The format called `name`.
    pub fn by_name(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == name)
    }
}

impl clap::ValueEnum for Format {
    fn value_variants<'a>() -> &'a [Self] {
        &Format::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let spec = self.spec();
        Some(PossibleValue::new(spec.name).help(spec.help))
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
