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

/// Three reruns a side, each time drifting by up to 2% from run to run (`reruns` scaled), as
/// a scenario that declares no drift between runs records them (`async`'s ×6 would leave a
/// 30% change inconclusive: see the test below).
fn reruns(dir: &std::path::Path, name: &str, scale: f64) -> Vec<std::path::PathBuf> {
    [1.0, 1.02, 0.99]
        .iter()
        .enumerate()
        .map(|(i, drift)| {
            report_with(dir, &format!("{name}{i}.json"), |d| {
                scale_times(d, |_| scale * drift);
                d["runs"][0]
                    .as_object_mut()
                    .unwrap()
                    .remove("drift_between_runs");
            })
        })
        .collect()
}

/// One report a side cannot tell a 30% slowdown from the machine's drift: inconclusive,
/// exit 0. Three reruns a side can: slower, exit 1.
#[test]
fn compare_flags_a_30_percent_slowdown_given_reruns() {
    let dir = tempfile::tempdir().unwrap();
    let (base, new) = (reruns(dir.path(), "a", 1.0), reruns(dir.path(), "b", 1.3));
    let out = parbench()
        .args(["compare"])
        .arg(&base[0])
        .arg(&new[0])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("inconclusive") && !text.contains("slower"),
        "{text}"
    );
    assert!(text.contains("1 report against 1 and no history"), "{text}");
    let out = parbench()
        .arg("compare")
        .args(&base)
        .arg("--")
        .args(&new)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("slower") && !text.contains("inconclusive"),
        "{text}"
    );
    assert!(text.contains("3 reports against 3"), "{text}");
    let md = parbench()
        .args(["compare", "--format", "markdown"])
        .args(&base)
        .arg("--")
        .args(&new)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&md.stdout).starts_with("| entry | baseline |"));
    // Three reports with no `--` to part them: which side is which is not guessed.
    let mut three = vec!["compare".to_string()];
    three.extend(base.iter().map(|p| p.display().to_string()));
    let three: Vec<&str> = three.iter().map(String::as_str).collect();
    assert_usage_error(&three, "compare BASE... -- NEW...");
}

/// One report a side judged against the reruns of a history of the same machine: the spread
/// learned there makes a 30% slowdown a regression, and leaves unchanged code alone.
#[test]
fn compare_learns_the_spread_from_a_history() {
    let dir = tempfile::tempdir().unwrap();
    let hist = dir.path().join("hist");
    std::fs::create_dir_all(&hist).unwrap();
    let earlier = [reruns(dir.path(), "h", 1.0), reruns(dir.path(), "g", 1.01)].concat();
    for (i, p) in earlier.iter().enumerate() {
        std::fs::copy(p, hist.join(format!("h{i}.json"))).unwrap();
    }
    let (base, new) = (reruns(dir.path(), "a", 1.0), reruns(dir.path(), "b", 1.3));
    let out = parbench()
        .arg("compare")
        .arg(&base[1])
        .arg(&new[0])
        .arg("--history")
        .arg(&hist)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("and the reruns among 6 earlier reports"),
        "{text}"
    );
    let same = parbench()
        .arg("compare")
        .arg(&base[1])
        .arg(&base[2])
        .arg("--history")
        .arg(&hist)
        .output()
        .unwrap();
    assert_eq!(same.status.code(), Some(0), "{same:?}");
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

/// The rows of a JSON comparison that judge a time.
fn time_rows(doc: &Value) -> Vec<&Value> {
    let rows = doc["rows"].as_array().unwrap();
    rows.iter().filter(|r| r["is_time"] == true).collect()
}

/// `async`, whose runs record a drift of ×6 between processes: twice as slow is inconclusive,
/// not a regression, with one report a side and with three reruns a side however tight they
/// read, and the comparison passes.
#[test]
fn async_leaves_a_doubling_inconclusive() {
    let dir = tempfile::tempdir().unwrap();
    let a = report_with(dir.path(), "a.json", |d| {
        assert_eq!(
            d["runs"][0]["drift_between_runs"], 5.0,
            "async records its drift"
        );
        scale_times(d, |_| 1.0);
    });
    let b = report_with(dir.path(), "b.json", |d| scale_times(d, |_| 2.0));
    let three = |side: &std::path::Path| [side, side, side].map(|p| p.to_owned());
    for args in [
        vec![a.clone(), b.clone()],
        [three(&a), three(&b)].join(&["--".into()][..]),
    ] {
        let out = parbench()
            .args(["compare", "--format", "json"])
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        let doc: Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
        let times = time_rows(&doc);
        assert!(!times.is_empty());
        for row in times {
            assert_eq!(row["verdict"], "inconclusive", "{row}");
        }
    }
}

#[test]
fn compare_warns_of_other_environments_and_speaks_json() {
    let dir = tempfile::tempdir().unwrap();
    let a = report_with(dir.path(), "a.json", |d| scale_times(d, |_| 1.0));
    // Seven times as slow: past the ×6 drift `async` records for one report a side.
    let b = report_with(dir.path(), "b.json", |d| {
        scale_times(d, |_| 7.0);
        d["environment"]["cpu_model"] = "Another CPU".into();
    });
    let out = parbench()
        .args(["compare", "--format", "json"])
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "a 7× slowdown is a regression");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("different environments") && stderr.contains("'Another CPU'"),
        "{stderr}"
    );
    let doc: Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert_eq!(doc["environment_differences"].as_array().unwrap().len(), 1);
    assert_eq!(doc["threshold"], 0.05);
    let times = time_rows(&doc);
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
    // Three reruns a side, each probe within 2% of its level.
    let side = |name: &str, per_core: f64| -> Vec<std::path::PathBuf> {
        [1.0, 1.02, 0.99]
            .iter()
            .enumerate()
            .map(|(i, k)| {
                report_with(dir.path(), &format!("{name}{i}.json"), |d| {
                    d["environment"]["limits"]["fma"] = fma(per_core * k);
                })
            })
            .collect()
    };
    let (a, b) = (side("a", 187.0), side("b", 93.5));
    let out = parbench()
        .arg("compare")
        .args(&a)
        .arg("--")
        .args(&b)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("different environments")
            && stderr.contains("f32 FMA peak per core: ")
            && stderr.contains("(0.50×, beyond its spread over reruns)"),
        "{stderr}"
    );
    // One report a side: a probe read at half may be the load, not another machine.
    let out = parbench()
        .arg("compare")
        .arg(&a[0])
        .arg(&b[0])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("different environments"),
        "a probe without its spread"
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

#[test]
fn one_report_alone_is_a_usage_error() {
    assert_usage_error(
        &["compare", "a.json"],
        "compare takes two reports (BASE NEW)",
    );
}
