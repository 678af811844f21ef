//! The `parbench/1` report against its JSON Schema (`docs/parbench-1.schema.json`): what the
//! binary writes (every scenario, a sweep, traced runs) and the reports committed under
//! `results/` validate; a report with a field missing, of the wrong type or misspelt does not.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use assert_cmd::Command;
use serde_json::{json, Value};

use crate::common::TINY;

const SCHEMA: &str = "docs/parbench-1.schema.json";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The binary under test: this build's own, or the one `PARBENCH_BIN` names (`.ci/run` points
/// the ignored `parbench all` test at its release binary rather than build the tests in release).
fn parbench() -> Command {
    let mut c = match std::env::var_os("PARBENCH_BIN") {
        Some(bin) => Command::new(bin),
        None => Command::cargo_bin("parbench").expect("binary builds"),
    };
    c.env_remove("PARBENCH_ENGINE");
    c.env_remove("PARBENCH_MATMUL_KERNEL");
    c
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn schema() -> &'static Value {
    static SCHEMA_DOC: OnceLock<Value> = OnceLock::new();
    SCHEMA_DOC.get_or_init(|| read_json(&root().join(SCHEMA)))
}

fn validator() -> &'static jsonschema::Validator {
    static VALIDATOR: OnceLock<jsonschema::Validator> = OnceLock::new();
    VALIDATOR.get_or_init(|| {
        jsonschema::draft202012::new(schema()).unwrap_or_else(|e| panic!("{SCHEMA}: {e}"))
    })
}

/// Each way `doc` breaks the schema, as `instance path: message`.
fn errors(doc: &Value) -> Vec<String> {
    validator()
        .iter_errors(doc)
        .map(|e| format!("{}: {e}", display_path(&e.instance_path().to_string())))
        .collect()
}

fn display_path(path: &str) -> &str {
    if path.is_empty() {
        "(the document)"
    } else {
        path
    }
}

/// Fails with every error and where it is, so a report that breaks the schema says how.
fn assert_valid(what: &str, doc: &Value) {
    let errors = errors(doc);
    assert!(
        errors.is_empty(),
        "{what} does not match {SCHEMA} ({} errors):\n  {}",
        errors.len(),
        errors
            .iter()
            .take(30)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n  ")
    );
}

/// Runs parbench with `args` plus `-o FILE`, checks it succeeded, and returns the report.
fn report_of(args: &[&str], dir: &Path) -> Value {
    let out_file = dir.join("report.json");
    let out = parbench()
        .args(args)
        .arg("-o")
        .arg(&out_file)
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "parbench {args:?} failed ({:?}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    read_json(&out_file)
}

/// The report of `tests/data/all-small.toml` (every scenario at small sizes), traced so
/// it carries `timelines`; run once for the tests that share it.
fn small_suite() -> &'static Value {
    static REPORT: OnceLock<Value> = OnceLock::new();
    REPORT.get_or_init(|| {
        let suite = root().join("tests/data/all-small.toml");
        traced_report(&["run", suite.to_str().expect("a UTF-8 path")])
    })
}

/// The report of `parbench COMMAND...` with one sample a variant, traced (`--html` and
/// `--trace`) so that it carries `timelines` too.
fn traced_report(command: &[&str]) -> Value {
    let dir = tempfile::tempdir().expect("temp dir");
    let html = dir.path().join("report.html");
    let trace = dir.path().join("trace.json");
    let mut args = command.to_vec();
    args.extend_from_slice(TINY);
    args.extend([
        "--html",
        html.to_str().expect("a UTF-8 path"),
        "--trace",
        trace.to_str().expect("a UTF-8 path"),
    ]);
    report_of(&args, dir.path())
}

/// The scenarios of a suite file, in order.
fn suite_scenarios(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).expect("suite");
    let suite: toml::Table = text.parse().expect("a TOML suite");
    suite["run"]
        .as_array()
        .expect("[[run]]")
        .iter()
        .map(|r| r["scenario"].as_str().expect("scenario").to_string())
        .collect()
}

