//! What the command-line tests share: running the binary, reading its JSON, checking usage
//! errors, and saved reports to compare, export and plot.

use assert_cmd::Command;
use serde_json::Value;

use crate::common::QUICK;

pub fn parbench() -> Command {
    let mut c = Command::cargo_bin("parbench").expect("binary builds");
    c.env_remove("PARBENCH_ENGINE");
    c.env_remove("PARBENCH_MATMUL_KERNEL");
    c
}

/// `parbench compare ARGS BASE NEW`, run to completion.
pub fn compare(
    args: &[&str],
    base: &std::path::Path,
    new: &std::path::Path,
) -> std::process::Output {
    parbench()
        .arg("compare")
        .args(args)
        .arg(base)
        .arg(new)
        .output()
        .unwrap()
}

/// `parbench` with every GPU hidden (`CUDA_VISIBLE_DEVICES` empty), so a test of the path
/// without a GPU runs the same on a machine that has one.
pub fn parbench_without_gpu() -> Command {
    let mut c = parbench();
    c.env("CUDA_VISIBLE_DEVICES", "");
    c
}

/// The variant names of a run, in order.
pub fn variant_names(run: &Value) -> Vec<&str> {
    run["variants"]
        .as_array()
        .expect("variants")
        .iter()
        .map(|v| v["name"].as_str().expect("a variant name"))
        .collect()
}

pub fn json_of(args: &[&str]) -> Value {
    json_from(parbench(), args)
}

/// [`json_of`] through a command set up by the caller (an environment of its own).
pub fn json_from(mut command: Command, args: &[&str]) -> Value {
    let out = command
        .args(args)
        .args(QUICK)
        .arg("--json")
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON document")
}

/// A usage error: exit 2, exactly one line on stderr, no panic, nothing on stdout.
pub fn assert_usage_error(args: &[&str], needle: &str) {
    assert_usage_error_from(parbench(), args, needle)
}

/// [`assert_usage_error`] through a command set up by the caller.
pub fn assert_usage_error_from(mut command: Command, args: &[&str], needle: &str) {
    let out = command.args(args).output().expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "args {args:?}, stderr: {stderr}"
    );
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "one line expected: {stderr}"
    );
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(stderr.contains(needle), "expected '{needle}' in: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        out.stdout.is_empty(),
        "stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// A real report to compare against, and a way to derive variants of it.
pub fn report_with(
    dir: &std::path::Path,
    name: &str,
    edit: impl Fn(&mut Value),
) -> std::path::PathBuf {
    let base = dir.join("base.json");
    if !base.exists() {
        parbench()
            .args([
                "async",
                "--iterations",
                "50",
                "--product-size",
                "64",
                "--warmup",
                "0",
                "--min-samples",
                "8",
                "--max-samples",
                "8",
                "--quiet",
                "-o",
            ])
            .arg(&base)
            .assert()
            .success();
    }
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&base).unwrap()).unwrap();
    // The machine's state while the base ran (busy under a parallel `cargo test`) would mark
    // the verdicts these tests read; they are about the verdicts, tests/busy.rs about the state.
    for run in doc["runs"].as_array_mut().unwrap() {
        run.as_object_mut().unwrap().remove("state");
    }
    edit(&mut doc);
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string(&doc).unwrap()).unwrap();
    path
}

/// Give every variant eight synthetic samples, `scale(i)` times a tight base (±1%), so the
/// comparison tests depend on no real timing noise.
pub fn scale_times(doc: &mut Value, scale: impl Fn(usize) -> f64) {
    for v in doc["runs"][0]["variants"].as_array_mut().unwrap() {
        let samples: Vec<f64> = (0..8)
            .map(|i| 1e-3 * (1.0 + 0.01 * ((i % 3) as f64 - 1.0)) * scale(i))
            .collect();
        let mut sorted = samples.clone();
        sorted.sort_by(f64::total_cmp);
        v["median_s"] = serde_json::json!((sorted[3] + sorted[4]) / 2.0);
        // The 95% interval of the median of 8 samples is their range.
        v["ci95_s"] = serde_json::json!([sorted[0], sorted[7]]);
        v["samples_s"] = serde_json::json!(samples);
    }
}

/// A small sweep of matmul over two axes: three sizes, two thread counts.
pub const TWO_AXIS_SWEEP: &[&str] = &[
    "sweep",
    "matmul",
    "--set",
    "size=16,32,48",
    "--set",
    "threads=1,2",
    "--set",
    "ops=1",
];

/// A small data-parallel run: a 16 → 24 → 4 MLP, 3 devices so the ring has 3 chunks.
pub const SMALL_TRAINING: &[&str] = &[
    "data-parallel",
    "--devices",
    "3",
    "--layers",
    "16x24x4",
    "--batch",
    "48",
    "--steps",
    "20",
    "--samples",
    "480",
    "--lr",
    "0.5",
    "--target-loss",
    "1.2",
];
