//! A scenario that does not span ranks, started by an MPI launcher as one of several
//! processes, is refused in one line (the launcher's variables set by hand: no mpirun needed);
//! and the environment counts one core as "1 core".

use crate::cli::util::{assert_usage_error_from, parbench};

/// `parbench` as rank `rank` of a 2-rank OpenMPI job.
fn rank_of_two(rank: &str) -> assert_cmd::Command {
    let mut c = parbench();
    c.env("OMPI_COMM_WORLD_SIZE", "2");
    c.env("OMPI_COMM_WORLD_RANK", rank);
    c
}

#[test]
fn data_parallel_in_a_two_rank_job_without_the_mpi_backend_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("dp.json");
    let out = out.to_str().unwrap();
    assert_usage_error_from(
        rank_of_two("0"),
        &["data-parallel", "--steps", "2", "-o", out],
        "add --backend mpi",
    );
    assert_usage_error_from(
        rank_of_two("1"),
        &["data-parallel", "--steps", "2", "-o", out],
        "rank 1 of 2",
    );
    assert!(!dir.path().join("dp.json").exists());
}

#[test]
fn other_scenarios_suites_and_sweeps_in_a_two_rank_job_are_refused() {
    assert_usage_error_from(
        rank_of_two("0"),
        &["async", "--iterations", "5"],
        "run one process, without mpirun",
    );
    assert_usage_error_from(
        rank_of_two("0"),
        &["sweep", "async", "--set", "iterations=5,10"],
        "sweep async runs in one process",
    );
    let mut pmix = parbench();
    pmix.env("PMIX_RANK", "1");
    assert_usage_error_from(pmix, &["run", "scenarios/ci.toml"], "(PMIX_RANK=1)");
}

#[test]
fn a_job_of_one_rank_runs() {
    let mut one = parbench();
    one.env("OMPI_COMM_WORLD_SIZE", "1")
        .env("OMPI_COMM_WORLD_RANK", "0")
        .args([
            "async",
            "--iterations",
            "5",
            "--min-samples",
            "1",
            "--max-samples",
            "1",
        ])
        .args(["--warmup", "0", "--min-time", "0", "--quiet", "--json"])
        .assert()
        .success();
}

#[test]
fn one_cpu_is_one_core() {
    // taskset (util-linux, in every Debian and Ubuntu base system) pins the process to CPU 0.
    let taskset = which("taskset").expect("taskset (util-linux) on the PATH");
    let out = std::process::Command::new(taskset)
        .args(["-c", "0"])
        .arg(assert_cmd::cargo::cargo_bin("parbench"))
        .arg("devices")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains(": 1 core available"), "{text}");
    assert!(!text.contains("1 cores"), "{text}");
}

/// The path of `program` on PATH.
fn which(program: &str) -> Result<std::path::PathBuf, ()> {
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(program))
                .find(|p| p.is_file())
        })
        .ok_or(())
}
