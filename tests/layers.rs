//! The library's layers, checked: every `crate::<module>` a module's code names must sit in a
//! lower layer, so imports point one way and no cycle can come back (see ARCHITECTURE.md).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Top-level modules, lowest first; a module may use only modules of a lower layer.
const LAYERS: &[(&str, u32)] = &[
    ("units", 0),
    ("engine", 1),
    ("machine", 1),
    ("harness", 2),
    ("device", 2),
    ("distributed", 2),
    ("tensor", 3),
    ("report", 3),
    ("scenario", 4),
    ("export", 4),
    ("cli", 5),
];

fn layer(module: &str) -> Option<u32> {
    LAYERS.iter().find(|(m, _)| *m == module).map(|(_, l)| *l)
}

/// The code of a file without its unit tests (they may reach across layers to build inputs).
fn without_tests(text: &str) -> &str {
    text.split("#[cfg(test)]\nmod ").next().unwrap_or(text)
}

/// `crate::<module>` names in `code`.
fn crate_modules(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
            .collect();
        if !name.is_empty() {
            found.insert(name);
        }
    }
    found
}

/// The imports of `module`'s code that break the layering, as "module -> target".
fn violations(module: &str, code: &str) -> Vec<String> {
    let Some(own) = layer(module) else {
        return vec![format!("{module}: not in the layer table")];
    };
    crate_modules(without_tests(code))
        .into_iter()
        .filter(|target| target != module)
        .filter(|target| layer(target).is_none_or(|l| l >= own))
        .map(|target| format!("{module} -> {target}"))
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn imports_point_down_the_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut broken = Vec::new();
    for file in files {
        let rel = file.strip_prefix(&src).expect("under src");
        let first = rel.components().next().expect("a component");
        let module = first
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        // The crate's roots, and unit-test files (`mod tests;`), which may reach anywhere.
        if module == "lib" || module == "main" || file.file_name().is_some_and(|n| n == "tests.rs")
        {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("read a source file");
        for v in violations(&module, &text) {
            broken.push(format!("{}: {v}", rel.display()));
        }
    }
    assert!(
        broken.is_empty(),
        "imports against the layers:\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_check_sees_a_back_reference() {
    assert_eq!(
        violations("device", "use crate::report::GpuInfo;"),
        ["device -> report"]
    );
    assert_eq!(
        violations("engine", "fn f() { crate::tensor::Tensor::ones(); }"),
        ["engine -> tensor"]
    );
    // Same layer is not below either.
    assert_eq!(
        violations("report", "use crate::tensor::Tensor;"),
        ["report -> tensor"]
    );
    assert!(violations("scenario", "use crate::report::RunRecord;").is_empty());
    // Unit tests may reach anywhere.
    assert!(violations(
        "engine",
        "#[cfg(test)]\nmod tests { use crate::tensor::T; }"
    )
    .is_empty());
    assert_eq!(violations("newmod", ""), ["newmod: not in the layer table"]);
}
