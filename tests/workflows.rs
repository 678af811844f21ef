//! The CI workflows to copy: each parses as YAML (yaml-rust2, a YAML 1.2 parser) and does what
//! the README says. The A/B gate edits one marked comment, says so when the gate could not run,
//! keeps ab.json, and its caches survive a red run; main's job adds each report to the history,
//! prunes it and publishes the page. The comment and the prune steps' shell is run here (with a
//! stand-in `gh` and `parbench`), not only read. Each check is also run on a broken copy of the
//! workflow and must fail there, so none passes by construction.
//!
//! actionlint itself runs in `scripts/lint-workflows.sh` (it installs the checker from PyPI).

use std::path::Path;
use yaml_rust2::{Yaml, YamlLoader};

fn text(name: &str) -> String {
    std::fs::read_to_string(Path::new(".github/workflows").join(name)).expect("workflow exists")
}

fn parse(text: &str) -> Yaml {
    let docs = YamlLoader::load_from_str(text).unwrap_or_else(|e| panic!("not YAML: {e}"));
    docs.into_iter().next().expect("a YAML document")
}

/// Every step of every job.
fn steps(doc: &Yaml) -> Vec<&Yaml> {
    let jobs = doc["jobs"].as_hash().expect("jobs");
    jobs.values()
        .flat_map(|job| job["steps"].as_vec().into_iter().flatten())
        .collect()
}

/// The step named `name`, or the first that uses an action starting with `name`.
fn step<'a>(doc: &'a Yaml, name: &str) -> Result<&'a Yaml, String> {
    steps(doc)
        .into_iter()
        .find(|s| s["name"].as_str() == Some(name) || uses(s).starts_with(name))
        .ok_or_else(|| format!("no step {name}"))
}

fn uses(step: &Yaml) -> &str {
    step["uses"].as_str().unwrap_or("")
}

fn condition(step: &Yaml) -> &str {
    step["if"].as_str().unwrap_or("")
}

/// Each `if:` of a job or a step.
fn conditions(doc: &Yaml) -> Vec<String> {
    let jobs = doc["jobs"].as_hash().expect("jobs");
    let job_ifs = jobs.values().map(|j| condition(j).to_string());
    job_ifs
        .chain(steps(doc).into_iter().map(|s| condition(s).to_string()))
        .collect()
}

#[test]
fn workflows_parse_as_yaml() {
    for name in ["ab.yml", "history.yml"] {
        let doc = parse(&text(name));
        let jobs = &doc["jobs"];
        assert!(
            jobs.as_hash().is_some_and(|j| !j.is_empty()),
            "{name} has no jobs"
        );
    }
}

/// `always()` runs on a cancelled job too; the steps that report a red gate use `!cancelled()`.
fn reports_red_runs_but_not_cancelled_ones(ab: &Yaml) -> Result<(), String> {
    if let Some(c) = conditions(ab).iter().find(|c| c.contains("always()")) {
        return Err(format!("`if: {c}` runs on a cancelled job too"));
    }
    for name in [
        "Keep the base's executable",
        "Keep ab.json and the summary",
        "Post or update the summary on the pull request",
    ] {
        if !condition(step(ab, name)?).contains("!cancelled()") {
            return Err(format!("{name} is skipped after a red gate"));
        }
    }
    Ok(())
}

#[test]
fn the_gate_reports_red_runs_but_not_cancelled_ones() {
    let ab = text("ab.yml");
    reports_red_runs_but_not_cancelled_ones(&parse(&ab)).unwrap();
    let broken = ab.replace("!cancelled()", "always()");
    assert!(reports_red_runs_but_not_cancelled_ones(&parse(&broken)).is_err());
    let broken = ab.replace("${{ !cancelled() }}", "success()");
    assert!(reports_red_runs_but_not_cancelled_ones(&parse(&broken)).is_err());
}

