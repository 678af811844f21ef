//! A traced repeat reduced to what a picture of it needs: per lane, the intervals in which the
//! lane was busy. A report carries these (`Report::timelines`, optional in `parbench/1`) when
//! its runs were traced (`--html`, `--trace`, `--timeline`), so a saved report can still draw
//! its lane timelines; the op-by-op records stay in the Chrome trace.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::TracedRun;

/// Intervals closer than this fraction of the whole span are merged: a lane's busy row keeps at
/// most about this many gaps, however many ops it ran.
const RESOLUTION: u64 = 1000;

/// The lane timeline of one traced variant of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    /// Index of the run in `Report::runs`.
    pub run: usize,
    pub variant: String,
    pub ops: usize,
    /// From the first op's start to the last op's end, nanoseconds.
    pub span_ns: u64,
    pub lanes: Vec<LaneBusy>,
}

/// When one lane was busy, as `[start, end]` nanoseconds from the timeline's start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaneBusy {
    pub lane: String,
    pub ops: usize,
    pub busy_ns: Vec<[u64; 2]>,
}

impl Timeline {
    /// The timeline of `trace`, the traced repeat of a variant of run `run`.
    pub fn of(run: usize, trace: &TracedRun) -> Timeline {
        let records = &trace.records;
        let start = records.iter().map(|r| r.started_ns).min().unwrap_or(0);
        let end = records.iter().map(|r| r.ended_ns).max().unwrap_or(0);
        let span_ns = end.saturating_sub(start);
        let gap = span_ns / RESOLUTION;
        let mut lanes: BTreeMap<usize, (String, Vec<[u64; 2]>)> = BTreeMap::new();
        for r in records {
            lanes
                .entry(r.lane)
                .or_insert_with(|| (r.lane_name.clone(), Vec::new()))
                .1
                .push([r.started_ns - start, r.ended_ns.max(r.started_ns) - start]);
        }
        let lanes = lanes
            .into_values()
            .map(|(lane, mut spans)| {
                let ops = spans.len();
                spans.sort_unstable();
                let mut busy: Vec<[u64; 2]> = Vec::new();
                for [a, b] in spans {
                    match busy.last_mut() {
                        Some(last) if a <= last[1] + gap => last[1] = last[1].max(b),
                        _ => busy.push([a, b]),
                    }
                }
                LaneBusy {
                    lane,
                    ops,
                    busy_ns: busy,
                }
            })
            .collect();
        Timeline {
            run,
            variant: trace.variant.clone(),
            ops: records.len(),
            span_ns,
            lanes,
        }
    }
}

/// An op on lane `lane` (named `cpu:<lane>`) that ran from `start` to `end`, for tests.
#[cfg(test)]
pub(crate) fn traced_op(lane: usize, start: u64, end: u64) -> crate::engine::TraceRecord {
    crate::engine::TraceRecord {
        lane,
        lane_name: format!("cpu:{lane}"),
        name: "op".into(),
        seq: 0,
        reads: Vec::new(),
        writes: Vec::new(),
        worker: String::new(),
        pushed_ns: start,
        started_ns: start,
        ended_ns: end,
        failed: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::TraceRecord;

    #[test]
    fn busy_intervals_are_merged_per_lane_and_start_at_zero() {
        let trace = TracedRun {
            scenario: "deps".into(),
            variant: "parallel".into(),
            records: vec![
                traced_op(1, 5_000, 9_000),
                traced_op(0, 1_000, 2_000),
                // Touches the previous op: one interval.
                traced_op(0, 2_000, 3_000),
                // Far enough away to stay apart.
                traced_op(0, 6_000, 11_000),
            ],
        };
        let t = Timeline::of(3, &trace);
        assert_eq!((t.run, t.ops, t.span_ns), (3, 4, 10_000));
        assert_eq!(t.lanes.len(), 2);
        assert_eq!(t.lanes[0].lane, "cpu:0");
        assert_eq!(t.lanes[0].ops, 3);
        assert_eq!(t.lanes[0].busy_ns, vec![[0, 2_000], [5_000, 10_000]]);
        assert_eq!(t.lanes[1].busy_ns, vec![[4_000, 8_000]]);
    }

    #[test]
    fn a_lane_of_many_ops_keeps_at_most_the_resolution_in_gaps() {
        let records: Vec<TraceRecord> = (0..100_000u64)
            .map(|i| traced_op(0, i * 10, i * 10 + 9))
            .collect();
        let trace = TracedRun {
            scenario: "async".into(),
            variant: "sync".into(),
            records,
        };
        let t = Timeline::of(0, &trace);
        assert!(t.lanes[0].busy_ns.len() <= RESOLUTION as usize + 1);
        assert_eq!(t.lanes[0].ops, 100_000);
    }
}
