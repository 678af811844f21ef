//! Crash-safe replacement of a file's contents.
//!
//! Why: a report is written once, at the end of a long run. If the process is killed or the disk
//! fills part-way, a truncated JSON file that looks like a report is worse than none — and worse
//! than the previous report it clobbered. So the bytes go to a temporary file in the target's
//! directory (same filesystem, so `rename` is atomic), are fsynced, and the temporary file is
//! renamed over the target: a reader sees either the old file or the whole new one, never a mix.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Why [`write_atomic`] failed. `Display` is one line naming the target path and the reason,
/// e.g. `cannot write /nope/x.json: No such file or directory (os error 2)`.
///
/// The I/O error is part of the message rather than exposed as `source()`, so that printing an
/// error with its causes on one line (as the CLI does) does not repeat it; match on [`AtomicWriteError::Io`] to get
/// at the `io::Error` itself.
#[derive(Debug, thiserror::Error)]
pub enum AtomicWriteError {
    /// The OS refused an operation (creating, writing, syncing or renaming the file).
    #[error("cannot write {}: {reason}", path.display())]
    Io { path: PathBuf, reason: io::Error },
    /// The path cannot be written as a file: it is an existing directory (left untouched), or
    /// it names no file (it ends in `..` or is empty).
    #[error("cannot write {}: {reason}", path.display())]
    Refused { path: PathBuf, reason: &'static str },
}

/// Makes temporary names unique among the writes of this process (the pid separates processes).
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Replaces the contents of `path` with `bytes` atomically: via `.pb-{pid}-{counter}.tmp` in the
/// same directory, fsynced, then renamed over `path`. The temporary name does not contain the
/// target's, so a target whose name is at the file-name limit (255 bytes) is written too.
///
/// On failure the temporary file is removed and `path` is as it was (absent, or the old
/// contents). The directory must exist; it is not created. When `path` already is a file, the
/// new file takes over its permissions. If `path` is a symbolic link to a regular file, the
/// link itself is replaced by the new file. A special file (see [`writes_in_place`]) is
/// written in place instead, never replaced. After the rename the directory is fsynced too (on Unix, best
/// effort: some filesystems refuse to sync directories), so the new name survives a power loss.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), AtomicWriteError> {
    let refused = |reason| AtomicWriteError::Refused {
        path: path.to_path_buf(),
        reason,
    };
    if path.is_dir() {
        return Err(refused("it is a directory"));
    }
    let io = |reason| AtomicWriteError::Io {
        path: path.to_path_buf(),
        reason,
    };
    if writes_in_place(path) {
        return write_in_place(path, bytes).map_err(io);
    }
    if path.file_name().is_none() {
        return Err(refused("the path does not name a file"));
    }
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let counter = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    let temp = dir.join(format!(".pb-{}-{counter}.tmp", std::process::id()));

    replace_via_temp(&temp, path, bytes).map_err(io)?;
    // Persist the directory entry the rename created (best effort, see above).
    #[cfg(unix)]
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// True when `path` must be written in place rather than replaced: it exists and is not a
/// regular file (a device such as `/dev/null` or `/dev/full`, a FIFO, a socket, or a link to
/// one, like `/dev/stdout` on a pipe), or it names a file descriptor (`/dev/stdout`,
/// `/dev/fd/N`, `/proc/...`), which may lead to the regular file a shell redirected to.
/// Renaming over such a path would replace the special file or link itself with a regular
/// one, which as root destroys `/dev/null`. A regular file elsewhere, `/dev/shm` included, is
/// replaced atomically as usual.
pub fn writes_in_place(path: &Path) -> bool {
    let special = fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir());
    let descriptor = path.starts_with("/proc")
        || path.starts_with("/dev/fd")
        || ["/dev/stdout", "/dev/stderr", "/dev/stdin"]
            .iter()
            .any(|p| path == Path::new(p));
    special || (descriptor && path.exists())
}

/// Write `bytes` into an existing special file, as a shell redirect would: no temp file, no
/// rename, no fsync (a device or pipe has nothing to sync), never created or truncated. A full
/// device (`/dev/full`) or a closed pipe is an error like any other.
///
/// A descriptor path that leads to a regular file (`-o /dev/stdout > out.txt`) is opened for
/// appending: opening it starts a new offset at 0, and writing there would overwrite what the
/// process already wrote to that descriptor (the table).
fn write_in_place(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let regular = fs::metadata(path).is_ok_and(|m| m.is_file());
    let mut file = OpenOptions::new().write(true).append(regular).open(path)?;
    file.write_all(bytes)?;
    file.flush()
}

