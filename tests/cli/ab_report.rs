//! `ab`'s result as a document: its schema and both sides' provenance, what reads it back, and
//! the pull-request Markdown's order and folding, on synthetic pairs read with `--from`.

use serde_json::{json, Value};

use crate::cli::util::{assert_usage_error, parbench, report_with, scale_times};

/// An `ab` result as written before it carried a schema: entries `same` (ratio 1.0), `slow`
/// (1.3) and `fast` (0.7), twelve pairs each on a drifting base of about 1 ms.
fn synthetic(dir: &std::path::Path) -> std::path::PathBuf {
    let entry = |name: &str, ratio: f64| {
        let pairs: Vec<Value> = (0..12)
            .map(|i| {
                let b = 1e-3 * (1.0 + f64::from(i % 5) * 0.25);
                json!({"base": b, "candidate": b * ratio})
            })
            .collect();
        json!({"entry": name, "is_time": true, "better": "lower", "pairs": pairs})
    };
    let doc = json!({
        "threshold": 0.05,
        "settings": {"suite": "synthetic"},
        "entries": [entry("s[] same", 1.0), entry("s[] fast", 0.7), entry("s[] slow", 1.3)],
    });
    let path = dir.join("older.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    path
}

fn from(path: &std::path::Path, format: &str) -> std::process::Output {
    parbench()
        .args(["ab", "--format", format, "--from"])
        .arg(path)
        .output()
        .unwrap()
}

#[test]
fn the_json_has_its_schema_and_medians_and_validates() {
    let dir = tempfile::tempdir().unwrap();
    let out = from(&synthetic(dir.path()), "json");
    assert_eq!(out.status.code(), Some(1));
    let doc: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(doc["schema"], "parbench-ab/1");
    assert!(
        doc["base"].is_null(),
        "no provenance in the older file: {doc}"
    );
    let slow = &doc["entries"][2];
    assert_eq!(slow["verdict"], "slower");
    let (b, c) = (
        slow["median_base"].as_f64().unwrap(),
        slow["median_candidate"].as_f64().unwrap(),
    );
    assert!((c / b - 1.3).abs() < 1e-9, "{slow}");
    crate::cli::result_schemas::assert_valid("ab --format json", "parbench-ab-1", &doc);
    // Read back as `ab --from`, refused by the readers of reports.
    let saved = dir.path().join("ab.json");
    std::fs::write(&saved, &out.stdout).unwrap();
    assert_eq!(from(&saved, "json").stdout, out.stdout);
    let saved = saved.to_str().unwrap();
    for args in [
        vec!["export", saved],
        vec!["compare", saved, saved],
        vec!["report", saved],
    ] {
        assert_usage_error(&args, "is an `ab` result (parbench-ab/1), not a report");
    }
    // A report is not an `ab` result either.
    let report = report_with(dir.path(), "r.json", |_| {});
    assert_usage_error(
        &["ab", "--from", report.to_str().unwrap()],
        "it is a report (parbench/1), not an `ab` result",
    );
}

#[test]
fn an_ab_result_with_an_entry_twice_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = synthetic(dir.path());
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let first = doc["entries"][0].clone();
    doc["entries"].as_array_mut().unwrap().push(first);
    std::fs::write(&path, doc.to_string()).unwrap();
    assert_usage_error(
        &["ab", "--from", path.to_str().unwrap()],
        "holds the entry s[] same more than once",
    );
}

#[test]
fn the_markdown_leads_with_regressions_then_improvements_and_folds_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let out = from(&synthetic(dir.path()), "markdown");
    let md = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| `")).collect();
    assert_eq!(rows.len(), 3, "{md}");
    assert!(
        rows[0].starts_with("| `s[] slow` | 1.375 ms | 1.788 ms |"),
        "{md}"
    );
    assert!(rows[0].ends_with("slower ❌ |"), "{md}");
    assert!(
        rows[1].starts_with("| `s[] fast` |") && rows[1].contains("faster"),
        "{md}"
    );
    let details = md
        .find("<details><summary>1 unchanged</summary>")
        .expect("folded");
    assert!(md[details..].contains("| `s[] same` |"), "{md}");
}

#[cfg(unix)]
#[test]
fn a_real_run_records_both_sides_provenance() {
    let dir = tempfile::tempdir().unwrap();
    let report = report_with(dir.path(), "a.json", |d| scale_times(d, |_| 1.0));
    let base = crate::cli::ab::fake_parbench(dir.path(), "base", &report);
    let candidate = crate::cli::ab::fake_parbench(dir.path(), "candidate", &report);
    let suite = dir.path().join("one.toml");
    std::fs::write(
        &suite,
        "[[run]]\nscenario = \"async\"\nparams = { iterations = 50 }\n",
    )
    .unwrap();
    let out = parbench()
        .arg("ab")
        .arg(&base)
        .arg(&candidate)
        .arg(&suite)
        .args(["--min-pairs", "3", "--max-pairs", "3", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("json");
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    for side in ["base", "candidate"] {
        assert_eq!(doc[side]["commit"], written["tool"]["git_commit"], "{doc}");
        assert_eq!(
            doc[side]["started_at"],
            written["environment"]["started_at"]
        );
        assert_eq!(
            doc[side]["environment"]["host"],
            written["environment"]["host"]
        );
    }
    assert!(doc["base"]["path"].as_str().unwrap().ends_with("base"));
    crate::cli::result_schemas::assert_valid("ab --format json", "parbench-ab-1", &doc);
}
