//! Finding the CUDA libraries of either major version (12 or 13), and saying where they came
//! from.
//!
//! cudarc opens its libraries by file name (`libcublas.so.13`, `libcublas.so.12`, ...), which
//! only finds what the dynamic loader's path holds. A machine may hold them elsewhere: a CUDA
//! toolkit outside `ld.so.conf`, or the `nvidia-*` Python wheels PyTorch ships. So before
//! cudarc's first call, [`preload`] looks in the usual places and opens what it finds by full
//! path; the loader then hands that same library to cudarc's open by name (it matches loaded
//! libraries by their SONAME). What was loaded, and from where, is read back from
//! `/proc/self/maps` for `parbench devices`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// A CUDA library: what reports call it, and the file names (SONAMEs) parbench accepts, newest
/// major version first.
pub struct CudaLib {
    pub name: &'static str,
    pub sonames: &'static [&'static str],
    /// The file-name prefix shared by every version (to recognize one of another version).
    pub prefix: &'static str,
}

/// cuBLASLt, which cuBLAS needs: opened first so cuBLAS finds it by name.
pub const CUBLAS_LT: CudaLib = CudaLib {
    name: "cuBLASLt",
    sonames: &["libcublasLt.so.13", "libcublasLt.so.12"],
    prefix: "libcublasLt.so",
};

pub const CUBLAS: CudaLib = CudaLib {
    name: "cuBLAS",
    sonames: &["libcublas.so.13", "libcublas.so.12"],
    prefix: "libcublas.so",
};

/// cuRAND keeps SONAME `libcurand.so.10` across CUDA 11, 12 and 13.
pub const CURAND: CudaLib = CudaLib {
    name: "cuRAND",
    sonames: &["libcurand.so.10"],
    prefix: "libcurand.so",
};

/// NCCL: SONAME `libnccl.so.2` across NCCL 2.x, for CUDA 12 and 13 alike. pip's wheels
/// (`nvidia-nccl-cu13`, `nvidia-nccl-cu12`, what PyTorch installs) put it in
/// `site-packages/nvidia/nccl/lib`, which [`search_dirs`] covers.
pub const NCCL: CudaLib = CudaLib {
    name: "NCCL",
    sonames: &["libnccl.so.2"],
    prefix: "libnccl.so",
};

/// Where CUDA libraries live when they are not on the loader's path, most specific first.
pub fn search_dirs() -> Vec<PathBuf> {
    search_dirs_with(|var| std::env::var_os(var))
}

/// [`search_dirs`] with the environment read through `env`.
fn search_dirs_with(env: impl Fn(&str) -> Option<OsString>) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(path) = env("LD_LIBRARY_PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(root) = env(var) {
            let root = PathBuf::from(root);
            dirs.push(root.join("lib64"));
            dirs.push(root.join("lib"));
        }
    }
    dirs.push(PathBuf::from("/usr/local/cuda/lib64"));
    // /usr/local/cuda-13.0, cuda-12.6, ...: newest first.
    let mut versioned = subdirs(Path::new("/usr/local"), |n| n.starts_with("cuda-"));
    versioned.sort();
    versioned.reverse();
    dirs.extend(versioned.into_iter().map(|d| d.join("lib64")));
    // pip's nvidia-* wheels (PyTorch's CUDA libraries): <prefix>/lib/python3.X/
    // site-packages/nvidia/<lib>/lib, for the system's, a venv's, conda's and pyenv's Pythons.
    let mut prefixes: Vec<PathBuf> = ["/usr", "/usr/local", "/opt/conda"]
        .map(PathBuf::from)
        .into();
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        prefixes.extend(env(var).map(PathBuf::from));
    }
    // A venv whose bin/ is on PATH but was never activated (no VIRTUAL_ENV): what a machine
    // that installed PyTorch's cu13 wheels into /root/venv and put /root/venv/bin first has.
    // Every `<prefix>/bin` on PATH names its prefix; one without a `lib/python3*` tree adds
    // nothing below.
    if let Some(path) = env("PATH") {
        prefixes.extend(
            std::env::split_paths(&path)
                .filter(|d| d.file_name().is_some_and(|n| n == "bin"))
                .filter_map(|d| d.parent().map(Path::to_path_buf)),
        );
    }
    if let Some(home) = env("HOME").map(PathBuf::from) {
        prefixes.push(home.join(".local"));
        prefixes.extend(subdirs(&home.join(".pyenv/versions"), |_| true));
    }
    let mut seen = std::collections::HashSet::new();
    prefixes.retain(|p| seen.insert(p.clone()));
    for root in prefixes.iter().map(|p| p.join("lib")) {
        for python in subdirs(&root, |n| n.starts_with("python3")) {
            for packages in ["site-packages", "dist-packages"] {
                let nvidia = python.join(packages).join("nvidia");
                dirs.extend(
                    subdirs(&nvidia, |_| true)
                        .into_iter()
                        .map(|d| d.join("lib")),
                );
            }
        }
    }
    dirs.extend(
        [
            "/usr/lib/x86_64-linux-gnu",
            "/usr/lib64",
            "/usr/lib",
            "/opt/conda/lib",
        ]
        .map(PathBuf::from),
    );
    dirs
}