/// Cargo's cache is saved after a red gate and shared with main's job; the base's executable
/// (which rust-cache's cleanup deletes) is cached by commit, restored and saved under one key,
/// the save after a red gate too, and main's job saves its own under the same scheme.
fn caches_survive_a_red_gate(ab: &Yaml, history: &Yaml) -> Result<(), String> {
    let cargo = step(ab, "Swatinem/rust-cache@")?;
    let on_failure = &cargo["with"]["cache-on-failure"];
    if !(on_failure.as_bool() == Some(true) || on_failure.as_str() == Some("true")) {
        return Err("rust-cache saves nothing after a red gate".into());
    }
    let shared = cargo["with"]["shared-key"]
        .as_str()
        .ok_or("no shared-key")?;
    let main_cargo = step(history, "Swatinem/rust-cache@")?;
    if main_cargo["with"]["shared-key"].as_str() != Some(shared) {
        return Err("main's cargo cache is not the one pull requests restore".into());
    }
    let restore = step(ab, "actions/cache/restore@")?;
    let save = step(ab, "actions/cache/save@")?;
    for field in ["path", "key"] {
        if restore["with"][field] != save["with"][field] {
            return Err(format!("the base's cache is saved under another {field}"));
        }
    }
    let key = save["with"]["key"].as_str().ok_or("no key")?;
    let path = save["with"]["path"].as_str().ok_or("no path")?;
    if !(key.contains("steps.base.outputs.sha") && path.starts_with("target/ab/")) {
        return Err(format!(
            "the base's cache ({path}, {key}) is not keyed by its commit"
        ));
    }
    if !condition(save).contains("!cancelled()") {
        return Err("the base's executable is not kept after a red gate".into());
    }
    let main_save = step(history, "actions/cache/save@")?;
    let main_key = main_save["with"]["key"].as_str().ok_or("no key on main")?;
    let scheme = |k: &str| k.split("${{").next().map(str::to_string);
    if scheme(main_key) != scheme(key) || !main_key.contains("github.sha") {
        return Err(format!(
            "main saves {main_key}, pull requests restore {key}"
        ));
    }
    Ok(())
}

#[test]
fn the_caches_survive_a_red_gate_and_main_warms_them() {
    let (ab, history) = (text("ab.yml"), text("history.yml"));
    caches_survive_a_red_gate(&parse(&ab), &parse(&history)).unwrap();
    for broken in [
        ab.replace("cache-on-failure: true", "cache-on-failure: false"),
        ab.replace("shared-key: parbench-release", "shared-key: other"),
        ab.replace("key: parbench-base-", "key: parbench-base-x-"),
        ab.replace(
            "!cancelled() && steps.base-exe",
            "success() && steps.base-exe",
        ),
    ] {
        assert!(caches_survive_a_red_gate(&parse(&broken), &parse(&history)).is_err());
    }
    // Both sides and main's job build into the one target folder the cache keeps.
    let script = std::fs::read_to_string("scripts/ci-regress.sh").unwrap();
    assert!(script.contains("--target-dir target/ab/target"));
    assert!(history.contains("--target-dir target/ab/target"));
}

/// No `${{ … }}` inside a `run:` block: values reach the shell through `env:` (no script
/// injection; `exit "${{ … }}"` is shellcheck's SC2242).
fn runs_take_values_from_env(doc: &Yaml) -> Result<(), String> {
    for s in steps(doc) {
        if let Some(run) = s["run"].as_str().filter(|r| r.contains("${{")) {
            return Err(format!("an expression inside a run block: {run}"));
        }
    }
    Ok(())
}

#[test]
fn run_blocks_take_values_from_env() {
    for name in ["ab.yml", "history.yml"] {
        runs_take_values_from_env(&parse(&text(name))).unwrap();
    }
    let broken = text("ab.yml").replace(
        "run: exit \"$STATUS\"",
        "run: exit \"${{ steps.ab.outputs.status }}\"",
    );
    assert!(runs_take_values_from_env(&parse(&broken)).is_err());
}

/// The actions' majors that run on Node 24 (their Node 20 majors are deprecated).
fn current_majors(doc: &Yaml) -> Result<(), String> {
    let least = [
        ("actions/checkout", 5),
        ("actions/cache", 5),
        ("actions/upload-artifact", 6),
        ("actions/upload-pages-artifact", 5),
        ("actions/deploy-pages", 5),
    ];
    for s in steps(doc) {
        let Some((action, version)) = uses(s).split_once('@') else {
            continue;
        };
        let action = action
            .trim_end_matches("/restore")
            .trim_end_matches("/save");
        let major: u32 = version
            .trim_start_matches('v')
            .split('.')
            .next()
            .and_then(|m| m.parse().ok())
            .unwrap_or(u32::MAX);
        if let Some((_, min)) = least.iter().find(|(a, _)| *a == action) {
            if major < *min {
                return Err(format!("{} runs on a deprecated Node", uses(s)));
            }
        }
    }
    Ok(())
}

