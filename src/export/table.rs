//! The human table: what a person at a terminal reads.

use std::fmt::Write;

use serde_json::Value;

use crate::report::{Report, RunRecord, WARNING};
use crate::units::{human_bytes, human_time};

/// The header line describing where the report was made.
pub fn render_environment(report: &Report) -> String {
    let e = &report.environment;
    let gpu = if e.gpu.available {
        format!("GPU: {}", e.gpu.name.as_deref().unwrap_or("available"))
    } else {
        format!(
            "GPU: unavailable ({})",
            e.gpu.reason.as_deref().unwrap_or("unknown reason")
        )
    };
    format!(
        "{} {} ({}) on {}: {}, {}, {}; engine {}\n{gpu}\n",
        report.tool.name,
        report.tool.version,
        report.tool.git_commit,
        e.host,
        e.cpu_model,
        crate::units::count(e.cores, "core"),
        human_bytes(e.memory_bytes),
        e.engine
    )
}

/// What `parbench devices` prints.
pub fn render_devices(e: &crate::report::Environment) -> String {
    let mut out = format!(
        "cpu     {}: {} available to this process, {} of memory\n        \
         CPU devices (cpu:0, cpu:1, ...) split these cores between them; --cpu-threads sets the share\n",
        e.cpu_model,
        crate::units::count(e.cores, "core"),
        human_bytes(e.memory_bytes)
    );
    let g = &e.gpu;
    if g.available {
        let _ = writeln!(
            out,
            "cuda:0  {}: {} memory, compute capability {}, driver {}, CUDA {}",
            g.name.as_deref().unwrap_or("?"),
            g.memory_bytes.map_or("?".into(), human_bytes),
            g.compute_capability.as_deref().unwrap_or("?"),
            g.driver.as_deref().unwrap_or("?"),
            g.cuda.as_deref().unwrap_or("?"),
        );
        for lib in &g.libraries {
            let _ = writeln!(
                out,
                "        {:<12} {:<28} {}",
                lib.name, lib.version, lib.path
            );
        }
    } else {
        let _ = writeln!(
            out,
            "gpu     unavailable: {}\n        scenarios that want a GPU run on a CPU fallback device and say so",
            g.reason.as_deref().unwrap_or("unknown reason")
        );
    }
    for (i, gpu) in e.gpus.iter().enumerate() {
        let _ = writeln!(out, "{:<7}{}", if i == 0 { "gpus" } else { "" }, gpu.line());
    }
    if let Some(cuda) = &e.cuda_env {
        let _ = writeln!(
            out,
            "cuda    GPU ordinal {} (--gpu); environment: {}",
            cuda.ordinal,
            cuda.variables_line()
        );
    }
    if let Some(limits) = &e.limits {
        let gpu = e
            .gpu_limits
            .as_ref()
            .map(crate::device::gpu_limits::probe_lines)
            .unwrap_or_default();
        for (i, line) in limits.lines().iter().chain(&gpu).enumerate() {
            let _ = writeln!(out, "{:<8}{line}", if i == 0 { "limits" } else { "" });
        }
    }
    out
}

/// How much a run's table shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Depth {
    /// What the reader of the chapter asks: the figures that state results, the lesson and
    /// the book beside them.
    #[default]
    Reader,
    /// Also the detail figures and the sentences that quote them (`--verbose`).
    Verbose,
}

/// More variants than this fold into a line in the reader's table (`allreduce`'s 72, a size
/// and algorithm each): the sentences and the lesson read them, `--verbose` lists them.
pub const FOLD_ROWS: usize = 24;

/// More passing checks than this fold into a line in the reader's table.
pub const FOLD_CHECKS: usize = 8;

/// One run as a table with its derived figures, checks, notes and explanation, for a reader.
pub fn render_run(run: &RunRecord) -> String {
    render_run_at(run, Depth::Reader)
}

