//! Journals: their header and resuming under other conditions, re-runs after a finished run,
//! default names, the limits of a sweep, and suites (`run`, `all`) that resume.

use std::path::Path;

use serde_json::Value;

use crate::cli::util::{assert_usage_error, parbench};
use crate::common::QUICK;

/// QUICK without `--quiet`: the notes on stderr are what some tests read.
const QUICK_NOTES: &[&str] = &["--warmup", "0", "--min-samples", "3", "--max-samples", "3"];

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

fn sizes(report: &Path) -> Vec<u64> {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap();
    doc["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["parameters"]["size"].as_u64().unwrap())
        .collect()
}

#[test]
fn resuming_under_other_conditions_is_refused_naming_each_difference() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("s.jsonl");
    let j = journal.to_str().unwrap();
    let sweep = ["sweep", "matmul", "--set", "size=16,32", "--set", "ops=1"];
    parbench()
        .env("PARBENCH_SWEEP_STOP_AFTER", "1")
        .args(sweep)
        .args(QUICK)
        .args(["--journal", j])
        .assert()
        .code(130);
    let header: Value = serde_json::from_str(
        std::fs::read_to_string(&journal)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(header["journal"], "parbench-journal/1");
    assert_eq!(header["engine"], "threaded");
    assert_eq!(header["sampling"]["min_samples"], 3);
    assert_eq!(header["scenario"], "matmul");
    assert!(header["commit"].is_string() && header["parbench"].is_string());
    let naive = [
        "--engine",
        "naive",
        "--warmup",
        "0",
        "--min-samples",
        "1",
        "--max-samples",
        "1",
        "--quiet",
    ];
    assert_usage_error(
        &[&sweep[..], &naive, &["--resume", j]].concat(),
        &format!(
            "cannot resume {j}: engine was threaded, now naive; samples per point (at least) \
             was 3, now 1; samples per point (at most) was 3, now 1 (run with --fresh to start \
             over)"
        ),
    );
    // The journal is left as it was; --fresh starts over under the new conditions.
    assert_eq!(lines(&journal), 2);
    let out = dir.path().join("r.json");
    parbench()
        .args(sweep)
        .args(naive)
        .args(["--fresh", "--journal", j, "-o"])
        .arg(&out)
        .assert()
        .success();
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(doc["environment"]["engine"], "naive");
    assert_eq!(lines(&dir.path().join("s.done.jsonl")), 3);
}

#[test]
fn a_journal_without_a_header_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("old.jsonl");
    parbench()
        .env("PARBENCH_SWEEP_STOP_AFTER", "1")
        .args(["sweep", "matmul", "--set", "size=16,32"])
        .args(QUICK)
        .arg("--journal")
        .arg(&journal)
        .assert()
        .code(130);
    // As an older parbench wrote it: the points without the header.
    let text = std::fs::read_to_string(&journal).unwrap();
    let (_header, points) = text.split_once('\n').unwrap();
    std::fs::write(&journal, points).unwrap();
    assert_usage_error(
        &[
            &["sweep", "matmul", "--set", "size=16,32", "--resume"],
            &[journal.to_str().unwrap()][..],
        ]
        .concat(),
        "has no header line (an older parbench wrote it)",
    );
}

#[test]
fn a_finished_sweep_does_not_block_the_next_run_and_says_where_its_points_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s.json");
    let sweep = [
        "sweep",
        "matmul",
        "--set",
        "size=16,32,48",
        "--set",
        "ops=1",
    ];
    let run = |extra: &[&str], env: Option<&str>| {
        let mut c = parbench();
        if let Some(n) = env {
            c.env("PARBENCH_SWEEP_STOP_AFTER", n);
        }
        c.args(sweep)
            .args(QUICK_NOTES)
            .args(extra)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap()
    };
    let first = run(&[], Some("1"));
    assert_eq!(first.status.code(), Some(130));
    // The estimates: the points' work before the first, the time after it.
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(
        stderr.contains(
            "3 points to measure; by their parameters the largest does 27× the first's work, \
             all together 36×"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("for 2 more points (the first took "),
        "{stderr}"
    );
    let resumed = run(&["--resume"], None);
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert!(resumed.status.success(), "{stderr}");
    assert!(
        stderr.contains("3 points, 1 from the journal, 2 measured now"),
        "{stderr}"
    );
    assert_eq!(sizes(&out), [16, 32, 48]);
    // The report holds every point: the journal beside it is gone, and the same command
    // measures again.
    assert!(!dir.path().join("s.jsonl").exists());
    let again = run(&[], None);
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(again.status.success(), "{stderr}");
    assert!(
        stderr.contains("3 points, 0 from the journal, 3 measured now"),
        "{stderr}"
    );
}

#[test]
fn default_journals_of_one_scenario_differ_by_axes() {
    let dir = tempfile::tempdir().unwrap();
    for axis in ["size=16,32", "size=16,48"] {
        parbench()
            .current_dir(dir.path())
            .env("PARBENCH_SWEEP_STOP_AFTER", "1")
            .args(["sweep", "matmul", "--set", axis])
            .args(QUICK)
            .assert()
            .code(130);
    }
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(
        names
            .iter()
            .all(|n| n.starts_with("parbench-sweep-matmul-") && n.ends_with(".jsonl")),
        "{names:?}"
    );
}

#[test]
fn a_sweep_without_axes_lists_what_can_be_swept() {
    assert_usage_error(
        &["sweep", "matmul"],
        "sweep matmul needs at least one --set NAME=VALUES axis; its parameters: size (whole \
         number",
    );
    assert_usage_error(
        &["sweep", "matmul"],
        "e.g. parbench sweep matmul --set size=",
    );
}

