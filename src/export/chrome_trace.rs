//! Seeing the schedule: the engine's op records as a Chrome trace (Perfetto, chrome://tracing)
//! and as a text timeline, one row per lane, so overlap is visible at a glance.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde_json::{json, Value};

pub use crate::report::TracedRun;

/// Chrome trace-event JSON: one process per traced variant, one thread (track) per lane,
/// one complete (`"ph": "X"`) event per op. Times are microseconds from the variant's first op.
pub fn chrome_trace(runs: &[TracedRun]) -> Value {
    let mut events = Vec::new();
    for (pid, run) in runs.iter().enumerate() {
        let pid = pid + 1;
        events.push(json!({
            "name": "process_name", "ph": "M", "pid": pid, "tid": 0,
            "args": {"name": format!("{} / {}", run.scenario, run.variant)}
        }));
        let origin = run.records.iter().map(|r| r.started_ns).min().unwrap_or(0);
        let lanes: BTreeMap<usize, &str> = run
            .records
            .iter()
            .map(|r| (r.lane, r.lane_name.as_str()))
            .collect();
        for (lane, name) in lanes {
            events.push(json!({
                "name": "thread_name", "ph": "M", "pid": pid, "tid": lane,
                "args": {"name": name}
            }));
        }
        for r in &run.records {
            events.push(json!({
                "name": r.name,
                "cat": run.variant,
                "ph": "X",
                "pid": pid,
                "tid": r.lane,
                "ts": (r.started_ns - origin) as f64 / 1e3,
                "dur": r.duration_ns() as f64 / 1e3,
                "args": {
                    "lane": r.lane_name,
                    "thread": r.worker,
                    "push_order": r.seq,
                    "reads": r.reads,
                    "writes": r.writes,
                    "queued_us": r.queued_ns() as f64 / 1e3,
                    "failed": r.failed,
                }
            }));
        }
    }
    json!({ "traceEvents": events, "displayTimeUnit": "ms" })
}

/// A text Gantt chart of one traced run: a row per lane, `█` where the lane ran an op.
pub fn timeline(run: &TracedRun, width: usize) -> String {
    let width = width.max(10);
    let mut out = String::new();
    let Some(start) = run.records.iter().map(|r| r.started_ns).min() else {
        return format!("   timeline of {}: no ops recorded\n", run.variant);
    };
    let end = run
        .records
        .iter()
        .map(|r| r.ended_ns)
        .max()
        .unwrap_or(start)
        .max(start + 1);
    let span = (end - start) as f64;
    let mut lanes: BTreeMap<usize, (&str, Vec<bool>)> = BTreeMap::new();
    for r in &run.records {
        let row = &mut lanes
            .entry(r.lane)
            .or_insert_with(|| (&r.lane_name, vec![false; width]))
            .1;
        let a = ((((r.started_ns - start) as f64 / span) * width as f64).floor() as usize)
            .min(width - 1);
        let b = (((r.ended_ns - start) as f64 / span) * width as f64).ceil() as usize;
        for cell in row
            .iter_mut()
            .take(b.clamp(a + 1, width))
            .skip(a.min(width - 1))
        {
            *cell = true;
        }
    }
    let name_w = lanes
        .values()
        .map(|(n, _)| n.chars().count())
        .max()
        .unwrap_or(4);
    let _ = writeln!(
        out,
        "   timeline of {} ({} ops, {}):",
        run.variant,
        run.records.len(),
        crate::units::human_time(span * 1e-9)
    );
    for (name, row) in lanes.values() {
        let bar: String = row
            .iter()
            .map(|&busy| if busy { '█' } else { '·' })
            .collect();
        let _ = writeln!(out, "     {name:<name_w$} |{bar}|");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::TraceRecord;

    fn record(lane: usize, name: &str, start: u64, end: u64) -> TraceRecord {
        TraceRecord {
            name: name.into(),
            ..crate::report::timeline::traced_op(lane, start, end)
        }
    }

    fn run() -> TracedRun {
        TracedRun {
            scenario: "cpu-gpu".into(),
            variant: "parallel".into(),
            records: vec![
                record(0, "matmul", 1_000, 5_000),
                record(1, "matmul", 1_000, 9_000),
            ],
        }
    }

    #[test]
    fn chrome_trace_has_the_event_fields_and_a_track_per_lane() {
        let t = chrome_trace(&[run()]);
        let events = t["traceEvents"].as_array().unwrap();
        let ops: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
        assert_eq!(ops.len(), 2);
        for e in &ops {
            for key in ["name", "ph", "ts", "dur", "tid", "pid"] {
                assert!(!e[key].is_null(), "{key} missing in {e}");
            }
        }
        assert_eq!(ops[0]["ts"], 0.0);
        assert_eq!(ops[1]["dur"], 8.0);
        let tracks: Vec<&Value> = events
            .iter()
            .filter(|e| e["name"] == "thread_name")
            .collect();
        assert_eq!(tracks.len(), 2);
        assert_eq!(tracks[1]["args"]["name"], "cpu:1");
    }

    #[test]
    fn timeline_draws_one_row_per_lane() {
        let text = timeline(&run(), 20);
        let rows: Vec<&str> = text.lines().filter(|l| l.contains('|')).collect();
        assert_eq!(rows.len(), 2);
        // cpu:0 is busy for the first half only, cpu:1 throughout.
        assert!(rows[0].contains("cpu:0 |██████████··········|"), "{text}");
        assert!(rows[1].contains("cpu:1 |████████████████████|"), "{text}");
    }
}