fn scenarios_of(report: &Value) -> Vec<&str> {
    report["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| r["scenario"].as_str().expect("scenario"))
        .collect()
}

#[test]
fn the_schema_is_a_draft_2020_12_schema_with_a_description_for_each_property() {
    let schema = schema();
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    assert!(schema["$id"].is_string() && schema["title"].is_string());
    if let Err(e) = jsonschema::meta::validate(schema) {
        panic!("{SCHEMA} is not a valid schema: {}: {e}", e.instance_path());
    }
    // The draft named in the document is the one the tests use.
    jsonschema::validator_for(schema).expect("a validator for the schema's own $schema");

    fn resolve<'a>(schema: &'a Value, node: &'a Value) -> &'a Value {
        match node["$ref"].as_str() {
            Some(r) => {
                let pointer = r.strip_prefix('#').expect("a local $ref");
                schema
                    .pointer(pointer)
                    .unwrap_or_else(|| panic!("{r} resolves"))
            }
            None => node,
        }
    }
    fn walk(schema: &Value, node: &Value, at: &str, missing: &mut Vec<String>) {
        match node {
            Value::Object(map) => {
                if let Some(Value::Object(props)) = map.get("properties") {
                    for (name, prop) in props {
                        if !resolve(schema, prop)["description"].is_string() {
                            missing.push(format!("{at}/properties/{name}"));
                        }
                    }
                }
                // `if` tests a value; it declares no property.
                for (k, v) in map.iter().filter(|(k, _)| *k != "if") {
                    walk(schema, v, &format!("{at}/{k}"), missing);
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    walk(schema, v, &format!("{at}/{i}"), missing);
                }
            }
            _ => {}
        }
    }
    let mut missing = Vec::new();
    walk(schema, schema, "", &mut missing);
    assert!(
        missing.is_empty(),
        "properties without a description: {missing:?}"
    );
}

#[test]
fn every_scenario_traced_gives_a_valid_report() {
    let report = small_suite();
    assert_valid("the report of tests/data/all-small.toml", report);

    // The small suite runs what `parbench all` runs, in the same order.
    let all = suite_scenarios(&root().join("scenarios/default.toml"));
    assert_eq!(scenarios_of(report), all);
    let timelines = report["timelines"].as_array().expect("traced: timelines");
    assert!(!timelines.is_empty());
    // The display fields are there, and as the table words them.
    for run in report["runs"].as_array().expect("runs") {
        for v in run["variants"].as_array().expect("variants") {
            let shown = v["median_display"].as_str().expect("median_display");
            assert!(
                shown.ends_with('s') && shown.chars().next().is_some_and(|c| c.is_ascii_digit()),
                "{shown:?}"
            );
        }
        let numbers = run["derived"]
            .as_object()
            .expect("derived")
            .iter()
            .filter(|(_, v)| v.is_number())
            .count();
        let display = run["derived_display"].as_object().map_or(0, |d| d.len());
        assert_eq!(display, numbers, "{}: {run}", run["scenario"]);
    }
}

/// What the suite test stands in for: `parbench all` itself, at its book sizes (about 75 s in a
/// debug build on two cores), so it runs only when asked: `.ci/run` runs it on the release
/// binary, `PARBENCH_BIN=target/release/parbench cargo test --test suite report_schema:: --
/// --ignored` (about 25 s of running there).
#[test]
#[ignore = "slow in a debug binary (about 75 s on 2 cores): run it with PARBENCH_BIN=target/release/parbench"]
fn parbench_all_gives_a_valid_report() {
    let report = traced_report(&["all"]);
    assert_valid("the report of parbench all", &report);
    let all = suite_scenarios(&root().join("scenarios/default.toml"));
    assert_eq!(scenarios_of(&report), all);
    assert!(report["timelines"]
        .as_array()
        .is_some_and(|t| !t.is_empty()));
}

#[test]
fn a_sweep_gives_a_valid_report() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut args = vec!["sweep", "matmul", "--set", "size=32,64", "--set", "ops=1"];
    args.extend_from_slice(TINY);
    let report = report_of(&args, dir.path());
    assert_valid("the report of a sweep", &report);
    assert_eq!(
        report["sweep"],
        json!({"scenario": "matmul", "axes": [["size", ["32", "64"]], ["ops", ["1"]]]})
    );
    assert_eq!(report["runs"].as_array().map(Vec::len), Some(2));
}

/// Every `.json` file under `dir`, recursively.
fn json_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            json_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "json") {
            out.push(path);
        }
    }
}

