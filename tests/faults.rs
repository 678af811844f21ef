//! Faults a user can run into, through the binary: output onto special files and full disks,
//! a sweep killed mid-point, a torn journal, a closed stderr, a suite that is not UTF-8. Each
//! must end with a clear one-line error and the documented exit code, or succeed — never a
//! panic, an abort or a hang.
//!
//! What every Linux machine has (/dev/full, /dev/null, /dev/zero, the /dev/stdout link,
//! mkfifo) is asserted, not skipped: a test that passes has run. What needs root (mounting a
//! tmpfs) is `#[ignore]`d; run it as root with `cargo test --test suite faults:: -- --ignored`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::cargo_bin;
use serde_json::Value;

use crate::common::QUICK;

fn parbench() -> Command {
    let mut c = Command::new(cargo_bin("parbench"));
    c.env_remove("PARBENCH_ENGINE");
    c
}

/// Run to completion, killing it after `secs` (a hang fails the test instead of the suite).
fn run_with_deadline(mut cmd: Command, secs: u64) -> std::process::Output {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("parbench starts");
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let readers = (
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = out.read_to_end(&mut v);
            v
        }),
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = err.read_to_end(&mut v);
            v
        }),
    );
    let status = wait_or_kill(&mut child, deadline, "parbench did not finish in time");
    std::process::Output {
        status,
        stdout: readers.0.join().expect("stdout reader"),
        stderr: readers.1.join().expect("stderr reader"),
    }
}

