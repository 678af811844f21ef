//! A report as CSV, one row per measured thing, for pandas, a spreadsheet or a dashboard:
//! a row per variant of each run (`kind` `variant`: its median, the median's 95% interval,
//! percentiles and sample count) and a row per derived figure (`kind` `derived`: its value,
//! unit and direction). Written with the `csv` crate, so quoting follows RFC 4180.
//!
//! Every numeric cell is a plain decimal rounded to [`significant::DIGITS`] digits; a value a
//! row does not have is an empty cell, which pandas reads as NaN.

use super::significant;
use super::unit_symbol::{better_word, unit_symbol};
use super::ExportError;
use crate::report::{Report, RunRecord};
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// One timed variant of a run.
    #[default]
    Variant,
    /// One derived figure of a run (a speed-up, GFLOP/s, an efficiency).
    Derived,
}

/// A number as the CSV writes it: rounded, plain, or an empty cell.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Number(pub Option<f64>);

impl Serialize for Number {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // As text: the csv crate writes an f64 in ryu's shortest form, which uses an exponent
        // for small values (`1.5e-9`).
        serializer.serialize_str(&self.0.and_then(significant::plain).unwrap_or_default())
    }
}

/// [`Row`] and [`COLUMNS`], its fields' names in order, from one list of the fields.
macro_rules! rows {
    ($($(#[$doc:meta])* $field:ident: $ty:ty,)*) => {
        /// One row of the CSV; its fields are [`COLUMNS`], in order.
        #[derive(Debug, Clone, PartialEq, Serialize, Default)]
        pub struct Row {
            $($(#[$doc])* pub $field: $ty,)*
        }

        /// The columns, in order (the header row). The last four say where and when the
        /// report was made, so rows of many reports concatenated still tell their runs apart.
        pub const COLUMNS: &[&str] = &[$(stringify!($field)),*];
    };
}

rows! {
    scenario: String,
    /// The run's parameters as `key=value` pairs sorted by key, joined by `;`.
    parameters: String,
    kind: Kind,
    /// The variant's or the derived figure's name.
    name: String,
    /// The variant's median (seconds) or the figure's value (in `unit`).
    value: Number,
    unit: &'static str,
    /// `higher`, `lower`, or empty for a figure with no better direction.
    better: &'static str,
    median_s: Number,
    ci_low_s: Number,
    ci_high_s: Number,
    p50_s: Number,
    p90_s: Number,
    p99_s: Number,
    /// The number of samples (a variant), empty for a derived figure.
    n: Option<usize>,
    /// The parbench build's git commit.
    commit: String,
    /// When the report's first run started (RFC 3339, UTC).
    started_at: String,
    host: String,
    cpu_model: String,
}

/// A row of `report`'s with the columns that say where and when it was made, and empty
/// measurements.
fn blank(report: &Report, run: &RunRecord, params: &str, kind: Kind, name: &str) -> Row {
    Row {
        scenario: run.scenario.clone(),
        parameters: params.to_string(),
        kind,
        name: name.to_string(),
        commit: report.tool.git_commit.clone(),
        started_at: report.environment.started_at.clone(),
        host: report.environment.host.clone(),
        cpu_model: report.environment.cpu_model.clone(),
        ..Row::default()
    }
}

/// The rows of a report: each run's variants, then its derived figures that are finite
/// numbers (a series, such as a loss curve, stays in the JSON).
pub fn rows(report: &Report) -> Vec<Row> {
    let mut out = Vec::new();
    for run in &report.runs {
        // The run's parameters as one stable cell: `key=value` sorted by key, joined by `;`;
        // each value as the table shows it (a string without quotes, a shape as `1000x1000`).
        let mut params = super::table::parameters(run);
        params.sort();
        let params = params.join(";");
        for v in &run.variants {
            let (s, p) = (&v.summary, v.percentiles());
            out.push(Row {
                value: Number(Some(s.median_s)),
                unit: "s",
                better: "lower",
                median_s: Number(Some(s.median_s)),
                ci_low_s: Number(Some(s.ci95_s[0])),
                ci_high_s: Number(Some(s.ci95_s[1])),
                p50_s: Number(p.map(|p| p.p50_s)),
                p90_s: Number(p.map(|p| p.p90_s)),
                p99_s: Number(p.map(|p| p.p99_s)),
                n: Some(s.samples_s.len()),
                ..blank(report, run, &params, Kind::Variant, &v.name)
            });
        }
        for (key, value) in &run.derived {
            let Some(v) = value.as_f64().filter(|v| v.is_finite()) else {
                continue;
            };
            let figure = run.figure(key);
            out.push(Row {
                value: Number(Some(v)),
                unit: unit_symbol(figure.unit),
                better: better_word(figure.better),
                ..blank(report, run, &params, Kind::Derived, key)
            });
        }
    }
    out
}

/// The report as CSV text: the header, then [`rows`].
pub fn render(report: &Report) -> Result<String, ExportError> {
    let fail = |e: &dyn std::fmt::Display| ExportError(format!("cannot write the CSV: {e}"));
    let mut writer = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(Vec::new());
    // The header by hand: a report of no runs still has its columns.
    writer.write_record(COLUMNS).map_err(|e| fail(&e))?;
    for row in rows(report) {
        writer.serialize(row).map_err(|e| fail(&e))?;
    }
    let bytes = writer.into_inner().map_err(|e| fail(&e))?;
    String::from_utf8(bytes).map_err(|e| fail(&e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Better, Figure, Unit};
    use serde_json::Value;

    fn report() -> Report {
        let mut params = serde_json::Map::new();
        params.insert("size".into(), Value::from(64));
        params.insert("device".into(), Value::from("cpu"));
        let mut run = RunRecord::new("matmul", params, vec![]);
        run.add_variants(
            vec!["a".into(), "b, quoted".into()],
            vec![
                crate::harness::Summary::from_samples(&[0.1, 0.2, 0.30000000000000004, 0.4])
                    .expect("samples"),
                crate::harness::Summary::from_samples(&[1.5e-9; 3]).expect("samples"),
            ],
            [None, None],
        );
        run.derive_as(
            "gflops",
            12.345678901,
            Figure::new(Unit::Gflops, Better::Higher),
        );
        run.derive_series("loss_curve", serde_json::json!([[0, 1.0]]));
        crate::report::fixtures::report(vec![run])
    }

    #[test]
    fn a_row_per_variant_and_per_numeric_figure_read_back_by_the_csv_crate() {
        let text = render(&report()).expect("csv");
        let mut reader = csv::Reader::from_reader(text.as_bytes());
        assert_eq!(reader.headers().expect("header"), COLUMNS);
        let records: Vec<csv::StringRecord> =
            reader.records().collect::<Result<_, _>>().expect("rows");
        assert_eq!(records.len(), 3, "{text}");
        assert_eq!(&records[0][1], "device=cpu;size=64");
        assert_eq!(&records[0][2], "variant");
        assert_eq!(&records[0][4], "0.25", "{text}");
        assert_eq!(&records[1][3], "b, quoted");
        assert_eq!(&records[1][4], "0.0000000015", "a plain decimal: {text}");
        assert_eq!(&records[1][13], "3");
        let gflops = &records[2];
        assert_eq!(
            (&gflops[2], &gflops[3], &gflops[4], &gflops[5], &gflops[6]),
            ("derived", "gflops", "12.3457", "GFLOP/s", "higher")
        );
        assert_eq!(&gflops[7], "", "no timing for a derived figure");
    }

    #[test]
    fn an_empty_report_is_its_header() {
        let mut empty = report();
        empty.runs.clear();
        assert_eq!(
            render(&empty).expect("csv"),
            format!("{}\n", COLUMNS.join(","))
        );
    }
}
