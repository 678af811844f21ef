//! The machine's state in a report, end to end: a run while processes spin on every core says
//! the machine was busy and names the other processes; the same run without them does not.
//!
//! A test binary of its own (not a module of `tests/suite.rs`), with one test: any other test
//! running beside it (cargo runs a binary's tests on parallel threads) would be one of the
//! "other processes" it measures.
#![cfg(target_os = "linux")]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::cargo_bin;
use parbench::machine::busy::OTHER_CPU_LIMIT;
use serde_json::Value;

/// Processes that spin until dropped.
struct Hogs(Vec<Child>);

impl Hogs {
    fn spin(n: usize) -> Hogs {
        Hogs(
            (0..n)
                .map(|_| {
                    Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .stdin(Stdio::null())
                        .spawn()
                        .expect("sh starts")
                })
                .collect(),
        )
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A short matmul run's report (about a second at most).
fn matmul_report() -> Value {
    let out = Command::new(cargo_bin("parbench"))
        .args([
            "matmul",
            "--size",
            "256",
            "--ops",
            "4",
            "--min-samples",
            "3",
        ])
        .args(["--max-time", "1", "--json", "--quiet"])
        .env_remove("PARBENCH_ENGINE")
        .output()
        .expect("parbench runs");
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).expect("a JSON report")
}

/// The run's warning that other processes were busy, if it has one.
fn other_processes_warning(report: &Value) -> Option<String> {
    report["runs"][0]["notes"]
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .find(|n| n.starts_with("warning: busy machine: other processes used"))
        .map(str::to_string)
}

/// The share of the machine's CPU time that was busy over `span`, read from `/proc/stat` while
/// this test only sleeps: the background load, parbench aside.
fn background_load(span: Duration) -> f64 {
    let read = || -> (u64, u64) {
        let text = std::fs::read_to_string("/proc/stat").expect("/proc/stat");
        let fields: Vec<u64> = text
            .lines()
            .next()
            .expect("the cpu line")
            .split_whitespace()
            .skip(1)
            .take(8)
            .map(|f| f.parse().expect("a tick count"))
            .collect();
        // user nice system idle iowait irq softirq steal
        let idle = fields[3] + fields[4];
        (fields.iter().sum::<u64>() - idle, fields.iter().sum())
    };
    let (busy0, total0) = read();
    std::thread::sleep(span);
    let (busy1, total1) = read();
    (busy1 - busy0) as f64 / (total1 - total0).max(1) as f64
}

#[test]
fn a_run_beside_spinning_processes_says_so_and_a_quiet_one_does_not() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());

    // Busy: a spinning process per core takes about half the machine's CPU time from a run
    // that uses every core, ten times the threshold.
    let started = Instant::now();
    let busy = {
        let _hogs = Hogs::spin(cores);
        std::thread::sleep(Duration::from_millis(100));
        matmul_report()
    };
    let warning = other_processes_warning(&busy)
        .unwrap_or_else(|| panic!("no other-processes warning beside {cores} hogs: {busy}"));
    assert!(warning.contains("times are inflated"), "{warning}");
    let state = &busy["runs"][0]["state"];
    let other = state["other_cpu_fraction"].as_f64().expect("a share");
    assert!(other > OTHER_CPU_LIMIT, "{state}");
    assert!(
        state["runnable_others"]["max"].as_u64() >= Some(1),
        "{state}"
    );

    // Quiet: the same run with the hogs gone. A shared CI runner may have other jobs running,
    // so the claim checked is parbench's, not the runner's: a run is flagged only when the
    // machine was busy. A run may retry twice (a burst of someone else's work passes); when
    // all three were flagged, the background load measured here without parbench must be above
    // the threshold too, or parbench flagged a quiet machine.
    let mut flagged = Vec::new();
    for _ in 0..3 {
        let quiet = matmul_report();
        match other_processes_warning(&quiet) {
            None => {
                assert!(started.elapsed() < Duration::from_secs(30));
                return;
            }
            Some(w) => flagged.push(w),
        }
    }
    let load = background_load(Duration::from_secs(1));
    assert!(
        load > OTHER_CPU_LIMIT,
        "three runs on a machine {:.1}% busy without parbench were each flagged: {flagged:?}",
        load * 100.0
    );
    eprintln!(
        "each run without the hogs was flagged, rightly: this machine's background load is \
         {:.0}% without parbench ({flagged:?})",
        load * 100.0
    );
}
