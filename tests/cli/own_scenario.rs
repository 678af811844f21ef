//! A program's own scenario (`examples/own_scenario.rs`: the standard library's sorts, declared
//! outside parbench's tree) tracked through `run`, `compare`, `ab` and `history` of the
//! program's binary, as a built-in scenario is.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The example's binary, which `cargo test` builds beside the tests.
fn example() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    // target/<profile>/deps/suite-<hash> → target/<profile>/examples/own_scenario
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("a target folder");
    let bin = dir
        .join("examples")
        .join(format!("own_scenario{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.is_file(),
        "{} is missing: `cargo test` builds it (or `cargo build --example own_scenario`)",
        bin.display()
    );
    bin
}

/// The example binary with every GPU hidden and the engine chosen by default.
fn own(args: &[&str]) -> Command {
    let mut c = Command::new(example());
    c.args(args)
        .env("CUDA_VISIBLE_DEVICES", "")
        .env_remove("PARBENCH_ENGINE");
    c
}

fn ok(mut c: Command) -> String {
    let out = c.output().expect("the example runs");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{:?}: {:?}\n{text}\n{}",
        c,
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

const SUITE: &str = "[[run]]\nscenario = \"sorts\"\nparams = { n = 2000 }\n\
                     sampling = { warmup = 1, min_samples = 5, max_samples = 5, min_time = 0.0 }\n";

#[test]
fn a_programs_own_scenario_is_run_compared_gated_and_charted() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("sorts.toml");
    std::fs::write(&suite, SUITE).unwrap();
    let hist = dir.path().join("hist");
    std::fs::create_dir(&hist).unwrap();

    // run: a report of the program's scenario, its variants, figure and check.
    let reports: Vec<PathBuf> = (0..2).map(|i| hist.join(format!("r{i}.json"))).collect();
    for r in &reports {
        let s = suite.to_str().unwrap();
        ok(own(&[
            "run",
            s,
            "--machine",
            "ci",
            "-o",
            r.to_str().unwrap(),
        ]));
    }
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&reports[0]).unwrap()).unwrap();
    let run = &doc["runs"][0];
    assert_eq!(run["scenario"], "sorts");
    let names: Vec<&str> = run["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["stable", "unstable"]);
    assert_eq!(run["variants"][0]["samples_s"].as_array().unwrap().len(), 5);
    assert!(run["derived"]["unstable_speedup"].as_f64().unwrap() > 0.0);
    assert_eq!(run["checks"][0]["passed"], true, "{}", run["checks"]);
    assert_eq!(doc["environment"]["machine"], "ci");

    // compare: the two reruns side by side, each variant judged (noise or a change).
    let mut c = own(&["compare", "--format", "markdown"]);
    c.args(&reports);
    let out = c.output().unwrap();
    assert!(matches!(out.status.code(), Some(0 | 1)), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("sorts") && text.contains("unstable"),
        "{text}"
    );

    // history: the folder charted, an entry per variant of the program's scenario.
    let page = ok(own(&["history", hist.to_str().unwrap()]));
    assert!(
        page.contains("sorts") && page.contains("stable"),
        "no sorts entry"
    );

    // ab: two builds of the program (here the same binary twice) paired over the suite.
    let bin = example();
    let bin = bin.to_str().unwrap();
    let out = own(&[
        "ab",
        bin,
        bin,
        suite.to_str().unwrap(),
        "--samples",
        "3",
        "--min-pairs",
        "2",
        "--max-pairs",
        "2",
        "--format",
        "markdown",
    ])
    .output()
    .unwrap();
    assert!(matches!(out.status.code(), Some(0 | 1)), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("sorts"), "{text}");
}

#[test]
fn the_program_lists_its_scenario_beside_the_chapters() {
    let list = ok(own(&["list"]));
    assert!(list.contains("sorts") && list.contains("cpu-gpu"), "{list}");
    let help = ok(own(&["sorts", "--help"]));
    assert!(help.contains("--n <"), "{help}");
}
