//! `data-parallel --backend mpi` under a real `mpirun` (OpenMPI): 2 and 4 ranks (the 4
//! oversubscribe this machine's cores), and ranks that hang or die. Built only with the `mpi`
//! feature (`.ci/run` installs OpenMPI and runs these).
use crate::common::child;

use std::process::Command;
use std::time::Duration;

use assert_cmd::cargo::cargo_bin;
use serde_json::Value;

/// A small model, 4 rows a rank at 4 ranks, the fewest samples that still give medians.
const SMALL: &[&str] = &[
    "data-parallel",
    "--backend",
    "mpi",
    "--layers",
    "16x24x4",
    "--batch",
    "48",
    "--steps",
    "12",
    "--samples",
    "480",
    "--lr",
    "0.5",
    "--target-loss",
    "1.2",
    "--warmup",
    "0",
    "--min-samples",
    "3",
    // A bucket per layer: allreduce-overlapped posts two all-reduces a step.
    "--bucket-mb",
    "0",
];

/// `mpirun -n ranks parbench args`, as root in a container: run as root allowed, shared-memory
/// transport, more ranks than cores allowed.
fn mpirun(ranks: usize, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut c = Command::new("mpirun");
    c.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "--mca",
        "btl",
        "self,vader",
    ])
    .args(["-n", &ranks.to_string()]);
    for (k, v) in env {
        c.args(["-x", &format!("{k}={v}")]);
    }
    c.arg(cargo_bin("parbench")).args(args);
    c.env_remove("PARBENCH_ENGINE");
    c
}

/// Run to completion within `secs` (a hang fails the test): exit code, stdout, stderr.
fn run(cmd: Command, secs: u64) -> (Option<i32>, String, String, Duration) {
    child::run_within(cmd, secs, "mpirun", |c| {
        let _ = c.kill();
    })
}

fn report_of(ranks: usize) -> Value {
    let mut args = SMALL.to_vec();
    args.push("--json");
    let (code, stdout, stderr, _) = run(mpirun(ranks, &args, &[]), 300);
    assert_eq!(code, Some(0), "stderr: {stderr}");
    // Only rank 0 prints: stdout is exactly one report.
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("one JSON report ({e}): {stdout}"))
}