/// The reports kept in the repository, old ones included: a field added since they were
/// written is optional, so they still validate.
#[test]
fn the_committed_reports_are_valid() {
    let mut files = Vec::new();
    json_files(&root().join("results"), &mut files);
    files.sort();
    let mut checked = Vec::new();
    for path in &files {
        let doc = read_json(path);
        // results/ also keeps Chrome traces, device listings and PyTorch figures.
        if doc["schema"] != "parbench/1" {
            continue;
        }
        let name = path
            .strip_prefix(root())
            .unwrap_or(path)
            .display()
            .to_string();
        assert_valid(&name, &doc);
        checked.push(name);
    }
    assert!(
        checked.iter().any(|f| f.starts_with("results/baselines/"))
            && checked.iter().any(|f| f.starts_with("results/gpu/")),
        "the baselines and the GPU reports are checked: {checked:?}"
    );
}

/// The example in docs/report-format.md is a report as parbench writes it.
#[test]
fn the_documented_example_is_valid() {
    let path = root().join("docs/report-format.md");
    let text = std::fs::read_to_string(&path).expect("docs/report-format.md");
    let mut examples = Vec::new();
    let mut block: Option<String> = None;
    for line in text.lines() {
        match (&mut block, line.trim_end()) {
            (None, "```json") => block = Some(String::new()),
            (Some(b), "```") => {
                if let Ok(doc) = serde_json::from_str::<Value>(b) {
                    if doc.get("schema").is_some() {
                        examples.push(doc);
                    }
                }
                block = None;
            }
            (Some(b), l) => {
                b.push_str(l);
                b.push('\n');
            }
            (None, _) => {}
        }
    }
    assert_eq!(examples.len(), 1, "one whole report in {}", path.display());
    assert_valid("the example of docs/report-format.md", &examples[0]);
}

/// `doc` with `change` applied at the JSON pointer `at` (which must exist).
fn changed(doc: &Value, at: &str, change: impl FnOnce(&mut Value)) -> Value {
    let mut doc = doc.clone();
    change(
        doc.pointer_mut(at)
            .unwrap_or_else(|| panic!("{at} is in the report")),
    );
    doc
}

/// `doc` without the field at `at`.
fn without(doc: &Value, at: &str) -> Value {
    let (parent, field) = at.rsplit_once('/').expect("a pointer to a field");
    changed(doc, parent, |p| {
        p.as_object_mut()
            .expect("an object")
            .remove(field)
            .unwrap_or_else(|| panic!("{at} is in the report"));
    })
}

/// Asserts the schema rejects `doc`, with an error at `path` (the instance path).
fn assert_rejected(what: &str, doc: &Value, path: &str) {
    let errors = errors(doc);
    let at = format!("{}: ", display_path(path));
    assert!(
        errors.iter().any(|e| e.starts_with(&at)),
        "{what}: expected an error at {}, got {errors:?}",
        display_path(path)
    );
}

