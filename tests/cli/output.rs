//! Where the output goes: `-o` files and their directories, placement logs, traces and timelines.

use serde_json::Value;

use crate::cli::util::{assert_usage_error, parbench};
use crate::common::QUICK;

#[test]
fn output_file_is_written_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.json");
    parbench()
        .args(["async", "--iterations", "20", "--product-size", "64", "-o"])
        .arg(&path)
        .args(QUICK)
        .assert()
        .success();
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(doc["runs"][0]["scenario"], "async");
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names.len(), 1, "no temporary files left: {names:?}");
}

#[test]
fn unwritable_output_fails_before_running_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // A plain file where a directory should be: its directory cannot be created.
    let plain = dir.path().join("plain");
    std::fs::write(&plain, "").unwrap();
    let blocked = plain.join("sub/out.json");
    assert_usage_error(
        &["async", "-o", blocked.to_str().unwrap()],
        "cannot create its directory",
    );
    assert_usage_error(&["async", "-o", dir.path().to_str().unwrap()], "directory");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "only the plain file"
    );
}

#[test]
fn log_placement_prints_each_ops_lane() {
    let out = parbench()
        .args(["run-copy", "--ops", "1", "--size", "8", "--log-placement"])
        .args(QUICK)
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    // cpu:0 on the fallback, cuda:0 with a GPU.
    let lane = if err.contains("on cuda:0") {
        "cuda:0"
    } else {
        "cpu:0"
    };
    assert!(
        err.contains(&format!("[placement] matmul on {lane}\n")),
        "{err}"
    );
    assert!(
        err.contains(&format!("[placement] copy to host on {lane} copy\n")),
        "{err}"
    );
}

#[test]
fn log_placement_shows_one_executions_worth_and_counts_the_rest() {
    let out = parbench()
        .args([
            "async",
            "--iterations",
            "500",
            "--product-size",
            "64",
            "--log-placement",
        ])
        .args(QUICK)
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("[placement]"))
        .collect();
    let shown = lines.iter().filter(|l| l.ends_with(" on cpu:0")).count();
    assert_eq!(shown, 20, "the first 20 ops of the lane: {err}");
    let rest = lines
        .iter()
        .find_map(|l| {
            l.strip_prefix("[placement] ")?
                .split_once(" more ops on cpu:0 not shown")
        })
        .unwrap_or_else(|| panic!("no count of the rest: {err}"));
    let rest: u64 = rest.0.replace(',', "").parse().unwrap();
    assert!(
        rest > 1000,
        "several variants of 500 ops each, times 3 rounds: {rest}"
    );
}

#[test]
fn trace_and_timeline_show_the_parallel_variant_overlapping() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.json");
    let out = parbench()
        // Eight products of a few milliseconds each per device: tens of milliseconds in which
        // the other lane must have started, far beyond any scheduling delay.
        .args([
            "cpu-gpu",
            "--ops",
            "8",
            "--cpu-size",
            "512",
            "--gpu-size",
            "512",
            "--timeline",
            "--trace",
        ])
        .arg(&path)
        .args(QUICK)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("timeline of parallel"), "{stdout}");

    let trace: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    // The parallel variant is one process; its ops sit on one track per lane.
    let pid = events
        .iter()
        .find(|e| e["name"] == "process_name" && e["args"]["name"] == "cpu-gpu / parallel")
        .map(|e| e["pid"].clone())
        .expect("a process for the parallel variant");
    let ops: Vec<&Value> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["pid"] == pid)
        .collect();
    for e in &ops {
        for key in ["name", "ph", "ts", "dur", "tid", "pid"] {
            assert!(!e[key].is_null(), "{key} missing in {e}");
        }
    }
    let span = |tid: &Value| {
        let mine: Vec<&&Value> = ops
            .iter()
            .filter(|e| &e["tid"] == tid && e["name"] == "matmul")
            .collect();
        let start = mine
            .iter()
            .map(|e| e["ts"].as_f64().unwrap())
            .fold(f64::INFINITY, f64::min);
        let end = mine
            .iter()
            .map(|e| e["ts"].as_f64().unwrap() + e["dur"].as_f64().unwrap())
            .fold(0.0, f64::max);
        (start, end)
    };
    let mut tids: Vec<Value> = ops
        .iter()
        .filter(|e| e["name"] == "matmul")
        .map(|e| e["tid"].clone())
        .collect();
    tids.sort_by_key(|t| t.as_u64());
    tids.dedup();
    assert_eq!(tids.len(), 2, "one track per device lane");
    let ((s0, e0), (s1, e1)) = (span(&tids[0]), span(&tids[1]));
    assert!(
        s0.max(s1) < e0.min(e1),
        "the two devices' products overlap in time"
    );
}
