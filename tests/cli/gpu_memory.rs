//! `--gpu-memory-fraction` and `run-copy --direction/--host-memory`, without a GPU: bad values
//! are one-line usage errors, good ones run on CPU devices with the GPU unavailable.

use crate::cli::util::{assert_usage_error, json_from, parbench_without_gpu, variant_names};

#[test]
fn a_memory_fraction_outside_zero_to_one_is_a_usage_error() {
    for bad in ["0", "1.5", "abc", "-0.5"] {
        assert_usage_error(
            &[
                "run-copy",
                "--ops",
                "1",
                "--size",
                "8",
                "--gpu-memory-fraction",
                bad,
            ],
            "--gpu-memory-fraction",
        );
    }
}

#[test]
fn a_memory_fraction_without_a_gpu_still_runs_on_the_cpu() {
    let doc = json_from(
        parbench_without_gpu(),
        &[
            "run-copy",
            "--ops",
            "2",
            "--size",
            "16",
            "--gpu-memory-fraction",
            "0.5",
        ],
    );
    let run = &doc["runs"][0];
    assert_eq!(run["checks"][0]["passed"], true);
    assert!(run["notes"][0]
        .as_str()
        .unwrap()
        .starts_with("GPU unavailable: "));
}

#[test]
fn run_copy_uploads_on_the_cpu_fallback_in_each_direction() {
    for (direction, memory, names) in [
        ("h2d", "pinned", vec!["run", "upload", "pipeline"]),
        (
            "both",
            "pageable",
            vec!["run", "upload", "copy", "pipeline"],
        ),
    ] {
        let doc = json_from(
            parbench_without_gpu(),
            &[
                "run-copy",
                "--ops",
                "2",
                "--size",
                "16",
                "--direction",
                direction,
                "--host-memory",
                memory,
            ],
        );
        let run = &doc["runs"][0];
        assert_eq!(variant_names(run), names, "{direction}");
        assert!(run["derived"]["h2d_gbytes_per_s"].is_number(), "{run}");
        assert!(
            run["derived"]["pipeline_overlap_efficiency"].is_number(),
            "{run}"
        );
        assert_eq!(
            run["derived"]["copy_gbytes_per_s"].is_number(),
            direction == "both",
            "{run}"
        );
        assert_eq!(run["checks"][0]["passed"], true, "{run}");
        assert!(run["notes"][0]
            .as_str()
            .unwrap()
            .starts_with("GPU unavailable: "));
    }
}

#[test]
fn run_copy_refuses_bad_directions_and_pageable_downloads() {
    assert_usage_error(&["run-copy", "--direction", "sideways"], "--direction");
    assert_usage_error(&["run-copy", "--host-memory", "paged"], "--host-memory");
    assert_usage_error(&["run-copy", "--host-memory", "pageable"], "--host-memory");
}
