//! Output formats of a report: each one file that turns a whole [`Report`](crate::report::Report)
//! into text. The terminal table also renders piece by piece (`table::render_run`),
//! so a run's table can be printed as soon as it finishes. The Chrome trace and the text
//! timeline render the engine's op records of a traced repeat, which a report does not
//! carry, so they are functions of those records (`chrome_trace`) rather than formats.
//!
//! [`Format`] (`format.rs`) is the one list of the formats: each one's name, help line and
//! renderer, from which the CLI's `--format` choices come. A comparison of two reports prints
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

/// Why a report could not be rendered in a format.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ExportError(pub String);

/// `value` as pretty JSON text ending in a newline (a JSON value always serializes).
pub fn pretty(value: &serde_json::Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

/// `items` without repeats, in the order first seen.
pub(crate) fn unique<T: PartialEq>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_but_svg_renders_an_empty_report() {
        let report = crate::report::fixtures::report(vec![]);
        for f in <Format as clap::ValueEnum>::value_variants() {
            // An SVG of nothing is an error, not an empty picture.
            assert_eq!(f.render(&report).is_ok(), *f != Format::Svg, "{f:?}");
        }
    }

    /// A comparison's formats are named as the report formats of the same name.
    #[test]
    fn comparison_formats_are_named_as_report_formats() {
        use clap::ValueEnum;
        let name = |v: Option<clap::builder::PossibleValue>| v.map(|v| v.get_name().to_string());
        let names: Vec<_> = Format::value_variants()
            .iter()
            .map(|f| name(f.to_possible_value()))
            .collect();
        for c in ComparisonFormat::value_variants() {
            assert!(names.contains(&name(c.to_possible_value())), "{c:?}");
        }
    }
}
