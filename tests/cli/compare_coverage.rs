//! `compare` beyond the matched rows: entries on one side only, `--require-all`, duplicates,
//! its JSON's provenance and schema, and the pull-request Markdown's order and folding.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::cli::util::{assert_usage_error, compare, report_with, scale_times};

/// The base: the async report with a second run, a `deps` scenario (the async run renamed).
fn two_scenarios(dir: &Path) -> PathBuf {
    report_with(dir, "two.json", |d| {
        scale_times(d, |_| 1.0);
        let mut deps = d["runs"][0].clone();
        deps["scenario"] = "deps".into();
        d["runs"].as_array_mut().unwrap().push(deps);
    })
}

/// The new report: `deps` gone, and the first variant of async gone.
fn one_scenario_one_variant_less(dir: &Path) -> (PathBuf, String) {
    let lost = std::cell::RefCell::new(String::new());
    let path = report_with(dir, "less.json", |d| {
        scale_times(d, |_| 1.0);
        let variants = d["runs"][0]["variants"].as_array_mut().unwrap();
        *lost.borrow_mut() = variants.remove(0)["name"].as_str().unwrap().to_string();
    });
    (path, lost.into_inner())
}

#[test]
fn entries_on_one_side_only_are_listed_and_fail_with_require_all() {
    let dir = tempfile::tempdir().unwrap();
    let base = two_scenarios(dir.path());
    let (new, lost) = one_scenario_one_variant_less(dir.path());
    let out = compare(&[], &base, &new);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        stderr.contains("missing in new: async[") && stderr.contains(&format!("] {lost}")),
        "{stderr}"
    );
    assert!(stderr.contains("missing in new: deps["), "{stderr}");
    assert!(!stderr.contains("new in new:"), "{stderr}");
    let deps_entries = stderr.matches("missing in new: deps[").count();
    assert!(deps_entries >= 2, "every entry of deps: {stderr}");
    assert!(stdout.contains("only in base, 0 only in new"), "{stdout}");
    assert!(
        stdout.contains(&format!("{} only in base", deps_entries + 1)),
        "{stdout}"
    );

    let out = compare(&["--require-all"], &base, &new);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.lines().last().unwrap().starts_with("error: ") && stderr.contains("--require-all"),
        "{stderr}"
    );
    // Complete reports pass --require-all.
    let out = compare(&["--require-all"], &new, &new);
    assert_eq!(out.status.code(), Some(0));

    // The other way round: new in new, in the JSON's fields and the Markdown's section.
    let out = compare(&["--format", "json"], &new, &base);
    let doc: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        doc["only_in_new"].as_array().unwrap().len(),
        deps_entries + 1
    );
    assert_eq!(doc["only_in_base"], serde_json::json!([]));
    let out = compare(&["--format", "markdown"], &new, &base);
    let md = String::from_utf8_lossy(&out.stdout);
    assert!(md.contains("**Entries on one side only**"), "{md}");
    assert!(md.contains("- new in new: `deps["), "{md}");
}

#[test]
fn a_report_holding_an_entry_twice_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let a = report_with(dir.path(), "a.json", |_| {});
    let twice = report_with(dir.path(), "twice.json", |d| {
        let run = d["runs"][0].clone();
        d["runs"].as_array_mut().unwrap().push(run);
    });
    for (base, new) in [(&a, &twice), (&twice, &a)] {
        assert_usage_error(
            &["compare", base.to_str().unwrap(), new.to_str().unwrap()],
            "twice.json holds async[",
        );
    }
    // Exported, the copies would be two rows or benchmarks of one name.
    for format in ["csv", "github-action-benchmark"] {
        assert_usage_error(
            &["export", twice.to_str().unwrap(), "--format", format],
            "twice.json holds async[",
        );
    }
}

#[test]
fn the_json_carries_its_schema_and_both_sides_provenance() {
    let dir = tempfile::tempdir().unwrap();
    let base = two_scenarios(dir.path());
    let (new, _) = one_scenario_one_variant_less(dir.path());
    let out = compare(&["--format", "json"], &base, &new);
    let doc: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(doc["schema"], "parbench-compare/1");
    for side in ["base", "new"] {
        assert!(doc[side]["commit"].is_string(), "{doc}");
        assert!(doc[side]["started_at"].is_string(), "{doc}");
        assert!(doc[side]["environment"]["host"].is_string(), "{doc}");
    }
    assert!(doc["base"]["path"].as_str().unwrap().ends_with("two.json"));
    crate::cli::result_schemas::assert_valid("compare --format json", "parbench-compare-1", &doc);

    // Fed back to parbench's readers: one line saying what it is and what reads it.
    let saved = dir.path().join("cmp.json");
    std::fs::write(&saved, &out.stdout).unwrap();
    let saved = saved.to_str().unwrap();
    for args in [
        vec!["compare", saved, saved],
        vec!["export", saved],
        vec!["plot", saved],
    ] {
        assert_usage_error(
            &args,
            "is a `compare` result (parbench-compare/1), not a report",
        );
    }
    assert_usage_error(&["ab", "--from", saved], "not an `ab` result");
}

#[test]
fn the_markdown_leads_with_changes_and_folds_the_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let a = report_with(dir.path(), "a.json", |d| scale_times(d, |_| 1.0));
    let slow = std::cell::RefCell::new(String::new());
    let b = report_with(dir.path(), "b.json", |d| {
        scale_times(d, |_| 1.0);
        let v = &mut d["runs"][0]["variants"][1];
        *slow.borrow_mut() = v["name"].as_str().unwrap().to_string();
        let samples: Vec<f64> = v["samples_s"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() * 7.0)
            .collect();
        // Seven times as slow: past the ×6 drift `async` records for one report a side.
        v["median_s"] = serde_json::json!(v["median_s"].as_f64().unwrap() * 7.0);
        let ci: Vec<f64> = v["ci95_s"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() * 7.0)
            .collect();
        v["ci95_s"] = serde_json::json!(ci);
        v["samples_s"] = serde_json::json!(samples);
    });
    let slow = slow.into_inner();
    let out = compare(&["--format", "markdown"], &a, &b);
    assert_eq!(out.status.code(), Some(1));
    let md = String::from_utf8_lossy(&out.stdout);
    let first_row = md.lines().nth(2).expect("a row");
    assert!(
        first_row.contains(&format!("] {slow}`")) && first_row.contains("slower ❌"),
        "{md}"
    );
    // Both absolute medians: 1.000 ms → 7.000 ms.
    assert!(
        first_row.contains("7.000 ms") || first_row.contains("7.00 ms"),
        "{md}"
    );
    let details = md.find("<details><summary>").expect("folded");
    assert!(md[details..].contains("unchanged</summary>"), "{md}");
    assert!(md[details..].contains("| same |"), "{md}");
    assert!(!md[..details].contains("| same |"), "{md}");
}
