//! `sweep`: axes, journals, resuming, the summary, and an interrupt.

use serde_json::Value;

use crate::cli::util::{assert_usage_error, parbench};
use crate::common::QUICK;

const SWEEP: &[&str] = &[
    "sweep",
    "matmul",
    "--set",
    "size=16:64:16",
    "--set",
    "ops=1",
];

#[test]
fn an_interrupted_sweep_resumes_without_repeating_a_point() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("j.jsonl");
    let out = dir.path().join("sweep.json");
    // Stopped after two of four points, as a kill would.
    let first = parbench()
        .env("PARBENCH_SWEEP_STOP_AFTER", "2")
        .args(SWEEP)
        .args(QUICK)
        .arg("--journal")
        .arg(&journal)
        .output()
        .unwrap();
    assert_ne!(first.status.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(&journal).unwrap().lines().count(),
        3,
        "a header and two points"
    );
    // Starting over on the same journal by mistake is refused.
    assert_usage_error(
        &[SWEEP, &["--journal", journal.to_str().unwrap()]].concat(),
        "holds an unfinished run: continue it with --resume, or start over with --fresh",
    );
    parbench()
        .args(SWEEP)
        .args(QUICK)
        .arg("--resume")
        .arg(&journal)
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let sizes: Vec<u64> = doc["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["parameters"]["size"].as_u64().unwrap())
        .collect();
    assert_eq!(
        sizes,
        [16, 32, 48, 64],
        "every point exactly once, in order"
    );
    assert_eq!(doc["sweep"]["scenario"], "matmul");
    // Finished, the named journal is kept as j.done.jsonl: it no longer blocks a re-run.
    assert!(!journal.exists());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("j.done.jsonl"))
            .unwrap()
            .lines()
            .count(),
        5
    );
}

#[test]
fn sweep_rejects_bad_axes_before_running() {
    assert_usage_error(
        &["sweep", "matmul", "--set", "colour=1"],
        "no parameter 'colour'",
    );
    assert_usage_error(&["sweep", "matmul", "--set", "size=100,0"], "--size");
    assert_usage_error(&["sweep", "matmul", "--set", "size=9:1:1"], "START <= STOP");
    assert_usage_error(
        &["sweep", "warp", "--set", "size=1"],
        "unknown scenario 'warp'",
    );
}

#[test]
fn a_sweep_resumed_with_other_axes_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("j.jsonl");
    parbench()
        .env("PARBENCH_SWEEP_STOP_AFTER", "2")
        .args(["sweep", "matmul", "--set", "size=16,32,64"])
        .args(QUICK)
        .arg("--journal")
        .arg(&journal)
        .assert()
        .code(130);
    assert_usage_error(
        &[
            &[
                "sweep",
                "matmul",
                "--set",
                "size=16,48",
                "--resume",
                journal.to_str().unwrap(),
            ],
            QUICK,
        ]
        .concat(),
        "holds a point that is not in this sweep (matmul size=32",
    );
    // More points than before is a longer sweep, not another one.
    let out = dir.path().join("b.json");
    parbench()
        .args(["sweep", "matmul", "--set", "size=16,32,48"])
        .args(QUICK)
        .arg("--resume")
        .arg(&journal)
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(doc["runs"].as_array().unwrap().len(), 3);
}

#[test]
fn a_sweep_ends_with_a_summary_of_its_points() {
    let out = parbench()
        .args(["sweep", "matmul", "--set", "size=16,32", "--set", "ops=1,2"])
        // Not quiet: a quiet sweep prints its points' lines alone.
        .args(QUICK.iter().filter(|a| **a != "--quiet"))
        .args(["--journal", "/dev/null"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let summary = text
        .split("== sweep of matmul: 4 points, median per variant\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no summary: {text}"));
    let lines: Vec<&str> = summary.lines().collect();
    assert!(
        lines[0]
            .split_whitespace()
            .eq(["size", "ops", "matmul", "checks", "machine"]),
        "{summary}"
    );
    assert_eq!(lines.len(), 5, "a header and a line per point: {summary}");
    assert!(lines[1].trim_start().starts_with("16    1"), "{summary}");
    // Each point says whether its checks passed and whether the machine was busy under it.
    assert!(
        lines[1..]
            .iter()
            .all(|l| l.contains(" ok ") && (l.ends_with("quiet") || l.contains(" busy: "))),
        "{summary}"
    );
}

#[cfg(unix)]
#[test]
fn ctrl_c_on_a_sweep_says_how_to_resume() {
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("j.jsonl");
    // The second point takes minutes: the interrupt always lands in it.
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("parbench"))
        .args([
            "sweep",
            "matmul",
            "--set",
            "size=16,6000",
            "--set",
            "ops=50",
            "--quiet",
        ])
        .args(["--warmup", "0", "--min-samples", "1", "--max-samples", "1"])
        .arg("--journal")
        .arg(&journal)
        .arg("-o")
        .arg(dir.path().join("r.json"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while std::fs::read_to_string(&journal).map_or(0, |t| t.lines().count()) < 2 {
        assert!(start.elapsed() < Duration::from_secs(120), "no first point");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(200));
    let kill = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("--resume {}", journal.display())),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&journal).unwrap().lines().count(),
        2,
        "the header and the first point"
    );
}

#[test]
fn a_quiet_sweep_prints_one_line_per_point() {
    let dir = tempfile::tempdir().unwrap();
    let out = parbench()
        .current_dir(dir.path())
        .args(SWEEP)
        .args(QUICK) // with --quiet
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{stdout}");
    for (line, size) in lines.iter().zip([16, 32, 48, 64]) {
        assert!(
            line.starts_with(&format!("size={size}  ops=1  ")) && line.contains("  checks ok  "),
            "{line}"
        );
    }
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