/// Wait for `child`; past `deadline`, kill it and fail with `why`.
fn wait_or_kill(
    child: &mut std::process::Child,
    deadline: Instant,
    why: &str,
) -> std::process::ExitStatus {
    loop {
        if let Some(s) = child.try_wait().expect("wait") {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("{why}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn assert_no_panic(out: &std::process::Output) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// Exit `code`, exactly one line on stderr starting with `error: ` and containing `needle`.
fn assert_one_line_error(out: &std::process::Output, code: i32, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "stderr: {stderr}");
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "one line expected: {stderr}"
    );
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(stderr.contains(needle), "expected '{needle}' in: {stderr}");
    assert_no_panic(out);
}

#[cfg(unix)]
fn file_type(path: &Path) -> Option<std::fs::FileType> {
    std::fs::symlink_metadata(path).ok().map(|m| m.file_type())
}

#[cfg(unix)]
fn is_char_device(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    file_type(path).is_some_and(|t| t.is_char_device())
}

/// `path`, a character device every Linux machine has (/dev/full, /dev/null, /dev/zero). The
/// test fails, not skips, where it is missing.
#[cfg(unix)]
fn char_device(path: &str) -> &Path {
    let device = Path::new(path);
    assert!(
        is_char_device(device),
        "{path} is not a character device here: this test needs it (every Linux machine has it)"
    );
    device
}

/// /dev/stdout, asserted to be the link every Linux machine has (to /proc/self/fd/1).
#[cfg(target_os = "linux")]
fn dev_stdout() -> &'static Path {
    let stdout = Path::new("/dev/stdout");
    assert!(
        file_type(stdout).is_some_and(|t| t.is_symlink()),
        "/dev/stdout is not a link here: this test needs it (every Linux machine has it)"
    );
    stdout
}

fn async_quick(output: &Path) -> Command {
    let mut c = parbench();
    c.args(["async", "--iterations", "100", "--product-size", "64"])
        .args(QUICK)
        .arg("-o")
        .arg(output);
    c
}

#[cfg(target_os = "linux")]
#[test]
fn output_onto_a_full_device_is_a_one_line_error_and_the_device_survives() {
    let full = char_device("/dev/full");
    let out = run_with_deadline(async_quick(full), 120);
    assert_one_line_error(&out, 2, "cannot write /dev/full");
    assert!(String::from_utf8_lossy(&out.stderr).contains("No space left on device"));
    assert!(
        is_char_device(full),
        "/dev/full was replaced by a regular file"
    );
}

#[cfg(unix)]
#[test]
fn output_onto_the_null_device_succeeds_and_the_device_survives() {
    let null = char_device("/dev/null");
    let out = run_with_deadline(async_quick(null), 120);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_no_panic(&out);
    assert!(
        is_char_device(null),
        "/dev/null was replaced by a regular file"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn output_onto_dev_stdout_writes_through_and_leaves_the_link() {
    let stdout = dev_stdout();
    let out = run_with_deadline(async_quick(stdout), 120);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The table, then the report written through the pipe that is this child's stdout.
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\"schema\": \"parbench/1\""), "{text}");
    assert!(
        file_type(stdout).is_some_and(|t| t.is_symlink()),
        "/dev/stdout was replaced"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn output_onto_dev_stdout_redirected_to_a_file_follows_the_table() {
    // `parbench async -o /dev/stdout > out.txt`: opening /dev/stdout opens out.txt afresh at
    // offset 0, so the report must be appended, not written over the table before it.
    let stdout = dev_stdout();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("out.txt");
    let file = std::fs::File::create(&path).expect("create");
    let mut cmd = async_quick(stdout);
    let mut child = cmd
        .stdout(Stdio::from(file))
        .stderr(Stdio::null())
        .spawn()
        .expect("parbench starts");
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = wait_or_kill(&mut child, deadline, "parbench did not finish in time");
    assert_eq!(status.code(), Some(0));
    let text = std::fs::read_to_string(&path).expect("read");
    assert!(
        text.starts_with("parbench "),
        "the table was overwritten: {text}"
    );
    let json_at = text
        .find("{\n  \"schema\"")
        .expect("the report follows the table");
    assert!(text[..json_at].contains("== async"), "{text}");
    let doc: Value = serde_json::from_str(&text[json_at..]).expect("one whole report");
    assert_eq!(doc["runs"][0]["scenario"], "async");
    assert!(file_type(stdout).is_some_and(|t| t.is_symlink()));
}

#[cfg(unix)]
#[test]
fn output_onto_a_fifo_reaches_the_reader_and_the_fifo_survives() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("report.pipe");
    let made = Command::new("mkfifo").arg(&fifo).status();
    assert!(
        made.as_ref().is_ok_and(|s| s.success()),
        "mkfifo {}: {made:?}: this test needs it (every Linux machine has it)",
        fifo.display()
    );
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(&fifo).expect("read the fifo"))
    };
    let out = run_with_deadline(async_quick(&fifo), 120);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(file_type(&fifo).is_some_and(|t| {
        use std::os::unix::fs::FileTypeExt;
        t.is_fifo()
    }));
    let doc: Value = serde_json::from_slice(&reader.join().expect("reader")).expect("JSON");
    assert_eq!(doc["runs"][0]["scenario"], "async");
}

/// A tiny tmpfs, unmounted when dropped (even when the test fails).
struct SmallFs(PathBuf);

impl SmallFs {
    /// Mount it on `dir`, or say why not (mount's own message: not root, or no permission to
    /// mount in this container).
    fn mount(dir: &Path, size: &str) -> Result<SmallFs, String> {
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(SmallFs(dir.to_path_buf()))
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[cfg(target_os = "linux")]
#[test]
#[ignore = "needs root (mounts a 64 KiB tmpfs): cargo test --test suite faults:: -- --ignored"]
fn output_into_a_full_filesystem_leaves_no_partial_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = SmallFs::mount(dir.path(), "64k").unwrap_or_else(|why| {
        panic!("this test needs root and permission to mount a tmpfs: {why}")
    });
    // Fill it, leaving less room than a report needs.
    let filler = fs.0.join("filler");
    let mut f = std::fs::File::create(&filler).expect("filler");
    let block = vec![0u8; 4096];
    while std::io::Write::write_all(&mut f, &block).is_ok() {}
    drop(f);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&filler)
        .expect("reopen the filler");
    let len = f.metadata().expect("the filler's size").len();
    assert!(
        len > 0 && len <= 64 * 1024,
        "the filler ({len} bytes) did not fill the 64 KiB tmpfs"
    );
    // Leave a little room, so the pre-run probe passes and the report write fails.
    f.set_len(len.saturating_sub(2048))
        .expect("shrink the filler");
    std::io::Write::flush(&mut f).expect("flush the filler");
    drop(f);
    let target = fs.0.join("report.json");
    let out = run_with_deadline(async_quick(&target), 120);
    assert_one_line_error(&out, 2, "No space left on device");
    let mut left: Vec<String> = std::fs::read_dir(&fs.0)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["filler"], "a partial report or temp file was left");
}