#[test]
fn broken_reports_are_rejected_where_they_break() {
    let good = small_suite();
    assert_valid("the unchanged report", good);
    let variant = "/runs/0/variants/0";

    // Required fields removed.
    for (field, parent) in [
        ("/runs/0/variants/0/median_s", variant),
        ("/runs/0/variants/0/samples_s", variant),
        ("/runs/0/derived", "/runs/0"),
        ("/environment/gpu", "/environment"),
        ("/tool/git_commit", "/tool"),
        ("/timelines/0/lanes", "/timelines/0"),
        ("/runs/0/state/wall_s", "/runs/0/state"),
    ] {
        assert_rejected(&format!("without {field}"), &without(good, field), parent);
    }
    assert_rejected("without environment", &without(good, "/environment"), "");
    assert_rejected("without runs", &without(good, "/runs"), "");

    // Wrong types and values.
    let cases: Vec<(&str, Value)> = vec![
        ("/runs/0/variants/0/median_s", json!("fast")),
        ("/runs/0/variants/0/median_display", json!(0.5)),
        ("/runs/0/variants/0/outliers", json!(1.5)),
        ("/runs/0/variants/0/ci95_s", json!([1.0])),
        ("/runs/0/derived_display/async_speedup", json!(3.4)),
        ("/runs/0/checks/0/passed", json!("yes")),
        ("/runs/0/notes", json!("engine: threaded")),
        ("/environment/cores", json!(-1)),
        ("/environment/engine", json!("turbo")),
        ("/environment/started_at", json!("yesterday")),
        ("/schema", json!("parbench/2")),
        ("/timelines/0/lanes/0/busy_ns/0", json!([1, 2, 3])),
        ("/runs/0/state/cores", json!("two")),
    ];
    for (at, value) in cases {
        let doc = changed(good, at, |v| *v = value.clone());
        assert_rejected(&format!("{at} = {value}"), &doc, at);
    }
    // A measured share, absent where the kernel's counters gave none (`Shares::between`): set,
    // not changed, so the case does not depend on the run (it once found the field absent).
    let at = "/runs/0/state/other_cpu_fraction";
    let doc = changed(good, "/runs/0/state", |s| {
        s["other_cpu_fraction"] = json!(1.5)
    });
    assert_rejected("other_cpu_fraction = 1.5", &doc, at);
    let figure = good["runs"][0]["figures"]
        .as_object()
        .and_then(|f| f.keys().next())
        .expect("a figure")
        .clone();
    let at = format!("/runs/0/figures/{figure}/unit");
    assert_rejected(
        "an unknown unit",
        &changed(good, &at, |v| *v = json!("furlongs")),
        &at,
    );
    let at = format!("/runs/0/figures/{figure}/better");
    assert_rejected(
        "an unknown direction",
        &changed(good, &at, |v| *v = json!("sideways")),
        &at,
    );

    // A misspelt field where the keys are fixed (the right one still there, so only the
    // closed set of keys can catch it).
    for (at, field) in [
        (variant, "median_ms"),
        ("/runs/0", "note"),
        ("/environment", "host_name"),
        ("/environment/gpu", "reasons"),
        ("/tool", "commit"),
        ("", "timeline"),
        ("/runs/0/state", "other_cpu"),
    ] {
        let doc = changed(good, at, |o| o[field] = json!("x"));
        assert_rejected(&format!("an unknown field {field} in {at}"), &doc, at);
    }

    // A GPU said to be available must say which.
    let doc = changed(good, "/environment/gpu", |g| {
        *g = json!({"available": true});
    });
    assert_rejected("an available GPU without a name", &doc, "/environment/gpu");

    // The maps keyed by data stay open.
    let doc = changed(good, "/runs/0", |r| {
        r["parameters"]["new_parameter"] = json!(3);
        r["derived"]["new_figure_s"] = json!(1e-6);
        r["derived"]["new_series"] = json!([[0, 1.0, null]]);
        r["derived_display"]["new_figure_s"] = json!("1.000 µs");
        r["figures"]["new_figure_s"] = json!({"unit": "seconds", "better": "lower"});
    });
    assert_valid("a report with new keys in its maps", &doc);
}

/// Every report records the machine's limits: measured (as a release build records them) or
/// not (as a debug build does), both validate; an older report without them still does; a
/// limit of the wrong shape is rejected at its probe.
#[test]
fn limits_measured_or_not_are_valid_and_broken_ones_rejected() {
    let good = small_suite();
    assert!(
        good["environment"]["limits"]["fma"].is_object(),
        "every report records the limits: {}",
        good["environment"]
    );
    assert_valid(
        "a report without limits (written before them)",
        &without(good, "/environment/limits"),
    );
    let budget = parbench::machine::Budget::TINY;
    let measured = serde_json::to_value(parbench::machine::Limits::measure(&budget))
        .expect("limits serialize");
    let with_limits = changed(good, "/environment/limits", |v| *v = measured.clone());
    assert_valid("a report with measured limits", &with_limits);
    let fma = &with_limits["environment"]["limits"]["fma"];
    assert!(fma["measured"]["per_core_gflops"].is_number(), "{fma}");
    let channel = &with_limits["environment"]["limits"]["channel"];
    assert!(channel["measured"]["per_op_s"].is_number(), "{channel}");
    assert_valid(
        "limits without the channel hand-off (written before it)",
        &without(&with_limits, "/environment/limits/channel"),
    );

    let cases: Vec<(&str, &str, Value)> = vec![
        (
            "/environment/limits/fma",
            "/measured/unit",
            json!("avx1024"),
        ),
        (
            "/environment/limits/fma",
            "/measured/per_core_gflops",
            json!("fast"),
        ),
        (
            "/environment/limits/memory",
            "/measured/copy/one_thread_gbytes_per_s",
            json!(null),
        ),
        ("/environment/limits/line", "/not_measured", json!("")),
        (
            "/environment/limits/channel",
            "/measured/per_op_s",
            json!(-1.0),
        ),
    ];
    for (probe, field, value) in cases {
        let doc = changed(good, "/environment/limits", |v| *v = measured.clone());
        let at = format!("{probe}{field}");
        let doc = if doc.pointer(&at).is_some() {
            changed(&doc, &at, |v| *v = value.clone())
        } else {
            changed(&doc, probe, |v| {
                *v = json!({ "not_measured": value.clone() })
            })
        };
        assert_rejected(&format!("{at} = {value}"), &doc, probe);
    }
    let both =
        changed(
            good,
            "/environment/limits/clock",
            |v| *v = json!({"measured": {"ghz": 3.0, "method": "imul"}, "not_measured": "why"}),
        );
    assert_rejected(
        "a probe both measured and not",
        &both,
        "/environment/limits/clock",
    );
    assert_rejected(
        "limits without their probe time",
        &without(&with_limits, "/environment/limits/probe_s"),
        "/environment/limits",
    );
}

