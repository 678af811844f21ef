//! `ab`: paired runs of two builds, checked on stand-ins that print exact reports.

use serde_json::Value;

use crate::cli::util::{assert_usage_error, parbench, report_with, scale_times};

/// A stand-in for a parbench build: answers `--version` as parbench does and runs the shell
/// `body` for anything else.
#[cfg(unix)]
fn stand_in(dir: &std::path::Path, name: &str, body: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!("#!/bin/sh\nif [ \"$1\" = --version ]; then echo 'parbench 0.1.0'; exit 0; fi\n{body}\n"),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A stand-in that prints `report` for any `run`, so `ab`'s decisions can be checked on exact,
/// noise-free values.
#[cfg(unix)]
pub fn fake_parbench(
    dir: &std::path::Path,
    name: &str,
    report: &std::path::Path,
) -> std::path::PathBuf {
    stand_in(dir, name, &format!("cat '{}'", report.display()))
}

#[cfg(unix)]
#[test]
fn ab_finds_a_slower_candidate_and_passes_an_identical_one() {
    let dir = tempfile::tempdir().unwrap();
    let base_report = report_with(dir.path(), "a.json", |d| scale_times(d, |_| 1.0));
    let slow_report = report_with(dir.path(), "b.json", |d| scale_times(d, |_| 1.3));
    let base = fake_parbench(dir.path(), "base", &base_report);
    let same = fake_parbench(dir.path(), "same", &base_report);
    let slow = fake_parbench(dir.path(), "slow", &slow_report);
    let suite = dir.path().join("one.toml");
    std::fs::write(
        &suite,
        "[[run]]\nscenario = \"async\"\nparams = { iterations = 50 }\n",
    )
    .unwrap();
    let ab = |candidate: &std::path::Path, extra: &[&str]| {
        parbench()
            .arg("ab")
            .arg(&base)
            .arg(candidate)
            .arg(&suite)
            .args(["--min-pairs", "8", "--max-pairs", "12"])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = ab(&same, &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("0 regressions"), "{text}");
    assert!(text.contains("  same"), "{text}");
    // Identical values settle at once: the entry stops at --min-pairs.
    assert!(String::from_utf8_lossy(&out.stderr).contains("1: async: 8 pairs"));

    let json_file = dir.path().join("ab.json");
    let out = ab(
        &slow,
        &["--format", "markdown", "-o", json_file.to_str().unwrap()],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.starts_with("| entry | base | candidate | pairs |"),
        "{text}"
    );
    assert!(
        text.contains("+30.0%") && text.contains("slower ❌"),
        "{text}"
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json_file).unwrap()).unwrap();
    let sync = doc["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["entry"].as_str().unwrap().ends_with("] sync"))
        .expect("the sync variant");
    assert_eq!(sync["verdict"], "slower");
    // A change never ends sampling early: all of --max-pairs.
    assert_eq!(sync["pairs"].as_array().unwrap().len(), 12);
    assert!((sync["median_ratio"].as_f64().unwrap() - 1.3).abs() < 1e-9);
    assert!(doc["regressions"].as_u64().unwrap() >= 6, "{doc}");
    // The saved pairs judged again, without running anything: a 30% change is no regression at
    // a 40% threshold, and is one at 5%.
    for (threshold, code) in [("40%", 0), ("5%", 1)] {
        let out = parbench()
            .args(["ab", "--threshold", threshold, "--from"])
            .arg(&json_file)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(code), "{threshold}");
    }
    assert_usage_error(
        &["ab", "--from", "/nonexistent.json"],
        "cannot read the A/B run",
    );
    assert_usage_error(&["ab", "only-one"], "required");
}

