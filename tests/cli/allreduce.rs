//! `allreduce`: nccl-tests' figures per size and algorithm, the checks, and bad sizes.

use crate::cli::util::{assert_usage_error, json_of, variant_names};

#[test]
fn allreduce_records_each_size_and_algorithm_with_passing_checks() {
    let doc = json_of(&["allreduce", "--sizes", "8,4096", "--devices", "2"]);
    let run = &doc["runs"][0];
    assert_eq!(
        variant_names(run),
        [
            "ring 8B",
            "parameter-server 8B",
            "tree 8B",
            "ring 4KiB",
            "parameter-server 4KiB",
            "tree 4KiB"
        ]
    );
    let checks = run["checks"].as_array().expect("checks");
    assert_eq!(checks.len(), 2);
    assert!(checks.iter().all(|c| c["passed"] == true), "{checks:?}");
    let d = &run["derived"];
    for alg in ["ring", "parameter_server", "tree"] {
        for size in ["8B", "4KiB"] {
            let stem = format!("{alg}_{size}");
            let algbw = d[format!("{stem}_algbw_gbytes_per_s")]
                .as_f64()
                .expect("algbw");
            let busbw = d[format!("{stem}_busbw_gbytes_per_s")]
                .as_f64()
                .expect("busbw");
            // On 2 devices busbw = algbw × 2(2 − 1)/2.
            assert!(
                algbw > 0.0 && (busbw - algbw).abs() <= 1e-9 * algbw,
                "{stem}"
            );
            assert_eq!(d[format!("{stem}_wrong")].as_f64(), Some(0.0), "{stem}");
            assert_eq!(
                run["figures"][format!("{stem}_busbw_gbytes_per_s")]["better"],
                "higher"
            );
        }
        assert_eq!(
            d[format!("{alg}_busbw_curve")].as_array().map(Vec::len),
            Some(2)
        );
    }
    // Every variant carries its percentiles.
    assert!(run["variants"][0]["p99_s"].is_number());
    assert!(!run["explanation"].as_array().expect("sentences").is_empty());
    assert!(run["lesson"]["claim"].is_string());
}

#[test]
fn allreduce_refuses_bad_sizes_and_devices_with_one_line() {
    assert_usage_error(&["allreduce", "--sizes", "0"], "--sizes");
    assert_usage_error(&["allreduce", "--devices", "0"], "--devices");
    assert_usage_error(&["allreduce", "--sizes", "6"], "multiple of 4");
    assert_usage_error(&["allreduce", "--sizes", "64GiB"], "allreduce");
    assert_usage_error(&["allreduce", "--sizes", "1TiB"], "--sizes");
}

#[test]
fn allreduce_over_mpi_needs_the_feature_or_runs_as_one_rank() {
    assert_usage_error(&["allreduce", "--backend", "tcp"], "--backend");
    assert_usage_error(&["allreduce", "--timeout", "0"], "--timeout");
    if !cfg!(feature = "mpi") {
        assert_usage_error(
            &["allreduce", "--backend", "mpi"],
            "needs a build with the mpi feature: apt-get install",
        );
        return;
    }
    // Started without mpirun: one rank, whose all-reduce is a copy, checked.
    let doc = json_of(&["allreduce", "--backend", "mpi", "--sizes", "8,4K"]);
    let run = &doc["runs"][0];
    assert_eq!(run["parameters"]["devices"], 1);
    assert_eq!(run["variants"].as_array().unwrap().len(), 6);
    assert!(run["checks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["passed"] == true));
    assert!(run["notes"].to_string().contains("one rank moves nothing"));
}
