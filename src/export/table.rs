//! The human table: what a person at a terminal reads.

use std::fmt::Write;

use serde_json::Value;

use crate::report::{Report, RunRecord};
use crate::units::{human_bytes, human_time};

/// A derived figure, formatted by the unit its key names.
pub fn human_derived(key: &str, value: &Value) -> String {
    let Some(v) = value.as_f64() else {
        return match value {
            Value::Null => "n/a".into(),
            Value::Array(points) => format!("{} points (in the JSON)", points.len()),
            other => other.to_string(),
        };
    };
    if key.contains("gflops") {
        format!("{v:.1} GFLOP/s")
    } else if key.contains("gbytes_per_s") {
        format!("{v:.2} GB/s")
    } else if key.ends_with("_s") {
        human_time(v)
    } else if key.ends_with("_bytes") {
        human_bytes(v.max(0.0) as u64)
    } else if key.contains("speedup") || key.ends_with("_ratio") {
        format!("{v:.2}×")
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

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
        "{} {} ({}) on {}: {}, {} cores, {}; engine {}\n{gpu}\n",
        report.tool.name,
        report.tool.version,
        report.tool.git_commit,
        e.host,
        e.cpu_model,
        e.cores,
        human_bytes(e.memory_bytes),
        e.engine
    )
}

/// What `parbench devices` prints.
pub fn render_devices(e: &crate::report::Environment) -> String {
    let mut out = format!(
        "cpu     {}: {} cores available to this process, {} of memory\n        \
         CPU devices (cpu:0, cpu:1, ...) split these cores between them; --cpu-threads sets the share\n",
        e.cpu_model,
        e.cores,
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
    out
}

/// One run as a table with its derived figures, checks, notes and explanation.
pub fn render_run(run: &RunRecord) -> String {
    let mut out = String::new();
    let params: Vec<String> = run
        .parameters
        .iter()
        .map(|(k, v)| format!("{k}={}", compact(v)))
        .collect();
    let _ = writeln!(out, "\n== {} ({})", run.scenario, params.join(", "));
    let _ = writeln!(out, "   devices: {}", run.devices.join(", "));
    let name_w = run
        .variants
        .iter()
        .map(|v| v.name.len())
        .max()
        .unwrap_or(7)
        .max(7);
    let _ = writeln!(
        out,
        "   {:<name_w$}  {:>11}  {:>25}  {:>11}  {:>11}  {:>5}  {:>8}",
        "variant", "median", "95% CI of median", "min", "max", "n", "outliers"
    );
    for v in &run.variants {
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
    if !run.derived.is_empty() {
        let key_w = run.derived.keys().map(|k| k.len()).max().unwrap_or(0);
        let _ = writeln!(out, "   derived:");
        for (k, v) in &run.derived {
            let _ = writeln!(out, "     {k:<key_w$}  {}", human_derived(k, v));
        }
    }
    for c in &run.checks {
        let mark = if c.passed { "ok  " } else { "FAIL" };
        let _ = writeln!(out, "   check {mark} {}: {}", c.name, c.detail);
    }
    for n in &run.notes {
        let _ = writeln!(out, "   note: {n}");
    }
    for line in &run.explanation {
        let _ = writeln!(out, "   > {line}");
    }
    out
}

/// The whole report for a terminal.
pub fn render(report: &Report) -> String {
    let mut out = render_environment(report);
    for run in &report.runs {
        out.push_str(&render_run(run));
    }
    out
}

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
    fn derived_figures_use_their_key_unit() {
        assert_eq!(human_derived("async_speedup", &3.456.into()), "3.46×");
        assert_eq!(human_derived("t1_s", &2e-6.into()), "2.000 µs");
        assert_eq!(human_derived("peak_bytes", &2048.0.into()), "2.0 KiB");
        assert_eq!(human_derived("x", &Value::Null), "n/a");
        assert_eq!(human_derived("copy_gbytes_per_s", &1.5.into()), "1.50 GB/s");
        assert_eq!(
            human_derived("gflops_per_thread", &35.0.into()),
            "35.0 GFLOP/s"
        );
    }

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
}
