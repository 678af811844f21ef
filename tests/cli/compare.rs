//! `compare`: verdicts between two reports, thresholds, environments and bad input.

use serde_json::Value;

use crate::cli::util::{assert_usage_error, parbench, report_with, scale_times};

#[test]
fn compare_identical_reports_is_all_same() {
    let dir = tempfile::tempdir().unwrap();
    let a = report_with(dir.path(), "a.json", |_| {});
    let out = parbench()
        .args(["compare"])
        .arg(&a)
        .arg(&a)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("0 regressions"), "{text}");
    assert!(!text.contains("slower"), "{text}");
}

#[test]
fn compare_flags_a_30_percent_slowdown() {
    let dir = tempfile::tempdir().unwrap();
    let a = report_with(dir.path(), "a.json", |d| scale_times(d, |_| 1.0));
    let b = report_with(dir.path(), "b.json", |d| scale_times(d, |_| 1.3));
    let out = parbench()
        .args(["compare"])
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("slower"), "{text}");
    let md = parbench()
        .args(["compare", "--format", "markdown"])
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&md.stdout).starts_with("| entry | baseline |"));
}

#[test]
fn compare_ignores_noise_within_the_threshold() {
    let dir = tempfile::tempdir().unwrap();
    let a = report_with(dir.path(), "a.json", |d| scale_times(d, |_| 1.0));
    // ±2% jitter, alternating: within the 5% threshold.
    let b = report_with(dir.path(), "b.json", |d| {
        scale_times(d, |i| if i % 2 == 0 { 1.02 } else { 0.98 })
    });
    let out = parbench()
        .args(["compare", "--threshold", "5%"])
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn compare_rejects_other_schemas_and_unreadable_files() {
    let dir = tempfile::tempdir().unwrap();
    let a = report_with(dir.path(), "a.json", |_| {});
    let other = report_with(dir.path(), "other.json", |d| {
        d["schema"] = "parbench/2".into()
    });
    let out = parbench()
        .args(["compare"])
        .arg(&a)
        .arg(&other)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("parbench/2"));
    assert_usage_error(
        &["compare", "/nonexistent/a.json", "/nonexistent/b.json"],
        "cannot read",
    );
    let garbage = dir.path().join("garbage.json");
    std::fs::write(&garbage, "{not json").unwrap();
    let out = parbench()
        .args(["compare"])
        .arg(&garbage)
        .arg(&a)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let unmatched = report_with(dir.path(), "unmatched.json", |d| {
        d["runs"][0]["scenario"] = "other".into()
    });
    let out = parbench()
        .args(["compare"])
        .arg(&a)
        .arg(&unmatched)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to compare"));
    assert_usage_error(&["compare", "a", "b", "--threshold", "150%"], "threshold");
}

#[test]
fn the_committed_baseline_is_a_readable_report() {
    let base = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/results/baselines/ci-2core-epyc.json"
    );
    let out = parbench().args(["compare", base, base]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_threshold_without_percent_suggests_one() {
    assert_usage_error(
        &["compare", "a", "b", "--threshold", "5"],
        "(did you mean 5%?)",
    );
}

#[test]
fn compare_warns_of_other_environments_and_speaks_json() {
    let dir = tempfile::tempdir().unwrap();
    let a = report_with(dir.path(), "a.json", |d| scale_times(d, |_| 1.0));
    let b = report_with(dir.path(), "b.json", |d| {
        scale_times(d, |_| 1.3);
        d["environment"]["cpu_model"] = "Another CPU".into();
    });
    let out = parbench()
        .args(["compare", "--format", "json"])
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "a 30% slowdown is a regression");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("different environments") && stderr.contains("'Another CPU'"),
        "{stderr}"
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert_eq!(doc["environment_differences"].as_array().unwrap().len(), 1);
    assert_eq!(doc["threshold"], 0.05);
    let times: Vec<&Value> = doc["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["is_time"] == true)
        .collect();
    assert_eq!(times.len(), 7, "a row per variant: {doc}");
    assert!(times.iter().all(|r| r["verdict"] == "slower"), "{doc}");
    assert!(doc["regressions"].as_u64().unwrap() >= 6, "{doc}");
    // Same environment: no warning.
    let same = parbench().arg("compare").arg(&a).arg(&a).output().unwrap();
    assert!(!String::from_utf8_lossy(&same.stderr).contains("different environments"));
}

#[test]
fn compare_names_the_limits_that_differ_between_the_machines() {
    let dir = tempfile::tempdir().unwrap();
    let fma = |per_core: f64| {
        serde_json::json!({"measured": {
            "unit": "avx512", "per_core_gflops": per_core, "all_cores_gflops": 2.0 * per_core,
            "cores": 2, "pinned": true, "method": "test"
        }})
    };
    let a = report_with(dir.path(), "a.json", |d| {
        d["environment"]["limits"]["fma"] = fma(187.0);
    });
    let b = report_with(dir.path(), "b.json", |d| {
        d["environment"]["limits"]["fma"] = fma(93.5);
    });
    let out = parbench().arg("compare").arg(&a).arg(&b).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("different environments")
            && stderr.contains("f32 FMA peak per core: 187.0 GFLOP/s vs 93.5 GFLOP/s (0.50×)"),
        "{stderr}"
    );
    let near = report_with(dir.path(), "near.json", |d| {
        d["environment"]["limits"]["fma"] = fma(200.0);
    });
    let out = parbench()
        .arg("compare")
        .arg(&a)
        .arg(&near)
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("different environments"),
        "within the probes' noise"
    );
}

/// A report written before a scenario gained a parameter still compares with one written
/// after: the missing parameter is read at its default, and `compare` says so. A parameter
/// missing at another value than the default stays unmatched.
#[test]
fn a_report_from_before_a_parameter_compares_at_its_default() {
    let dir = tempfile::tempdir().unwrap();
    let new = report_with(dir.path(), "new.json", |_| {});
    // `device` is at its default (cpu) in the run; `iterations` is not (50).
    let old = report_with(dir.path(), "old.json", |d| {
        let p = d["runs"][0]["parameters"].as_object_mut().unwrap();
        p.remove("device");
    });
    let out = parbench()
        .args(["compare"])
        .arg(&old)
        .arg(&new)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("read at their defaults: async: device"),
        "{stderr}"
    );
    assert!(!stderr.contains("missing in new"), "{stderr}");
    let older = report_with(dir.path(), "older.json", |d| {
        let p = d["runs"][0]["parameters"].as_object_mut().unwrap();
        p.remove("iterations");
    });
    let out = parbench()
        .args(["compare"])
        .arg(&older)
        .arg(&new)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("async: iterations"), "{stderr}");
    // Read at 1000, it is another run than the new one's 50: nothing matches.
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("nothing to compare"), "{stderr}");
}
