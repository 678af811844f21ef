//! Standard output as an output: `-o -`, a closed stdout, a full one.

use std::process::Stdio;

use serde_json::Value;

use crate::cli::util::{parbench, report_with};

#[test]
fn dash_output_is_standard_output() {
    let dir = tempfile::tempdir().unwrap();
    let a = report_with(dir.path(), "a.json", |_| {});
    let out = parbench()
        .current_dir(dir.path())
        .args(["export", "--format", "json", "-o", "-"])
        .arg(&a)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["runs"][0]["scenario"], "async");
    let plot = parbench()
        .current_dir(dir.path())
        .args(["plot", "-o", "-"])
        .arg(&a)
        .output()
        .unwrap();
    assert!(
        plot.status.success(),
        "{}",
        String::from_utf8_lossy(&plot.stderr)
    );
    assert!(plot.stdout.starts_with(b"<svg"));
    assert!(
        !dir.path().join("-").exists(),
        "no file named '-' is written"
    );
}

#[test]
fn a_run_writes_its_report_to_dash() {
    let dir = tempfile::tempdir().unwrap();
    let out = parbench()
        .current_dir(dir.path())
        .args([
            "async",
            "--iterations",
            "20",
            "--product-size",
            "32",
            "-o",
            "-",
        ])
        .args(crate::common::QUICK)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // One document: the report in place of the table, whole.
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["runs"][0]["scenario"], "async");
    assert!(!dir.path().join("-").exists());
    // `--json -o -` is the same document: written once.
    let args = ["matmul", "--size", "16", "--ops", "1", "--json", "-o", "-"];
    let out = parbench()
        .args(args)
        .args(crate::common::QUICK)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.matches("\"schema\"").count(), 1, "{text}");
    // Two documents on one stream: refused before anything runs.
    crate::cli::util::assert_usage_error(
        &["matmul", "--json", "--html", "-"],
        "the JSON report (--json or -o -) and the HTML page (--html -) would both go to \
         standard output: name a file for one of them",
    );
}

/// `parbench devices --json` with its stdout on `stdout`.
#[cfg(target_os = "linux")]
fn devices_json(stdout: Stdio) -> std::process::Output {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("parbench"))
        .args(["devices", "--json"])
        .env_remove("PARBENCH_ENGINE")
        .stdout(stdout)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

/// Exit 2 and one line saying stdout cannot be written.
fn assert_stdout_error(out: &std::process::Output, reason: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: cannot write to standard output: ") && stderr.contains(reason),
        "{stderr}"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn a_full_stdout_exits_2_with_one_line() {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("every Linux system has /dev/full");
    let out = devices_json(Stdio::from(full));
    assert_stdout_error(&out, "No space left on device");
}

#[cfg(target_os = "linux")]
#[test]
fn a_closed_stdout_exits_2_with_one_line() {
    let bin = assert_cmd::cargo::cargo_bin("parbench");
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("exec \"$0\" devices --json >&-")
        .arg(&bin)
        .env_remove("PARBENCH_ENGINE")
        .output()
        .unwrap();
    assert_stdout_error(&out, "it is closed");
    // A stdout sent to /dev/null is not closed: its output is discarded as asked.
    let out = devices_json(Stdio::null());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_output_name_at_the_file_name_limit_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let a = report_with(dir.path(), "a.json", |_| {});
    let long = dir.path().join(format!("{}.csv", "x".repeat(251)));
    parbench()
        .args(["export", "--format", "csv"])
        .arg(&a)
        .arg("-o")
        .arg(&long)
        .assert()
        .success();
    assert!(std::fs::read_to_string(&long)
        .unwrap()
        .starts_with("scenario,"));
}

#[test]
fn an_empty_engine_variable_means_the_default() {
    let out = parbench()
        .env("PARBENCH_ENGINE", "")
        .args([
            "async",
            "--iterations",
            "10",
            "--product-size",
            "16",
            "--json",
        ])
        .args(crate::common::QUICK)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        doc["environment"]["engine"], "threaded",
        "{}",
        doc["environment"]
    );
}

#[test]
fn a_bad_engine_variable_is_named_with_the_accepted_values() {
    crate::cli::util::assert_usage_error_from(
        {
            let mut c = parbench();
            c.env("PARBENCH_ENGINE", "warp");
            c
        },
        &["async"],
        "PARBENCH_ENGINE is 'warp', which names no engine mode (expected 'threaded', 'naive'",
    );
}
