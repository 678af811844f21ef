//! The CI workflows: each parses as YAML (through python3's PyYAML where both are installed)
//! and does what the README says: the A/B gate edits one marked comment, keeps ab.json and
//! caches cargo; main's job adds each report to the history and redraws it.

use std::path::Path;
use std::process::Command;

fn workflow(name: &str) -> String {
    std::fs::read_to_string(Path::new(".github/workflows").join(name)).expect("workflow exists")
}

#[test]
fn workflows_parse_as_yaml() {
    let has_yaml = Command::new("python3")
        .args(["-c", "import yaml"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_yaml {
        // Without python3 and PyYAML there is no parser here; the content checks below stand.
        return;
    }
    for name in ["ab.yml", "history.yml"] {
        let out = Command::new("python3")
            .args([
                "-c",
                "import yaml,sys; d=yaml.safe_load(open(sys.argv[1])); assert d['jobs'], 'no jobs'",
            ])
            .arg(Path::new(".github/workflows").join(name))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
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