fn subdirs(dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(&keep))
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect()
}

/// The first accepted version of `lib` in `dirs`: newest major first, then the first
/// directory that has it.
pub fn find(lib: &CudaLib, dirs: &[PathBuf]) -> Option<PathBuf> {
    lib.sonames
        .iter()
        .find_map(|soname| dirs.iter().map(|d| d.join(soname)).find(|p| p.exists()))
}

/// Versions of `lib` found in `dirs` that parbench does not accept (`libcublas.so.11`), for a
/// message that says "found, but the wrong version" rather than "missing".
pub fn other_versions(lib: &CudaLib, dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let major = name
                .strip_prefix(lib.prefix)
                .and_then(|r| r.strip_prefix('.'));
            // Only `prefix.N` itself: not `libcublasLt.so` for cuBLAS, not `.so.12.6.1`.
            if major.is_some_and(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()))
                && !lib.sonames.contains(&name.as_str())
            {
                found.push(e.path());
            }
        }
    }
    found
}

/// Why `lib` cannot be used, in one line: a wrong version found, or where it was looked for.
pub fn missing_reason(lib: &CudaLib, dirs: &[PathBuf]) -> String {
    let wanted = lib.sonames.join(" or ");
    let others = other_versions(lib, dirs);
    if let Some(other) = others.first() {
        return format!(
            "{} {} was found, but parbench needs {wanted}",
            lib.name,
            other.display()
        );
    }
    format!(
        "{} ({wanted}) is neither on the loader path nor in {} other places searched \
         (LD_LIBRARY_PATH, CUDA_HOME, /usr/local/cuda*, pip's nvidia-* wheels, a venv's on PATH among them); add its directory to LD_LIBRARY_PATH",
        lib.name,
        dirs.len()
    )
}

/// Make `lib` loadable by name: true when it already is (on the loader path), or when a copy
/// found in [`search_dirs`] was opened by full path and stays loaded. Never panics.
pub fn preload(lib: &CudaLib, dirs: &[PathBuf]) -> bool {
    use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
    for soname in lib.sonames {
        // SAFETY: opening a CUDA library runs its initializers, which is what cudarc's own
        // open does next; nothing else is called.
        if let Ok(l) = unsafe { Library::open(Some(*soname), RTLD_NOW | RTLD_GLOBAL) } {
            // Kept loaded for the process: cudarc opens it again by name.
            std::mem::forget(l);
            return true;
        }
    }
    let Some(path) = find(lib, dirs) else {
        return false;
    };
    // SAFETY: as above, by full path.
    match unsafe { Library::open(Some(&path), RTLD_NOW | RTLD_GLOBAL) } {
        Ok(l) => {
            std::mem::forget(l);
            true
        }
        Err(_) => false,
    }
}

/// The file a loaded library was mapped from, by its file-name prefix (`libcublas.so`), from
/// the text of `/proc/self/maps`. `libcublasLt` does not count as `libcublas`.
pub fn path_in_maps(maps: &str, prefix: &str) -> Option<PathBuf> {
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .map(Path::new)
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix(prefix))
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
        })
        .map(Path::to_path_buf)
}

/// Where a loaded library came from, if this process has it mapped.
pub fn loaded_path(prefix: &str) -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    path_in_maps(&maps, prefix)
}

/// `13000` → `13.0`, `12060` → `12.6` (the CUDA encoding: 1000 × major + 10 × minor).
pub fn cuda_version(encoded: i32) -> String {
    format!("{}.{}", encoded / 1000, (encoded % 1000) / 10)
}