pub fn render_run_at(run: &RunRecord, depth: Depth) -> String {
    let mut out = String::new();
    let params = parameters(run).join(", ");
    let _ = writeln!(out, "\n== {} ({params})", run.scenario);
    let _ = writeln!(out, "   devices: {}", run.devices.join(", "));
    let name_w = run
        .variants
        .iter()
        .map(|v| v.name.len())
        .fold(7, usize::max);
    let folds = depth == Depth::Reader && run.variants.len() > FOLD_ROWS;
    if folds {
        let _ = writeln!(
            out,
            "   ({} variants: --verbose lists them; the figures and sentences below read them)",
            run.variants.len()
        );
    } else {
        let _ = writeln!(
            out,
            "   {:<name_w$}  {:>11}  {:>25}  {:>11}  {:>11}  {:>5}  {:>8}",
            "variant", "median", "95% CI of median", "min", "max", "n", "outliers"
        );
    }
    for v in run.variants.iter().filter(|_| !folds) {
        let s = &v.summary;
        let ci = format!("[{}, {}]", human_time(s.ci95_s[0]), human_time(s.ci95_s[1]));
        let _ = write!(
            out,
            "   {:<name_w$}  {:>11}  {:>25}  {:>11}  {:>11}  {:>5}  {:>8}",
            v.name,
            human_time(s.median_s),
            ci,
            human_time(s.min_s),
            human_time(s.max_s),
            s.samples_s.len(),
            s.outliers
        );
        if let Some(label) = &v.label {
            let _ = write!(out, "  <- {label}");
        }
        out.push('\n');
    }
    let shown: Vec<(&String, &Value)> = run
        .derived
        .iter()
        .filter(|(k, _)| depth == Depth::Verbose || !run.is_detail(k))
        .collect();
    let folded = run.derived.len() - shown.len();
    if !shown.is_empty() {
        let key_w = shown.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        let _ = writeln!(out, "   derived:");
        for (k, v) in shown {
            let _ = writeln!(out, "     {k:<key_w$}  {}", run.worded(k, v));
        }
    }
    if folded > 0 {
        let _ = writeln!(
            out,
            "   ({folded} detail figures in the JSON; --verbose shows them)"
        );
    }
    // Many passing checks of one run fold into a line; a failing one is always shown.
    let passed = run.checks.iter().filter(|c| c.passed).count();
    let fold_checks = depth == Depth::Reader && passed > FOLD_CHECKS;
    for c in run.checks.iter().filter(|c| !(fold_checks && c.passed)) {
        let mark = if c.passed { "ok  " } else { "FAIL" };
        let _ = writeln!(out, "   check {mark} {}: {}", c.name, c.detail);
    }
    if fold_checks {
        let _ = writeln!(
            out,
            "   check ok   {passed} checks passed (--verbose lists them)"
        );
    }
    // A warning (a figure outside its physical range) reads as one, not as "note: warning:".
    for n in &run.notes {
        let _ = match n.strip_prefix(WARNING) {
            Some(w) => writeln!(out, "   warning: {w}"),
            None => writeln!(out, "   note: {n}"),
        };
    }
    // What the machine was doing, beside the warnings it explains; a quiet run's state is in
    // the JSON only.
    if let Some(state) = run.state.as_ref().filter(|s| s.is_busy()) {
        let _ = writeln!(out, "   machine: {state}");
    }
    let detail = match depth {
        Depth::Verbose => &run.explanation_detail[..],
        Depth::Reader => &[],
    };
    for line in run.explanation.iter().chain(detail) {
        let _ = writeln!(out, "   > {line}");
    }
    if let Some(view) = super::lesson::view(run) {
        let lesson = view.lesson;
        if let Some(book) = &lesson.book {
            let _ = writeln!(out, "   the book, {book}\n   here: {}", lesson.here);
        }
        let _ = writeln!(
            out,
            "   lesson ({}): {} — held: {}",
            lesson.section,
            lesson.claim,
            view.held.word(),
        );
        for (held, line) in &view.why {
            let _ = writeln!(out, "     {} {line}", super::lesson::mark(*held));
        }
        if let Some(busy) = &view.busy {
            let _ = writeln!(out, "     ! {busy}");
        }
        for more in &view.more {
            let _ = writeln!(out, "     + {more}");
        }
    }
    out
}

/// The whole report for a terminal (a sweep ends with its summary).
pub fn render(report: &Report) -> String {
    let mut out = render_environment(report);
    for run in &report.runs {
        out.push_str(&render_run(run));
    }
    out.push_str(&render_sweep_summary(report));
    out
}

/// A sweep's points side by side: the swept parameters, then each variant's median and whether
/// every check passed; empty for a report that is not a sweep.
pub fn render_sweep_summary(report: &Report) -> String {
    let Some(sweep) = &report.sweep else {
        return String::new();
    };
    let variants = variant_names(&report.runs);
    let axes: Vec<&str> = sweep.axes.iter().map(|(name, _)| name.as_str()).collect();
    let last = ["checks", "machine"];
    let header = axes.iter().chain(&variants).chain(&last);
    let mut rows = vec![header.map(|h| h.to_string()).collect::<Vec<_>>()];
    for run in &report.runs {
        let mut row: Vec<String> = axes
            .iter()
            // Axis names are parameter names (`sweep::parse_axis` normalizes `cpu-size`).
            .map(|a| run.parameters.get(*a).map(compact).unwrap_or_default())
            .collect();
        for name in &variants {
            row.push(
                run.variants
                    .iter()
                    .find(|v| v.name == *name)
                    .map(|v| human_time(v.summary.median_s))
                    .unwrap_or_else(|| "-".into()),
            );
        }
        row.push(checks_cell(run));
        row.push(machine_cell(run));
        rows.push(row);
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = format!(
        "\n== sweep of {}: {} points, median per variant\n",
        sweep.scenario,
        report.runs.len()
    );
    for row in &rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, w))| match c < axes.len() {
                true => format!("{cell:<w$}"),
                false => format!("{cell:>w$}"),
            })
            .collect();
        let _ = writeln!(out, "   {}", cells.join("  ").trim_end());
    }
    out
}

