//! The book beside the reader: a plan of several runs ends with the chapter's summary table,
//! every run states its lesson, and `--verbose` shows the detail figures the default hides.

use serde_json::Value;

use crate::cli::util::parbench;

/// A suite of two small runs, written to `dir`.
fn two_runs(dir: &std::path::Path) -> std::path::PathBuf {
    let suite = dir.join("two.toml");
    std::fs::write(
        &suite,
        "description = \"two\"\n\n[[run]]\nscenario = \"async\"\nparams = { iterations = 20, product_size = 64 }\n\n\
         [[run]]\nscenario = \"matmul\"\nparams = { size = 33, ops = 1 }\n",
    )
    .expect("suite written");
    suite
}

#[test]
fn a_plan_ends_with_the_chapter_and_each_run_states_its_lesson() {
    let dir = tempfile::tempdir().expect("tempdir");
    let suite = two_runs(dir.path());
    let out = dir.path().join("out.json");
    let done = parbench()
        .arg("run")
        .arg(&suite)
        .args(["--warmup", "0", "--max-samples", "3", "--quiet", "-o"])
        .arg(&out)
        .output()
        .expect("runs");
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let text = String::from_utf8_lossy(&done.stdout);
    let summary = text
        .split("== the chapter on this machine")
        .nth(1)
        .expect("the summary table at the end");
    // A row's long cells wrap onto the lines below it; its verdict ends its first line.
    let verdicts = summary
        .lines()
        .filter(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().last())
        .filter(|w| ["yes", "no", "inconclusive"].contains(w))
        .count();
    assert_eq!(verdicts, 2, "{summary}");
    let flat = summary.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("async") && flat.contains("3.5589 s") && flat.contains("(TF 2 edition,"),
        "{summary}"
    );

    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("report")).expect("json");
    for run in doc["runs"].as_array().expect("runs") {
        let lesson = &run["lesson"];
        assert!(
            lesson["claim"].as_str().is_some_and(|c| !c.is_empty()),
            "{run}"
        );
        assert!(lesson["held"].is_string(), "{lesson}");
    }
    let book = doc["runs"][0]["book"]
        .as_array()
        .expect("async quotes the book");
    assert!(book.iter().all(|f| f["source"]["seed"].is_string()));
}

#[test]
fn verbose_shows_the_detail_figures_the_default_table_hides() {
    let args = [
        "async",
        "--iterations",
        "20",
        "--product-size",
        "64",
        "--warmup",
        "0",
        "--max-samples",
        "3",
        "--quiet",
    ];
    let plain = parbench().args(args).output().expect("runs");
    assert!(plain.status.success());
    let plain = String::from_utf8_lossy(&plain.stdout).to_string();
    let verbose = parbench()
        .args(args)
        .arg("--verbose")
        .output()
        .expect("runs");
    assert!(verbose.status.success());
    let verbose = String::from_utf8_lossy(&verbose.stdout).to_string();
    for internal in ["t1_s", "handoff_p50_s", "ping_pong_per_op_s"] {
        assert!(
            !plain.contains(internal),
            "{internal} in the default table:\n{plain}"
        );
        assert!(
            verbose.contains(internal),
            "{internal} missing with --verbose:\n{verbose}"
        );
    }
    assert!(plain.contains("--verbose shows them"), "{plain}");
    assert!(plain.contains("lesson (TF 2 edition, §8.2)"), "{plain}");
    // A single run prints no chapter summary.
    assert!(!plain.contains("the chapter on this machine"), "{plain}");
}
