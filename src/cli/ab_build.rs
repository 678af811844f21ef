//! How `ab` turns a side into an executable: a path as given, or a git revision of the
//! repository around the working directory.
//!
//! - The working tree's HEAD is not rebuilt when a current build of it exists: the running
//!   parbench or `target/release/parbench`, when its `--version` names HEAD's commit (without
//!   `-dirty`). Otherwise the working tree itself is built (`cargo build --release`,
//!   incremental).
//! - HEAD with uncommitted changes is refused, since its commit is not what would be measured,
//!   unless `--allow-dirty`: then the working tree is built as it is and measured, and a note
//!   says so.
//! - Any other revision is checked out in a detached worktree and built into one target folder
//!   all revisions share (`target/ab/target`: dependencies are built once, not per revision);
//!   its executable is copied out to `target/ab/<commit>/parbench`, which later runs reuse.
//!   Only the newest [`KEEP`] of those executables are kept.

use std::path::{Path, PathBuf};
use std::process::Command as Process;
use std::time::SystemTime;

use super::error::CliError;

/// Revisions' executables kept in `target/ab/` (by last use).
pub(super) const KEEP: usize = 5;

/// What the repository says about its working tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Tree {
    /// HEAD's full commit hash.
    pub head: String,
    /// Whether tracked files differ from HEAD.
    pub dirty: bool,
}

/// How a revision's executable is obtained.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Plan {
    /// A build of the working tree that is HEAD's commit already exists.
    Reuse(PathBuf),
    /// Built before, into `target/ab/<commit>/parbench`.
    Cached(PathBuf),
    /// Build the working tree in place; `dirty` when it has uncommitted changes (allowed).
    BuildTree { dirty: bool },
    /// Build the revision in a worktree of its own.
    BuildRevision,
}

/// The commit a parbench's `--version` line names: `parbench 0.1.0 (abc1234)` gives
/// `abc1234` (`abc1234-dirty` for a build of a changed tree).
pub(super) fn built_from(version: &str) -> Option<&str> {
    let open = version.rfind('(')?;
    let rest = &version[open + 1..];
    Some(rest[..rest.find(')')?].trim()).filter(|c| !c.is_empty())
}

/// How to get the executable of revision `sha`. `builds` are existing builds of the working
/// tree with the commit each names; `cached` is `target/ab/<sha>/parbench` if it exists.
pub(super) fn decide(
    rev: &str,
    sha: &str,
    tree: &Tree,
    allow_dirty: bool,
    builds: &[(PathBuf, String)],
    cached: Option<PathBuf>,
) -> Result<Plan, String> {
    if sha != tree.head {
        return Ok(cached.map_or(Plan::BuildRevision, Plan::Cached));
    }
    if tree.dirty {
        return if allow_dirty {
            Ok(Plan::BuildTree { dirty: true })
        } else {
            Err(format!(
                "{rev} is this checkout's HEAD ({}) and the working tree has uncommitted \
                 changes, which a build of the commit would not measure: commit or stash them, \
                 or pass --allow-dirty to measure the working tree as it is",
                &sha[..sha.len().min(10)]
            ))
        };
    }
    // A build that names a commit is reused when it is a clean build of the full hash `sha`.
    let clean_build_of_sha = |c: &str| c.len() >= 7 && !c.ends_with("-dirty") && sha.starts_with(c);
    if let Some((path, _)) = builds.iter().find(|(_, c)| clean_build_of_sha(c)) {
        return Ok(Plan::Reuse(path.clone()));
    }
    Ok(cached.map_or(Plan::BuildTree { dirty: false }, Plan::Cached))
}

/// The revisions' folders of `target/ab/` to remove: all but the `keep` most recently used,
/// never one of `in_use`.
pub(super) fn to_prune(
    mut dirs: Vec<(String, SystemTime)>,
    keep: usize,
    in_use: &[&str],
) -> Vec<String> {
    dirs.sort_by_key(|d| std::cmp::Reverse(d.1));
    dirs.into_iter()
        .skip(keep)
        .map(|(name, _)| name)
        .filter(|name| !in_use.contains(&name.as_str()))
        .collect()
}

