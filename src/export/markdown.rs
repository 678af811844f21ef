//! A report as Markdown, for a pull request, an issue or a wiki: per run a heading with its
//! scenario and parameters, a table of the variants (median, the median's 95% interval, p90,
//! p99, samples) and a table of the derived figures, each worded as the terminal table words
//! it (`848.6 µs`, `4.58×`, `12.3 GFLOP/s`).

use std::fmt::Write;

use super::table::parameters;
use crate::report::{Report, RunRecord};
use crate::units::human_time;

/// `text` safe in a Markdown table cell: `|` escaped, line breaks as spaces.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

fn render_run(out: &mut String, run: &RunRecord) {
    let params = parameters(run);
    let _ = writeln!(
        out,
        "## {} ({})\n",
        cell(&run.scenario),
        cell(&params.join(", "))
    );
    if !run.devices.is_empty() {
        let _ = writeln!(out, "Devices: {}\n", cell(&run.devices.join(", ")));
    }
    let _ = writeln!(
        out,
        "| variant | median | 95% CI of the median | p90 | p99 | n |\n|---|---:|---:|---:|---:|---:|"
    );
    for v in &run.variants {
        let s = &v.summary;
        let (p90, p99) = v.percentiles().map_or(("n/a".into(), "n/a".into()), |p| {
            (human_time(p.p90_s), human_time(p.p99_s))
        });
        let _ = writeln!(
            out,
            "| {} | {} | {} – {} | {p90} | {p99} | {} |",
            cell(&v.name),
            human_time(s.median_s),
            human_time(s.ci95_s[0]),
            human_time(s.ci95_s[1]),
            s.samples_s.len()
        );
    }
    let derived = run.derived_display();
    if !derived.is_empty() {
        let _ = writeln!(out, "\n| derived figure | value |\n|---|---:|");
        for (key, text) in derived {
            let _ = writeln!(out, "| {} | {} |", cell(key), cell(&text));
        }
    }
    out.push('\n');
}

/// The report as Markdown: a section per run, in the report's order.
pub fn render(report: &Report) -> String {
    let mut out = String::from("# parbench report\n\n");
    for run in &report.runs {
        render_run(&mut out, run);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Better, Figure, Unit};

    #[test]
    fn a_table_per_run_with_its_variants_and_figures_in_their_units() {
        let mut params = serde_json::Map::new();
        params.insert("size".into(), serde_json::Value::from(64));
        let mut run = RunRecord::new("matmul", params, vec!["cpu:0 (2 threads)".into()]);
        run.add_variants(
            vec!["a|b".into()],
            vec![crate::harness::Summary::from_samples(&[1e-3, 2e-3, 3e-3]).expect("samples")],
            [None],
        );
        run.derive_as("gflops", 12.345, Figure::new(Unit::Gflops, Better::Higher));
        let report = crate::report::fixtures::report(vec![run]);
        let text = render(&report);
        assert!(text.contains("## matmul (size=64)"), "{text}");
        assert!(text.contains("|---|---:|---:|---:|---:|---:|"), "{text}");
        assert!(
            text.contains("| a\\|b | 2.000 ms | 1.000 ms – 3.000 ms |"),
            "{text}"
        );
        assert!(text.contains("| gflops | 12.3 GFLOP/s |"), "{text}");
    }
}