/// cuRAND's `10305` → `10.3.5` (1000 × major + 100 × minor + patch).
pub fn curand_version(encoded: i32) -> String {
    format!(
        "{}.{}.{}",
        encoded / 1000,
        (encoded % 1000) / 100,
        encoded % 100
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(dir: &Path, name: &str) {
        std::fs::write(dir.join(name), b"").unwrap();
    }

    #[test]
    fn the_newest_accepted_major_wins_wherever_it_is() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        touch(a.path(), "libcublas.so.12");
        touch(b.path(), "libcublas.so.13");
        let dirs = vec![a.path().to_path_buf(), b.path().to_path_buf()];
        assert_eq!(find(&CUBLAS, &dirs), Some(b.path().join("libcublas.so.13")));
        std::fs::remove_file(b.path().join("libcublas.so.13")).unwrap();
        assert_eq!(find(&CUBLAS, &dirs), Some(a.path().join("libcublas.so.12")));
        assert_eq!(find(&CURAND, &dirs), None);
    }

    #[test]
    fn nccl_is_found_in_a_pip_wheel_folder() {
        // site-packages/nvidia/nccl/lib, as nvidia-nccl-cu12 / -cu13 lay it out.
        let d = tempfile::tempdir().unwrap();
        let lib = d.path().join("nvidia/nccl/lib");
        std::fs::create_dir_all(&lib).unwrap();
        touch(&lib, "libnccl.so.2");
        let dirs = vec![d.path().join("nvidia/cublas/lib"), lib.clone()];
        assert_eq!(find(&NCCL, &dirs), Some(lib.join("libnccl.so.2")));
        let why = missing_reason(&NCCL, &[]);
        assert!(why.contains("NCCL (libnccl.so.2) is neither"), "{why}");
    }

    #[test]
    fn a_wrong_version_is_named_and_a_missing_one_says_where_it_was_sought() {
        let d = tempfile::tempdir().unwrap();
        touch(d.path(), "libcublas.so.11");
        touch(d.path(), "libcublasLt.so.11");
        touch(d.path(), "libcublas.so.11.4.1");
        let dirs = vec![d.path().to_path_buf()];
        assert_eq!(
            other_versions(&CUBLAS, &dirs),
            vec![d.path().join("libcublas.so.11")]
        );
        let why = missing_reason(&CUBLAS, &dirs);
        assert!(
            why.contains(
                "libcublas.so.11 was found, but parbench needs libcublas.so.13 or libcublas.so.12"
            ),
            "{why}"
        );
        let why = missing_reason(&CURAND, &dirs);
        assert!(
            why.contains("cuRAND (libcurand.so.10) is neither on the loader path"),
            "{why}"
        );
        assert!(!why.contains('\n'));
    }

    #[test]
    fn preloading_a_library_that_is_nowhere_fails_quietly() {
        let nowhere = CudaLib {
            name: "nothing",
            sonames: &["libparbench-does-not-exist.so.1"],
            prefix: "libparbench-does-not-exist.so",
        };
        assert!(!preload(&nowhere, &[]));
        // A file that is not a library: found, but opening it fails, without a panic.
        let d = tempfile::tempdir().unwrap();
        touch(d.path(), "libparbench-does-not-exist.so.1");
        assert!(!preload(&nowhere, &[d.path().to_path_buf()]));
    }

    #[test]
    fn the_mapped_path_is_read_from_proc_maps() {
        let maps = "\
7f00-7f01 r--p 00000000 08:01 1 /usr/local/cuda-13.0/lib64/libcublasLt.so.13.0.0
7f02-7f03 r--p 00000000 08:01 2 /usr/local/cuda-13.0/lib64/libcublas.so.13.0.0
7f04-7f05 rw-p 00000000 00:00 0
7f06-7f07 r-xp 00000000 08:01 3 /usr/lib/x86_64-linux-gnu/libcuda.so.580.65.06";
        assert_eq!(
            path_in_maps(maps, "libcublas.so"),
            Some(PathBuf::from(
                "/usr/local/cuda-13.0/lib64/libcublas.so.13.0.0"
            ))
        );
        assert_eq!(
            path_in_maps(maps, "libcuda.so"),
            Some(PathBuf::from(
                "/usr/lib/x86_64-linux-gnu/libcuda.so.580.65.06"
            ))
        );
        assert_eq!(path_in_maps(maps, "libcurand.so"), None);
    }

    #[test]
    fn versions_decode_as_cuda_encodes_them() {
        assert_eq!(cuda_version(13000), "13.0");
        assert_eq!(cuda_version(12060), "12.6");
        assert_eq!(curand_version(10305), "10.3.5");
    }

    #[test]
    fn nccl_is_found_in_a_venv_on_path_without_virtual_env() {
        // PyTorch's cu13 wheels in a venv whose bin/ is on PATH, never activated.
        let venv = tempfile::tempdir().unwrap();
        let lib = venv
            .path()
            .join("lib/python3.12/site-packages/nvidia/nccl/lib");
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::create_dir_all(venv.path().join("bin")).unwrap();
        touch(&lib, "libnccl.so.2");
        let path =
            std::env::join_paths([venv.path().join("bin"), PathBuf::from("/usr/bin")]).unwrap();
        let env = |var: &str| (var == "PATH").then(|| path.clone());
        let dirs = search_dirs_with(env);
        assert_eq!(find(&NCCL, &dirs), Some(lib.join("libnccl.so.2")));
        // The venv's own folders come before the system's.
        let at = |d: &Path| dirs.iter().position(|x| x == d);
        assert!(at(&lib) < at(Path::new("/usr/lib/x86_64-linux-gnu")));
        // Without it on PATH, its folder is not searched.
        assert!(!search_dirs_with(|_| None).contains(&lib));
    }

    #[test]
    fn the_search_covers_the_usual_places() {
        let dirs = search_dirs();
        assert!(dirs.contains(&PathBuf::from("/usr/local/cuda/lib64")));
        assert!(dirs.contains(&PathBuf::from("/usr/lib/x86_64-linux-gnu")));
    }
}
