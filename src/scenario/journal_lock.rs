//! One writer per journal: a process that writes a journal holds an OS lock on the file beside
//! it (`<journal>.lock`, `flock` on Unix), which names the holder (pid, host, start time). A
//! second process on the same journal is refused with that name instead of measuring the same
//! points again. The OS drops the lock when the holder exits, however it exits, so a crashed
//! run leaves no stale lock: its file is locked again by the next run.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use super::sweep::{write_error, JournalError};
use crate::report::environment::{host, rfc3339_utc};

/// The lock on a journal, held until dropped (which removes the lock's file).
#[derive(Debug)]
pub struct JournalLock {
    file: File,
    path: PathBuf,
}

impl JournalLock {
    /// Lock `journal` for this process, or say who holds it.
    pub fn acquire(journal: &Path) -> Result<JournalLock, JournalError> {
        let path = lock_path(journal);
        let fail = write_error(&path);
        loop {
            let mut file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(fail)?;
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => {
                    let mut holder = String::new();
                    let _ = file.read_to_string(&mut holder);
                    let holder = match holder.trim() {
                        "" => "another process".to_string(),
                        named => named.to_string(),
                    };
                    return Err(JournalError::Locked {
                        path: journal.display().to_string(),
                        holder,
                    });
                }
                Err(TryLockError::Error(error)) => return Err(fail(error)),
            }
            // A holder that finished removed the file after this process opened it: the lock
            // on the removed file excludes no one, so lock the file now at the path.
            if !still_at(&file, &path) {
                continue;
            }
            let holder = format!(
                "parbench pid {} on {}, started {}",
                std::process::id(),
                host(),
                rfc3339_utc(std::time::SystemTime::now())
            );
            file.set_len(0)
                .and_then(|()| file.write_all(holder.as_bytes()))
                .and_then(|()| file.sync_data())
                .map_err(fail)?;
            return Ok(JournalLock { file, path });
        }
    }
}

impl Drop for JournalLock {
    /// The file goes first, then the lock (with the file handle): a process that opened the
    /// file before it went finds it removed once it gets the lock, and starts again.
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = self.file.unlock();
    }
}

/// The lock's file beside `journal`: `j.jsonl` → `j.jsonl.lock`.
pub fn lock_path(journal: &Path) -> PathBuf {
    let mut name = journal.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// Whether `file` is still the file at `path`.
#[cfg(unix)]
fn still_at(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn still_at(_file: &File, path: &Path) -> bool {
    path.exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_writer_is_refused_with_the_holders_name_until_the_first_is_done() {
        let dir = tempfile::tempdir().unwrap();
        let journal = dir.path().join("j.jsonl");
        let first = JournalLock::acquire(&journal).unwrap();
        let lock = dir.path().join("j.jsonl.lock");
        assert_eq!(lock_path(&journal), lock);
        let err = JournalLock::acquire(&journal).unwrap_err().to_string();
        let pid = std::process::id();
        assert!(
            err.starts_with(&format!(
                "journal {} is being written by parbench pid {pid} on ",
                journal.display()
            )),
            "{err}"
        );
        assert!(!err.contains("--resume"), "{err}");
        drop(first);
        assert!(!lock.exists(), "the lock's file goes with the lock");
        drop(JournalLock::acquire(&journal).unwrap());
        // A lock file left by a crash is taken over.
        // What a killed holder leaves: the file with its name, and no lock (the OS dropped it).
        std::fs::write(lock_path(&journal), "parbench pid 1 on gone, started then").unwrap();
        let lock = JournalLock::acquire(&journal).unwrap();
        let text = std::fs::read_to_string(lock_path(&journal)).unwrap();
        assert!(
            text.starts_with(&format!("parbench pid {} on ", std::process::id())),
            "{text}"
        );
        drop(lock);
    }
}