/// A run's GPU state, as the library writes it, validates beside the CPU state; a report
/// without it (a CPU run, or one written before it) still does; a GPU state of the wrong shape
/// is rejected where it breaks.
#[test]
fn a_gpu_state_validates_and_broken_ones_are_rejected() {
    use parbench::machine::state::gpu::{
        ClockLimit, GpuDuring, GpuProcess, GpuProcesses, GpuRunState, GpuSample, GpuState,
    };
    let good = small_suite();
    assert!(
        good["runs"][0]["state"].get("gpu").is_none(),
        "a CPU run records no GPU state: {}",
        good["runs"][0]["state"]
    );
    assert_valid("a report without a GPU state", good);
    let before = GpuState {
        sm_mhz: Some(1980),
        sm_mhz_max: Some(1980),
        memory_mhz: Some(2619),
        memory_mhz_max: Some(2619),
        power_w: Some(118.2),
        power_limit_w: Some(700.0),
        temperature_c: Some(38),
        utilization_gpu_pct: Some(0),
        utilization_memory_pct: Some(0),
        clock_limits: Vec::new(),
        memory_used_bytes: Some(600 << 20),
        memory_total_bytes: Some(143_771_090_944),
        processes: Some(GpuProcesses::split(
            &[
                GpuProcess {
                    pid: 4242,
                    used_bytes: Some(500 << 20),
                },
                GpuProcess {
                    pid: 77,
                    used_bytes: None,
                },
            ],
            4242,
            true,
        )),
    };
    let sample = GpuSample {
        sm_mhz: Some(1755),
        utilization_gpu_pct: Some(97),
        clock_limits: vec![ClockLimit::SwPowerCap],
    };
    let gpu = GpuRunState {
        uuid: Some("GPU-5a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9".into()),
        before: before.clone(),
        after: GpuState {
            processes: Some(GpuProcesses::split(
                &[GpuProcess {
                    pid: 900,
                    used_bytes: None,
                }],
                4242,
                true,
            )),
            ..before
        },
        during: GpuDuring::of(&[sample.clone(), sample]),
    };
    let gpu = serde_json::to_value(&gpu).expect("serializes");
    let with_gpu = changed(good, "/runs/0/state", |s| s["gpu"] = gpu.clone());
    assert_valid("a report with a GPU state", &with_gpu);
    let bare = changed(good, "/runs/0/state", |s| {
        s["gpu"] = json!({"before": {}, "after": {}})
    });
    assert_valid("a GPU state NVML could read nothing of", &bare);

    let cases: Vec<(&str, Value)> = vec![
        ("/runs/0/state/gpu/before/sm_mhz", json!("fast")),
        (
            "/runs/0/state/gpu/after/clock_limits/0",
            json!("overheated"),
        ),
        ("/runs/0/state/gpu/before/utilization_gpu_pct", json!(140)),
        ("/runs/0/state/gpu/before/processes/others/0/pid", json!(-1)),
        ("/runs/0/state/gpu/during/busy_samples", json!(1.5)),
    ];
    let mut with_gpu = with_gpu;
    with_gpu["runs"][0]["state"]["gpu"]["after"]["clock_limits"] = json!(["hw-thermal"]);
    assert_valid("a report with a thermal limit", &with_gpu);
    for (at, value) in cases {
        let doc = changed(&with_gpu, at, |v| *v = value.clone());
        assert_rejected(&format!("{at} = {value}"), &doc, at);
    }
    for (at, field) in [
        ("/runs/0/state/gpu", "sm_mhz"),
        ("/runs/0/state/gpu/before", "sm_clock"),
        ("/runs/0/state/gpu/during", "sm_mhz_max"),
    ] {
        let doc = changed(&with_gpu, at, |o| o[field] = json!(1));
        assert_rejected(&format!("an unknown field {field} in {at}"), &doc, at);
    }
    assert_rejected(
        "a GPU state without its snapshot after the run",
        &without(&with_gpu, "/runs/0/state/gpu/after"),
        "/runs/0/state/gpu",
    );
}