#[test]
fn the_actions_are_current_majors() {
    for name in ["ab.yml", "history.yml"] {
        current_majors(&parse(&text(name))).unwrap();
    }
    let broken = text("ab.yml").replace("actions/checkout@v7", "actions/checkout@v4");
    assert!(current_majors(&parse(&broken)).is_err());
}

#[test]
fn the_gate_edits_one_comment_and_keeps_its_json() {
    let ab = text("ab.yml");
    for needle in [
        "<!-- parbench-ab -->",
        "-X PATCH",
        "actions/upload-artifact@",
        "target/ci-regress/ab.json",
    ] {
        assert!(ab.contains(needle), "ab.yml lacks {needle}");
    }
    assert!(!ab.contains("gh pr comment"), "a new comment on every push");
}

#[test]
fn main_records_prunes_and_publishes_the_history() {
    let history = text("history.yml");
    for needle in [
        "branches: [main]",
        "parbench\" run scenarios/ci.toml",
        "history pages/history -o pages/history/index.html",
        "--format markdown",
        "gh-pages",
        // How to enable the page, in the header a user reads when copying the file.
        "Source: GitHub Actions",
        "PARBENCH_KEEP_REPORTS",
        "actions/upload-pages-artifact@",
        "actions/deploy-pages@",
    ] {
        assert!(history.contains(needle), "history.yml lacks {needle}");
    }
    let doc = parse(&history);
    for permission in ["pages", "id-token"] {
        assert_eq!(doc["permissions"][permission].as_str(), Some("write"));
    }
}

/// Running a step's `run:` block as the runner does (`bash -e`), in a folder of its own.
#[cfg(unix)]
mod run {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::process::{Command, Output};

    pub fn script(doc: &Yaml, name: &str) -> String {
        step(doc, name).unwrap()["run"]
            .as_str()
            .expect("a run block")
            .to_string()
    }

