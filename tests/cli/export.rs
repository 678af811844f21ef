//! `export`: a report rendered in every format, and the output directories it creates.

use serde_json::Value;

use crate::cli::util::{parbench, report_with};

#[test]
fn export_writes_github_action_benchmark_entries() {
    let dir = tempfile::tempdir().unwrap();
    let a = report_with(dir.path(), "a.json", |_| {});
    let out = parbench().args(["export"]).arg(&a).output().unwrap();
    assert!(out.status.success());
    let entries: Value = serde_json::from_slice(&out.stdout).unwrap();
    let entries = entries.as_array().unwrap();
    assert_eq!(entries.len(), 7, "one entry per variant");
    for e in entries {
        assert_eq!(e["unit"], "s");
        assert!(e["value"].as_f64().is_some_and(|v| v > 0.0));
        assert!(e["name"].as_str().unwrap().starts_with("async["));
    }
}

#[test]
fn export_renders_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let a = report_with(dir.path(), "a.json", |_| {});
    let run = |format: &str| {
        let out = parbench()
            .args(["export", "--format", format])
            .arg(&a)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{format}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let table = run("table");
    assert!(
        table.contains("== async") && table.contains("push-only"),
        "{table}"
    );
    let json: Value = serde_json::from_str(&run("json")).unwrap();
    let original: Value = serde_json::from_slice(&std::fs::read(&a).unwrap()).unwrap();
    assert_eq!(json, original, "the JSON export is the report itself");
    assert!(run("svg").starts_with("<svg"));
    let out = parbench()
        .args(["export", "--format", "pdf"])
        .arg(&a)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn output_directories_are_created() {
    let dir = tempfile::tempdir().unwrap();
    let a = report_with(dir.path(), "a.json", |_| {});
    let out = dir.path().join("new").join("sub").join("a.txt");
    parbench()
        .args(["export", "--format", "table"])
        .arg(&a)
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    assert!(std::fs::read_to_string(&out).unwrap().contains("== async"));
}