/// Five points of a few hundred milliseconds each: slow enough to be killed in the middle.
const SWEEP: &[&str] = &[
    "sweep",
    "matmul",
    "--set",
    "size=600:1400:200",
    "--set",
    "ops=3",
];

/// `parbench <sweep> --resume journal -o report`, which must succeed without a panic.
fn resume_sweep(sweep: &[&str], journal: &Path, report: &Path, secs: u64) {
    let mut resume = parbench();
    resume
        .args(sweep)
        .args(QUICK)
        .arg("--resume")
        .arg(journal)
        .arg("-o")
        .arg(report);
    let out = run_with_deadline(resume, secs);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_no_panic(&out);
}

fn journal_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Where a finished sweep keeps a journal named with `--journal`: `s.jsonl` → `s.done.jsonl`.
fn done(journal: &Path) -> std::path::PathBuf {
    journal.with_extension("done.jsonl")
}

/// A finished sweep's journal put back where an unfinished one would be, to tear it.
fn unfinish(journal: &Path) {
    std::fs::rename(done(journal), journal).expect("a finished journal");
}

fn sizes_in(report: &Path) -> Vec<u64> {
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(report).expect("report")).expect("JSON");
    doc["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| r["parameters"]["size"].as_u64().expect("size"))
        .collect()
}

