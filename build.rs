//! Build script: records which compiler and which commit built the binary, so that every report
//! can say what produced it (exposed as `report::environment::{RUSTC, GIT_COMMIT}`).
//!
//! It uses only `std` and never fails the build: whatever it cannot find becomes "unknown".

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let root = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));

    // Cargo sets RUSTC to the compiler it builds this crate with.
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let rustc_version = output_line(Command::new(rustc).arg("--version"));
    println!(
        "cargo:rustc-env=PARBENCH_RUSTC={}",
        rustc_version.as_deref().unwrap_or("unknown")
    );

    let commit = git_commit(&root);
    println!(
        "cargo:rustc-env=PARBENCH_GIT_COMMIT={}",
        commit.as_deref().unwrap_or("unknown")
    );

    // Without any rerun-if-changed line cargo would rerun this script whenever any file of the
    // package changes; name exactly what the outputs depend on instead.
    println!("cargo:rerun-if-changed=build.rs");
    if let Some(git_dir) = git_dir(&root) {
        // HEAD moves on checkout, the branch ref on commit, the index on add/commit/reset. A
        // worktree's HEAD and index are in its own git dir, its branches in the common one.
        let common = std::fs::read_to_string(git_dir.join("commondir"))
            .map(|c| git_dir.join(c.trim()))
            .unwrap_or_else(|_| git_dir.clone());
        let mut watched = vec![git_dir.join("HEAD"), git_dir.join("index")];
        if let Some(branch_ref) = std::fs::read_to_string(git_dir.join("HEAD"))
            .ok()
            .and_then(|head| head.strip_prefix("ref:").map(|r| r.trim().to_string()))
        {
            watched.push(git_dir.join(&branch_ref));
            watched.push(common.join(&branch_ref));
            watched.push(common.join("packed-refs"));
        }
        for path in watched {
            if path.is_file() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
        // Editing a tracked file touches nothing under .git; watch the sources too so "-dirty"
        // appears on the build that first includes the edit (they are recompiled then anyway).
        for rel in ["src", "Cargo.toml"] {
            if root.join(rel).exists() {
                println!("cargo:rerun-if-changed={rel}");
            }
        }
    }
}

/// The checkout's git dir: `.git` itself, or where a worktree's `.git` file points
/// (`gitdir: /repo/.git/worktrees/name`).
fn git_dir(root: &Path) -> Option<PathBuf> {
    let dot = root.join(".git");
    if dot.is_dir() {
        return Some(dot);
    }
    let text = std::fs::read_to_string(&dot).ok()?;
    let dir = root.join(text.strip_prefix("gitdir:")?.trim());
    dir.is_dir().then_some(dir)
}

/// Short commit hash of the checkout at `root`, with "-dirty" when `git status --porcelain`
/// lists anything. `None` when `root` is not itself a git checkout (so a crate unpacked inside
/// some unrelated repository does not report that repository's commit) or git fails.
fn git_commit(root: &Path) -> Option<String> {
    if !root.join(".git").exists() {
        return None;
    }
    let hash = output_line(Command::new("git").arg("-C").arg(root).args([
        "rev-parse",
        "--short",
        "HEAD",
    ]))?;
    // --no-optional-locks: do not refresh .git/index as a side effect, which would make the
    // rerun-if-changed on the index fire again on the next build.
    let status = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["--no-optional-locks", "status", "--porcelain"])
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let dirty = !status.stdout.iter().all(u8::is_ascii_whitespace);
    Some(if dirty { format!("{hash}-dirty") } else { hash })
}

/// First line of the standard output of a command that succeeded, trimmed; `None` otherwise.
fn output_line(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok().filter(|o| o.status.success())?;
    let text = String::from_utf8(out.stdout).ok()?;
    let line = text.lines().next()?.trim();
    (!line.is_empty()).then(|| line.to_string())
}
