//! The limits a CI runner sets: under an address-space limit (`ulimit -v`), every parameter
//! at its largest allowed value runs or is refused in one line (exit 2; a memory refusal names
//! the limit it hit), never aborted by a failed allocation (exit 134) or a thread that cannot
//! start.

use std::time::{Duration, Instant};

use assert_cmd::Command;
use parbench::scenario::registry;

use crate::cli::util::assert_usage_error_from;
use crate::common::TINY;

/// 12 GiB in KiB, as `ulimit -v` takes it: half of a 24 GiB runner.
const CI_LIMIT_KIB: &str = "12582912";

/// How long a run that passed its checks may go on before the test stops it, in seconds
/// (`PARBENCH_LIMITS_GUARD`, 2 by default). A largest count (`async --iterations 10000000`,
/// `data-parallel --steps 1000000`) runs for minutes, and no rule refuses a long run, so a run
/// still going at the guard counts as not aborted: the test does not tell a slow run from a
/// hung one (the engine's tests do), nor from one that aborts later. A failed thread start or
/// an early buffer shows within 2 s of a debug build; the set-up of a large run takes longer
/// (`data-parallel --batch 1000000` aborted after 118 s of a debug build when its activations
/// were not counted), which a longer guard catches (`PARBENCH_LIMITS_GUARD=150`: the test
/// then takes tens of minutes).
fn guard() -> Duration {
    let secs = std::env::var("PARBENCH_LIMITS_GUARD").map_or(2, |s| {
        s.parse()
            .unwrap_or_else(|_| panic!("PARBENCH_LIMITS_GUARD={s}: not whole seconds"))
    });
    Duration::from_secs(secs)
}

/// `parbench` under `ulimit -v` of `kib`.
fn under_ulimit(kib: &str) -> Command {
    let mut sh = Command::new("sh");
    sh.args(["-c", &format!("ulimit -v {kib} && exec \"$0\" \"$@\"")])
        .arg(assert_cmd::cargo::cargo_bin("parbench"))
        .env_remove("PARBENCH_ENGINE")
        .env("CUDA_VISIBLE_DEVICES", "");
    sh
}

/// How a guarded run ended, or why it is wrong.
fn outcome(args: &[String]) -> Result<&'static str, String> {
    let started = Instant::now();
    let out = under_ulimit(CI_LIMIT_KIB)
        .args(args)
        .args(TINY)
        .timeout(guard())
        .output()
        .map_err(|e| format!("{args:?}: cannot run: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let wrong = |why: &str| {
        Err(format!(
            "{args:?}: {why} ({:?}); stderr: {stderr}",
            out.status
        ))
    };
    if stderr.contains("panicked") || stderr.contains("memory allocation of") {
        return wrong("a panic or a failed allocation");
    }
    match out.status.code() {
        Some(0) => Ok("ran"),
        Some(2) if stderr.trim_end().lines().count() == 1 && stderr.starts_with("error: ") => {
            Ok("refused")
        }
        Some(_) => wrong("neither a run nor a one-line refusal"),
        // The guard's kill: the run passed its checks and was still running.
        None if started.elapsed() >= guard() => Ok("running at the guard"),
        None => wrong("killed by a signal"),
    }
}

/// Every integer, float, shape and size parameter of every scenario at its largest, alone
/// (the library's own list), and the shared thread and queue options at theirs.
#[test]
fn no_largest_value_aborts_under_a_ci_address_space_limit() {
    let mut cases: Vec<Vec<String>> = registry()
        .iter()
        .flat_map(|s| {
            s.params().iter().filter_map(|spec| {
                let value = spec.largest()?;
                Some(vec![
                    s.name().to_string(),
                    format!("--{}", spec.flag()),
                    value,
                ])
            })
        })
        .collect();
    for shared in [["--cpu-threads", "4096"], ["--max-inflight", "100000000"]] {
        cases.push(["async", shared[0], shared[1]].map(String::from).to_vec());
    }
    assert!(cases.len() > 40, "the parameters: {cases:?}");
    let wrong: Vec<String> = cases
        .iter()
        .filter_map(|args| match outcome(args) {
            Ok(how) => {
                eprintln!("{} {how}", args.join(" "));
                None
            }
            Err(why) => Some(why),
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A workload beyond the address space left is refused with the limit named: it aborted
/// allocating its activations (exit 134) when only the memory available was counted.
#[test]
fn the_address_space_limit_is_counted_before_allocating() {
    assert_usage_error_from(
        under_ulimit("4194304"),
        &["data-parallel", "--batch", "1000000"],
        "(ulimit -v)",
    );
}

/// Threads reserve address space before they use memory: a stack each, and a malloc arena for
/// each of the first 8 a core. Where `ulimit -v` leaves too little, the pool is refused with
/// the limit named (it failed to start: "Resource temporarily unavailable", exit 1). Under
/// 800 MiB, 64 threads (within 64 a core on any machine) need more than 80% of what is left
/// on any number of cores: 64 stacks and 8 arenas or more are 640 MiB.
#[test]
fn threads_beyond_the_address_space_left_are_refused_with_the_limit() {
    assert_usage_error_from(
        under_ulimit("819200"),
        &["matmul", "--threads", "64", "--size", "64", "--ops", "1"],
        "(ulimit -v)",
    );
}
