//! Where output goes: stdout that tolerates a reader that went away, output files (`-` is
//! stdout), and output paths checked before anything runs.

use std::path::{Path, PathBuf};

use super::args::CommonArgs;
use super::closed_stdout::stdout_was_closed;
use super::error::CliError;
use crate::report::write_atomic;

/// Write to stdout, in one piece. A reader that went away (`parbench all | head`) is not an
/// error: the rest of the output is dropped, and the run still finishes and writes its `-o`
/// file. A stdout that was closed when the process started, or that refuses the bytes (a full
/// device), is [`CliError::Stdout`]: the output would be lost.
pub(super) fn stdout(text: &str) -> Result<(), CliError> {
    use std::io::Write;
    if stdout_was_closed() {
        return Err(CliError::Stdout(std::io::Error::other("it is closed")));
    }
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(CliError::Stdout(e)),
        _ => Ok(()),
    }
}

/// The path `-o -` gives: standard output, not a file named `-`.
pub(super) fn is_stdout(path: &Path) -> bool {
    path == Path::new("-")
}

/// Write an output file (`-o`, `--html`, `--trace`): atomically (see
/// [`write_atomic`]), or to stdout in one piece when the path is `-`.
pub(super) fn write_output(path: &Path, text: &str) -> Result<(), CliError> {
    if is_stdout(path) {
        stdout(text)
    } else {
        Ok(write_atomic(path, text.as_bytes())?)
    }
}

/// How a note names an output: its path, or `standard output` for `-`.
pub(super) fn output_name(path: &Path) -> String {
    if is_stdout(path) {
        "standard output".to_string()
    } else {
        path.display().to_string()
    }
}

/// Whether the JSON report goes to stdout: `--json`, or `-o -` (the same document, written
/// once, in place of the table).
pub(super) fn json_on_stdout(common: &CommonArgs) -> bool {
    common.json || common.output.as_deref().is_some_and(is_stdout)
}

/// Check a run's output paths before it starts, and that at most one document goes to
/// stdout: the JSON report (`--json` or `-o -`), the HTML page (`--html -`) or the trace
/// (`--trace -`). Two on one stream could not be told apart by the program reading it.
pub(super) fn check_outputs(common: &CommonArgs) -> Result<(), CliError> {
    for out in [&common.output, &common.trace, &common.html]
        .into_iter()
        .flatten()
    {
        check_output_path(out)?;
    }
    let to_stdout = |path: &Option<PathBuf>| path.as_deref().is_some_and(is_stdout);
    let documents: Vec<&str> = [
        (json_on_stdout(common), "the JSON report (--json or -o -)"),
        (to_stdout(&common.html), "the HTML page (--html -)"),
        (to_stdout(&common.trace), "the trace (--trace -)"),
    ]
    .into_iter()
    .filter_map(|(on, what)| on.then_some(what))
    .collect();
    let (both, but) = match documents.len() {
        0 | 1 => return Ok(()),
        2 => ("both", "one of them"),
        _ => ("all", "all but one"),
    };
    Err(CliError::Usage(format!(
        "{} would {both} go to standard output: name a file for {but}",
        documents.join(" and ")
    )))
}

/// Refuse an output path that cannot be written, before spending minutes on the benchmark.
/// Missing directories are created (`-o results/today/run.json`), as `mkdir -p` would.
pub(super) fn check_output_path(path: &Path) -> Result<(), CliError> {
    let fail = |why: &str| CliError::Usage(format!("cannot write {}: {why}", path.display()));
    if is_stdout(path) {
        return Ok(());
    }
    if path.is_dir() {
        return Err(fail("it is a directory"));
    }
    if crate::report::atomic::writes_in_place(path) {
        // A device or pipe is written in place: nothing is created next to it, so there is
        // no directory to probe (and a FIFO cannot be opened without blocking for a reader).
        return Ok(());
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !dir.is_dir() {
        std::fs::create_dir_all(&dir)
            .map_err(|e| fail(&format!("cannot create its directory: {e}")))?;
    }
    let probe = dir.join(format!(".parbench-probe-{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .map_err(|e| fail(&e.to_string()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}
