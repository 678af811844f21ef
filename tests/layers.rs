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

/// A file of unit tests: `tests.rs`, or `<what>_tests.rs` (`failure_tests.rs`,
/// `gpu_path_tests.rs`), each declared by its parent under `#[cfg(test)]`.
fn is_unit_test_file(file: &Path) -> bool {
    file.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n == "tests.rs" || n.ends_with("_tests.rs"))
}

/// The code of a file without its unit tests (they may reach across layers to build inputs):
/// a test module declared as a file of its own (`#[cfg(test)] mod tests;`) drops that line
/// only, so the code after it is still checked; an inline one (`mod tests {`), which ends the
/// file, drops the rest.
fn without_tests(text: &str) -> String {
    let mut code = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("#[cfg(test)]\nmod ") {
        code.push_str(&rest[..at]);
        let declaration = &rest[at..];
        let line_end = declaration
            .match_indices('\n')
            .nth(1)
            .map_or(declaration.len(), |(i, _)| i);
        if !declaration[..line_end].trim_end().ends_with(';') {
            return code;
        }
        rest = &declaration[line_end..];
    }
    code.push_str(rest);
    code
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
    crate_modules(&without_tests(code))
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
        // The crate's roots, and unit-test files, which may reach anywhere.
        if module == "lib" || module == "main" || is_unit_test_file(&file) {
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
    // A test module in a file of its own hides only its declaration, not the code after it.
    assert_eq!(
        violations(
            "engine",
            "#[cfg(test)]\nmod tests;\nmod lane;\nuse crate::tensor::T;"
        ),
        ["engine -> tensor"]
    );
    assert_eq!(violations("newmod", ""), ["newmod: not in the layer table"]);
}

// ---- Circles between files ----
//
// Imports point one way between files too, not only between the top-level layers: no file may
// use, through a chain of others, a file that uses it. A "use" of another file is a path in
// code (outside unit tests and comments) that names a module the crate keeps in a file:
// - `crate::a::b::Item` names the deepest module of `a::b::Item` that has a file (`a/b.rs` or
//   `a/b/mod.rs`; else `a`);
// - `super::x` and `self::x` are resolved from the file's own module the same way;
// - a group `crate::a::{b, c::Item}` names each of its paths.
// A module and its own ancestors are one unit for this check: a parent declares its children
// and builds its API from them, a child sees its parent's private items, so edges between them
// are not counted (`super::Item` in `a/b.rs` naming an item of `a/mod.rs` is no edge). Circles
// are looked for between files that are not nested in one another: siblings, cousins, and
// across top-level modules. Unit tests (`#[cfg(test)] mod tests`, files named `tests.rs` or `*_tests.rs`) are
// exempt, as for the layers.

/// Circles the architecture declares (ARCHITECTURE.md, "Deliberate exceptions"): the edges
/// between these two files, in both directions, are not counted.
const DECLARED_CIRCLES: &[(&str, &str)] = &[("engine::var", "engine::op")];

/// The module a file under `src/` holds: `a/b.rs` and `a/b/mod.rs` are `a::b`.
fn module_of(rel: &Path) -> String {
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if let Some(last) = parts.last_mut() {
        *last = last.trim_end_matches(".rs").to_string();
        if last == "mod" {
            parts.pop();
        }
    }
    parts.join("::")
}

/// `code` without its comment lines (`//`, `///`, `//!`): an intra-doc link is no use.
fn without_comments(code: &str) -> String {
    code.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths of the path tree that starts at `s` (just after a `crate::`, `super::` or
/// `self::`), each as its segments, and how many bytes of `s` the tree spans.
fn path_tree(s: &str) -> (Vec<Vec<String>>, usize) {
    let mut segments = Vec::new();
    let mut at = 0;
    loop {
        let rest = &s[at..];
        let trimmed = rest.trim_start();
        at += rest.len() - trimmed.len();
        if let Some(group) = trimmed.strip_prefix('{') {
            // A group: comma-separated subtrees up to the matching `}`.
            at += 1;
            let mut paths = Vec::new();
            let mut inner = group;
            loop {
                let (sub, used) = path_tree(inner);
                paths.extend(sub.into_iter().map(|p| [segments.clone(), p].concat()));
                at += used;
                let rest = &s[at..];
                let trimmed = rest.trim_start();
                at += rest.len() - trimmed.len();
                match trimmed.chars().next() {
                    Some(',') => {
                        at += 1;
                        inner = &s[at..];
                    }
                    Some('}') => return (paths, at + 1),
                    _ => return (paths, at),
                }
            }
        }
        let name: String = trimmed.chars().take_while(|&c| is_ident(c)).collect();
        if name.is_empty() {
            return (vec![segments], at);
        }
        at += name.len();
        segments.push(name);
        match s[at..].strip_prefix("::") {
            Some(_) => at += 2,
            None => return (vec![segments], at),
        }
    }
}

/// The modules with files that `code`, the code of module `own`, names (see above), among
/// `known`, before the ancestor rule.
fn named_modules(own: &str, code: &str, known: &BTreeSet<String>) -> BTreeSet<String> {
    let own: Vec<&str> = own.split("::").filter(|s| !s.is_empty()).collect();
    let mut found = BTreeSet::new();
    for start in ["crate::", "super::", "self::"] {
        for (at, _) in code.match_indices(start) {
            if code[..at].chars().next_back().is_some_and(is_ident) || code[..at].ends_with("::") {
                continue; // `my_crate::`, or the `super::` of `super::super::` seen once
            }
            let (paths, _) = path_tree(&code[at..]);
            for path in paths {
                let mut base: Vec<&str> = match start {
                    "crate::" => Vec::new(),
                    "self::" => own.clone(),
                    _ => own[..own.len().saturating_sub(1)].to_vec(),
                };
                let mut segs = path.iter().map(String::as_str).skip(1).peekable();
                if start == "super::" {
                    while segs.peek() == Some(&"super") {
                        segs.next();
                        base.pop();
                    }
                }
                for seg in segs {
                    let deeper = [base.clone(), vec![seg]].concat().join("::");
                    if !known.contains(&deeper) {
                        break;
                    }
                    base.push(seg);
                }
                found.insert(base.join("::"));
            }
        }
    }
    found
}

/// True when `a` is `b` or one of its ancestors.
fn encloses(a: &str, b: &str) -> bool {
    a.is_empty() || a == b || b.starts_with(&format!("{a}::"))
}

/// The counted edges of module `own` with code `code`.
fn edges(own: &str, code: &str, known: &BTreeSet<String>) -> BTreeSet<String> {
    named_modules(own, &without_comments(&without_tests(code)), known)
        .into_iter()
        .filter(|to| !encloses(to, own) && !encloses(own, to))
        .filter(|to| {
            !DECLARED_CIRCLES
                .iter()
                .any(|&(a, b)| (own == a && to == b) || (own == b && to == a))
        })
        .collect()
}

/// Every circle of `graph` (module -> the modules it uses), each as its modules in order,
/// one per strongly connected group of more than one module.
fn circles(graph: &std::collections::BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let mut found: Vec<Vec<String>> = Vec::new();
    for start in graph.keys() {
        if found.iter().any(|c| c.contains(start)) {
            continue;
        }
        // The shortest way back to `start`, breadth first.
        let mut came_from: std::collections::BTreeMap<&String, &String> = Default::default();
        let mut queue = std::collections::VecDeque::from([start]);
        'search: while let Some(at) = queue.pop_front() {
            for next in graph.get(at).into_iter().flatten() {
                if next == start {
                    let mut circle = vec![at.clone()];
                    let mut back = at;
                    while back != start {
                        back = came_from[back];
                        circle.push(back.clone());
                    }
                    circle.reverse();
                    found.push(circle);
                    break 'search;
                }
                if !came_from.contains_key(next) && next != start {
                    came_from.insert(next, at);
                    queue.push_back(next);
                }
            }
        }
    }
    found
}

#[test]
fn no_circle_between_files() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut sources = Vec::new();
    for file in files {
        let rel = file.strip_prefix(&src).expect("under src").to_path_buf();
        // The binary's root is another crate; unit-test files may reach anywhere.
        if rel == Path::new("main.rs") || is_unit_test_file(&file) {
            continue;
        }
        let module = if rel == Path::new("lib.rs") {
            String::new()
        } else {
            module_of(&rel)
        };
        let text = std::fs::read_to_string(&file).expect("read a source file");
        sources.push((module, text));
    }
    let known: BTreeSet<String> = sources.iter().map(|(m, _)| m.clone()).collect();
    let graph = sources
        .iter()
        .map(|(m, code)| (m.clone(), edges(m, code, &known)))
        .collect();
    let found: Vec<String> = circles(&graph)
        .into_iter()
        .map(|c| format!("{} -> {}", c.join(" -> "), c[0]))
        .collect();
    assert!(
        found.is_empty(),
        "circles between files (break them, or declare one in ARCHITECTURE.md and \
         DECLARED_CIRCLES):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_circle_check_sees_a_planted_circle() {
    let known: BTreeSet<String> = [
        "",
        "device",
        "device::cuda",
        "device::cuda::ops",
        "device::discovery",
        "engine",
        "engine::var",
        "engine::op",
        "tensor",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    let graph_of = |files: &[(&str, &str)]| {
        files
            .iter()
            .map(|(m, code)| (m.to_string(), edges(m, code, &known)))
            .collect()
    };
    // The circle this check was written for: cuda/mod.rs and discovery.rs naming each other,
    // through `super::` on one side and a `crate::` group on the other.
    let planted = graph_of(&[
        (
            "device::cuda",
            "use super::discovery::{GpuInfo, LibraryInfo};",
        ),
        (
            "device::discovery",
            "use crate::device::{cuda::probe, memory};",
        ),
    ]);
    assert_eq!(circles(&planted), [["device::cuda", "device::discovery"]]);
    // `super::super::` climbs twice; `self::` starts at the file's own module.
    let deep = graph_of(&[
        (
            "device::cuda::ops",
            "fn f() { super::super::discovery::probe_gpu(); }",
        ),
        (
            "device::discovery",
            "pub use self::x; fn g() { crate::device::cuda::ops::grid(1); }",
        ),
    ]);
    assert_eq!(circles(&deep).len(), 1);
    // A child naming its parent, and the parent naming the child, is no circle.
    let nested = graph_of(&[
        (
            "device::cuda",
            "use super::GpuOrder; use crate::device::Device;",
        ),
        ("device", "use cuda::CudaDevice; use self::cuda::probe;"),
    ]);
    assert!(circles(&nested).is_empty());
    // One way only is no circle; comments and unit tests are not code.
    let one_way = graph_of(&[
        ("device::cuda", "use super::discovery::GpuInfo;"),
        (
            "device::discovery",
            "/// See [`probe`](super::cuda::probe).\n#[cfg(test)]\nmod tests { use crate::device::cuda; }",
        ),
    ]);
    assert!(circles(&one_way).is_empty());
    // The declared exception.
    let declared = graph_of(&[
        ("engine::var", "use super::op::{Granted, OpRef};"),
        ("engine::op", "use super::var::{OpVars, Var};"),
    ]);
    assert!(circles(&declared).is_empty());
}
