use super::*;
use crate::export::html::tests::trace;
use crate::harness::Summary;
use crate::report::timeline::traced_op as rec;
use serde_json::Map;

/// A run of `scenario` whose variants take the given medians (seconds).
fn run(scenario: &str, medians: &[(&str, f64)]) -> RunRecord {
    let mut run = RunRecord::new(scenario, Map::new(), vec!["cpu:0".into()]);
    let summaries = medians
        .iter()
        .map(|(_, m)| {
            let samples: Vec<f64> = (0..6).map(|i| m * (1.0 + i as f64 * 0.01)).collect();
            Summary::from_samples(&samples).expect("samples")
        })
        .collect();
    run.add_variants(
        medians.iter().map(|(n, _)| n.to_string()).collect(),
        summaries,
        medians.iter().map(|_| None),
    );
    run
}

#[test]
fn an_async_report_draws_its_bars_on_a_marked_log_axis() {
    let spread = run(
        "async",
        &[("sync", 0.118), ("async", 40e-6), ("push-only", 2e-6)],
    );
    let svg = variant_bars(&spread, 880.0).expect("drawn");
    assert!(svg.contains("class=\"log-axis\""), "{svg}");
    assert!(svg.contains("on a log scale"), "{svg}");
    assert!(svg.contains(">1 µs<") && svg.contains(">100 ms<"), "{svg}");
    // Medians within 30× of each other stay on a linear axis.
    let close = run("deps", &[("op-by-op", 8e-3), ("parallel", 6e-3)]);
    let svg = variant_bars(&close, 880.0).expect("drawn");
    assert!(
        !svg.contains("log-axis") && !svg.contains("log scale"),
        "{svg}"
    );
}

#[test]
fn timelines_name_their_repeat_and_share_an_axis_where_the_lesson_needs_it() {
    let report = |scenario: &str| {
        let mut r = crate::report::fixtures::report(vec![run(
            scenario,
            &[("a-alone", 1.36e-3), ("parallel", 2e-3)],
        )]);
        for (variant, end) in [("a-alone", 1_000), ("parallel", 7_360_000)] {
            trace(&mut r, variant, vec![rec(0, 0, end)]);
        }
        r
    };
    let shared = timeline_chart(&report("cpu-gpu"), 0, 880.0).expect("drawn");
    assert!(shared.contains("one time axis for all"), "{shared}");
    assert!(
        shared.contains(
            "one extra traced repeat, after the 6 timed (tracing adds overhead): 7.360 ms"
        ),
        "{shared}"
    );
    // Escaped, as SVG text is; the samples are 1.36 ms to 1.43 ms, and a-alone's repeat of
    // 1 µs lies far below every one of them.
    assert!(
        shared.contains("the table&#39;s median: 1.394 ms — this repeat is far from every timed"),
        "{shared}"
    );
    let own = timeline_chart(&report("async"), 0, 880.0).expect("drawn");
    assert!(own.contains("each to its own length"), "{own}");
}

#[test]
fn variants_without_engine_ops_are_left_out_of_the_timeline_with_the_reason() {
    let mut r = crate::report::fixtures::report(vec![run(
        "memory",
        &[("unbounded", 0.04), ("bounded", 0.04)],
    )]);
    for (variant, records) in [("unbounded", vec![rec(0, 0, 500)]), ("bounded", vec![])] {
        trace(&mut r, variant, records);
    }
    let svg = timeline_chart(&r, 0, 880.0).expect("drawn");
    assert!(
        svg.contains(">unbounded<") && !svg.contains(">bounded<"),
        "{svg}"
    );
    let note = timeline_note(&r, 0).expect("a note");
    assert!(
        note.contains("bounded") && note.contains("engine of their own"),
        "{note}"
    );
}

