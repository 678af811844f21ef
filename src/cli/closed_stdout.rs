//! Whether the process started with its standard output closed (`parbench devices --json >&-`).
//!
//! Rust's runtime reopens a closed standard descriptor on `/dev/null` before `main`, so that a
//! file opened later cannot take its number; what was printed would then vanish and the
//! command exit 0. The reopened descriptor is told apart from a shell's `> /dev/null` by its
//! access mode: the runtime opens `/dev/null` for reading and writing, a shell's `>` for writing
//! only (and `std::process::Stdio::null()` too).

/// True when standard output is the runtime's stand-in for a closed descriptor: `/dev/null`
/// open for reading and writing. (A shell's `1<> /dev/null` looks the same; nobody means it.)
#[cfg(target_os = "linux")]
pub(super) fn stdout_was_closed() -> bool {
    use std::os::fd::{AsFd, AsRawFd};
    use std::os::unix::fs::{FileTypeExt, MetadataExt};

    let out = std::io::stdout();
    // SAFETY: F_GETFL reads the flags of a descriptor number; it touches no memory.
    let flags = unsafe { libc::fcntl(out.as_raw_fd(), libc::F_GETFL) };
    if flags < 0 {
        return true;
    }
    if flags & libc::O_ACCMODE != libc::O_RDWR {
        return false;
    }
    let Ok(file) = out.as_fd().try_clone_to_owned().map(std::fs::File::from) else {
        return true;
    };
    match (file.metadata(), std::fs::metadata("/dev/null")) {
        (Ok(ours), Ok(null)) => ours.file_type().is_char_device() && ours.rdev() == null.rdev(),
        _ => false,
    }
}

/// Elsewhere a closed standard output is not detected.
#[cfg(not(target_os = "linux"))]
pub(super) fn stdout_was_closed() -> bool {
    false
}