/// A side as an executable (see the module's notes).
pub(super) fn resolve(spec: &Path, allow_dirty: bool) -> Result<PathBuf, CliError> {
    if spec.exists() {
        return Ok(spec.to_path_buf());
    }
    let rev = spec.to_string_lossy();
    let sha = git(&[
        "rev-parse",
        "--verify",
        "--quiet",
        &format!("{rev}^{{commit}}"),
    ])
    .map_err(|_| {
        CliError::Usage(format!(
            "{rev} is neither an executable nor a git revision of this repository"
        ))
    })?;
    let top = PathBuf::from(git(&["rev-parse", "--show-toplevel"])?);
    let tree = Tree {
        head: git(&["rev-parse", "HEAD"])?,
        dirty: !git(&["status", "--porcelain", "--untracked-files=no"])?.is_empty(),
    };
    let ab = top.join("target").join("ab");
    let bin = ab.join(&sha).join("parbench");
    let builds: Vec<(PathBuf, String)> = [
        std::env::current_exe().ok(),
        Some(top.join("target/release/parbench")),
    ]
    .into_iter()
    .flatten()
    .filter_map(|p| {
        // The build's `--version` line, if it runs.
        let out = Process::new(&p).arg("--version").output().ok()?;
        let version = String::from_utf8_lossy(&out.stdout);
        let commit = built_from(version.trim()).filter(|_| out.status.success())?;
        Some((p, commit.to_string()))
    })
    .collect();
    let cached = bin.exists().then(|| bin.clone());
    let plan = decide(&rev, &sha, &tree, allow_dirty, &builds, cached).map_err(CliError::Usage)?;
    let short = &sha[..sha.len().min(10)];
    let built = match plan {
        Plan::Reuse(path) => {
            note!(
                "ab: {rev} ({short}) is this checkout's HEAD: reusing {}",
                path.display()
            );
            return Ok(path);
        }
        Plan::Cached(path) => path,
        Plan::BuildTree { dirty } => {
            let out = if dirty {
                note!(
                    "ab: {rev} ({short}): measuring the working tree with its uncommitted \
                     changes (--allow-dirty), not the commit"
                );
                ab.join("worktree").join("parbench")
            } else {
                note!("ab: {rev} ({short}) is this checkout's HEAD: building the working tree");
                bin
            };
            cargo_build(&top, &top.join("target"), &rev)?;
            copy_out(&top.join("target/release/parbench"), &out)?;
            out
        }
        Plan::BuildRevision => {
            build_revision(&rev, &sha, &ab)?;
            bin
        }
    };
    // Touched, so pruning by last use keeps what was just used.
    let _ = std::fs::File::options()
        .append(true)
        .open(&built)
        .and_then(|f| f.set_modified(SystemTime::now()));
    prune(&ab, &sha);
    Ok(built)
}

/// Revision `sha` built in a detached worktree into the shared `target/ab/target`, its
/// executable copied to `target/ab/<sha>/parbench`.
fn build_revision(rev: &str, sha: &str, ab: &Path) -> Result<(), CliError> {
    let src = ab.join(format!("src-{sha}"));
    let _ = std::fs::remove_dir_all(&src);
    let _ = git(&["worktree", "prune"]);
    note!(
        "ab: building {rev} ({}) into {}",
        &sha[..sha.len().min(10)],
        ab.join(sha).display()
    );
    git(&[
        "worktree",
        "add",
        "--quiet",
        "--detach",
        &src.to_string_lossy(),
        sha,
    ])?;
    let target = ab.join("target");
    let built = cargo_build(&src, &target, rev).and_then(|()| {
        copy_out(
            &target.join("release/parbench"),
            &ab.join(sha).join("parbench"),
        )
    });
    // The worktree goes whether or not the build worked.
    let _ = git(&["worktree", "remove", "--force", &src.to_string_lossy()]);
    built
}

fn cargo_build(dir: &Path, target: &Path, rev: &str) -> Result<(), CliError> {
    let status = Process::new("cargo")
        .args(["build", "--release", "--quiet", "--manifest-path"])
        .arg(dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(target)
        .status()
        .map_err(|e| CliError::Usage(format!("cannot run cargo to build {rev}: {e}")))?;
    if !status.success() {
        return Err(CliError::Usage(format!(
            "cargo build of {rev} failed ({status})"
        )));
    }
    Ok(())
}

/// Copy a fresh build to where `ab` runs it from (so a later build does not change it).
fn copy_out(from: &Path, to: &Path) -> Result<(), CliError> {
    let fail = |e: std::io::Error| CliError::Usage(format!("cannot copy {}: {e}", from.display()));
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir).map_err(fail)?;
    }
    let partial = to.with_extension("partial");
    std::fs::copy(from, &partial).map_err(fail)?;
    std::fs::rename(&partial, to).map_err(fail)
}

