//! The GPU probe, and every scenario's fallback to a CPU device when no GPU can be used.

use predicates::prelude::*;
use serde_json::Value;

use crate::cli::util::{
    assert_usage_error_from, json_from, parbench, parbench_without_gpu, variant_names,
};
use crate::common::QUICK;

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
    // Every GPU hidden, so the fallback path runs on a machine that has one too.
    let doc = json_from(parbench_without_gpu(), &args);
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
    assert_eq!(doc["environment"]["gpu"]["available"], false);
    {
        // A, B standing in for the GPU, and the one device with both their cores.
        assert_eq!(run["devices"].as_array().unwrap().len(), 3);
        let note = run["notes"][0].as_str().unwrap();
        assert!(
            note.starts_with("GPU unavailable: ") && note.ends_with("using cpu:1"),
            "{note}"
        );
        // --gpu-size cannot apply without a GPU, and the run says so rather than ignore it.
        let size = run["notes"][1].as_str().unwrap();
        assert_eq!(
            size,
            "--gpu-size 64 applies to a GPU only: B ran at --cpu-size 64² on its CPU stand-in"
        );
        parbench_without_gpu()
            .args(args)
            .args(QUICK)
            .assert()
            .success()
            .stdout(predicate::str::contains("note: GPU unavailable:"))
            .stdout(predicate::str::contains(
                "devices: cpu:0 (1 thread), cpu:1 (1 thread, standing in for the GPU), cpu:2 (2 threads)",
            ));
    }
}