#[cfg(unix)]
#[test]
fn a_sweep_killed_mid_point_resumes_without_losing_or_repeating_a_point() {
    let dir = tempfile::tempdir().expect("tempdir");
    let journal = dir.path().join("sweep.jsonl");
    let report = dir.path().join("sweep.json");
    let mut child = parbench()
        .args(SWEEP)
        // The resume's sampling (QUICK): a resume under other sampling is refused.
        .args(QUICK)
        .arg("--journal")
        .arg(&journal)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sweep starts");
    // Kill it (SIGKILL: no cleanup of any kind) once a point is in the journal (after its
    // header), mid-way.
    let deadline = Instant::now() + Duration::from_secs(120);
    while journal_lines(&journal).len() < 2 {
        assert!(
            child.try_wait().expect("wait").is_none(),
            "the sweep ended before it could be killed"
        );
        assert!(
            Instant::now() < deadline,
            "the sweep wrote no point in 120 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        child.try_wait().expect("wait").is_none(),
        "finished before the kill"
    );
    let _ = child.kill();
    let _ = child.wait();
    let before = journal_lines(&journal);
    assert!(!before.is_empty());
    resume_sweep(SWEEP, &journal, &report, 300);
    assert_eq!(
        sizes_in(&report),
        [600, 800, 1000, 1200, 1400],
        "every point exactly once"
    );
    let after = journal_lines(&done(&journal));
    assert_eq!(
        after.len(),
        6,
        "a header and 5 points: a point was run twice or lost"
    );
    // The points finished before the kill were kept as they were, not run again.
    let kept = before
        .iter()
        .filter(|l| serde_json::from_str::<Value>(l).is_ok())
        .count();
    assert_eq!(after[..kept], before[..kept]);
}

#[test]
fn a_journal_with_a_torn_last_line_resumes_and_reruns_only_that_point() {
    let dir = tempfile::tempdir().expect("tempdir");
    let journal = dir.path().join("sweep.jsonl");
    let report = dir.path().join("sweep.json");
    let small = [
        "sweep",
        "matmul",
        "--set",
        "size=16,32,48",
        "--set",
        "ops=1",
    ];
    // A complete journal, then its last line cut in half, as a kill during a write leaves it.
    let mut first = parbench();
    first.args(small).args(QUICK).arg("--journal").arg(&journal);
    let out = run_with_deadline(first, 120);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    unfinish(&journal);
    let lines = journal_lines(&journal);
    assert_eq!(lines.len(), 4, "a header and 3 points");
    // Cut in bytes, as a kill does: the cut may fall inside a character (the records quote
    // the book's sections, `§8.3.1`), leaving the last line invalid UTF-8 as well as JSON.
    let mut torn = format!("{}\n{}\n{}\n", lines[0], lines[1], lines[2]).into_bytes();
    torn.extend_from_slice(&lines[3].as_bytes()[..lines[3].len() / 2]);
    std::fs::write(&journal, torn).expect("tear the journal");
    resume_sweep(&small, &journal, &report, 120);
    assert_eq!(sizes_in(&report), [16, 32, 48]);
    let after = journal_lines(&done(&journal));
    assert_eq!(after.len(), 4, "{after:?}");
    assert_eq!(after[..3], lines[..3], "finished points were run again");
}

/// A small sweep of three quick points.
const SMALL_SWEEP: &[&str] = &[
    "sweep",
    "matmul",
    "--set",
    "size=16,32,48",
    "--set",
    "ops=1",
];

#[test]
fn a_journal_torn_inside_a_character_resumes_and_reruns_only_that_point() {
    // Records hold non-ASCII text (`×`, `µ`): a kill can cut a line inside a character,
    // leaving bytes that are not UTF-8. That must read as a torn line, not a broken journal.
    let dir = tempfile::tempdir().expect("tempdir");
    let journal = dir.path().join("sweep.jsonl");
    let report = dir.path().join("sweep.json");
    let mut first = parbench();
    first
        .args(SMALL_SWEEP)
        .args(QUICK)
        .arg("--journal")
        .arg(&journal);
    let out = run_with_deadline(first, 120);
    assert_eq!(out.status.code(), Some(0));
    unfinish(&journal);
    let bytes = std::fs::read(&journal).expect("journal");
    let last_start = bytes[..bytes.len() - 1]
        .iter()
        .rposition(|&b| b == b'\n')
        .expect("three lines")
        + 1;
    // Every matmul record has a `×`: its variant label is "OPS × (M×K · K×N) on DEVICE".
    let times = "×".as_bytes();
    let multi = bytes[last_start..]
        .windows(times.len())
        .position(|w| w == times)
        .expect("the last record has its label's '×' to cut");
    // Keep the first byte of that character only.
    std::fs::write(&journal, &bytes[..last_start + multi + 1]).expect("tear");
    resume_sweep(SMALL_SWEEP, &journal, &report, 120);
    assert_eq!(sizes_in(&report), [16, 32, 48]);
    let after = std::fs::read(done(&journal)).expect("journal");
    assert_eq!(
        after[..last_start],
        bytes[..last_start],
        "finished points changed"
    );
    assert_eq!(journal_lines(&done(&journal)).len(), 4);
}

#[cfg(target_os = "linux")]
#[test]
fn a_journal_on_a_full_device_is_a_one_line_error_without_a_hang() {
    // Reading /dev/full never ends: the journal must not be read back to check for a torn
    // line. The first append fails, and says which file.
    let full = char_device("/dev/full");
    let mut c = parbench();
    c.args(SMALL_SWEEP).args(QUICK).arg("--journal").arg(full);
    let out = run_with_deadline(c, 120);
    assert_one_line_error(&out, 2, "cannot write journal /dev/full");
    assert!(is_char_device(full));
}

#[cfg(unix)]
#[test]
fn a_journal_on_the_null_device_is_allowed() {
    // `--journal /dev/null`: no journal wanted. It exists, but it is not a journal to resume.
    let null = char_device("/dev/null");
    let mut c = parbench();
    c.args(SMALL_SWEEP).args(QUICK).arg("--journal").arg(null);
    let out = run_with_deadline(c, 120);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(is_char_device(null));
}

#[cfg(unix)]
#[test]
fn resuming_from_a_device_is_a_one_line_error_without_a_hang() {
    // /dev/zero is one endless line: reading it as a journal ran out of memory (SIGABRT).
    let zero = char_device("/dev/zero");
    let mut c = parbench();
    c.args(SMALL_SWEEP).args(QUICK).arg("--resume").arg(zero);
    let out = run_with_deadline(c, 60);
    assert_one_line_error(&out, 2, "/dev/zero");
    assert!(out.stdout.is_empty());
}

#[cfg(unix)]
#[test]
fn a_sweep_report_on_a_device_keeps_its_journal_out_of_dev() {
    // The default journal is the -o file with .jsonl; for `-o /dev/null` that was
    // /dev/null.jsonl, a stray file in /dev (as root) or a refused run. It goes to the
    // working directory instead, as without -o.
    let null = char_device("/dev/null");
    let stray = Path::new("/dev/null.jsonl");
    // One left by an older parbench (or made by hand) stays, and must stay as it is.
    let stray_state = || {
        std::fs::symlink_metadata(stray)
            .ok()
            .map(|m| (m.file_type(), m.len(), m.modified().ok()))
    };
    let before = stray_state();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = parbench();
    c.current_dir(dir.path())
        .args(SMALL_SWEEP)
        .args(QUICK)
        .arg("-o")
        .arg(null);
    let out = run_with_deadline(c, 120);
    let after = stray_state();
    if before.is_none() && after.is_some() {
        let _ = std::fs::remove_file(stray);
    }
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(after, before, "the journal went to /dev/null.jsonl");
    assert!(is_char_device(null));
    // The journal went to the working directory, and was removed once the report was written.
    let left: Vec<_> = std::fs::read_dir(dir.path()).expect("list").collect();
    assert!(left.is_empty(), "{left:?}");
}

#[cfg(unix)]
#[test]
fn placement_logging_into_a_closed_pipe_neither_aborts_nor_hangs() {
    // stderr is a pipe whose reader has gone: every placement line fails to write.
    let mut child = parbench()
        .args([
            "async",
            "--iterations",
            "2000",
            "--product-size",
            "64",
            "--log-placement",
        ])
        .args(["--warmup", "0", "--min-samples", "3", "--max-samples", "3"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("parbench starts");
    drop(child.stderr.take());
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = wait_or_kill(&mut child, deadline, "parbench hung with its stderr closed");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), None, "killed by a signal: {status:?}");
    assert_eq!(status.code(), Some(0), "{status:?}");
}

#[test]
fn a_suite_that_is_not_utf8_is_a_one_line_usage_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let suite = dir.path().join("bad.toml");
    std::fs::write(&suite, b"[[run]]\nscenario = \"async\xff\"\n").expect("write");
    let mut c = parbench();
    c.arg("run").arg(&suite);
    let out = run_with_deadline(c, 60);
    assert_one_line_error(&out, 2, "bad.toml");
    assert!(out.stdout.is_empty());
}

