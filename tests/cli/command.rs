//! A suite's command entries: your own processes timed into an ordinary report.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::cli::util::{assert_usage_error, parbench, variant_names};

/// Write `text` as a suite in `dir`.
fn suite(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

const TWO: &str = "[[run]]\nname = \"tiny\"\n\
                   commands = { quick = [\"true\"], nap = [\"sleep\", \"0.001\"] }\n\
                   sampling = { warmup = 1, min_samples = 5, max_samples = 5, min_time = 0.0 }\n";

/// Run `suite` into `out`, quietly.
fn run_into(suite: &Path, out: &Path) {
    parbench()
        .arg("run")
        .arg(suite)
        .args(["--quiet", "-o"])
        .arg(out)
        .assert()
        .success();
}

#[test]
fn commands_become_a_run_with_the_samples_asked_and_compare_pairs_them() {
    let dir = tempfile::tempdir().unwrap();
    let s = suite(dir.path(), "s.toml", TWO);
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    run_into(&s, &a);
    run_into(&s, &b);
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&a).unwrap()).unwrap();
    let run = &doc["runs"][0];
    assert_eq!(run["scenario"], "command");
    assert_eq!(run["parameters"]["name"], "tiny");
    assert_eq!(run["parameters"]["nap"], "sleep 0.001");
    assert_eq!(variant_names(run), ["nap", "quick"]);
    for v in run["variants"].as_array().unwrap() {
        let samples = v["samples_s"].as_array().unwrap();
        assert_eq!(samples.len(), 5, "{v}");
        // A `sleep 0.001` cannot end sooner than its millisecond.
        if v["name"] == "nap" {
            assert!(samples.iter().all(|t| t.as_f64().unwrap() >= 0.001), "{v}");
        }
    }
    assert!(run["state"]["wall_s"].as_f64().unwrap() > 0.0, "{run}");
    crate::cli::result_schemas::assert_valid("a report of commands", "parbench-1", &doc);
    // A report against itself: the same figures, no regression.
    parbench().arg("compare").args([&a, &a]).assert().success();
    // Two runs pair entry by entry (a regression or not, the machine decides).
    let out = parbench().arg("compare").args([&a, &b]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{out:?}");
    assert!(
        stdout.contains("2 entries compared, 0 only in base, 0 only in new"),
        "{stdout}"
    );
    // history: the folder's two reports charted, an entry per command.
    let out = parbench().arg("history").arg(dir.path()).output().unwrap();
    let page = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    for command in ["nap", "quick"] {
        assert!(page.contains(&format!("] {command}")), "no {command} entry");
    }
}

#[test]
fn the_command_line_form_times_one_program() {
    let out = parbench()
        .args(["command", "--name", "nap", "--max-samples", "3", "--json"])
        .args(["--", "sleep", "0.001"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = &doc["runs"][0];
    assert_eq!(run["scenario"], "command");
    assert_eq!(run["parameters"]["name"], "nap");
    assert_eq!(run["parameters"]["command"], "sleep 0.001");
    assert_eq!(variant_names(run), ["command"]);
    assert_usage_error(
        &["command", "--", "no-such-program-xyz"],
        "not found on PATH",
    );
    assert_usage_error(&["command", "-q"], "required arguments");
}

#[test]
fn a_failing_command_is_one_line_naming_it_and_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let s = suite(
        dir.path(),
        "f.toml",
        "[[run]]\nname = \"f\"\ncommands = { ok = [\"true\"], bad = \"exit 3\" }\n",
    );
    // With `-o` in the temporary directory, the journal a failed suite leaves is there too.
    let out = parbench()
        .arg("run")
        .arg(&s)
        .arg("--quiet")
        .arg("-o")
        .arg(dir.path().join("f.json"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("command 'bad' (sh -c 'exit 3') failed: exit status: 3"),
        "{stderr}"
    );
}

#[test]
fn a_missing_program_and_malformed_entries_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "[[run]]\nname = \"m\"\ncommand = [\"no-such-program-xyz\", \"-v\"]\n",
            ":2: command 'command': program 'no-such-program-xyz' not found on PATH",
        ),
        (
            "[[run]]\nname = \"m\"\ncommand = [\"./no/such/file\"]\n",
            ":2: command 'command': program './no/such/file' not found",
        ),
        (
            "[[run]]\ncommand = [\"true\"]\n",
            ":1: a command entry needs name",
        ),
        (
            "[[run]]\nname = \"m\"\ncommand = []\n",
            ":2: command 'command' is empty",
        ),
        (
            "[[run]]\nname = \"m\"\ncommand = [\"true\", 1]\n",
            ":2: a command is a list of strings",
        ),
        (
            "[[run]]\nname = \"m\"\ncommand = [\"true\"]\ncommands = { a = [\"true\"] }\n",
            ":1: an entry has one of scenario",
        ),
        (
            "[[run]]\nname = \"m\"\ncommand = [\"true\"]\nwhen = 1\n",
            "unknown field `when`",
        ),
    ];
    for (i, (text, needle)) in cases.iter().enumerate() {
        let path = suite(dir.path(), &format!("bad{i}.toml"), text);
        assert_usage_error(&["run", path.to_str().unwrap()], needle);
    }
}

/// `ab` pairs a command entry's `base` and `new` commands, timed by one process of the
/// candidate a pair: a slower `new` is a regression (exit 1), and the base build, which no
/// entry runs, is neither resolved nor built. One command, which both builds would run alike,
/// or commands of other names are refused before anything runs.
#[test]
fn ab_pairs_a_command_entrys_base_and_new() {
    let dir = tempfile::tempdir().unwrap();
    let me = assert_cmd::cargo::cargo_bin("parbench");
    let me = me.to_str().unwrap();
    let two = suite(dir.path(), "two.toml", TWO);
    assert_usage_error(
        &["ab", me, me, two.to_str().unwrap()],
        "entry 1 times the commands nap, quick: ab pairs two parbench builds, or a command \
         entry's `commands = { base = [...], new = [...] }`",
    );
    let one = suite(
        dir.path(),
        "one.toml",
        "[[run]]\nname = \"nap\"\ncommand = [\"sleep\", \"0.001\"]\n",
    );
    assert_usage_error(
        &["ab", me, me, one.to_str().unwrap()],
        "entry 1 times one command, which both builds would run alike",
    );
    let pair = suite(
        dir.path(),
        "pair.toml",
        "[[run]]\nname = \"nap\"\n\
         commands = { base = [\"true\"], new = [\"sleep\", \"0.02\"] }\n",
    );
    // The base is not resolved where no entry runs it: any name passes.
    let out = parbench()
        .args(["ab", "no-such-revision", me, pair.to_str().unwrap()])
        .args(["--samples", "3", "--min-pairs", "8", "--max-pairs", "8"])
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("ab: 1: nap: 8 pairs"), "{stderr}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let entries = doc["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{doc}");
    let entry = &entries[0];
    assert!(
        entry["entry"].as_str().unwrap().ends_with(" new vs base"),
        "{entry}"
    );
    assert_eq!(entry["verdict"], "slower", "{entry}");
    assert_eq!(entry["pairs"].as_array().unwrap().len(), 8);
    assert_eq!(doc["base"], Value::Null, "no entry ran the base build");
    assert_eq!(doc["settings"]["base"], Value::Null, "nor was it resolved");
    crate::cli::result_schemas::assert_valid("ab of a command entry", "parbench-ab-1", &doc);
}
