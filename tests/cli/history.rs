//! `history`: a folder of reports over time, one injected step flagged and nothing else.

use serde_json::{json, Value};

use crate::cli::util::{assert_usage_error, parbench, report_with};

/// A ±3% wobble per report (fixed: the test never flakes).
const NOISE: [f64; 6] = [0.0, 0.03, -0.02, 0.01, -0.03, 0.02];

/// Six reports of one real run, a day apart, every variant's median wobbling by `NOISE`; the
/// variant `stepped` is 20% slower from the fourth report on. The sixth ran with other cores.
/// Returns the folder and the stepped entry's name.
fn six_reports(dir: &std::path::Path) -> (std::path::PathBuf, String) {
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    let base = report_with(&src, "real.json", |_| {});
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(base).unwrap()).unwrap();
    let stepped = doc["runs"][0]["variants"][0]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let hist = dir.join("hist");
    std::fs::create_dir_all(&hist).unwrap();
    for (i, noise) in NOISE.iter().enumerate() {
        let mut d = doc.clone();
        d["environment"]["started_at"] = json!(format!("2024-05-{:02}T10:00:00Z", i + 1));
        d["tool"]["git_commit"] = json!(format!("c0ffee{i}"));
        // As a scenario that declares no drift records it: `async`'s ×6 bounds its steps.
        d["runs"][0]
            .as_object_mut()
            .unwrap()
            .remove("drift_between_runs");
        if i == 5 {
            d["environment"]["cores"] = json!(d["environment"]["cores"].as_u64().unwrap() + 8);
        }
        for v in d["runs"][0]["variants"].as_array_mut().unwrap() {
            let step = if v["name"] == stepped.as_str() && i >= 3 {
                1.2
            } else {
                1.0
            };
            let median = 1e-3 * (1.0 + noise) * step;
            v["median_s"] = json!(median);
            v["ci95_s"] = json!([median * 0.98, median * 1.02]);
        }
        // Written out of order, named against time: the history orders by started_at.
        let name = format!("run-{}.json", 9 - i);
        std::fs::write(hist.join(name), serde_json::to_string(&d).unwrap()).unwrap();
    }
    std::fs::write(hist.join("README.txt"), "not a report").unwrap();
    let key = {
        let params: Vec<String> = doc["runs"][0]["parameters"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        format!("async[{}] {stepped}", params.join(","))
    };
    (hist, key)
}