/// Asking for the GPU by name on a machine without one is an error, unless `--fallback`.
#[test]
fn device_cuda_without_a_gpu_is_refused_unless_falling_back() {
    // Every GPU hidden, so this runs the same on a machine that has one.
    let probe = parbench_without_gpu()
        .args(["devices", "--json"])
        .output()
        .unwrap();
    let env: Value = serde_json::from_slice(&probe.stdout).unwrap();
    assert_eq!(env["gpu"]["available"], false, "{}", env["gpu"]);
    for scenario in ["matmul", "async", "memory", "hybridize", "deps"] {
        assert_usage_error_from(
            parbench_without_gpu(),
            &[scenario, "--device", "cuda"],
            "--device cuda asks for a GPU, and none can be used (",
        );
    }
    assert_usage_error_from(
        parbench_without_gpu(),
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
    let doc = json_from(
        parbench_without_gpu(),
        &["matmul", "--device", "cuda", "--size", "32", "--fallback"],
    );
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

/// `deps --device cuda --streams k` without a GPU: the same one-line refusal as every other
/// `--device cuda`, with or without streams; with `--fallback`, the CPU DAG and a note.
#[test]
fn deps_on_gpu_streams_without_a_gpu_is_refused_unless_falling_back() {
    for streams in ["1", "4"] {
        assert_usage_error_from(
            parbench_without_gpu(),
            &["deps", "--device", "cuda", "--streams", streams],
            "--device cuda asks for a GPU, and none can be used (",
        );
    }
    let doc = json_from(
        parbench_without_gpu(),
        &[
            "deps",
            "--device",
            "cuda",
            "--streams",
            "4",
            "--fallback",
            "--width",
            "3",
            "--depth",
            "8",
            "--size",
            "8",
        ],
    );
    let run = &doc["runs"][0];
    let note = run["notes"][0].as_str().unwrap();
    assert!(
        note.starts_with("GPU unavailable: ") && note.contains("not on --streams 4 GPU streams"),
        "{note}"
    );
    assert_eq!(variant_names(run), ["op-by-op", "one-device", "parallel"]);
    assert_eq!(run["checks"][0]["passed"], true, "{}", run["checks"]);
    assert_eq!(run["parameters"]["streams"], 4);
    assert_eq!(run["parameters"]["device"], "cuda");
}

#[test]
fn run_copy_falls_back_and_checks_the_copies() {
    // Every GPU hidden, so the fallback path runs on a machine that has one too.
    let doc = json_from(
        parbench_without_gpu(),
        &["run-copy", "--ops", "3", "--size", "64"],
    );
    let run = &doc["runs"][0];
    let names = variant_names(run);
    assert_eq!(names, ["run", "copy", "run-then-copy", "overlapped"]);
    assert!(run["derived"]["overlap_efficiency"].is_number());
    assert!(run["derived"]["lower_bound_s"].is_number());
    assert_eq!(run["checks"][0]["passed"], true);
    assert!(run["notes"][0]
        .as_str()
        .unwrap()
        .starts_with("GPU unavailable: "));
}

/// `devices --probe` prints one line per limit, measured (a release build) or with the reason
/// it was not (a debug build); `--json` carries them in the environment; plain `devices` does
/// not measure.
#[test]
fn devices_probe_prints_each_limit() {
    let out = parbench().args(["devices", "--probe"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for (label, measured) in [
        ("f32 FMA peak: ", " per core, "),
        ("clock: ", " GHz (dependent imul chain)"),
        ("memory copy: ", " GB/s on 1 thread, "),
        ("memory triad: ", " GB/s on 1 thread, "),
        ("cache line between cores: ", " one way"),
        (
            "closure handed to a thread: ",
            " each (through a channel, no engine)",
        ),
    ] {
        let line = text
            .lines()
            .find(|l| l.contains(label))
            .unwrap_or_else(|| panic!("no '{label}' line in:\n{text}"));
        assert!(
            line.contains(measured) || line.contains(": not measured ("),
            "{line}"
        );
    }
    assert!(text.starts_with("cpu "), "{text}");
    assert!(text.contains("\nlimits  f32 FMA peak: "), "{text}");

    let json = |args: &[&str]| -> Value {
        serde_json::from_slice(&parbench().args(args).output().unwrap().stdout).unwrap()
    };
    let env = json(&["devices", "--probe", "--json"]);
    for probe in ["fma", "clock", "memory", "line", "channel"] {
        let limit = &env["limits"][probe];
        assert!(
            limit["measured"].is_object() || limit["not_measured"].is_string(),
            "{probe}: {env}"
        );
    }
    assert!(env["limits"]["probe_s"].is_number());
    assert!(json(&["devices", "--json"]).get("limits").is_none());
    let plain = parbench().arg("devices").output().unwrap();
    assert!(!String::from_utf8_lossy(&plain.stdout).contains("FMA peak"));
}

/// `--gpu` takes an ordinal: anything else is a usage error.
#[test]
fn gpu_ordinal_that_is_not_a_number_is_a_usage_error() {
    for bad in ["abc", "1.5", "", "-1"] {
        let flag = format!("--gpu={bad}");
        let out = parbench().args([&flag, "devices"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "--gpu {bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("--gpu"), "{err}");
    }
}

/// A GPU ordinal the machine does not have: the GPU is unavailable and says why (the
/// missing ordinal, or no GPU at all), and every report records the ordinal asked for.
#[test]
fn a_missing_gpu_ordinal_is_reported_unavailable() {
    let out = parbench().args(["--gpu", "3", "devices"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("cuda    GPU ordinal 3 (--gpu)"), "{text}");
    let json: Value = serde_json::from_slice(
        &parbench()
            .args(["--gpu", "3", "devices", "--json"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert_eq!(json["cuda_env"]["ordinal"], 3);
    let gpus = json["gpus"].as_array().expect("a gpus array");
    if gpus.len() <= 3 {
        assert_eq!(json["gpu"]["available"], false, "{json}");
        assert!(text.contains("gpu     unavailable: "), "{text}");
        if !gpus.is_empty() {
            assert_eq!(
                json["gpu"]["reason"],
                format!("no GPU 3: this machine has {}", gpus.len())
            );
        }
    }
    assert_usage_error_from(
        parbench(),
        &["--gpu", "99", "async", "--device", "cuda"],
        "--device cuda asks for a GPU, and none can be used (",
    );
}

/// The CUDA variables that change behaviour are recorded when set, the others never.
#[test]
fn the_cuda_environment_is_recorded() {
    let out = parbench()
        .env("CUDA_LAUNCH_BLOCKING", "1")
        .env("CUDA_MODULE_LOADING", "LAZY")
        .env("CUDA_SOMETHING_ELSE", "x")
        .args(["devices", "--json"])
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let vars = &json["cuda_env"]["variables"];
    assert_eq!(vars["CUDA_LAUNCH_BLOCKING"], "1", "{json}");
    assert_eq!(vars["CUDA_MODULE_LOADING"], "LAZY", "{json}");
    assert!(vars.get("CUDA_SOMETHING_ELSE").is_none(), "{json}");
    assert_eq!(json["cuda_env"]["ordinal"], 0);
}