#[test]
fn the_memory_chart_draws_a_line_per_live_bytes_series_in_binary_units() {
    let mut r = run("memory", &[("unbounded", 0.04), ("bounded", 0.04)]);
    let mib = 1024.0 * 1024.0;
    r.derive_series(
        "unbounded_live_bytes",
        serde_json::json!([[0.0, 0.0], [0.01, 30.0 * mib], [0.02, 0.0]]),
    );
    r.derive_series(
        "bounded_live_bytes",
        serde_json::json!([[0.0, 0.0], [0.01, 1.0 * mib], [0.03, 0.0]]),
    );
    let svg = memory_chart(&r, 880.0).expect("drawn");
    assert_eq!(svg.matches("<polyline").count(), 2);
    assert!(svg.contains("live memory (MiB)"), "{svg}");
    assert!(memory_chart(&run("async", &[("sync", 1.0)]), 880.0).is_none());
}

/// `sweep allreduce --set devices=2,4 --set sizes=4MiB,64MiB`: each point's variants are named
/// by its size, so every series the sweep holds is drawn (the 64 MiB ones included), and the
/// devices axis ticks at whole numbers.
#[test]
fn a_sweep_draws_every_series_it_holds_on_a_counting_axis() {
    let point = |devices: u64, size: &str, median: f64| {
        let mut r = run(
            "allreduce",
            &[
                (&format!("ring {size}") as &str, median),
                (&format!("parameter-server {size}"), median * 1.5),
            ],
        );
        r.parameters.insert("devices".into(), devices.into());
        r.parameters
            .insert("sizes".into(), serde_json::json!([size]));
        r
    };
    let runs = [
        point(2, "4MiB", 1e-3),
        point(2, "64MiB", 16e-3),
        point(4, "4MiB", 2e-3),
        point(4, "64MiB", 30e-3),
    ];
    let refs: Vec<&RunRecord> = runs.iter().collect();
    let charts = sweep_charts("allreduce", "devices", &refs, 880.0);
    let svg = &charts[0];
    assert!(svg.contains("ring 64MiB"), "no 64 MiB line: {svg}");
    assert!(!svg.contains("ring 4MiB (sizes=[\"64MiB\"])"), "{svg}");
    assert!(!svg.contains(">2.5<") && !svg.contains(">3.5<"), "{svg}");
    assert!(svg.contains(">3<"), "{svg}");
}

/// cpu-gpu's traced repeat drew 1.849 s against samples of about 1.085 s: its picture says it
/// is far from every timed sample, and one within them says nothing of the kind.
#[test]
fn a_traced_repeat_far_from_the_samples_is_flagged() {
    let chart_for = |span_ns: u64| {
        let mut r = crate::report::fixtures::report(vec![run("cpu-gpu", &[("parallel", 1.085)])]);
        trace(&mut r, "parallel", vec![rec(0, 0, span_ns)]);
        timeline_chart(&r, 0, 880.0).expect("drawn")
    };
    let far = chart_for(1_849_000_000);
    assert!(far.contains("far from every timed sample"), "{far}");
    let near = chart_for(1_100_000_000);
    assert!(!near.contains("far from every timed sample"), "{near}");
}

/// A sweep point measured on a busy machine is ringed on the chart, with a legend entry; a
/// sweep of quiet points has neither.
#[test]
fn a_busy_sweep_point_is_ringed() {
    let point = |threads: u64, median: f64, busy: bool| {
        let mut r = run("matmul", &[("matmul", median)]);
        r.parameters.insert("threads".into(), threads.into());
        r.state = Some(crate::machine::RunState {
            other_cpu_fraction: Some(if busy { 0.5 } else { 0.01 }),
            ..crate::machine::RunState::unknown(1.0, 2)
        });
        r
    };
    let runs = [point(1, 2.0, false), point(2, 1.0, true)];
    let refs: Vec<&RunRecord> = runs.iter().collect();
    let svg = &sweep_charts("matmul", "threads", &refs, 880.0)[0];
    assert_eq!(
        svg.matches("stroke=\"#b35c00\"").count(),
        2,
        "the point and the legend: {svg}"
    );
    assert!(svg.contains("measured on a busy machine"), "{svg}");
    let quiet = [point(1, 2.0, false), point(2, 1.0, false)];
    let refs: Vec<&RunRecord> = quiet.iter().collect();
    let svg = &sweep_charts("matmul", "threads", &refs, 880.0)[0];
    assert!(!svg.contains("busy machine"), "{svg}");
}