#[cfg(unix)]
#[test]
fn a_suite_that_never_ends_is_a_one_line_usage_error() {
    // /dev/zero is valid UTF-8 (NUL bytes) and endless: reading it whole ran out of memory.
    let zero = char_device("/dev/zero");
    let mut c = parbench();
    c.arg("run").arg(zero);
    let out = run_with_deadline(c, 60);
    assert_one_line_error(&out, 2, "cannot read /dev/zero: larger than");
    assert!(out.stdout.is_empty());
}

#[cfg(unix)]
#[test]
fn a_closed_stderr_changes_no_exit_code() {
    // stderr a pipe whose reader has gone: the "wrote FILE" note and the one-line error cannot
    // be shown, but must not panic (exit 101) either.
    let dir = tempfile::tempdir().expect("tempdir");
    let report = dir.path().join("r.json");
    let success: &[&str] = &[
        "async",
        "--iterations",
        "100",
        "--product-size",
        "64",
        "--warmup",
        "0",
    ];
    let cases: [(Vec<&str>, i32); 2] = [
        (
            [success, &["--min-samples", "3", "--max-samples", "3", "-o"]].concat(),
            0,
        ),
        (vec!["async", "--no-such-option"], 2),
    ];
    for (args, code) in cases {
        let mut cmd = parbench();
        cmd.args(&args);
        if code == 0 {
            cmd.arg(&report);
        }
        let mut child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("parbench starts");
        drop(child.stderr.take());
        let deadline = Instant::now() + Duration::from_secs(120);
        let status = wait_or_kill(&mut child, deadline, "parbench hung with its stderr closed");
        assert_eq!(status.code(), Some(code), "{args:?}: {status:?}");
    }
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("report")).expect("JSON");
    assert_eq!(doc["runs"][0]["scenario"], "async");
}

