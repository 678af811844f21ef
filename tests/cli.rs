//! The command line as a user meets it: output contracts, exit codes, and bad input.

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

mod common;
use common::QUICK;

fn parbench() -> Command {
    let mut c = Command::cargo_bin("parbench").expect("binary builds");
    c.env_remove("PARBENCH_ENGINE");
    c.env_remove("PARBENCH_MATMUL_KERNEL");
    c
}

/// The variant names of a run, in order.
fn variant_names(run: &Value) -> Vec<&str> {
    run["variants"]
        .as_array()
        .expect("variants")
        .iter()
        .map(|v| v["name"].as_str().expect("a variant name"))
        .collect()
}

fn json_of(args: &[&str]) -> Value {
    let out = parbench()
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
fn assert_usage_error(args: &[&str], needle: &str) {
    let out = parbench().args(args).output().expect("runs");
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
fn async_json_follows_the_schema() {
    let doc = json_of(&["async", "--iterations", "50", "--product-size", "64"]);
    assert_eq!(doc["schema"], "parbench/1");
    assert_eq!(doc["tool"]["name"], "parbench");
    assert!(doc["tool"]["version"].is_string() && doc["tool"]["git_commit"].is_string());
    let env = &doc["environment"];
    for key in ["host", "os", "cpu_model", "rustc", "engine", "started_at"] {
        assert!(env[key].is_string(), "environment.{key}: {env}");
    }
    assert!(env["cores"].as_u64().is_some_and(|c| c >= 1));
    assert!(env["memory_bytes"].is_u64());
    assert!(env["argv"].is_array());
    assert_eq!(env["engine"], "threaded");
    assert_eq!(env["gpu"]["available"], false);
    assert!(env["gpu"]["reason"].as_str().is_some_and(|r| !r.is_empty()));

    let runs = doc["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    assert_eq!(run["scenario"], "async");
    assert_eq!(run["parameters"]["iterations"], 50);
    assert_eq!(run["parameters"]["shape"], serde_json::json!([1, 2]));
    assert!(run["devices"][0]
        .as_str()
        .is_some_and(|d| d.starts_with("cpu:0")));
    let names = variant_names(run);
    assert_eq!(
        names,
        [
            "sync",
            "async",
            "push-only",
            "chain",
            "ping-pong",
            "products",
            "products-push-only"
        ]
    );
    for v in run["variants"].as_array().unwrap() {
        assert_eq!(v["samples_s"].as_array().unwrap().len(), 3);
        for key in ["median_s", "mean_s", "min_s", "max_s", "stddev_s", "mad_s"] {
            assert!(v[key].as_f64().is_some_and(|x| x >= 0.0), "{key} in {v}");
        }
        let ci = v["ci95_s"].as_array().unwrap();
        assert_eq!(ci.len(), 2);
        assert!(
            ci[0].as_f64() <= v["median_s"].as_f64() && v["median_s"].as_f64() <= ci[1].as_f64()
        );
        assert!(v["outliers"].is_u64());
    }
    for key in [
        "async_speedup",
        "t1_s",
        "t2_s",
        "t3_s",
        "predicted_sync_s",
        "predicted_async_s",
        "products_over_push_only_ratio",
        "handoff_p50_s",
        "handoff_p99_s",
        "ping_pong_per_op_s",
    ] {
        assert!(
            run["derived"][key].is_number(),
            "derived.{key}: {}",
            run["derived"]
        );
    }
    let d = &run["derived"];
    assert!(d["handoff_p50_s"].as_f64() <= d["handoff_p99_s"].as_f64());
    assert_eq!(run["figures"]["handoff_p99_s"]["better"], "lower");
    let checks = run["checks"].as_array().unwrap();
    assert!(checks.iter().all(|c| c["passed"] == true), "{checks:?}");
    for name in [
        "timed products match float64",
        "ping-pong ran its ops in order",
    ] {
        assert!(checks.iter().any(|c| c["name"] == name), "{checks:?}");
    }
    let explanation = run["explanation"].to_string();
    assert!(
        explanation.contains("the pitfall on the book's workload: pushing 10 products of 64×64"),
        "{explanation}"
    );
}

#[test]
fn the_table_explains_the_pitfall() {
    parbench()
        .args(["async", "--iterations", "20", "--product-size", "64"])
        .args(QUICK)
        .assert()
        .success()
        .stdout(
            predicate::str::contains("push-only")
                .and(predicate::str::contains("NOT the cost"))
                .and(predicate::str::contains("GPU: unavailable"))
                .and(predicate::str::contains("check ok")),
        );
}

#[test]
fn naive_engine_from_flag_and_environment() {
    let doc = json_of(&[
        "async",
        "--iterations",
        "20",
        "--product-size",
        "64",
        "--engine",
        "naive",
    ]);
    assert_eq!(doc["environment"]["engine"], "naive");
    let out = parbench()
        .env("PARBENCH_ENGINE", "naive")
        .args([
            "async",
            "--iterations",
            "20",
            "--product-size",
            "64",
            "--json",
        ])
        .args(QUICK)
        .output()
        .unwrap();
    assert!(out.status.success());
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["environment"]["engine"], "naive");
    assert!(doc["runs"][0]["explanation"][0]
        .as_str()
        .unwrap()
        .contains("naive"));
}

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
fn devices_reports_a_missing_gpu_with_its_reason() {
    let out = parbench().arg("devices").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("cpu "), "{text}");
    if !text.contains("cuda:0") {
        assert!(text.contains("gpu     unavailable: "), "{text}");
    }
    let json: Value = serde_json::from_slice(
        &parbench()
            .args(["devices", "--json"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(json["gpu"]["available"].is_boolean());
}

#[test]
fn an_empty_library_path_still_gives_a_clean_unavailable() {
    let empty = tempfile::tempdir().unwrap();
    let out = parbench()
        .env("LD_LIBRARY_PATH", empty.path())
        .args(["devices", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    if json["gpu"]["available"] == false {
        assert!(json["gpu"]["reason"]
            .as_str()
            .is_some_and(|r| !r.is_empty()));
    }
}

#[test]
fn hidden_gpus_are_reported_as_hidden() {
    let out = parbench()
        .env("CUDA_VISIBLE_DEVICES", "")
        .args(["devices", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["gpu"]["available"], false);
}

/// Small sizes: these check the fallback path and the report, not speed.
#[test]
fn cpu_gpu_falls_back_and_says_so_in_table_and_json() {
    let args = [
        "cpu-gpu",
        "--ops",
        "2",
        "--cpu-size",
        "64",
        "--gpu-size",
        "64",
    ];
    let doc = json_of(&args);
    let run = &doc["runs"][0];
    let names = variant_names(run);
    assert_eq!(names, ["a-alone", "b-alone", "parallel", "one-device"]);
    for key in [
        "parallel_speedup",
        "overlap_efficiency",
        "a_gflops",
        "b_gflops",
    ] {
        assert!(run["derived"][key].is_number(), "{key}");
    }
    assert!(
        run["checks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["passed"] == true),
        "{}",
        run["checks"]
    );
    if doc["environment"]["gpu"]["available"] == false {
        assert_eq!(run["devices"].as_array().unwrap().len(), 2);
        let note = run["notes"][0].as_str().unwrap();
        assert!(
            note.starts_with("GPU unavailable: ") && note.ends_with("using cpu:1"),
            "{note}"
        );
        parbench()
            .args(args)
            .args(QUICK)
            .assert()
            .success()
            .stdout(predicate::str::contains("note: GPU unavailable:"))
            .stdout(predicate::str::contains(
                "devices: cpu:0 (1 thread), cpu:1 (1 thread, standing in for the GPU)",
            ));
    }
}

/// Asking for the GPU by name on a machine without one is an error, unless `--fallback`.
#[test]
fn device_cuda_without_a_gpu_is_refused_unless_falling_back() {
    let probe = parbench().args(["devices", "--json"]).output().unwrap();
    let env: Value = serde_json::from_slice(&probe.stdout).unwrap();
    if env["gpu"]["available"] == true {
        return;
    }
    for scenario in ["matmul", "async", "memory", "hybridize"] {
        assert_usage_error(
            &[scenario, "--device", "cuda"],
            "--device cuda asks for a GPU, and none can be used (",
        );
    }
    assert_usage_error(
        &[
            "sweep",
            "matmul",
            "--set",
            "size=16,32",
            "--set",
            "device=cpu,cuda",
        ],
        "add --fallback",
    );
    let doc = json_of(&["matmul", "--device", "cuda", "--size", "32", "--fallback"]);
    let run = &doc["runs"][0];
    assert!(
        run["notes"][0]
            .as_str()
            .unwrap()
            .starts_with("GPU unavailable: "),
        "{run}"
    );
    assert_eq!(run["checks"][0]["passed"], true);
}

#[test]
fn run_copy_falls_back_and_checks_the_copies() {
    let doc = json_of(&["run-copy", "--ops", "3", "--size", "64"]);
    let run = &doc["runs"][0];
    let names = variant_names(run);
    assert_eq!(names, ["run", "copy", "run-then-copy", "overlapped"]);
    assert!(run["derived"]["overlap_efficiency"].is_number());
    assert!(run["derived"]["lower_bound_s"].is_number());
    assert_eq!(run["checks"][0]["passed"], true);
    if doc["environment"]["gpu"]["available"] == false {
        assert!(run["notes"][0]
            .as_str()
            .unwrap()
            .starts_with("GPU unavailable: "));
    }
}

#[test]
fn matmul_reports_gflops_and_checks_the_product() {
    let doc = json_of(&["matmul", "--size", "65", "--ops", "2", "--threads", "1"]);
    let run = &doc["runs"][0];
    assert!(run["derived"]["gflops"].as_f64().is_some_and(|g| g > 0.0));
    assert_eq!(run["checks"][0]["passed"], true);
    let doc = json_of(&["matmul", "--m", "3", "--k", "5", "--n", "7", "--ops", "1"]);
    assert_eq!(doc["runs"][0]["checks"][0]["passed"], true);
    // Parameters are reported as they ran: `0` (the same as --size, all cores) resolved.
    let params = &doc["runs"][0]["parameters"];
    assert_eq!(
        (&params["m"], &params["k"], &params["n"]),
        (&3.into(), &5.into(), &7.into())
    );
    let cores = doc["environment"]["cores"].as_u64().unwrap();
    assert_eq!(params["threads"], cores, "threads 0 is all cores: {params}");
    let doc = json_of(&[
        "matmul",
        "--size",
        "33",
        "--n",
        "9",
        "--ops",
        "1",
        "--cpu-threads",
        "1",
    ]);
    let params = &doc["runs"][0]["parameters"];
    assert_eq!(
        (&params["m"], &params["k"], &params["n"]),
        (&33.into(), &33.into(), &9.into())
    );
    assert_eq!(params["threads"], 1, "--cpu-threads: {params}");
}

#[test]
fn absurd_sizes_are_refused_with_the_estimate_before_allocating() {
    assert_usage_error(&["cpu-gpu", "--cpu-size", "50000"], "needs an estimated");
    assert_usage_error(&["run-copy", "--size", "100000"], "needs an estimated");
    assert_usage_error(&["matmul", "--size", "100000"], "needs an estimated");
    assert_usage_error(&["cpu-gpu", "--cpu-size", "0"], "--cpu-size");
    assert_usage_error(&["run-copy", "--size", "-4"], "--size");
    assert_usage_error(&["matmul", "--device", "tpu"], "--device");
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

/// A real report to compare against, and a way to derive variants of it.
fn report_with(dir: &std::path::Path, name: &str, edit: impl Fn(&mut Value)) -> std::path::PathBuf {
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
    edit(&mut doc);
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string(&doc).unwrap()).unwrap();
    path
}

/// Give every variant eight synthetic samples, `scale(i)` times a tight base (±1%), so the
/// comparison tests depend on no real timing noise.
fn scale_times(doc: &mut Value, scale: impl Fn(usize) -> f64) {
    for v in doc["runs"][0]["variants"].as_array_mut().unwrap() {
        let samples: Vec<f64> = (0..8)
            .map(|i| 1e-3 * (1.0 + 0.01 * ((i % 3) as f64 - 1.0)) * scale(i))
            .collect();
        let mut sorted = samples.clone();
        sorted.sort_by(f64::total_cmp);
        v["median_s"] = serde_json::json!((sorted[3] + sorted[4]) / 2.0);
        v["samples_s"] = serde_json::json!(samples);
    }
}

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
fn run_executes_a_suite_into_one_report() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("tiny.toml");
    std::fs::write(
        &suite,
        "description = \"tiny\"\n\n[[run]]\nscenario = \"async\"\nparams = { iterations = 20, product_size = 64 }\n\n\
         [[run]]\nscenario = \"matmul\"\nparams = { size = 33, ops = 1 }\nsampling = { min_samples = 2 }\n",
    )
    .unwrap();
    let out = dir.path().join("out.json");
    parbench()
        .arg("run")
        .arg(&suite)
        .args(["--warmup", "0", "--max-samples", "3", "--quiet", "-o"])
        .arg(&out)
        .assert()
        .success();
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let scenarios: Vec<&str> = doc["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["scenario"].as_str().unwrap())
        .collect();
    assert_eq!(scenarios, ["async", "matmul"]);
    assert_eq!(doc["runs"][0]["parameters"]["iterations"], 20);
}

#[test]
fn malformed_suites_fail_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "[[run]]\nscenario = \"async\"\n\n[[run]]\nscenario = \"warp\"\n",
            ":5: unknown scenario 'warp'",
        ),
        (
            "[[run]]\nscenario = \"async\"\nparams = { iterations = \"many\" }\n",
            ":3: invalid value 'many' for --iterations",
        ),
        (
            "[[run]]\nscenario = \"async\"\nparams = { speed = 3 }\n",
            ":3: unknown parameter 'speed'",
        ),
        ("[[run]\nscenario = \"async\"\n", ":1: "),
    ];
    for (i, (text, needle)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("bad{i}.toml"));
        std::fs::write(&path, text).unwrap();
        assert_usage_error(&["run", path.to_str().unwrap()], needle);
    }
    assert_usage_error(
        &["run", "/nonexistent/suite.toml"],
        "cannot read /nonexistent/suite.toml",
    );
}

#[test]
fn export_writes_github_action_benchmark_entries() {
    let dir = tempfile::tempdir().unwrap();
    let a = report_with(dir.path(), "a.json", |_| {});
    let out = parbench().args(["export"]).arg(&a).output().unwrap();
    assert!(out.status.success());
    let entries: Value = serde_json::from_slice(&out.stdout).unwrap();
    let entries = entries.as_array().unwrap();
    assert_eq!(entries.len(), 7, "one entry per variant");
    for e in entries {
        assert_eq!(e["unit"], "s");
        assert!(e["value"].as_f64().is_some_and(|v| v > 0.0));
        assert!(e["name"].as_str().unwrap().starts_with("async["));
    }
}

#[test]
fn export_renders_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let a = report_with(dir.path(), "a.json", |_| {});
    let run = |format: &str| {
        let out = parbench()
            .args(["export", "--format", format])
            .arg(&a)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{format}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let table = run("table");
    assert!(
        table.contains("== async") && table.contains("push-only"),
        "{table}"
    );
    let json: Value = serde_json::from_str(&run("json")).unwrap();
    let original: Value = serde_json::from_slice(&std::fs::read(&a).unwrap()).unwrap();
    assert_eq!(json, original, "the JSON export is the report itself");
    assert!(run("svg").starts_with("<svg"));
    let out = parbench()
        .args(["export", "--format", "pdf"])
        .arg(&a)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
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
        2
    );
    // Starting over on the same journal by mistake is refused.
    assert_usage_error(
        &[SWEEP, &["--journal", journal.to_str().unwrap()]].concat(),
        "already exists",
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
    assert_eq!(
        std::fs::read_to_string(&journal).unwrap().lines().count(),
        4
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

/// Polylines whose point count is `n`: a plotted series over n sweep points (grid lines have 2).
fn series_paths(svg: &str, n: usize) -> usize {
    let doc = roxmltree::Document::parse(svg).expect("the SVG is well-formed XML");
    doc.descendants()
        .filter(|e| e.has_tag_name("polyline"))
        .filter(|e| {
            e.attribute("points")
                .is_some_and(|p| p.split_whitespace().count() == n)
        })
        .count()
}

#[test]
fn plot_draws_a_line_per_variant_and_bars_for_a_single_run() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("sweep.json");
    parbench()
        .args([
            "sweep",
            "run-copy",
            "--set",
            "size=16,32,48",
            "--set",
            "ops=1",
            "--journal",
        ])
        .arg(dir.path().join("j.jsonl"))
        .arg("-o")
        .arg(&report)
        .args(QUICK)
        .assert()
        .success();
    let svg_path = dir.path().join("sweep.svg");
    parbench().args(["plot"]).arg(&report).assert().success();
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert_eq!(series_paths(&svg, 3), 4, "run-copy has four variants");
    assert!(svg.contains("overlapped") && svg.contains("size"));

    let single = dir.path().join("single.json");
    parbench()
        .args(["async", "--iterations", "10", "--product-size", "64", "-o"])
        .arg(&single)
        .args(QUICK)
        .assert()
        .success();
    let out = dir.path().join("bars.svg");
    parbench()
        .args(["plot"])
        .arg(&single)
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    let svg = std::fs::read_to_string(&out).unwrap();
    roxmltree::Document::parse(&svg).unwrap();
    assert!(svg.contains("push-only"));
    assert_usage_error(&["plot", "/nonexistent.json"], "cannot read");
}

/// A small sweep of matmul over two axes: three sizes, two thread counts.
const TWO_AXIS_SWEEP: &[&str] = &[
    "sweep",
    "matmul",
    "--set",
    "size=16,32,48",
    "--set",
    "threads=1,2",
    "--set",
    "ops=1",
];

#[test]
fn a_two_axis_sweep_plots_a_line_per_value_of_the_other_axis() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("s.json");
    parbench()
        .args(TWO_AXIS_SWEEP)
        .arg("-o")
        .arg(&report)
        .args(QUICK)
        .assert()
        .success();
    parbench().args(["plot"]).arg(&report).assert().success();
    let svg = std::fs::read_to_string(dir.path().join("s.svg")).unwrap();
    assert_eq!(
        series_paths(&svg, 3),
        2,
        "one line for threads=1, one for threads=2"
    );
    assert!(svg.contains("threads=1") && svg.contains("threads=2"));
}

#[test]
fn deps_is_identical_to_op_by_op_and_reports_the_bound() {
    let doc = json_of(&[
        "deps",
        "--width",
        "4",
        "--depth",
        "16",
        "--size",
        "24",
        "--devices",
        "2",
        "--seed",
        "5",
    ]);
    let run = &doc["runs"][0];
    let names = variant_names(run);
    assert_eq!(names, ["op-by-op", "parallel"]);
    assert_eq!(run["checks"][0]["passed"], true, "{}", run["checks"]);
    for key in [
        "parallel_speedup",
        "critical_path_s",
        "lower_bound_s",
        "parallel_over_bound_ratio",
    ] {
        assert!(run["derived"][key].is_number(), "{key}");
    }
    assert_usage_error(&["deps", "--width", "0"], "--width");
    assert_usage_error(
        &["deps", "--size", "20000", "--depth", "100000"],
        "needs an estimated",
    );
}

#[test]
fn memory_shows_unbounded_growth_and_a_flat_bound() {
    let doc = json_of(&[
        "memory",
        "--batches",
        "40",
        "--batch",
        "32",
        "--features",
        "64",
        "--inflight",
        "2",
    ]);
    let run = &doc["runs"][0];
    let names = variant_names(run);
    assert_eq!(
        names,
        [
            "unbounded",
            "unbounded-half",
            "sync-per-batch",
            "bounded",
            "bounded-half"
        ]
    );
    assert_eq!(run["checks"][0]["passed"], true, "{}", run["checks"]);
    let d = &run["derived"];
    let batch = d["minibatch_bytes"].as_f64().unwrap();
    assert_eq!(batch, (32 * 64 * 4) as f64);
    // The bound holds whatever the timing: at most (inflight + 1) minibatches' three buffers.
    assert!(d["bounded_peak_bytes"].as_f64().unwrap() <= 3.0 * 3.0 * batch);
    assert!(d["sync_per_batch_peak_bytes"].as_f64().unwrap() <= 3.0 * batch);
    assert_usage_error(&["memory", "--batches", "1"], "--batches");
    assert_usage_error(
        &[
            "memory",
            "--batches",
            "100000",
            "--batch",
            "100000",
            "--features",
            "1000",
        ],
        "needs an estimated",
    );
}

#[test]
fn hybridize_replays_the_graph_with_identical_results() {
    let doc = json_of(&[
        "hybridize",
        "--layers",
        "3",
        "--width",
        "8",
        "--batch",
        "5",
        "--passes",
        "4",
    ]);
    let run = &doc["runs"][0];
    let names = variant_names(run);
    assert_eq!(names, ["imperative", "hybridized"]);
    assert_eq!(run["checks"][0]["passed"], true, "{}", run["checks"]);
    assert_eq!(run["derived"]["ops_per_pass"], 9.0);
    assert!(run["derived"]["hybridize_speedup"].is_number());
    assert_usage_error(&["hybridize", "--layers", "0"], "--layers");
}

/// A small data-parallel run: a 16 → 24 → 4 MLP, 3 devices so the ring has 3 chunks.
const SMALL_TRAINING: &[&str] = &[
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

#[test]
fn data_parallel_schemes_equal_one_device_sgd_and_record_scaling_and_loss_curves() {
    let doc = json_of(SMALL_TRAINING);
    let run = &doc["runs"][0];
    assert_eq!(
        variant_names(run),
        ["one-device", "parameter-server", "ring", "async"]
    );
    let checks = run["checks"].as_array().unwrap();
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "parameter-server equals one-device SGD",
            "ring equals one-device SGD",
            "parameter-server and ring give the same parameters"
        ]
    );
    assert!(checks.iter().all(|c| c["passed"] == true), "{checks:?}");
    let d = &run["derived"];
    assert_eq!(
        d["parameters"].as_f64(),
        Some((16 * 24 + 24 + 24 * 4 + 4) as f64)
    );
    for v in ["one_device", "parameter_server", "ring", "async"] {
        let curve = d[format!("{v}_loss_curve")].as_array().unwrap();
        // [update, loss, seconds], seconds never going back.
        assert!(curve.len() >= 10, "{v}: {curve:?}");
        let seconds: Vec<f64> = curve.iter().map(|p| p[2].as_f64().unwrap()).collect();
        assert!(seconds.windows(2).all(|w| w[0] <= w[1]), "{v}: {seconds:?}");
        // Training lowers the loss.
        assert!(
            d[format!("{v}_final_loss")].as_f64().unwrap() < d["initial_loss"].as_f64().unwrap()
        );
        assert!(d[format!("{v}_samples_per_second")].as_f64().unwrap() > 0.0);
    }
    for v in ["parameter_server", "ring"] {
        let e = d[format!("{v}_scaling_efficiency")].as_f64().unwrap();
        assert!(e > 0.0 && e.is_finite(), "{v}: {e}");
        let share = d[format!("{v}_communication_share")].as_f64().unwrap();
        assert!((0.0..1.0).contains(&share) && share > 0.0, "{v}: {share}");
        assert_eq!(
            run["figures"][format!("{v}_scaling_efficiency")]["better"],
            "higher"
        );
    }
    assert!(d["async_staleness_mean"].is_number());
    assert_eq!(run["figures"]["ring_time_to_target_s"]["better"], "lower");
    // The sentences quote the figures as the table prints them: samples/s grouped.
    let explanation = run["explanation"].as_array().unwrap();
    let rate = d["ring_samples_per_second"].as_f64().unwrap().round() as u64;
    let digits = rate.to_string();
    let grouped: String = digits
        .chars()
        .enumerate()
        .flat_map(|(i, c)| {
            let comma = i > 0 && (digits.len() - i).is_multiple_of(3);
            comma.then_some(',').into_iter().chain([c])
        })
        .collect();
    assert!(
        explanation
            .iter()
            .any(|e| e.as_str().unwrap().starts_with(&format!(
                "ring: {grouped} samples/s, a scaling efficiency of "
            ))),
        "{explanation:?}"
    );
    assert_usage_error(
        &["data-parallel", "--devices", "4", "--batch", "2"],
        "--batch must be at least --devices",
    );
    assert_usage_error(&["data-parallel", "--lr", "-1"], "--lr");
    assert_usage_error(
        &["data-parallel", "--layers", "10"],
        "--layers needs at least",
    );
    assert_usage_error(
        &["data-parallel", "--layers", "100000x100000x10"],
        "data-parallel's parameters",
    );
}

#[test]
fn data_parallel_over_mpi_needs_the_feature_or_runs_as_one_rank() {
    if !cfg!(feature = "mpi") {
        assert_usage_error(
            &["data-parallel", "--backend", "mpi"],
            "needs a build with the mpi feature: apt-get install",
        );
        return;
    }
    // Started without mpirun: one rank, said so, every check passing.
    let mut args = SMALL_TRAINING.to_vec();
    args.extend(["--backend", "mpi"]);
    let doc = json_of(&args);
    let run = &doc["runs"][0];
    assert_eq!(variant_names(run), ["one-device", "allreduce", "ring"]);
    assert_eq!(run["parameters"]["devices"], 1);
    assert!(run["checks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["passed"] == true));
    let notes = run["notes"].to_string();
    assert!(
        notes.contains("started without mpirun: running as one rank"),
        "{notes}"
    );
    assert_eq!(run["derived"]["ranks"][0]["rank"], 0);
    // A sweep cannot span MPI jobs.
    assert_usage_error(
        &["sweep", "data-parallel", "--set", "backend=mpi"],
        "a sweep runs its points in one process",
    );
}

#[test]
fn plot_draws_the_loss_curves_of_a_training_run() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("dp.json");
    parbench()
        .args(SMALL_TRAINING)
        .arg("-o")
        .arg(&report)
        .args(QUICK)
        .assert()
        .success();
    parbench().args(["plot"]).arg(&report).assert().success();
    let svg = std::fs::read_to_string(dir.path().join("dp.svg")).unwrap();
    assert!(svg.contains("loss during training") && svg.contains("loss against time"));
    // 20 steps: a point per step for each synchronous scheme, in both loss charts.
    assert_eq!(
        series_paths(&svg, 20),
        6,
        "one-device, parameter-server, ring, twice"
    );
    assert!(svg.contains("ring") && svg.contains("async"));
    // Throughput against devices, with the ideal line from one device to 3.
    assert!(svg.contains("throughput vs devices") && svg.contains("ideal: k × one device"));
    assert_eq!(
        series_paths(&svg, 2),
        1,
        "the ideal line, at 1 and 3 devices"
    );
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
fn a_threshold_without_percent_suggests_one() {
    assert_usage_error(
        &["compare", "a", "b", "--threshold", "5"],
        "(did you mean 5%?)",
    );
}

#[test]
fn output_directories_are_created() {
    let dir = tempfile::tempdir().unwrap();
    let a = report_with(dir.path(), "a.json", |_| {});
    let out = dir.path().join("new").join("sub").join("a.txt");
    parbench()
        .args(["export", "--format", "table"])
        .arg(&a)
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    assert!(std::fs::read_to_string(&out).unwrap().contains("== async"));
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
fn plot_says_what_it_cannot_draw() {
    let dir = tempfile::tempdir().unwrap();
    let a = report_with(dir.path(), "a.json", |_| {});
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&a).unwrap()).unwrap();
    // A sweep journal: one run record per line.
    let journal = dir.path().join("j.jsonl");
    let line = serde_json::to_string(&doc["runs"][0]).unwrap();
    std::fs::write(&journal, format!("{line}\n{line}\n")).unwrap();
    let svg = dir.path().join("a.svg");
    assert_usage_error(
        &[
            "plot",
            journal.to_str().unwrap(),
            "-o",
            svg.to_str().unwrap(),
        ],
        "it is a sweep journal",
    );
    // A report of two scenarios charts one and names the other.
    let two = report_with(dir.path(), "two.json", |d| {
        let mut other = d["runs"][0].clone();
        other["scenario"] = "deps".into();
        d["runs"].as_array_mut().unwrap().push(other);
    });
    let out = parbench()
        .arg("plot")
        .arg(&two)
        .arg("-o")
        .arg(&svg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("left out: deps"), "{stderr}");
}

#[test]
fn a_sweep_resumed_with_other_axes_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("j.jsonl");
    parbench()
        .args(["sweep", "matmul", "--set", "size=16,32"])
        .args(QUICK)
        .arg("--journal")
        .arg(&journal)
        .arg("-o")
        .arg(dir.path().join("a.json"))
        .assert()
        .success();
    assert_usage_error(
        &[
            "sweep",
            "matmul",
            "--set",
            "size=16,48",
            "--resume",
            journal.to_str().unwrap(),
        ],
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
        .args(QUICK)
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
            .eq(["size", "ops", "matmul", "checks"]),
        "{summary}"
    );
    assert_eq!(lines.len(), 5, "a header and a line per point: {summary}");
    assert!(lines[1].trim_start().starts_with("16    1"), "{summary}");
    assert!(lines[1..].iter().all(|l| l.ends_with("ok")), "{summary}");
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
    while std::fs::read_to_string(&journal).map_or(0, |t| t.lines().count()) < 1 {
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
        1
    );
}

#[test]
fn a_run_past_max_time_says_what_the_option_bounds() {
    // The notes of a short `async` run under `--max-time max_time`.
    let notes_with = |max_time: &str| {
        let doc = json_of(&[
            "async",
            "--iterations",
            "200",
            "--product-size",
            "64",
            "--max-time",
            max_time,
        ]);
        doc["runs"][0]["notes"].to_string()
    };
    let notes = notes_with("0");
    assert!(
        notes.contains("more than --max-time 0.000 ns: that option ends the sampling"),
        "{notes}"
    );
    // A run well within its bound says nothing of it (a bound far above the run's length,
    // so a machine busy with other tests cannot push this run past it).
    let notes = notes_with("600");
    assert!(!notes.contains("--max-time"), "{notes}");
}

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
fn fake_parbench(
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
    assert!(text.starts_with("| entry | pairs |"), "{text}");
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
        stderr.contains("ab: skipped: the candidate failed on suite entry 1: async")
            && stderr.contains("unknown parameter 'product_size'"),
        "{stderr}"
    );
}

/// An HTML page parsed as XML (it is written XHTML-compatible): every element closed, only
/// XML's entities. Panics with the parser's reason otherwise.
fn parse_page(html: &str) -> roxmltree::Document<'_> {
    roxmltree::Document::parse_with_options(
        html,
        roxmltree::ParsingOptions {
            allow_dtd: true,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("the page is not well-formed: {e}"))
}

/// The page loads nothing: no script, no `src=`, no stylesheet or font from elsewhere, and the
/// only URLs are the XHTML and SVG namespace names.
fn assert_self_contained(html: &str) {
    for needle in ["<script", "src=", "<link", "@import", "url("] {
        assert!(!html.contains(needle), "the page has '{needle}'");
    }
    let mut rest = html;
    while let Some(at) = rest.find("http") {
        let url = &rest[at..];
        assert!(
            url.starts_with("http://www.w3.org/1999/xhtml\"")
                || url.starts_with("http://www.w3.org/2000/svg\""),
            "an external URL: {}",
            &url[..url.len().min(60)]
        );
        rest = &rest[at + 4..];
    }
}

/// Run parbench with `args`; it must succeed.
fn succeed(args: &[&str]) {
    parbench().args(args).assert().success();
}

#[test]
fn report_writes_a_self_contained_page_of_a_saved_run() {
    let dir = tempfile::tempdir().unwrap();
    let at = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let (json, direct, page) = (at("x.json"), at("direct.html"), at("r.html"));
    let run = |extra: &[&str]| {
        let mut args: Vec<&str> = vec!["async", "--product-size", "64"];
        args.extend(extra);
        args.extend(QUICK);
        succeed(&args);
    };
    run(&["--iterations", "100", "-o", &json, "--html", &direct]);
    succeed(&["report", &json, "-o", &page]);
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(
        html,
        std::fs::read_to_string(&direct).unwrap(),
        "--html and report of the saved JSON give the same page"
    );
    let doc = parse_page(&html);
    assert_self_contained(&html);
    // The bars and the lane timeline (the JSON kept the traced repeat).
    let svgs = doc.descendants().filter(|n| n.has_tag_name("svg")).count();
    assert_eq!(svgs, 2, "bars and the timeline");
    assert!(html.contains("lane timeline of the traced repeat"));
    for variant in ["sync", "push-only", "products-push-only"] {
        assert!(html.contains(&format!(">{variant}<")), "{variant}");
    }
    assert!(html.contains("✓ pass") && !html.contains("✗ FAIL"));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["timelines"].as_array().map(Vec::len), Some(7));

    // A report without traces says so instead of drawing one; the default output is beside it.
    let plain = at("plain.json");
    run(&["--iterations", "10", "-o", &plain]);
    succeed(&["report", &plain]);
    let html = std::fs::read_to_string(at("plain.html")).unwrap();
    parse_page(&html);
    assert!(html.contains("No lane timeline"));
    assert!(!html.contains("lane timeline of the traced repeat"));

    // Two reports: the comparison, with compare's verdicts.
    let both = at("both.html");
    succeed(&["report", &plain, &json, "-o", &both]);
    let html = std::fs::read_to_string(&both).unwrap();
    parse_page(&html);
    assert_self_contained(&html);
    assert!(html.contains("parbench comparison") && html.contains("Verdicts"));
    assert!(html.contains("Nothing to compare") || html.contains("noise"));

    assert_usage_error(&["report", "/nonexistent.json"], "cannot read");
    assert_usage_error(&["report", &json, "-o", &json], "overwrite");
    assert_usage_error(&["report", &json, &json, &json], "no more were expected");
    assert_usage_error(&["report", &json, "-o", "/proc/x/r.html"], "cannot");
}

#[test]
fn the_page_checker_catches_a_broken_page() {
    let good = "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\"><body><p>a</p></body></html>";
    parse_page(good);
    assert_self_contained(good);
    for broken in [
        "<html><body><p>unclosed</body></html>",
        "<html><body>&nbsp;</body></html>",
    ] {
        assert!(std::panic::catch_unwind(|| {
            parse_page(broken);
        })
        .is_err());
    }
    for external in [
        "<html><img src=\"x.png\"/></html>",
        "<html><a href=\"https://example.com\">x</a></html>",
        "<html><script>1</script></html>",
    ] {
        assert!(std::panic::catch_unwind(|| assert_self_contained(external)).is_err());
    }
}

#[test]
fn a_sweep_page_charts_time_and_gflops_against_the_axis() {
    let dir = tempfile::tempdir().unwrap();
    let [journal, report, page] = ["j.jsonl", "s.json", "s.html"]
        .map(|name| dir.path().join(name).to_str().unwrap().to_string());
    let mut args = TWO_AXIS_SWEEP.to_vec();
    args.extend(["--journal", &journal, "-o", &report, "--html", &page]);
    args.extend(QUICK);
    succeed(&args);
    let html = std::fs::read_to_string(&page).unwrap();
    parse_page(&html);
    assert_self_contained(&html);
    assert!(html.contains("matmul: median time vs size"));
    assert!(html.contains("matmul: GFLOP/s vs size"));
    // Legend entries name only the parameter that varies besides the axis.
    assert!(html.contains("(threads=1)") && html.contains("(threads=2)"));
    assert!(
        !html.contains("(threads=1, "),
        "only varying parameters in a legend"
    );
    let lines = parse_page(&html)
        .descendants()
        .filter(|e| e.has_tag_name("polyline"))
        .filter(|e| {
            e.attribute("points")
                .is_some_and(|p| p.split_whitespace().count() == 3)
        })
        .count();
    assert_eq!(
        lines,
        2 + 2 * 2,
        "time: 2 lines; GFLOP/s: 2 figures × 2 lines"
    );
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

#[test]
fn html_output_is_checked_before_anything_runs() {
    assert_usage_error(
        &[
            "async",
            "--iterations",
            "10",
            "--html",
            "/proc/nonexistent/r.html",
        ],
        "cannot write /proc/nonexistent/r.html",
    );
    let dir = tempfile::tempdir().unwrap();
    assert_usage_error(
        &[
            "async",
            "--iterations",
            "10",
            "--html",
            dir.path().to_str().unwrap(),
        ],
        "it is a directory",
    );
}

#[test]
fn matmul_notes_which_kernel_ran_and_why() {
    let doc = json_of(&["matmul", "--size", "32"]);
    let notes = doc["runs"][0]["notes"].to_string();
    assert!(
        notes.contains("CPU products ran on the gemm kernel"),
        "{notes}"
    );
    // A value it does not know is ignored, and the note says so.
    let out = parbench()
        .env("PARBENCH_MATMUL_KERNEL", "blas")
        .args(["matmul", "--size", "32"])
        .args(QUICK)
        .arg("--json")
        .output()
        .expect("runs");
    assert!(out.status.success());
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let notes = doc["runs"][0]["notes"].to_string();
    assert!(
        notes.contains("PARBENCH_MATMUL_KERNEL=blas ignored: expected gemm or avx2"),
        "{notes}"
    );
}