/// A run's variants' names, in report order.
fn variant_names(run: &Value) -> Vec<&str> {
    run["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect()
}

fn assert_trained_together(doc: &Value, ranks: usize) {
    let run = &doc["runs"][0];
    let names = variant_names(run);
    assert_eq!(
        names,
        [
            "one-device",
            "allreduce",
            "ring",
            "allreduce-overlapped",
            "async"
        ]
    );
    assert_eq!(run["parameters"]["devices"], ranks);
    let checks = run["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 4, "{checks:?}");
    assert!(checks.iter().all(|c| c["passed"] == true), "{checks:?}");
    // Every rank's timings and host, in rank order.
    let every = run["derived"]["ranks"].as_array().unwrap();
    assert_eq!(every.len(), ranks);
    for (r, info) in every.iter().enumerate() {
        assert_eq!(info["rank"], r);
        assert!(info["host"].as_str().is_some_and(|h| !h.is_empty()));
        assert_eq!(info["samples_s"]["ring"].as_array().unwrap().len(), 3);
    }
    let d = &run["derived"];
    for v in ["allreduce", "ring", "allreduce_overlapped"] {
        assert!(d[format!("{v}_scaling_efficiency")].as_f64().unwrap() > 0.0);
        let share = d[format!("{v}_communication_share")].as_f64().unwrap();
        assert!(share > 0.0 && share < 1.0, "{v}: {share}");
    }
    assert!(
        d["async_staleness_mean"].as_f64().is_some(),
        "the server counts staleness"
    );
    let curve = d["ring_loss_curve"].as_array().unwrap();
    assert_eq!(curve.len(), 12, "a point per step: {curve:?}");
    assert!(d["ring_final_loss"].as_f64().unwrap() < d["initial_loss"].as_f64().unwrap());
    assert!(!run["notes"].to_string().contains("without mpirun"));
}

#[test]
fn two_ranks_train_as_one_device_would() {
    assert_trained_together(&report_of(2), 2);
}

#[test]
fn four_ranks_on_two_cores_train_as_one_device_would() {
    let doc = report_of(4);
    assert_trained_together(&doc, 4);
    // Three workers update the server without waiting for each other.
    let updates = doc["runs"][0]["derived"]["async_loss_curve"]
        .as_array()
        .unwrap();
    assert!(updates.len() >= 12 * 3 - 3, "{}", updates.len());
}

#[test]
fn a_rank_that_hangs_ends_the_job_naming_it() {
    let mut args = SMALL.to_vec();
    args.extend(["--timeout", "2"]);
    // With 3 ranks the others wait too; rank 0, which knows who is missing, speaks first.
    for (ranks, stalled) in [(2, 1), (3, 2)] {
        let fault = format!("{stalled}:stall");
        let (code, stdout, stderr, took) =
            run(mpirun(ranks, &args, &[("PARBENCH_MPI_FAULT", &fault)]), 120);
        assert_ne!(code, Some(0));
        // Each rank is named with its host, as MPI names it (this machine's name here).
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        let host = host.trim();
        assert!(
            stderr.contains(&format!(
                "rank 0 of {ranks} on {host}: rank {stalled} on {host} did not reach the start \
                 of one-device within 2 s"
            )),
            "{stderr}"
        );
        assert!(took < Duration::from_secs(30), "took {took:?}");
        assert!(!stdout.contains("check ok"));
    }
}

#[test]
fn a_rank_that_dies_ends_the_job() {
    let (code, _, stderr, took) = run(mpirun(2, SMALL, &[("PARBENCH_MPI_FAULT", "1:exit")]), 120);
    assert_ne!(code, Some(0));
    // mpirun names the process that died: rank 1 of the job.
    assert!(stderr.contains(",1]"), "{stderr}");
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

/// A few sizes, including one that does not split evenly into the ranks' chunks.
const ALLREDUCE: &[&str] = &[
    "allreduce",
    "--backend",
    "mpi",
    "--sizes",
    "8,12,4K,1MiB",
    "--warmup",
    "0",
    "--min-samples",
    "3",
    "--json",
];

/// The all-reduce across 2 and 4 ranks: every algorithm's result is right on every rank, each
/// The derived figures of a report's first run: their keys, and each `null`'s reason checked.
fn figure_keys(doc: &Value) -> Vec<String> {
    let run = &doc["runs"][0];
    let derived = run["derived"].as_object().unwrap();
    assert!(!derived.is_empty(), "{run}");
    for (key, value) in derived {
        let reason = run["unmeasured"][key].as_str();
        assert_eq!(value.is_null(), reason.is_some(), "{key} in {run}");
    }
    derived.keys().cloned().collect()
}

/// Two runs of one MPI scenario with the same parameters record the same figures, a `null`
/// with its reason where one was not measured, so reruns compare whole.
#[test]
fn runs_across_ranks_record_a_fixed_set_of_figures() {
    assert_eq!(figure_keys(&report_of(2)), figure_keys(&report_of(2)));
    let allreduce = || {
        let (code, stdout, stderr, _) = run(mpirun(2, ALLREDUCE, &[]), 300);
        assert_eq!(code, Some(0), "stderr: {stderr}");
        figure_keys(&serde_json::from_str(&stdout).unwrap())
    };
    assert_eq!(allreduce(), allreduce());
}

/// size carries nccl-tests' bandwidths and the per-rank spread of its median, and rank 0
/// names every rank's host.
#[test]
fn allreduce_across_ranks_is_right_on_every_rank() {
    for ranks in [2, 4] {
        let (code, stdout, stderr, _) = run(mpirun(ranks, ALLREDUCE, &[]), 300);
        assert_eq!(code, Some(0), "stderr: {stderr}");
        let doc: Value = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("one JSON report ({e}): {stdout}"));
        let run = &doc["runs"][0];
        assert_eq!(run["parameters"]["devices"], ranks);
        assert_eq!(run["devices"].as_array().unwrap().len(), ranks);
        let names = variant_names(run);
        assert_eq!(names.len(), 12, "{names:?}");
        assert!(names.contains(&"mpi-allreduce 1MiB") && names.contains(&"ring 12B"));
        let checks = run["checks"].as_array().unwrap();
        assert_eq!(checks.len(), 4, "{checks:?}");
        assert!(checks.iter().all(|c| c["passed"] == true), "{checks:?}");
        // Elements checked: every rank's whole result.
        assert!(checks[3]["detail"]
            .to_string()
            .contains(&format!("0 wrong of {}", ranks * 262_144)));
        let d = &run["derived"];
        for stem in ["ring_1MiB", "parameter_server_4KiB", "mpi_allreduce_8B"] {
            assert!(d[format!("{stem}_busbw_gbytes_per_s")].as_f64().unwrap() > 0.0);
            assert_eq!(d[format!("{stem}_wrong")].as_f64(), Some(0.0));
            let min = d[format!("{stem}_rank_min_s")].as_f64().unwrap();
            let avg = d[format!("{stem}_rank_avg_s")].as_f64().unwrap();
            let max = d[format!("{stem}_rank_max_s")].as_f64().unwrap();
            assert!(
                0.0 < min && min <= avg && avg <= max,
                "{stem}: {min} {avg} {max}"
            );
        }
        let said = run["explanation"].to_string();
        assert!(said.contains("MPI_Allreduce / the ring"), "{said}");
    }
}

/// A sweep of allreduce under mpirun: every rank runs every point, rank 0 alone writes; a
/// resumed sweep skips the journal's points on every rank; a sweep mixing the backends is
/// refused.
#[test]
fn a_sweep_spans_the_ranks_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep.json");
    let out = out.to_str().unwrap();
    let args = [
        "sweep",
        "allreduce",
        "--set",
        "backend=mpi",
        "--set",
        "sizes=8,4K,16",
        "--warmup",
        "0",
        "--min-samples",
        "3",
        "-o",
        out,
    ];
    let stop = [("PARBENCH_SWEEP_STOP_AFTER", "1")];
    let (code, _, stderr, _) = run(mpirun(2, &args, &stop), 120);
    assert_ne!(code, Some(0), "stopped after one point: {stderr}");
    // Without --resume, rank 0 refuses and the other rank stops with it, at once.
    let (code, _, stderr, took) = run(mpirun(2, &args, &[]), 120);
    assert_ne!(code, Some(0));
    assert!(stderr.contains("--resume"), "{stderr}");
    assert!(took < Duration::from_secs(30), "took {took:?}");
    let mut resumed = args.to_vec();
    resumed.push("--resume");
    let (code, _, stderr, _) = run(mpirun(2, &resumed, &[]), 120);
    assert_eq!(code, Some(0), "stderr: {stderr}");
    assert!(
        stderr.contains("1 from the journal, 2 measured now"),
        "{stderr}"
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap();
    let sizes: Vec<&Value> = doc["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["parameters"]["sizes"])
        .collect();
    assert_eq!(sizes.len(), 3, "{sizes:?}");
    let mixed = [
        "sweep",
        "allreduce",
        "--set",
        "backend=engine,mpi",
        "--set",
        "sizes=8",
    ];
    let (code, _, stderr, _) = run(mpirun(2, &mixed, &[]), 120);
    assert_ne!(code, Some(0));
    assert!(
        stderr.contains("sweep the two backends separately"),
        "{stderr}"
    );
}

/// MPI starts once per process, and a process that started it is no place to launch mpirun
/// from: the one-rank world is checked in a child, this test binary run on the test below
/// alone. Run on its own (no mpirun), a process is a one-rank world whose collectives return
/// its own values.
#[test]
fn a_process_on_its_own_is_a_one_rank_world() {
    let mut cmd = Command::new(std::env::current_exe().expect("the test binary"));
    cmd.args([
        "--ignored",
        "--exact",
        "mpi::one_rank_world_in_this_process",
        "--test-threads",
        "1",
    ]);
    let (code, stdout, stderr, _) = run(cmd, 120);
    assert_eq!(code, Some(0), "stdout: {stdout}\nstderr: {stderr}");
    assert!(
        stdout.contains("1 passed"),
        "the child ran no test: {stdout}"
    );
}

/// The body of the test above, in the process of its own it starts.
#[test]
#[ignore = "run by a_process_on_its_own_is_a_one_rank_world, in a process of its own"]
fn one_rank_world_in_this_process() {
    let comm =
        parbench::distributed::world(Duration::from_secs(30)).expect("MPI starts as a singleton");
    assert_eq!((comm.rank(), comm.size()), (0, 1));
    let send = [1.0f32, 2.0, 3.0];
    let mut recv = [0f32; 3];
    comm.all_reduce_sum(&send, &mut recv, "test");
    assert_eq!(recv, send);
    let mut out = [0f32; 3];
    comm.ring_all_reduce_sum_into(&send, &mut out, &mut Vec::new(), "test");
    assert_eq!(out, send);
    let mut out = [0f32; 3];
    comm.parameter_server_sum_into(&send, &mut out, &mut Vec::new(), "test");
    assert_eq!(out, send);
    let (mut grads, mut sums) = ([0f32; 5], [0f32; 5]);
    let (g0, g1) = grads.split_at_mut(2);
    let (s0, s1) = sums.split_at_mut(2);
    let mut filled = Vec::new();
    comm.all_reduce_sum_as_ready(vec![g1, g0], vec![s1, s0], "test", |i, bucket| {
        filled.push(i);
        bucket.iter_mut().for_each(|x| *x = 1.0 + i as f32);
    });
    assert_eq!(filled, [0, 1]);
    assert_eq!(sums, [2.0, 2.0, 1.0, 1.0, 1.0]);
    comm.barrier("test");
    let gathered = comm.gather_bytes(b"rank zero").expect("rank 0 gathers");
    assert_eq!(gathered, vec![b"rank zero".to_vec()]);
    let mut v = [2.5f64];
    comm.broadcast(&mut v, "test");
    assert_eq!(v, [2.5]);
    assert!(!parbench::distributed::is_secondary_rank());
}
