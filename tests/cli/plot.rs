//! `plot`: the SVG charts of runs, sweeps and training, and what it cannot draw.

use serde_json::Value;

use crate::cli::util::{assert_usage_error, parbench, report_with, SMALL_TRAINING, TWO_AXIS_SWEEP};
use crate::common::QUICK;

/// Polylines whose point count is `n`: a plotted series over n sweep points (grid lines have 2).
fn series_paths(svg: &str, n: usize) -> usize {
    let doc = roxmltree::Document::parse(svg).expect("the SVG is well-formed XML");
    doc.descendants()
        .filter(|e| e.has_tag_name("polyline"))
        .filter(|e| {
            e.attribute("points")
                .is_some_and(|p| p.split_whitespace().count() == n)
        })
        .count()
}

#[test]
fn plot_draws_a_line_per_variant_and_bars_for_a_single_run() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("sweep.json");
    parbench()
        .args([
            "sweep",
            "run-copy",
            "--set",
            "size=16,32,48",
            "--set",
            "ops=1",
            "--journal",
        ])
        .arg(dir.path().join("j.jsonl"))
        .arg("-o")
        .arg(&report)
        .args(QUICK)
        .assert()
        .success();
    let svg_path = dir.path().join("sweep.svg");
    parbench().args(["plot"]).arg(&report).assert().success();
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert_eq!(series_paths(&svg, 3), 4, "run-copy has four variants");
    assert!(svg.contains("overlapped") && svg.contains("size"));

    let single = dir.path().join("single.json");
    parbench()
        .args(["async", "--iterations", "10", "--product-size", "64", "-o"])
        .arg(&single)
        .args(QUICK)
        .assert()
        .success();
    let out = dir.path().join("bars.svg");
    parbench()
        .args(["plot"])
        .arg(&single)
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    let svg = std::fs::read_to_string(&out).unwrap();
    roxmltree::Document::parse(&svg).unwrap();
    assert!(svg.contains("push-only"));
    assert_usage_error(&["plot", "/nonexistent.json"], "cannot read");
}

#[test]
fn a_two_axis_sweep_plots_a_line_per_value_of_the_other_axis() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("s.json");
    parbench()
        .args(TWO_AXIS_SWEEP)
        .arg("-o")
        .arg(&report)
        .args(QUICK)
        .assert()
        .success();
    parbench().args(["plot"]).arg(&report).assert().success();
    let svg = std::fs::read_to_string(dir.path().join("s.svg")).unwrap();
    assert_eq!(
        series_paths(&svg, 3),
        2,
        "one line for threads=1, one for threads=2"
    );
    assert!(svg.contains("threads=1") && svg.contains("threads=2"));
}

#[test]
fn plot_draws_the_loss_curves_of_a_training_run() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("dp.json");
    parbench()
        .args(SMALL_TRAINING)
        .arg("-o")
        .arg(&report)
        .args(QUICK)
        .assert()
        .success();
    parbench().args(["plot"]).arg(&report).assert().success();
    let svg = std::fs::read_to_string(dir.path().join("dp.svg")).unwrap();
    assert!(svg.contains("loss during training") && svg.contains("loss against time"));
    // 20 steps: a point per step for each synchronous scheme, in both loss charts.
    assert_eq!(
        series_paths(&svg, 20),
        8,
        "one-device, parameter-server, ring, ring-overlapped, twice"
    );
    assert!(svg.contains("ring") && svg.contains("async"));
    // Throughput against devices, with the ideal line from one device to 3.
    assert!(svg.contains("throughput vs devices") && svg.contains("ideal: k × one device"));
    assert_eq!(
        series_paths(&svg, 2),
        1,
        "the ideal line, at 1 and 3 devices"
    );
}

#[test]
fn plot_says_what_it_cannot_draw() {
    let dir = tempfile::tempdir().unwrap();
    let a = report_with(dir.path(), "a.json", |_| {});
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&a).unwrap()).unwrap();
    // A sweep journal: one run record per line.
    let journal = dir.path().join("j.jsonl");
    let line = serde_json::to_string(&doc["runs"][0]).unwrap();
    std::fs::write(&journal, format!("{line}\n{line}\n")).unwrap();
    let svg = dir.path().join("a.svg");
    assert_usage_error(
        &[
            "plot",
            journal.to_str().unwrap(),
            "-o",
            svg.to_str().unwrap(),
        ],
        "it is a sweep journal",
    );
    // A suite's journal: a header naming the suite, then its finished runs.
    let header = r#"{"journal":"parbench-journal/1","kind":"suite","suite":"scenarios/default.toml (built in)","runs":[]}"#;
    std::fs::write(&journal, format!("{header}\n{line}\n")).unwrap();
    assert_usage_error(
        &["export", journal.to_str().unwrap(), "--format", "csv"],
        &format!(
            "it is a suite's journal (one finished run per line), not a report; `parbench all \
             --journal {} --resume -o report.json` writes the report",
            journal.display()
        ),
    );
    // A report of two scenarios charts one and names the other.
    let two = report_with(dir.path(), "two.json", |d| {
        let mut other = d["runs"][0].clone();
        other["scenario"] = "deps".into();
        d["runs"].as_array_mut().unwrap().push(other);
    });
    let out = parbench()
        .arg("plot")
        .arg(&two)
        .arg("-o")
        .arg(&svg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("left out: deps"), "{stderr}");
}
