//! Each scenario's report: its variants, derived figures, checks, notes and explanation.

use predicates::prelude::*;
use serde_json::Value;

use crate::cli::util::{
    assert_usage_error, json_from, json_of, parbench, parbench_without_gpu, variant_names,
};
use crate::common::QUICK;

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
    // Threads far beyond the cores (64 a core at most; 4,096 is beyond it below 64 cores).
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 64 {
        assert_usage_error(&["matmul", "--threads", "4096"], "threads a core");
        assert_usage_error(&["async", "--cpu-threads", "4096"], "threads a core");
    }
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
    assert_eq!(names, ["op-by-op", "one-device", "parallel"]);
    assert_eq!(run["checks"][0]["passed"], true, "{}", run["checks"]);
    for key in [
        "asynchrony_speedup",
        "parallelism_speedup",
        "parallel_speedup",
        "critical_path_s",
        "lower_bound_s",
        "parallel_over_bound_ratio",
    ] {
        assert!(run["derived"][key].is_number(), "{key}");
    }
    assert_usage_error(&["deps", "--width", "0"], "--width");
    // Streams belong to a GPU: refused on the CPU, with the option that spreads ops there.
    assert_usage_error(
        &["deps", "--streams", "2"],
        "--streams 2 spreads the ops over compute streams of a GPU and needs --device cuda; on the CPU, --devices",
    );
    assert_usage_error(&["deps", "--device", "cuda", "--streams", "0"], "--streams");
    assert_usage_error(
        &["deps", "--device", "cuda", "--streams", "17"],
        "must be from 1 to 16",
    );
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

/// The derived figures of each run of a report, by run: `scenario[params]` and its keys.
fn figure_sets(report: &Value) -> Vec<(String, Vec<String>)> {
    let runs = report["runs"].as_array().expect("runs");
    runs.iter()
        .map(|r| {
            let derived = r["derived"].as_object().expect("derived");
            let keys = derived.keys().cloned().collect();
            (format!("{}{}", r["scenario"], r["parameters"]), keys)
        })
        .collect()
}

/// Every scenario records the same figures however its run goes: the small suite run four
/// times, every other time traced (each variant run once more with the engine recording),
/// holds the same keys in every run, each `null` with its reason, and `compare` matches two
/// of them whole.
#[test]
fn every_scenario_records_a_fixed_set_of_figures() {
    let dir = tempfile::tempdir().expect("temp dir");
    let suite = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/all-small.toml");
    let trace = dir.path().join("trace.json");
    let trace = trace.to_str().expect("a UTF-8 path");
    // Four runs, so that a figure recorded on a condition of the measurement (one side faster
    // beyond the intervals) has several chances to show.
    let reports: Vec<Value> = [false, true, false, true]
        .iter()
        .map(|&traced| {
            let mut args = vec!["run", suite];
            if traced {
                args.extend(["--trace", trace]);
            }
            json_from(parbench_without_gpu(), &args)
        })
        .collect();
    let first = figure_sets(&reports[0]);
    assert_eq!(first.len(), 9, "every scenario ran");
    for other in &reports[1..] {
        assert_eq!(first, figure_sets(other));
    }
    let (plain, traced) = (&reports[0], &reports[1]);
    for run in reports
        .iter()
        .flat_map(|r| r["runs"].as_array().expect("runs"))
    {
        for (key, value) in run["derived"].as_object().expect("derived") {
            let reason = run["unmeasured"][key].as_str();
            assert_eq!(value.is_null(), reason.is_some(), "{key} in {run}");
            assert!(reason.is_none_or(|r| !r.is_empty()), "{key}");
        }
    }
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    std::fs::write(&a, plain.to_string()).expect("writes");
    std::fs::write(&b, traced.to_string()).expect("writes");
    let out = parbench()
        .args(["compare", "--format", "json"])
        .args([&a, &b])
        .output()
        .expect("runs");
    let c: Value = serde_json::from_slice(&out.stdout).expect("a comparison");
    for side in ["only_in_base", "only_in_new", "renamed"] {
        assert_eq!(c[side], serde_json::json!([]), "{side}: {c}");
    }
}