#[cfg(unix)]
#[test]
fn ab_refuses_what_it_cannot_run() {
    let dir = tempfile::tempdir().unwrap();
    let parbench_bin = assert_cmd::cargo::cargo_bin("parbench");
    let me = parbench_bin.to_str().unwrap();
    assert_usage_error(
        &["ab", "/nonexistent/parbench", me],
        "/nonexistent/parbench is neither an executable nor a git revision",
    );
    assert_usage_error(&["ab", me, "/bin/true"], "is not a parbench executable");
    assert_usage_error(
        &["ab", me, me, "--min-pairs", "9", "--max-pairs", "4"],
        "--max-pairs 4 is below --min-pairs 9",
    );
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[[run]]\nscenario = \"warp\"\n").unwrap();
    assert_usage_error(
        &["ab", me, me, bad.to_str().unwrap()],
        "unknown scenario 'warp'",
    );
    // A side that fails on an entry stops the run with its message.
    let failing = stand_in(dir.path(), "failing", "echo 'error: boom' >&2\nexit 3");
    let suite = dir.path().join("one.toml");
    std::fs::write(
        &suite,
        "[[run]]\nscenario = \"async\"\nparams = { iterations = 20, product_size = 16 }\n",
    )
    .unwrap();
    assert_usage_error(
        &["ab", me, failing.to_str().unwrap(), suite.to_str().unwrap()],
        "the candidate failed on suite entry 1: async",
    );
    // A side that refuses an entry as bad input (exit 2: a parameter it does not know yet) has
    // that entry skipped and named; the rest of the suite is still compared.
    let refusing = stand_in(
        dir.path(),
        "refusing",
        "echo \"error: unknown parameter 'product_size'\" >&2\nexit 2",
    );
    let out = parbench()
        .args([
            "ab",
            me,
            refusing.to_str().unwrap(),
            suite.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("; skipped: the candidate failed on suite entry 1: async")
            && stderr.contains("unknown parameter 'product_size'"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "one line per entry: {stderr}");
}

#[cfg(unix)]
#[test]
fn ab_stops_at_its_budget_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let report = report_with(dir.path(), "a.json", |d| scale_times(d, |_| 1.0));
    // Each side takes a second: a one-second budget buys at most one pair of the first
    // entry's forty, and none of the second's.
    let slow = stand_in(
        dir.path(),
        "slow",
        &format!("sleep 1\ncat '{}'", report.display()),
    );
    let suite = dir.path().join("two.toml");
    let entry =
        |n: u32| format!("[[run]]\nscenario = \"async\"\nparams = {{ iterations = {n} }}\n");
    std::fs::write(&suite, entry(50) + &entry(60)).unwrap();
    let json_file = dir.path().join("ab.json");
    let out = parbench()
        .arg("ab")
        .args([&slow, &slow, &suite])
        .args([
            "--budget",
            "1",
            "--min-pairs",
            "8",
            "--max-pairs",
            "40",
            "-o",
        ])
        .arg(&json_file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("1: async: ") && stderr.contains("; stopped at the --budget of 1 s"),
        "{stderr}"
    );
    assert!(
        stderr.contains("stopped at the --budget of 1 s: 1 of 2 entries not measured (2: async)"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 2, "one line per entry: {stderr}");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json_file).unwrap()).unwrap();
    let settings = &doc["settings"];
    assert_eq!(settings["stopped_at_budget"], true, "{settings}");
    assert!(settings["pairs"].as_u64().unwrap() < 40, "{settings}");
    assert_eq!(settings["unmeasured"][0], "2: async", "{settings}");
}

#[test]
fn ab_refuses_a_budget_that_is_not_positive_seconds() {
    for bad in ["0", "-1", "0.0", "soon", "1e9"] {
        assert_usage_error(&["ab", "a", "b", "--budget", bad], "--budget");
    }
}

/// `git args` in `dir`, which must succeed.
fn git_in(dir: &std::path::Path, args: &[&str]) {
    let ok = std::process::Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .output()
        .unwrap()
        .status
        .success();
    assert!(ok, "git {args:?}");
}

#[test]
fn ab_refuses_a_dirty_head_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path();
    let suite = "[[run]]\nscenario = \"async\"\nparams = { iterations = 50 }\n";
    std::fs::write(repo.join("one.toml"), suite).unwrap();
    git_in(repo, &["init", "--quiet"]);
    git_in(repo, &["add", "one.toml"]);
    git_in(repo, &["commit", "--quiet", "-m", "suite"]);
    std::fs::write(repo.join("one.toml"), format!("{suite}# changed\n")).unwrap();
    let out = parbench()
        .current_dir(repo)
        .args(["ab", "HEAD", "HEAD", "one.toml"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("uncommitted changes") && stderr.contains("--allow-dirty"),
        "{stderr}"
    );
}
