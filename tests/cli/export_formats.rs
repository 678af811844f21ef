//! `export`'s tabular and dashboard formats: CSV read back row by row, Markdown tables,
//! github-action-benchmark's bigger-is-better figures, and a report with nothing to export.

use serde_json::Value;

use crate::cli::util::{assert_usage_error, parbench, report_with};
use crate::common::QUICK;

fn export(report: &std::path::Path, format: &str) -> String {
    let out = parbench()
        .args(["export", "--format", format])
        .arg(report)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{format}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn csv_has_a_row_per_variant_with_numeric_columns() {
    let dir = tempfile::tempdir().unwrap();
    let a = report_with(dir.path(), "a.json", |_| {});
    let doc: Value = serde_json::from_slice(&std::fs::read(&a).unwrap()).unwrap();
    let variants = doc["runs"][0]["variants"].as_array().unwrap();
    let text = export(&a, "csv");
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let header: Vec<String> = reader.headers().unwrap().iter().map(String::from).collect();
    let column = |name: &str| header.iter().position(|h| h == name).expect(name);
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    let of_kind = |kind: &str| {
        rows.iter()
            .filter(|r| &r[column("kind")] == kind)
            .collect::<Vec<_>>()
    };
    let variant_rows = of_kind("variant");
    assert_eq!(variant_rows.len(), variants.len(), "{text}");
    for (row, v) in variant_rows.iter().zip(variants) {
        assert_eq!(&row[column("scenario")], "async");
        assert_eq!(
            &row[column("commit")],
            doc["tool"]["git_commit"].as_str().unwrap()
        );
        assert_eq!(
            &row[column("started_at")],
            doc["environment"]["started_at"].as_str().unwrap()
        );
        assert_eq!(
            &row[column("host")],
            doc["environment"]["host"].as_str().unwrap()
        );
        assert_eq!(&row[column("name")], v["name"].as_str().unwrap());
        assert!(
            row[column("parameters")].contains("iterations=50"),
            "{row:?}"
        );
        for name in [
            "value",
            "median_s",
            "ci_low_s",
            "ci_high_s",
            "p50_s",
            "p90_s",
            "p99_s",
            "n",
        ] {
            let cell = &row[column(name)];
            let parsed: f64 = cell
                .parse()
                .unwrap_or_else(|e| panic!("{name} = '{cell}': {e}"));
            assert!(parsed.is_finite() && parsed >= 0.0, "{name} = {cell}");
            assert!(!cell.contains('e'), "{name} = {cell}: a plain decimal");
        }
        let median = v["median_s"].as_f64().unwrap();
        let exported: f64 = row[column("median_s")].parse().unwrap();
        assert!(
            (exported - median).abs() <= median * 1e-5,
            "{exported} vs {median}"
        );
        assert_eq!(&row[column("n")], "8");
    }
    let derived = of_kind("derived");
    assert!(!derived.is_empty(), "{text}");
    for row in derived {
        let cell = &row[column("value")];
        assert!(cell.parse::<f64>().is_ok(), "{cell}");
        assert!(!row[column("unit")].is_empty(), "{row:?}");
    }
}

#[test]
fn markdown_has_a_table_of_variants_and_of_figures() {
    let dir = tempfile::tempdir().unwrap();
    let a = report_with(dir.path(), "a.json", |_| {});
    let text = export(&a, "markdown");
    assert!(text.contains("## async ("), "{text}");
    assert!(
        text.contains("| variant | median | 95% CI of the median | p90 | p99 | n |"),
        "{text}"
    );
    assert!(text.contains("| push-only |"), "{text}");
    assert!(text.contains("| derived figure | value |"), "{text}");
}

#[test]
fn matmul_gflops_are_bigger_is_better() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("matmul.json");
    parbench()
        .args(["matmul", "--size", "32", "--ops", "1", "--threads", "1"])
        .args(QUICK)
        .arg("-o")
        .arg(&report)
        .assert()
        .success();
    let entries: Value =
        serde_json::from_str(&export(&report, "github-action-benchmark-bigger")).unwrap();
    let entries = entries.as_array().unwrap();
    let gflops = entries
        .iter()
        .find(|e| e["unit"] == "GFLOP/s")
        .unwrap_or_else(|| panic!("no GFLOP/s entry in {entries:?}"));
    assert!(gflops["name"].as_str().unwrap().starts_with("matmul["));
    assert!(gflops["value"].as_f64().is_some_and(|v| v > 0.0));
    // Times stay in the smaller-is-better file.
    assert!(entries.iter().all(|e| e["unit"] != "s"), "{entries:?}");
}

#[test]
fn an_unknown_format_lists_the_formats() {
    assert_usage_error(
        &["export", "--format", "pdf", "r.json"],
        "expected one of: github-action-benchmark, github-action-benchmark-bigger, csv, markdown",
    );
}

#[test]
fn a_report_with_no_runs_is_not_exported() {
    let dir = tempfile::tempdir().unwrap();
    let empty = report_with(dir.path(), "empty.json", |doc| {
        doc["runs"] = Value::Array(vec![])
    });
    for format in ["github-action-benchmark", "csv", "json"] {
        assert_usage_error(
            &["export", "--format", format, empty.to_str().unwrap()],
            "has no runs to export",
        );
    }
}
