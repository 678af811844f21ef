//! The CI workflows: each parses as YAML (yaml-rust2, a YAML 1.2 parser) and does what the
//! README says: the A/B gate edits one marked comment, keeps ab.json and caches cargo; main's
//! job adds each report to the history and redraws it.

use std::path::Path;

fn workflow(name: &str) -> String {
    std::fs::read_to_string(Path::new(".github/workflows").join(name)).expect("workflow exists")
}

#[test]
fn workflows_parse_as_yaml() {
    for name in ["ab.yml", "history.yml"] {
        let docs = yaml_rust2::YamlLoader::load_from_str(&workflow(name))
            .unwrap_or_else(|e| panic!("{name} is not YAML: {e}"));
        let doc = docs.first().unwrap_or_else(|| panic!("{name} is empty"));
        let jobs = &doc["jobs"];
        assert!(
            jobs.as_hash().is_some_and(|j| !j.is_empty()),
            "{name} has no jobs"
        );
    }
}

#[test]
fn the_gate_edits_one_comment_keeps_its_json_and_caches_cargo() {
    let ab = workflow("ab.yml");
    for needle in [
        "<!-- parbench-ab -->",
        "-X PATCH",
        "actions/upload-artifact@",
        "target/ci-regress/ab.json",
        "Swatinem/rust-cache@",
    ] {
        assert!(ab.contains(needle), "ab.yml lacks {needle}");
    }
    assert!(!ab.contains("gh pr comment"), "a new comment on every push");
}

#[test]
fn main_records_the_ci_suite_into_the_history() {
    let history = workflow("history.yml");
    for needle in [
        "branches: [main]",
        "parbench run scenarios/ci.toml",
        "parbench history pages/history -o pages/history/index.html",
        "--format markdown",
        "gh-pages",
    ] {
        assert!(history.contains(needle), "history.yml lacks {needle}");
    }
}