/// Every variant any of `runs` has, in the order first seen (a sweep's points can differ:
/// allreduce's are named by size).
pub(super) fn variant_names<'a>(runs: impl IntoIterator<Item = &'a RunRecord>) -> Vec<&'a str> {
    super::unique(
        runs.into_iter()
            .flat_map(|r| &r.variants)
            .map(|v| v.name.as_str()),
    )
}

/// One point of a sweep in one line (`sweep -q`), as the summary's row says it: the swept
/// values, each variant's median, the checks, the machine.
pub fn render_sweep_point(run: &RunRecord, axes: &[(String, Vec<String>)]) -> String {
    let mut cells: Vec<String> = axes
        .iter()
        .map(|(a, _)| {
            format!(
                "{a}={}",
                run.parameters.get(a).map(compact).unwrap_or_default()
            )
        })
        .collect();
    cells.extend(
        run.variants
            .iter()
            .map(|v| format!("{} {}", v.name, human_time(v.summary.median_s))),
    );
    cells.push(format!("checks {}", checks_cell(run)));
    cells.push(machine_cell(run));
    format!("{}\n", cells.join("  "))
}

/// `ok`, or how many checks failed.
fn checks_cell(run: &RunRecord) -> String {
    match run.checks.iter().filter(|c| !c.passed).count() {
        0 => "ok".into(),
        failed => format!("{failed} FAIL"),
    }
}

/// `quiet`, or the busy reasons: a point measured on a busy machine says so, since its medians
/// describe what else ran.
fn machine_cell(run: &RunRecord) -> String {
    let busy: Vec<&str> = run.busy_reasons().iter().map(|r| r.kind()).collect();
    if busy.is_empty() {
        "quiet".into()
    } else {
        format!("busy: {}", busy.join(", "))
    }
}

/// The run's parameters as the table shows them: `key=value`, a string without quotes, a shape
/// as `1000x1000`.
pub(super) fn parameters(run: &RunRecord) -> Vec<String> {
    let pairs = run.parameters.iter();
    pairs.map(|(k, v)| format!("{k}={}", compact(v))).collect()
}

/// A parameter's value as the table shows it.
fn compact(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(compact).collect::<Vec<_>>().join("x"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::harness::Summary;
    use crate::report::{RunRecord, VariantRecord};

    #[test]
    fn a_run_shows_variants_checks_and_labels() {
        let mut run = RunRecord::new(
            "async",
            serde_json::Map::new(),
            vec!["cpu:0 (2 threads)".into()],
        );
        run.variants.push(VariantRecord {
            name: "push-only".into(),
            label: Some("not the cost".into()),
            summary: Summary::from_samples(&[1e-3, 2e-3, 3e-3]).unwrap(),
        });
        run.check("matches reference", false, "off by one");
        let t = render_run(&run);
        assert!(t.contains("push-only"));
        assert!(t.contains("<- not the cost"));
        assert!(t.contains("check FAIL matches reference: off by one"));
    }

    /// A run of many variants and checks (allreduce's 72 and 24) folds them for a reader,
    /// a failing check never; `--verbose` and the HTML's folds list them all.
    #[test]
    fn many_variants_and_passing_checks_fold_for_a_reader() {
        let mut run = RunRecord::new("allreduce", serde_json::Map::new(), vec![]);
        let names: Vec<String> = (0..30).map(|i| format!("ring {i}B")).collect();
        let summary = Summary::from_samples(&[1.0, 1.0, 1.0]).expect("samples");
        run.add_variants(names.clone(), vec![summary; 30], names.iter().map(|_| None));
        for i in 0..12 {
            run.check(&format!("sum {i}"), i != 5, "detail");
        }
        let reader = render_run_at(&run, Depth::Reader);
        assert!(
            reader.contains("(30 variants: --verbose lists them"),
            "{reader}"
        );
        assert!(!reader.contains("ring 3B"), "{reader}");
        assert!(reader.contains("check FAIL sum 5"), "{reader}");
        assert!(reader.contains("check ok   11 checks passed"), "{reader}");
        let verbose = render_run_at(&run, Depth::Verbose);
        assert!(
            verbose.contains("ring 3B") && verbose.contains("check ok   sum 11"),
            "{verbose}"
        );
        let page = crate::export::html::page(&crate::report::fixtures::report(vec![run]));
        assert!(page.contains("<details><summary>30 variants</summary>"));
        assert!(page.contains("11 checks passed</summary>"));
    }

    #[test]
    fn a_warning_is_shown_as_one_and_a_note_as_a_note() {
        let mut run = RunRecord::new("cpu-gpu", serde_json::Map::new(), vec![]);
        run.notes.push("engine: threaded".into());
        run.warn("overlap efficiency 1.07 is above 1.0");
        let t = render_run(&run);
        assert!(t.contains("   note: engine: threaded\n"), "{t}");
        assert!(
            t.contains("   warning: overlap efficiency 1.07 is above 1.0\n"),
            "{t}"
        );
        assert!(!t.contains("note: warning"), "{t}");
    }
}