/// Wait until `journal` holds its header and a first finished run, then send `signal` to
/// `child` and collect it.
#[cfg(unix)]
fn signal_after_first_run(
    child: std::process::Child,
    journal: &Path,
    signal: &str,
) -> std::process::Output {
    let deadline = Instant::now() + Duration::from_secs(120);
    while journal_lines(journal).len() < 2 {
        assert!(Instant::now() < deadline, "no first run in 120 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    let kill = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(kill.success());
    child.wait_with_output().expect("wait")
}

/// The first run is quick, the second takes minutes: a signal always lands in the second.
#[cfg(unix)]
fn quick_then_slow_suite(dir: &Path) -> PathBuf {
    let suite = dir.join("s.toml");
    std::fs::write(
        &suite,
        "[[run]]\nscenario = \"matmul\"\nparams = { size = 16, ops = 1 }\n\n\
         [[run]]\nscenario = \"matmul\"\nparams = { size = 6000, ops = 50 }\n",
    )
    .expect("suite");
    suite
}

#[cfg(unix)]
#[test]
fn sigterm_during_a_suite_keeps_the_finished_runs_and_says_how_to_resume() {
    let dir = tempfile::tempdir().expect("tempdir");
    let suite = quick_then_slow_suite(dir.path());
    let report = dir.path().join("r.json");
    let journal = dir.path().join("r.jsonl");
    let child = parbench()
        .arg("run")
        .arg(&suite)
        .args([
            "--warmup",
            "0",
            "--min-samples",
            "1",
            "--max-samples",
            "1",
            "--quiet",
        ])
        .arg("-o")
        .arg(&report)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("suite starts");
    let out = signal_after_first_run(child, &journal, "-TERM");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(143), "{stderr}");
    assert!(
        stderr.contains(&format!("'parbench run {} --resume'", suite.display())),
        "{stderr}"
    );
    assert_no_panic(&out);
    // The finished run is in the journal and in the report, which says what is missing.
    assert_eq!(journal_lines(&journal).len(), 2);
    assert_eq!(sizes_in(&report), [16]);
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("report")).expect("JSON");
    let notes = doc["runs"][0]["notes"].to_string();
    assert!(
        notes.contains("interrupted by SIGTERM after this run: 1 run(s) missing (matmul"),
        "{notes}"
    );
}

#[cfg(unix)]
#[test]
fn sigterm_during_a_sweep_says_how_to_resume() {
    let dir = tempfile::tempdir().expect("tempdir");
    let journal = dir.path().join("j.jsonl");
    let child = parbench()
        .args([
            "sweep",
            "matmul",
            "--set",
            "size=16,6000",
            "--set",
            "ops=50",
            "--quiet",
        ])
        .args(["--warmup", "0", "--min-samples", "1", "--max-samples", "1"])
        .arg("--journal")
        .arg(&journal)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sweep starts");
    let out = signal_after_first_run(child, &journal, "-TERM");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(143), "{stderr}");
    assert!(
        stderr.contains(&format!("--resume {}", journal.display())),
        "{stderr}"
    );
    assert_eq!(journal_lines(&journal).len(), 2);
}