#[test]
fn a_sweep_past_its_point_limit_is_refused_before_anything_is_built() {
    let r = "1:1000:1";
    assert_usage_error(
        &[
            "sweep",
            "matmul",
            "--set",
            &format!("size={r}"),
            "--set",
            &format!("ops={r}"),
            "--set",
            &format!("k={r}"),
        ],
        "the sweep has 1,000,000,000 points, more than --max-points 10000",
    );
    let r = "1:9999:1";
    // Five axes of 9,999 values: about 10^20 points, past u64.
    let many: Vec<String> = ["size", "m", "k", "n", "ops"]
        .iter()
        .flat_map(|name| ["--set".into(), format!("{name}={r}")])
        .collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    assert_usage_error(
        &[
            &["sweep", "matmul"][..],
            &many,
            &["--max-points", "18446744073709551615"],
        ]
        .concat(),
        "more than 18446744073709551615 points",
    );
    assert_usage_error(
        &[
            "sweep",
            "matmul",
            "--set",
            "size=16,32,48",
            "--max-points",
            "2",
        ],
        "the sweep has 3 points, more than --max-points 2",
    );
}

/// A suite of three quick matmul runs.
fn suite(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("s.toml");
    let runs: String = [16, 32, 48]
        .iter()
        .map(|n| format!("[[run]]\nscenario = \"matmul\"\nparams = {{ size = {n}, ops = 1 }}\n\n"))
        .collect();
    std::fs::write(&path, runs).unwrap();
    path
}

#[test]
fn an_interrupted_suite_resumes_from_its_journal() {
    let dir = tempfile::tempdir().unwrap();
    let suite = suite(dir.path());
    let out = dir.path().join("r.json");
    let journal = dir.path().join("r.jsonl");
    let run = |extra: &[&str], stop: Option<&str>| {
        let mut c = parbench();
        if let Some(n) = stop {
            c.env("PARBENCH_SWEEP_STOP_AFTER", n);
        }
        c.arg("run")
            .arg(&suite)
            .args(QUICK_NOTES)
            .args(extra)
            .arg("-o")
            .arg(&out)
            .output()
            .unwrap()
    };
    assert_eq!(run(&[], Some("1")).status.code(), Some(130));
    assert_eq!(lines(&journal), 2, "the header and the first run");
    let (s, o) = (suite.to_str().unwrap(), out.to_str().unwrap());
    assert_usage_error(
        &["run", s, "-o", o],
        "holds an unfinished run: continue it with --resume, or start over with --fresh",
    );
    assert_usage_error(
        &["run", s, "-o", o, "--resume", "--engine", "naive"],
        "engine was threaded, now naive",
    );
    let resumed = run(&["--resume"], None);
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert!(resumed.status.success(), "{stderr}");
    assert!(
        stderr.contains("3 runs, 1 from the journal, 2 run now"),
        "{stderr}"
    );
    assert_eq!(sizes(&out), [16, 32, 48]);
    assert!(!journal.exists(), "a finished suite's journal is removed");
    // A journal from another suite is not resumed into this one.
    assert_eq!(run(&[], Some("1")).status.code(), Some(130));
    std::fs::write(
        &suite,
        "[[run]]\nscenario = \"matmul\"\nparams = { size = 64, ops = 1 }\n",
    )
    .unwrap();
    assert_usage_error(
        &[
            "run",
            s,
            "-o",
            o,
            "--resume",
            "--warmup",
            "0",
            "--min-samples",
            "3",
            "--max-samples",
            "3",
        ],
        "run 1 (matmul size=16",
    );
}

#[test]
fn a_journal_another_process_writes_is_refused_naming_it() {
    use std::io::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("j.jsonl");
    let journal_arg = journal.to_str().unwrap();
    let sweep = |extra: &[&'static str]| {
        let mut args = vec!["sweep", "matmul", "--set", "size=16,32", "--journal"];
        args.push(journal_arg);
        args.extend(extra);
        args
    };
    // An unfinished journal, which another process (this test) is writing: it holds the
    // journal's lock, as a running sweep does.
    parbench()
        .env("PARBENCH_SWEEP_STOP_AFTER", "1")
        .args(sweep(QUICK))
        .assert()
        .code(130);
    let mut holder = std::fs::File::create(dir.path().join("j.jsonl.lock")).unwrap();
    holder.try_lock().expect("the lock is free between runs");
    holder
        .write_all(b"parbench pid 4242 on tester, started 2026-01-01T00:00:00Z")
        .unwrap();
    for extra in [&[][..], &["--resume"], &["--fresh"]] {
        let args = [sweep(QUICK), extra.to_vec()].concat();
        assert_usage_error(
            &args,
            &format!(
                "journal {} is being written by parbench pid 4242 on tester, started \
                 2026-01-01T00:00:00Z: wait for that run to end, or give this one another \
                 --journal",
                journal.display()
            ),
        );
        let out = parbench().args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("--resume"), "{stderr}");
    }
    assert_eq!(lines(&journal), 2, "the refused runs wrote nothing");
    // Once the holder lets go, the journal resumes. It unlocks, as parbench's lock does when
    // dropped: closing the file alone leaves the lock held while a child that another test
    // thread is forking holds a copy of the descriptor, until that child execs (this test
    // failed so under load).
    holder.unlock().unwrap();
    drop(holder);
    parbench()
        .args(sweep(QUICK))
        .arg("--resume")
        .assert()
        .success();
    assert!(!dir.path().join("j.jsonl.lock").exists());
}