/// The GPU's limits, measured or not, validate; a negative or missing figure does not.
#[test]
fn gpu_limits_validate_and_broken_ones_are_rejected() {
    use parbench::device::gpu_limits::GpuLimits;
    use parbench::machine::Probe;
    let limits = GpuLimits {
        launch_s: 3.4e-6,
        launch_alloc_free_s: Some(4.0e-6),
        launch_alloc_free_event_s: Some(4.4e-6),
        launch_and_wait_s: 9.0e-6,
        graph_per_kernel_s: 1.1e-6,
        h2d_pinned_gbytes_per_s: 55.0,
        d2h_pinned_gbytes_per_s: 54.9,
        copy_bytes: 256 << 20,
        sgemm_gflops: 51_000.0,
        sgemm_size: 8192,
        method: "test".into(),
    };
    let with = |p: serde_json::Value| {
        let mut doc = small_suite().clone();
        doc["environment"]["gpu_limits"] = p;
        doc
    };
    assert_valid(
        "measured GPU limits",
        &with(serde_json::to_value(Probe::Measured(limits.clone())).unwrap()),
    );
    assert_valid(
        "GPU limits not measured",
        &with(serde_json::to_value(Probe::<GpuLimits>::NotMeasured("no GPU".into())).unwrap()),
    );
    let older = GpuLimits {
        launch_alloc_free_s: None,
        launch_alloc_free_event_s: None,
        ..limits.clone()
    };
    assert_valid(
        "GPU limits without the allocation tiers (written before them)",
        &with(serde_json::to_value(Probe::Measured(older)).unwrap()),
    );
    let mut broken = serde_json::to_value(Probe::Measured(limits)).unwrap();
    broken["measured"]["launch_alloc_free_s"] = (-1.0).into();
    assert_rejected(
        "a negative allocation tier",
        &with(broken.clone()),
        "/environment/gpu_limits",
    );
    broken["measured"]["launch_alloc_free_s"] = 4.0e-6.into();
    broken["measured"]["launch_s"] = (-1.0).into();
    assert_rejected(
        "a negative launch time",
        &with(broken.clone()),
        "/environment/gpu_limits",
    );
    broken["measured"]
        .as_object_mut()
        .unwrap()
        .remove("launch_s");
    assert_rejected(
        "a missing launch time",
        &with(broken),
        "/environment/gpu_limits",
    );
}

/// `--machine NAME` is recorded in the environment and validates; a name the command line
/// refuses is refused by the schema too.
#[test]
fn a_named_machine_validates_and_a_bad_name_is_rejected() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut args = vec!["matmul", "--size", "16", "--machine", "ci-2core"];
    args.extend_from_slice(TINY);
    let doc = report_of(&args, dir.path());
    assert_eq!(doc["environment"]["machine"], "ci-2core");
    assert_valid("a named machine", &doc);
    let spaced = changed(&doc, "/environment/machine", |v| *v = json!("a b"));
    assert_rejected("a name with a space", &spaced, "/environment/machine");
    let unnamed = without(&doc, "/environment/machine");
    assert_valid("no name", &unnamed);
}
