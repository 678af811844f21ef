//! Where output goes: stdout that tolerates a closed pipe, and output paths checked before anything runs.

use std::path::{Path, PathBuf};

use super::error::CliError;

/// Write to stdout. A reader that went away (`parbench all | head`) is not an error: the
/// rest of the output is dropped, and the run still finishes and writes its `-o` file.
pub(super) fn stdout(text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e),
        _ => Ok(()),
    }
}

/// Refuse an output path that cannot be written, before spending minutes on the benchmark.
/// Missing directories are created (`-o results/today/run.json`), as `mkdir -p` would.
pub(super) fn check_output_path(path: &Path) -> Result<(), CliError> {
    let fail = |why: &str| CliError::Usage(format!("cannot write {}: {why}", path.display()));
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
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(fail(&e.to_string())),
    }
}
