//! `data-parallel --backend mpi` and `allreduce --backend mpi` across simulated hosts
//! (`scripts/cluster-sim.sh`: network namespaces on a bridge, TCP only): the job trains as one
//! device would with each rank on its own host, the all-reduce is right on every rank, and a
//! link cut mid-run ends it within the timeout, naming the lost host, with no report written
//! and nothing left behind. Needs root and iproute2 (`#[ignore]`;
//! `.ci/run` runs them as root) and the `mpi` feature.
use crate::common::child;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use assert_cmd::cargo::cargo_bin;
use serde_json::Value;

/// A small model: a step takes milliseconds, so a run of many steps is still running when the
/// link is cut.
const SMALL: &[&str] = &[
    "data-parallel",
    "--backend",
    "mpi",
    "--layers",
    "16x24x4",
    "--batch",
    "48",
    "--samples",
    "480",
    "--lr",
    "0.5",
    "--warmup",
    "0",
    "--min-samples",
    "3",
    "-q",
];

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/cluster-sim.sh")
}

/// The namespaces, links and MPI daemons of this machine, to compare before and after.
fn network() -> (String, String, usize) {
    let out = |program: &str, args: &[&str]| {
        let o = Command::new(program).args(args).output().expect("it runs");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    // Live ones: a daemon that exited stays a zombie until init reaps it.
    let daemons = out("ps", &["-eo", "stat=,comm="])
        .lines()
        .filter(|l| l.ends_with(" orted") && !l.trim_start().starts_with('Z'))
        .count();
    (
        out("ip", &["netns", "list"]),
        out("ip", &["-o", "link"]),
        daemons,
    )
}

/// `cluster-sim.sh options -- parbench args` within `secs` (past them it is stopped with
/// SIGTERM, so that it removes what it made, and the test fails): exit code, stdout, stderr
/// and the time taken.
fn cluster(options: &[&str], args: &[&str], secs: u64) -> (Option<i32>, String, String, Duration) {
    let mut cmd = Command::new("bash");
    cmd.arg(script())
        .args(options)
        .arg("--")
        .arg(cargo_bin("parbench"))
        .args(args)
        .env_remove("PARBENCH_ENGINE");
    child::run_within(cmd, secs, "the cluster job", |c| {
        let _ = Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status();
    })
}

#[test]
#[ignore = "needs root and iproute2 (network namespaces)"]
fn two_hosts_over_tcp_train_as_one_device_would() {
    let before = network();
    let mut args = SMALL.to_vec();
    args.extend(["--steps", "12", "--json"]);
    let (code, stdout, stderr, _) = cluster(&["--hosts", "2"], &args, 300);
    assert_eq!(code, Some(0), "{stderr}");
    let doc: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("one JSON report ({e}): {stdout}\n{stderr}"));
    let run = &doc["runs"][0];
    let hosts: Vec<&str> = run["derived"]["ranks"]
        .as_array()
        .expect("every rank's record")
        .iter()
        .map(|r| r["host"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(hosts, ["pbhost1", "pbhost2"], "each rank on its own host");
    let checks = run["checks"].as_array().unwrap();
    assert!(checks.len() >= 3, "{checks:?}");
    for c in checks {
        assert_eq!(c["passed"], true, "{c}");
    }
    assert_eq!(
        network(),
        before,
        "namespaces, links and MPI daemons as before"
    );
}

#[test]
#[ignore = "needs root and iproute2 (network namespaces)"]
fn the_all_reduce_across_two_hosts_is_right_on_each() {
    let before = network();
    let args = [
        "allreduce",
        "--backend",
        "mpi",
        "--sizes",
        "8,12,1MiB",
        "--warmup",
        "0",
        "--min-samples",
        "3",
        "--json",
    ];
    let (code, stdout, stderr, _) = cluster(&["--hosts", "2"], &args, 300);
    assert_eq!(code, Some(0), "{stderr}");
    let doc: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("one JSON report ({e}): {stdout}\n{stderr}"));
    let run = &doc["runs"][0];
    assert_eq!(
        run["devices"],
        serde_json::json!(["rank 0 (pbhost1)", "rank 1 (pbhost2)"])
    );
    let checks = run["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 3, "{checks:?}");
    for c in checks {
        assert_eq!(c["passed"], true, "{c}");
    }
    let busbw = run["derived"]["mpi_allreduce_1MiB_busbw_gbytes_per_s"].as_f64();
    assert!(busbw.is_some_and(|b| b > 0.0), "{busbw:?}");
    assert_eq!(
        network(),
        before,
        "namespaces, links and MPI daemons as before"
    );
}

#[test]
#[ignore = "needs root and iproute2 (network namespaces)"]
fn a_link_cut_mid_run_ends_the_job_naming_the_lost_host() {
    let before = network();
    let out = std::env::temp_dir().join(format!("cluster-cut-{}.json", std::process::id()));
    let _ = std::fs::remove_file(&out);
    let mut args = SMALL.to_vec();
    let out_arg = out.to_string_lossy().into_owned();
    args.extend(["--steps", "100000", "--timeout", "3", "-o", &out_arg]);
    let options = ["--hosts", "2", "--cut-host", "2", "--cut-after", "2"];
    let (code, _, stderr, took) = cluster(&options, &args, 120);
    assert_ne!(code, Some(0), "{stderr}");
    // Whichever notices first names the host: parbench's rank 0, or mpirun's lost daemon.
    assert!(
        stderr.contains("rank 1 on pbhost2") || stderr.contains("on node pbhost2"),
        "{stderr}"
    );
    // The cut comes 2 s in; the timeout is 3 s, and mpirun's keepalive gives up after 5.
    assert!(took < Duration::from_secs(30), "took {took:?}: {stderr}");
    assert!(!out.exists(), "no report after a failed job");
    assert_eq!(
        network(),
        before,
        "namespaces, links and MPI daemons as before"
    );
}
