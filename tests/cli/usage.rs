//! Help, `list`, shell completions, and bad input as one-line usage errors.

use predicates::prelude::*;

use crate::cli::util::{assert_usage_error, parbench};

#[test]
fn list_names_every_scenario() {
    parbench()
        .arg("list")
        .assert()
        .success()
        .stdout(predicate::str::contains("async").and(predicate::str::contains("sync vs async")));
}

#[test]
fn help_lists_scenarios_and_exits_zero() {
    parbench()
        .arg("--help")
        .assert()
        .success()
        .stdout(predicate::str::contains("async"));
    parbench()
        .args(["async", "--help"])
        .assert()
        .success()
        .stdout(predicate::str::contains("--iterations").and(predicate::str::contains("--shape")));
}

#[test]
fn bad_input_is_a_one_line_usage_error() {
    assert_usage_error(
        &["async", "--iterations", "0", "--product-size", "64"],
        "--iterations",
    );
    assert_usage_error(&["async", "--iterations", "-5"], "--iterations");
    assert_usage_error(&["async", "--shape", "-3"], "--shape");
    assert_usage_error(&["async", "--shape", "abc"], "--shape");
    assert_usage_error(&["async", "--shape", "0,2"], "--shape");
    assert_usage_error(&["async", "--bogus", "1"], "--bogus");
    assert_usage_error(&["no-such-scenario"], "unknown scenario 'no-such-scenario'");
    assert_usage_error(&["async", "--engine", "turbo"], "turbo");
    assert_usage_error(
        &["async", "--min-samples", "5", "--max-samples", "2"],
        "--max-samples",
    );
    assert_usage_error(&["async", "--shape", "100000,100000,100"], "estimated");
}

#[test]
fn bad_engine_in_environment_is_a_usage_error() {
    let out = parbench()
        .env("PARBENCH_ENGINE", "warp")
        .args(["async"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("warp"));
}

#[test]
fn a_closed_stdout_is_not_a_panic() {
    use std::process::{Command as Std, Stdio};
    let bin = assert_cmd::cargo::cargo_bin("parbench");
    let mut child = Std::new(bin)
        .args(["list"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader goes away before anything is written
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
}

#[test]
fn help_names_what_each_scenario_measures_and_its_defaults() {
    let top = parbench().arg("help").output().unwrap();
    assert_eq!(top.status.code(), Some(0));
    let top = String::from_utf8_lossy(&top.stdout);
    assert!(
        top.contains("Scenarios") && top.contains("cpu-gpu"),
        "{top}"
    );
    for args in [&["help", "cpu-gpu"][..], &["cpu-gpu", "--help"]] {
        let out = parbench().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.starts_with("matmuls on two devices"),
            "{args:?} opens with the scenario's about: {text}"
        );
        assert!(text.contains("[default: 10]"), "{text}");
        assert!(text.contains("Sampling defaults: "), "{text}");
    }
    let compare = parbench().args(["help", "compare"]).output().unwrap();
    assert_eq!(compare.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&compare.stdout).contains("Usage: parbench compare"));
    assert_usage_error(&["help", "warp"], "no command or scenario 'warp'");
}

#[test]
fn completions_name_the_subcommands_and_scenarios() {
    for shell in ["bash", "zsh", "fish"] {
        let out = parbench().args(["completions", shell]).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{shell}");
        let script = String::from_utf8(out.stdout).unwrap();
        for word in [
            "report",
            "completions",
            "compare",
            "sweep",
            "cpu-gpu",
            "html",
        ] {
            assert!(script.contains(word), "{shell} completion lacks {word}");
        }
    }
    assert_usage_error(&["completions", "tcsh"], "invalid value");
    assert_usage_error(&["completions"], "required");
}