#[test]
fn history_flags_the_injected_step_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let (hist, entry) = six_reports(dir.path());
    let out = parbench()
        .args(["history", "--format", "markdown"])
        .arg(&hist)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let md = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("skipped README.txt"), "{stderr}");
    let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| `")).collect();
    assert_eq!(rows.len(), 1, "{md}");
    assert!(rows[0].contains(&format!("`{entry}`")), "{md}");
    assert!(
        rows[0].contains("#3 (2024-05-03T10:00:00Z, c0ffee2) → #4 (2024-05-04T10:00:00Z, c0ffee3)"),
        "{md}"
    );
    assert!(rows[0].contains("regression"), "{md}");
    let change: f64 = rows[0]
        .split('|')
        .find_map(|c| c.trim().strip_suffix('%')?.parse().ok())
        .expect("a change column");
    assert!((15.0..25.0).contains(&change), "{md}");
    assert!(md.contains("The environment changed at #6"), "{md}");

    let page = dir.path().join("page.html");
    parbench()
        .args(["history", "-o"])
        .arg(&page)
        .arg(&hist)
        .assert()
        .success();
    let html = std::fs::read_to_string(&page).unwrap();
    let doc = roxmltree::Document::parse_with_options(
        &html,
        roxmltree::ParsingOptions {
            allow_dtd: true,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("not well-formed: {e}"));
    let with_class = |class: &str| {
        doc.descendants()
            .filter(|n| n.attribute("class") == Some(class))
            .count()
    };
    assert_eq!(with_class("step"), 1, "one flagged row");
    let charts = doc.descendants().filter(|n| n.has_tag_name("svg")).count();
    let entries = doc.descendants().filter(|n| n.has_tag_name("h3")).count();
    assert!(
        charts >= 2 && charts == entries,
        "{charts} charts, {entries} entries"
    );
    // The stepped entry comes first, with its step and the environment change drawn.
    let first = doc.descendants().find(|n| n.has_tag_name("h3")).unwrap();
    assert_eq!(first.text(), Some(entry.as_str()));
    assert!(html.contains("step +"), "the step's line in the chart");
    assert!(html.contains("machine changed at c0ffee5"), "{html}");
    assert!(html.contains("cores: "));
    assert!(!html.contains("<script") && !html.contains("src="));
}

#[test]
fn history_of_an_empty_folder_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("x.json"), "{}").unwrap();
    assert_usage_error(
        &["history", &dir.path().display().to_string()],
        "holds no parbench/1 report",
    );
}

/// One report as `-o` writes it, pretty-printed over many lines, is a history of one; a
/// negative threshold is refused by its value, not mistaken for an option.
#[test]
fn one_report_file_is_a_history_and_a_negative_threshold_a_value_error() {
    let dir = tempfile::tempdir().unwrap();
    let report = report_with(dir.path(), "one.json", |_| {});
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    std::fs::write(&report, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    let out = parbench()
        .args([
            "history",
            &report.display().to_string(),
            "--format",
            "markdown",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let path = report.display().to_string();
    for command in ["history", "compare"] {
        let mut args = vec![command, path.as_str()];
        if command == "compare" {
            args.push(path.as_str());
        }
        args.extend(["--threshold", "-5%"]);
        assert_usage_error(
            &args,
            "the threshold must be between 0% and 100%, got '-5%'",
        );
    }
}

/// Eight reruns of one commit whose times wander ±9% and whose FMA probe reads 1.3–1.8×
/// apart, as under load: one point, no step, no change of machine. Naming the machine
/// (`--machine`) is a change of machine.
#[test]
fn reruns_of_one_commit_flag_nothing_and_a_new_machine_name_is_a_change() {
    let dir = tempfile::tempdir().unwrap();
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(report_with(dir.path(), "real.json", |_| {})).unwrap(),
    )
    .unwrap();
    let hist = dir.path().join("hist");
    std::fs::create_dir_all(&hist).unwrap();
    let wander = [1.0, 1.09, 0.93, 1.05, 0.91, 1.08, 0.97, 1.02];
    let fma = [100.0, 180.0, 130.0, 75.0, 120.0, 95.0, 170.0, 110.0];
    for (i, (w, peak)) in wander.iter().zip(fma).enumerate() {
        let mut d = doc.clone();
        d["environment"]["started_at"] = json!(format!("2024-05-01T10:{i:02}:00Z"));
        d["environment"]["limits"]["fma"] = json!({"measured": {
            "unit": "avx512", "per_core_gflops": peak, "all_cores_gflops": 2.0 * peak,
            "cores": 2, "pinned": true, "method": "test"
        }});
        for v in d["runs"][0]["variants"].as_array_mut().unwrap() {
            let median = 1e-3 * w;
            v["median_s"] = json!(median);
            v["ci95_s"] = json!([median * 0.99, median * 1.01]);
        }
        if i == 7 {
            d["environment"]["machine"] = json!("ci-2core");
        }
        std::fs::write(hist.join(format!("r{i}.json")), d.to_string()).unwrap();
    }
    let out = parbench()
        .args(["history", "--format", "markdown"])
        .arg(&hist)
        .output()
        .unwrap();
    let md = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{md}");
    assert!(md.contains("No steps flagged."), "{md}");
    let changes: Vec<&str> = md.lines().filter(|l| l.contains("changed at")).collect();
    assert_eq!(changes.len(), 1, "{md}");
    assert!(
        changes[0].contains("machine: 'unnamed' vs 'ci-2core'") && !changes[0].contains("FMA"),
        "{md}"
    );
}