/// Remove the revisions' folders beyond the newest [`KEEP`], and the per-revision target
/// folders an earlier layout left (each a full build, hundreds of MB).
fn prune(ab: &Path, in_use: &str) {
    let Ok(entries) = std::fs::read_dir(ab) else {
        return;
    };
    let mut dirs = Vec::new();
    for e in entries.filter_map(Result::ok) {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.len() != 40 || !name.bytes().all(|b| b.is_ascii_hexdigit()) {
            continue;
        }
        let _ = std::fs::remove_dir_all(e.path().join("target"));
        let used = std::fs::metadata(e.path().join("parbench"))
            .and_then(|m| m.modified())
            .unwrap_or(SystemTime::UNIX_EPOCH);
        dirs.push((name, used));
    }
    for name in to_prune(dirs, KEEP, &[in_use]) {
        let _ = std::fs::remove_dir_all(ab.join(name));
    }
}

/// `git args...`'s trimmed output, or why it failed (the revision the user named cannot be
/// checked out or built: exit 2).
fn git(args: &[&str]) -> Result<String, CliError> {
    let out = Process::new("git")
        .args(args)
        .output()
        .map_err(|e| CliError::Usage(format!("cannot run git: {e}")))?;
    if !out.status.success() {
        return Err(CliError::Usage(format!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const HEAD: &str = "0123456789abcdef0123456789abcdef01234567";
    const OTHER: &str = "fedcba9876543210fedcba9876543210fedcba98";

    fn tree(dirty: bool) -> Tree {
        Tree {
            head: HEAD.into(),
            dirty,
        }
    }

    #[test]
    fn the_version_line_names_the_commit() {
        assert_eq!(built_from("parbench 0.1.0 (0123456)"), Some("0123456"));
        assert_eq!(
            built_from("parbench 0.1.0 (0123456-dirty)"),
            Some("0123456-dirty")
        );
        assert_eq!(built_from("parbench 0.1.0"), None);
    }

    #[test]
    fn head_reuses_a_current_build_and_nothing_else() {
        let release = PathBuf::from("target/release/parbench");
        let current = [(release.clone(), "0123456".to_string())];
        assert_eq!(
            decide("HEAD", HEAD, &tree(false), false, &current, None),
            Ok(Plan::Reuse(release.clone()))
        );
        // A build of a changed tree, or of another commit, is not HEAD's.
        for commit in ["0123456-dirty", "fedcba9", "unknown"] {
            let stale = [(release.clone(), commit.to_string())];
            assert_eq!(
                decide("HEAD", HEAD, &tree(false), false, &stale, None),
                Ok(Plan::BuildTree { dirty: false })
            );
        }
        // Another revision is built apart, or taken from the cache.
        assert_eq!(
            decide("main", OTHER, &tree(true), false, &current, None),
            Ok(Plan::BuildRevision)
        );
        let cached = PathBuf::from("target/ab/x/parbench");
        let plan = decide(
            "main",
            OTHER,
            &tree(false),
            false,
            &[],
            Some(cached.clone()),
        );
        assert_eq!(plan, Ok(Plan::Cached(cached)));
    }

    #[test]
    fn a_dirty_head_is_refused_unless_allowed() {
        let current = [(PathBuf::from("p"), "0123456".to_string())];
        let refused = decide("HEAD", HEAD, &tree(true), false, &current, None).unwrap_err();
        assert!(refused.contains("--allow-dirty"), "{refused}");
        assert!(refused.contains("uncommitted"), "{refused}");
        assert_eq!(
            decide("HEAD", HEAD, &tree(true), true, &current, None),
            Ok(Plan::BuildTree { dirty: true })
        );
    }

    #[test]
    fn pruning_keeps_the_newest_and_those_in_use() {
        let at = |s: u64| SystemTime::UNIX_EPOCH + Duration::from_secs(s);
        let dirs: Vec<(String, SystemTime)> = (0..8).map(|i| (format!("r{i}"), at(i))).collect();
        let mut gone = to_prune(dirs.clone(), 5, &[]);
        gone.sort();
        assert_eq!(gone, ["r0", "r1", "r2"]);
        assert_eq!(to_prune(dirs, 5, &["r1"]).len(), 2);
        assert!(to_prune(vec![("a".into(), at(1))], 5, &[]).is_empty());
    }
}