    pub fn executable(path: &Path, body: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, body).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    pub fn bash(dir: &Path, script: &str, env: &[(&str, &str)]) -> Output {
        let file = dir.join("step.sh");
        std::fs::write(&file, script).unwrap();
        let path = format!(
            "{}:{}",
            dir.join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Command::new("bash")
            .arg("-e")
            .arg(&file)
            .current_dir(dir)
            .env("PATH", path)
            .env("RUNNER_TEMP", dir)
            .env("GITHUB_STEP_SUMMARY", dir.join("step-summary.md"))
            .envs(env.iter().copied())
            .output()
            .unwrap()
    }
}

/// The comment step with `gh` stood in for: the body it posts (or patches, when `existing`
/// names a comment) for a gate that exited `status` with `summary` written or not.
#[cfg(unix)]
fn comment(ab: &Yaml, status: &str, summary: Option<&str>, existing: &str) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    run::executable(
        &dir.path().join("bin/gh"),
        "#!/bin/sh\necho \"$*\" >> calls\ncase \"$*\" in\n  *--paginate*) \
         [ -n \"$FAKE_ID\" ] && echo \"$FAKE_ID\" ;;\n  *) for a in \"$@\"; do case $a in \
         body=@*) cat \"${a#body=@}\" > body ;; esac; done ;;\nesac\nexit 0\n",
    );
    if let Some(summary) = summary {
        std::fs::create_dir_all(dir.path().join("target/ci-regress")).unwrap();
        std::fs::write(dir.path().join("target/ci-regress/summary.md"), summary).unwrap();
    }
    let script = run::script(ab, "Post or update the summary on the pull request");
    let log = "https://github.com/o/r/actions/runs/7";
    let out = run::bash(
        dir.path(),
        &script,
        &[
            ("STATUS", status),
            ("LOG", log),
            ("REPO", "o/r"),
            ("PR", "3"),
            ("HEAD_SHA", "0123456789abcdef"),
            ("FAKE_ID", existing),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read = |f: &str| std::fs::read_to_string(dir.path().join(f)).unwrap_or_default();
    (read("body"), read("calls"))
}

#[cfg(unix)]
fn says_when_the_gate_could_not_run(ab: &Yaml) -> Result<(), String> {
    let marker = "<!-- parbench-ab -->";
    // A verdict: its summary, edited into the existing comment.
    let (body, calls) = comment(ab, "1", Some("### 1 regression\n"), "42");
    if body != format!("{marker}\n### 1 regression\n") || !calls.contains("-X PATCH") {
        return Err(format!("a verdict posted as {body:?} ({calls})"));
    }
    // No verdict: the gate stopped before its summary, or never ran; a stale summary is not
    // reposted.
    for (status, summary) in [
        ("2", None),
        ("", None),
        ("101", Some("### 0 regressions\n")),
    ] {
        let (body, _) = comment(ab, status, summary, "42");
        if !(body.starts_with(marker)
            && body.contains("the gate could not run")
            && body.contains("actions/runs/7")
            && !body.contains("0 regressions"))
        {
            return Err(format!("exit {status:?} posted as {body:?}"));
        }
    }
    Ok(())
}

#[cfg(unix)]
#[test]
fn the_comment_says_when_the_gate_could_not_run() {
    let ab = text("ab.yml");
    says_when_the_gate_could_not_run(&parse(&ab)).unwrap();
    let broken = ab.replace(
        "if { [ \"$STATUS\" = 0 ] || [ \"$STATUS\" = 1 ]; } && [ -s \"$summary\" ]; then",
        "if [ -f \"$summary\" ]; then",
    );
    assert_ne!(broken, ab);
    assert!(says_when_the_gate_could_not_run(&parse(&broken)).is_err());
}

/// The prune step over `old` reports already on gh-pages with KEEP_REPORTS = `keep`: its exit
/// status and the reports left.
#[cfg(unix)]
fn prune(history: &Yaml, old: usize, keep: &str) -> (bool, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let reports = dir.path().join("pages/history");
    std::fs::create_dir_all(&reports).unwrap();
    for i in 0..old {
        std::fs::write(
            reports.join(format!("2020010{i}T000000Z-{i:010}.json")),
            "{}",
        )
        .unwrap();
    }
    std::fs::create_dir_all(dir.path().join("target")).unwrap();
    std::fs::write(dir.path().join("target/report.json"), "{}").unwrap();
    let sha = "f".repeat(40);
    run::executable(
        &dir.path().join(format!("target/ab/{sha}/parbench")),
        "#!/bin/sh\nexit 0\n",
    );
    let script = run::script(
        history,
        "Add the report, prune to the newest reports, redraw the page",
    );
    let out = run::bash(
        dir.path(),
        &script,
        &[("KEEP_REPORTS", keep), ("GITHUB_SHA", &sha)],
    );
    let mut left: Vec<String> = std::fs::read_dir(&reports)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    (out.status.success(), left)
}

#[cfg(unix)]
fn keeps_the_newest_reports(history: &Yaml) -> Result<(), String> {
    let (ok, left) = prune(history, 5, "3");
    let newest_old = "20200104T000000Z-0000000004.json";
    if !ok || left.len() != 3 || left[1] != newest_old || !left[2].ends_with("-ffffffffff.json") {
        return Err(format!("5 reports and a new one, 3 kept: {left:?}"));
    }
    let (ok, left) = prune(history, 2, "3");
    if !ok || left.len() != 3 {
        return Err(format!("under the limit, all kept: {left:?}"));
    }
    let (ok, left) = prune(history, 5, "0");
    if ok || left.len() != 5 {
        return Err(format!(
            "KEEP_REPORTS=0 is refused, nothing removed: {left:?}"
        ));
    }
    let default = &parse(&text("history.yml"))["jobs"]["history"]["env"]["KEEP_REPORTS"];
    if !default.as_str().is_some_and(|d| d.contains("|| '200'")) {
        return Err(format!("no default number of reports: {default:?}"));
    }
    Ok(())
}

#[cfg(unix)]
#[test]
fn main_keeps_the_newest_reports() {
    let history = text("history.yml");
    keeps_the_newest_reports(&parse(&history)).unwrap();
    let broken = history.replace("rm -- \"${reports[@]:0:excess}\"", "true");
    assert_ne!(broken, history);
    assert!(keeps_the_newest_reports(&parse(&broken)).is_err());
}
