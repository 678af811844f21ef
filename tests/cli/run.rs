//! `run`: a suite file into one report, and malformed suites refused before anything runs.

use serde_json::Value;

use crate::cli::util::{assert_usage_error, parbench};

#[test]
fn run_executes_a_suite_into_one_report() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("tiny.toml");
    std::fs::write(
        &suite,
        "description = \"tiny\"\n\n[[run]]\nscenario = \"async\"\nparams = { iterations = 20, product_size = 64 }\n\n\
         [[run]]\nscenario = \"matmul\"\nparams = { size = 33, ops = 1 }\nsampling = { min_samples = 2 }\n",
    )
    .unwrap();
    let out = dir.path().join("out.json");
    parbench()
        .arg("run")
        .arg(&suite)
        .args(["--warmup", "0", "--max-samples", "3", "--quiet", "-o"])
        .arg(&out)
        .assert()
        .success();
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let scenarios: Vec<&str> = doc["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["scenario"].as_str().unwrap())
        .collect();
    assert_eq!(scenarios, ["async", "matmul"]);
    assert_eq!(doc["runs"][0]["parameters"]["iterations"], 20);
}

#[test]
fn malformed_suites_fail_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "[[run]]\nscenario = \"async\"\n\n[[run]]\nscenario = \"warp\"\n",
            ":5: unknown scenario 'warp'",
        ),
        (
            "[[run]]\nscenario = \"async\"\nparams = { iterations = \"many\" }\n",
            ":3: invalid value 'many' for --iterations",
        ),
        (
            "[[run]]\nscenario = \"async\"\nparams = { speed = 3 }\n",
            ":3: unknown parameter 'speed'",
        ),
        ("[[run]\nscenario = \"async\"\n", ":1: "),
    ];
    for (i, (text, needle)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("bad{i}.toml"));
        std::fs::write(&path, text).unwrap();
        assert_usage_error(&["run", path.to_str().unwrap()], needle);
    }
    // The command line's sampling options against an entry's: the entry's line is named.
    assert_usage_error(
        &[
            "run",
            concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/ci.toml"),
            "--max-samples",
            "3",
        ],
        "scenarios/ci.toml:8: --max-samples (3) must be at least --min-samples (20)",
    );
    assert_usage_error(
        &["run", "/nonexistent/suite.toml"],
        "cannot read /nonexistent/suite.toml",
    );
}
