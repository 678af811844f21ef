//! `data-parallel`: the training schemes against one-device SGD, and the MPI backend.

use crate::cli::util::{
    assert_usage_error, assert_usage_error_from, json_from, json_of, parbench,
    parbench_without_gpu, variant_names, SMALL_TRAINING,
};

#[test]
fn data_parallel_schemes_equal_one_device_sgd_and_record_scaling_and_loss_curves() {
    let doc = json_of(SMALL_TRAINING);
    let run = &doc["runs"][0];
    assert_eq!(
        variant_names(run),
        [
            "one-device",
            "parameter-server",
            "ring",
            "ring-overlapped",
            "async"
        ]
    );
    let checks = run["checks"].as_array().unwrap();
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "parameter-server equals one-device SGD",
            "ring equals one-device SGD",
            "ring-overlapped equals one-device SGD",
            "parameter-server and ring give the same parameters"
        ]
    );
    assert!(checks.iter().all(|c| c["passed"] == true), "{checks:?}");
    let d = &run["derived"];
    assert_eq!(
        d["parameters"].as_f64(),
        Some((16 * 24 + 24 + 24 * 4 + 4) as f64)
    );
    for v in [
        "one_device",
        "parameter_server",
        "ring",
        "ring_overlapped",
        "async",
    ] {
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
    for v in ["parameter_server", "ring", "ring_overlapped"] {
        let e = d[format!("{v}_scaling_efficiency")].as_f64().unwrap();
        assert!(e > 0.0 && e.is_finite(), "{v}: {e}");
        let share = d[format!("{v}_communication_share")].as_f64().unwrap();
        assert!((0.0..1.0).contains(&share) && share > 0.0, "{v}: {share}");
        // Exposed communication is part of a step; the overlap a share.
        let exposed = d[format!("{v}_exposed_communication_s")].as_f64().unwrap();
        assert!(exposed >= 0.0 && exposed.is_finite(), "{v}: {exposed}");
        let overlap = d[format!("{v}_communication_overlap")].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&overlap), "{v}: {overlap}");
        assert_eq!(
            run["figures"][format!("{v}_exposed_communication_s")]["better"],
            "lower"
        );
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
    // At the default 25 MiB the small model is one bucket, and the sentence says so.
    assert!(
        explanation.iter().any(|e| {
            let e = e.as_str().unwrap();
            e.starts_with("ring-overlapped in 1 bucket: ring / ring-overlapped = ")
                && e.contains("One bucket holds all")
        }),
        "{explanation:?}"
    );
    assert_usage_error(&["data-parallel", "--lr", "-1"], "--lr");
    assert_usage_error(&["data-parallel", "--bucket-mb", "-1"], "--bucket-mb");
    assert_usage_error(&["data-parallel", "--bucket-mb", "nan"], "--bucket-mb");
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
    assert_eq!(
        variant_names(run),
        ["one-device", "allreduce", "ring", "allreduce-overlapped"]
    );
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
    // A sweep's points all span the ranks of one job, or none does.
    assert_usage_error(
        &["sweep", "data-parallel", "--set", "backend=engine,mpi"],
        "sweep the two backends separately",
    );
}

/// `--device cuda` without a usable GPU: the one-line refusal every scenario gives, or under
/// `--fallback` the CPU devices' run with a note; `--backend mpi` is not offered on the GPU.
#[test]
fn data_parallel_on_cuda_is_refused_without_a_gpu_unless_falling_back() {
    // Every GPU hidden, so this runs the same on a machine that has one.
    for devices in ["1", "2", "9"] {
        assert_usage_error_from(
            parbench_without_gpu(),
            &["data-parallel", "--device", "cuda", "--devices", devices],
            "--device cuda asks for a GPU, and none can be used (",
        );
    }
    for command in [parbench(), parbench_without_gpu()] {
        assert_usage_error_from(
            command,
            &["data-parallel", "--device", "cuda", "--backend", "mpi"],
            "--device cuda trains in one process; --backend mpi is not offered on the GPU",
        );
    }
    let mut args = SMALL_TRAINING.to_vec();
    args.extend(["--device", "cuda", "--fallback"]);
    let doc = json_from(parbench_without_gpu(), &args);
    let run = &doc["runs"][0];
    assert_eq!(run["parameters"]["device"], "cuda");
    assert_eq!(variant_names(run)[0], "one-device");
    let notes = run["notes"].to_string();
    assert!(notes.contains("GPU unavailable: "), "{notes}");
    let checks = run["checks"].as_array().unwrap();
    assert!(
        !checks.is_empty() && checks.iter().all(|c| c["passed"] == true),
        "{checks:?}"
    );
}
