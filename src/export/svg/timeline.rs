//! The lane timelines of a traced repeat, on one time axis where the lesson compares lengths.

use crate::export::chart::{self, GanttGroup};
use crate::report::Report;
use crate::units::human_time;

/// Scenarios whose lesson is how long variants take side by side (parallel ≈ max(a, b), copy
/// hidden behind compute, a graph's lanes against one): their timelines share one time axis.
const SHARED_TIME_AXIS: [&str; 3] = ["cpu-gpu", "run-copy", "deps"];

/// How far outside the timed samples' range a traced repeat may lie before its picture is
/// flagged: tracing costs a few percent, a repeat 1.7× the median (cpu-gpu's 1.849 s against
/// 1.085 s) is another run altogether.
const FAR_FROM_SAMPLES: f64 = 1.25;

/// The lane timelines recorded for run `index` of `report`, one block per traced variant;
/// `None` when the report carries none for it, or none with an engine op. Each block says it
/// is the extra traced repeat and gives the table's median beside it: tracing slows ops, and
/// the repeat is one sample, so the two differ. For the scenarios of [`SHARED_TIME_AXIS`] the
/// blocks share one time axis. A variant whose repeat recorded no engine op is left out (see
/// [`timeline_note`]).
pub fn timeline_chart(report: &Report, index: usize, width: f64) -> Option<String> {
    let run = report.runs.get(index)?;
    let groups: Vec<GanttGroup> = report
        .timelines
        .iter()
        .filter(|t| t.run == index && t.ops > 0)
        .map(|t| {
            let variant = run.variants.iter().find(|v| v.name == t.variant);
            let timed = variant.map_or(String::new(), |v| {
                format!(", after the {} timed", v.summary.samples_s.len())
            });
            let span_s = t.span_ns as f64 * 1e-9;
            let median = variant.map_or(String::new(), |v| {
                let s = &v.summary;
                // A repeat outside every timed sample, by more than tracing's own cost, is
                // not a typical run: said, so the picture is not read as one.
                let far = (span_s > s.max_s * FAR_FROM_SAMPLES
                    || span_s < s.min_s / FAR_FROM_SAMPLES)
                    .then(|| {
                        format!(
                            " — this repeat is far from every timed sample ({}–{}): not a \
                             typical run",
                            human_time(s.min_s),
                            human_time(s.max_s)
                        )
                    });
                let median = human_time(s.median_s);
                format!("the table's median: {median}{} · ", far.unwrap_or_default())
            });
            GanttGroup {
                title: t.variant.clone(),
                detail: format!(
                    "one extra traced repeat{timed} (tracing adds overhead): {}\n{median}{}",
                    human_time(span_s),
                    crate::units::count(t.ops, "op")
                ),
                lanes: t
                    .lanes
                    .iter()
                    .map(|l| {
                        let busy = l.busy_ns.iter().map(|&[a, b]| (a as f64, b as f64));
                        (
                            l.lane.clone(),
                            busy.map(|(a, b)| (a * 1e-9, b * 1e-9)).collect(),
                        )
                    })
                    .collect(),
            }
        })
        .collect();
    let (axis, scale) = if SHARED_TIME_AXIS.contains(&run.scenario.as_str()) {
        (chart::TimeAxis::Shared, "one time axis for all")
    } else {
        (chart::TimeAxis::PerVariant, "each to its own length")
    };
    chart::gantt(
        &format!(
            "{}: lane timeline of the traced repeat, {scale}",
            run.scenario
        ),
        &groups,
        axis,
        width,
    )
}

/// Why some variants of run `index` have no lane timeline: their traced repeat recorded no
/// engine op. `None` when every traced variant has one.
pub fn timeline_note(report: &Report, index: usize) -> Option<String> {
    let empty: Vec<&str> = report
        .timelines
        .iter()
        .filter(|t| t.run == index && t.ops == 0)
        .map(|t| t.variant.as_str())
        .collect();
    if empty.is_empty() {
        return None;
    }
    let why = match report.runs.get(index).map(|r| r.scenario.as_str()) {
        // The bounded variants run on an engine of their own (the one with the bound), and
        // the traced repeat records the scenario's main engine.
        Some("memory") => {
            "they run on an engine of their own, with the bound on ops in flight, which the \
             traced repeat does not record"
        }
        _ => "their work ran outside the engine's lanes",
    };
    Some(format!(
        "No lane timeline for {}: the traced repeat recorded no engine op, since {why}.",
        empty.join(", ")
    ))
}