/// Creates `temp` (which must not exist), fills and syncs it, and renames it over `target`.
/// Once `temp` has been created, any failure removes it again.
fn replace_via_temp(temp: &Path, target: &Path, bytes: &[u8]) -> io::Result<()> {
    // create_new: never write through a stale file, or a link planted under the temp name.
    let file = OpenOptions::new().write(true).create_new(true).open(temp)?;
    let result = fill_and_rename(file, temp, target, bytes);
    if result.is_err() {
        // The original error is what matters; a failed cleanup cannot be reported better.
        let _ = fs::remove_file(temp);
    }
    result
}

fn fill_and_rename(mut file: File, temp: &Path, target: &Path, bytes: &[u8]) -> io::Result<()> {
    file.write_all(bytes)?;
    if let Some(meta) = fs::metadata(target).ok().filter(fs::Metadata::is_file) {
        file.set_permissions(meta.permissions())?;
    }
    file.sync_all()?;
    drop(file);
    fs::rename(temp, target)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(unix)]
    use std::os::unix::fs::PermissionsExt;

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn writes_a_new_file_and_leaves_no_temp() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("report.json");
        write_atomic(&path, b"{\"ok\": true}\n").expect("write");
        assert_eq!(fs::read(&path).expect("read"), b"{\"ok\": true}\n");
        assert_eq!(entries(dir.path()), ["report.json"]);
    }

    #[test]
    fn a_name_at_the_file_name_limit_is_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        for len in [243, 250, 255] {
            let path = dir.path().join(format!("{}.json", "r".repeat(len - 5)));
            write_atomic(&path, b"{}").expect("a name of up to 255 bytes is written");
            assert_eq!(fs::read(&path).expect("read"), b"{}");
        }
        assert_eq!(entries(dir.path()).len(), 3, "no temp file left");
    }

    #[test]
    fn overwrites_and_keeps_permissions() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("report.json");
        write_atomic(&path, b"old contents, longer than the new ones").expect("first write");
        #[cfg(unix)]
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).expect("chmod");
        write_atomic(&path, b"new").expect("second write");
        assert_eq!(fs::read(&path).expect("read"), b"new");
        assert_eq!(entries(dir.path()), ["report.json"]);
        #[cfg(unix)]
        assert_eq!(
            fs::metadata(&path).expect("stat").permissions().mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn missing_directory_is_an_error_and_creates_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("nope").join("x.json");
        let err = write_atomic(&path, b"data").expect_err("directory is missing");
        let AtomicWriteError::Io { reason, .. } = &err else {
            panic!("unexpected error {err:?}")
        };
        assert_eq!(reason.kind(), io::ErrorKind::NotFound);
        let msg = err.to_string();
        assert!(!msg.contains('\n'), "{msg}");
        #[cfg(target_os = "linux")]
        assert_eq!(
            msg,
            format!(
                "cannot write {}: No such file or directory (os error 2)",
                path.display()
            )
        );
        assert!(!path.exists());
        assert!(entries(dir.path()).is_empty());
    }

    #[test]
    fn directory_target_is_rejected_and_untouched() {
        let dir = tempfile::tempdir().expect("tempdir");
        let target = dir.path().join("out");
        fs::create_dir(&target).expect("mkdir");
        fs::write(target.join("keep"), b"k").expect("write");
        let err = write_atomic(&target, b"data").expect_err("is a directory");
        assert!(matches!(err, AtomicWriteError::Refused { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            format!("cannot write {}: it is a directory", target.display())
        );
        assert!(target.is_dir());
        assert_eq!(entries(&target), ["keep"]);
        assert_eq!(entries(dir.path()), ["out"]);
    }

    #[test]
    fn path_without_file_name_is_rejected() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("missing").join("..");
        let err = write_atomic(&path, b"data").expect_err("no file name");
        assert!(matches!(err, AtomicWriteError::Refused { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            format!(
                "cannot write {}: the path does not name a file",
                path.display()
            )
        );
        assert!(entries(dir.path()).is_empty());
    }

    #[test]
    fn failed_rename_removes_the_temp_file() {
        // A non-empty directory cannot be replaced by a file, so the rename itself fails after
        // the temp file was written and synced.
        let dir = tempfile::tempdir().expect("tempdir");
        let target = dir.path().join("busy");
        fs::create_dir(&target).expect("mkdir");
        fs::write(target.join("inside"), b"x").expect("write");
        let temp = dir.path().join(".busy.tmp.test");
        let err = replace_via_temp(&temp, &target, b"data").expect_err("rename fails");
        assert_ne!(err.kind(), io::ErrorKind::NotFound, "{err}");
        assert!(!temp.exists(), "temp file left behind");
        assert_eq!(entries(dir.path()), ["busy"]);
    }

    #[test]
    fn existing_temp_name_is_not_clobbered_or_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let temp = dir.path().join(".x.tmp.stale");
        fs::write(&temp, b"someone else's").expect("write");
        let err = replace_via_temp(&temp, &dir.path().join("x"), b"data").expect_err("exists");
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read(&temp).expect("read"), b"someone else's");
    }

    #[cfg(unix)]
    fn is_char_device(path: &Path) -> bool {
        use std::os::unix::fs::FileTypeExt;
        fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_char_device())
    }

    #[cfg(unix)]
    #[test]
    fn a_null_device_is_written_not_replaced() {
        let null = Path::new("/dev/null");
        assert!(
            is_char_device(null),
            "this test needs /dev/null as a character device"
        );
        write_atomic(null, b"report").expect("writing to /dev/null succeeds");
        assert!(is_char_device(null), "/dev/null was replaced");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_full_device_is_an_error_and_stays_a_device() {
        let full = Path::new("/dev/full");
        assert!(
            is_char_device(full),
            "this test needs /dev/full (every Linux system has it)"
        );
        let err = write_atomic(full, b"report").expect_err("/dev/full is always full");
        let AtomicWriteError::Io { reason, .. } = &err else {
            panic!("unexpected {err:?}")
        };
        assert_eq!(reason.raw_os_error(), Some(28), "{reason}"); // ENOSPC
        assert!(!err.to_string().contains('\n'));
        assert!(is_char_device(full), "/dev/full was replaced");
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_receives_the_bytes_and_survives() {
        use std::os::unix::fs::FileTypeExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("pipe");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(
            made.as_ref().is_ok_and(|s| s.success()),
            "this test needs mkfifo: {made:?}"
        );
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || fs::read(&fifo).expect("read the fifo"))
        };
        write_atomic(&fifo, b"through the pipe").expect("write the fifo");
        // Checked before joining: a replaced FIFO would leave the reader blocked forever.
        let kind = fs::symlink_metadata(&fifo).expect("stat").file_type();
        assert!(kind.is_fifo(), "the FIFO was replaced");
        assert_eq!(reader.join().expect("reader"), b"through the pipe");
        assert_eq!(entries(dir.path()), ["pipe"]);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_descriptor_path_to_a_regular_file_appends() {
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("out.txt");
        let mut file = File::create(&path).expect("create");
        file.write_all(b"table\n").expect("write");
        let through = PathBuf::from(format!("/dev/fd/{}", file.as_raw_fd()));
        assert!(
            through.exists(),
            "this test needs /dev/fd (every Linux system has it)"
        );
        write_atomic(&through, b"report\n").expect("write through the descriptor");
        assert_eq!(fs::read(&path).expect("read"), b"table\nreport\n");
        assert_eq!(entries(dir.path()), ["out.txt"]);
    }

    #[test]
    fn only_special_files_are_written_in_place() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("report.json");
        assert!(!writes_in_place(&file), "a new path");
        fs::write(&file, b"old").expect("write");
        assert!(!writes_in_place(&file), "a regular file");
        #[cfg(unix)]
        assert!(writes_in_place(Path::new("/dev/null")));
        #[cfg(target_os = "linux")]
        assert!(writes_in_place(Path::new("/dev/stdout")));
        // A regular file under /dev (a tmpfs like /dev/shm) is replaced atomically.
        let shm = Path::new("/dev/shm");
        if shm.is_dir() {
            let file = tempfile::NamedTempFile::new_in(shm).expect("a file in /dev/shm");
            assert!(!writes_in_place(file.path()));
        }
    }

    #[test]
    fn concurrent_writers_leave_one_complete_version() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("shared.json");
        let payload = |t: usize| vec![b'a' + t as u8; 64 * 1024 + t];
        std::thread::scope(|s| {
            for t in 0..8 {
                let path = &path;
                s.spawn(move || {
                    for _ in 0..10 {
                        write_atomic(path, &payload(t)).expect("write");
                    }
                });
            }
        });
        let got = fs::read(&path).expect("read");
        assert!((0..8).any(|t| got == payload(t)), "torn write");
        assert_eq!(entries(dir.path()), ["shared.json"]);
    }
}
