//! Per-op trace records: which lane and thread ran what, when, and on which vars.
//!
//! Recording is off by default (clock reads, a lock and a few small allocations per op);
//! scenarios switch it on for the repeats they want to show or check, and the report layer
//! turns the records into a Chrome trace or a text timeline.
//!
//! Because a record names the vars its op read and wrote and its place in push order, a trace
//! is self-describing: [`dependencies`] rebuilds the engine's ordering rules from it alone, so
//! [`check_order`] can verify that a run respected every dependency, and [`critical_path`]
//! gives a bound that the run itself must respect (it is computed from the run's own op
//! times, so no schedule of those ops could have finished sooner).

use std::collections::HashMap;

use serde::Serialize;

/// One completed op. Times are nanoseconds since the engine started ([`Engine::now_ns`](super::Engine::now_ns)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TraceRecord {
    /// Lane index and display name.
    pub lane: usize,
    pub lane_name: String,
    /// The op's name as pushed.
    pub name: String,
    /// Position in push order among the ops pushed while tracing was on.
    pub seq: u64,
    /// Ids ([`Var::id`](super::Var::id)) of the vars the op read and wrote, as the engine
    /// registered them (duplicates removed; a var both read and written is a write).
    pub reads: Vec<u64>,
    pub writes: Vec<u64>,
    /// Name of the thread that ran the body; empty for an op that never ran a body (skipped
    /// because of an upstream error, or an engine-internal op).
    pub worker: String,
    /// When `push` was called (0 if tracing was switched on after the push).
    pub pushed_ns: u64,
    /// When the body started (equal to `ended_ns` for an op skipped because of an upstream error).
    pub started_ns: u64,
    /// When the op completed.
    pub ended_ns: u64,
    /// The op failed, panicked or was skipped.
    pub failed: bool,
}

impl TraceRecord {
    /// Time the body ran, in nanoseconds.
    pub fn duration_ns(&self) -> u64 {
        self.ended_ns.saturating_sub(self.started_ns)
    }

    /// Time from push to start (dependency wait plus queueing), in nanoseconds.
    pub fn queued_ns(&self) -> u64 {
        self.started_ns.saturating_sub(self.pushed_ns)
    }
}

/// For each record of `records` (sorted by [`TraceRecord::seq`]), the indices of the earlier
/// records it directly depends on under the engine's rules: a read waits for the last write
/// of its var; a write waits for the last write and for every read since.
pub fn dependencies(records: &[TraceRecord]) -> Vec<Vec<usize>> {
    #[derive(Default)]
    struct VarState {
        last_write: Option<usize>,
        reads_since: Vec<usize>,
    }
    let mut vars: HashMap<u64, VarState> = HashMap::new();
    let mut deps = Vec::with_capacity(records.len());
    for (i, r) in records.iter().enumerate() {
        let mut mine: Vec<usize> = r
            .reads
            .iter()
            .filter_map(|v| vars.get(v)?.last_write)
            .collect();
        for s in r.writes.iter().filter_map(|v| vars.get(v)) {
            mine.extend(s.last_write);
            mine.extend(&s.reads_since);
        }
        for v in &r.reads {
            vars.entry(*v).or_default().reads_since.push(i);
        }
        for v in &r.writes {
            let s = vars.entry(*v).or_default();
            s.last_write = Some(i);
            s.reads_since.clear();
        }
        mine.sort_unstable();
        mine.dedup();
        deps.push(mine);
    }
    deps
}

/// An op that started before an op it depends on had completed, seen in a trace.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("op #{op} '{op_name}' started {early_ns} ns before op #{dependency} '{dependency_name}' it depends on had completed")]
pub struct OrderViolation {
    pub op: u64,
    pub op_name: String,
    pub early_ns: u64,
    pub dependency: u64,
    pub dependency_name: String,
}

/// Verify from the trace alone that no op started before an op it depends on had completed.
/// `records` must hold every op of the traced run, sorted by push order.
pub fn check_order(records: &[TraceRecord]) -> Result<(), OrderViolation> {
    for (i, before) in dependencies(records).into_iter().enumerate() {
        let r = &records[i];
        for j in before {
            let d = &records[j];
            if r.started_ns < d.ended_ns {
                return Err(OrderViolation {
                    op: r.seq,
                    op_name: r.name.to_string(),
                    early_ns: d.ended_ns - r.started_ns,
                    dependency: d.seq,
                    dependency_name: d.name.to_string(),
                });
            }
        }
    }
    Ok(())
}

/// What a traced run's own op times say about how fast any schedule could have run it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CriticalPath {
    /// The longest chain of dependent ops, by the ops' own run times.
    pub path_ns: u64,
    /// The sum of every op's run time.
    pub work_ns: u64,
    /// The largest sum of run times on one lane (a bound where a lane has one worker).
    pub busiest_lane_ns: u64,
}

/// The critical path of a traced run (records sorted by push order).
pub fn critical_path(records: &[TraceRecord]) -> CriticalPath {
    let mut finish = vec![0u64; records.len()];
    let mut lanes: HashMap<usize, u64> = HashMap::new();
    for (i, before) in dependencies(records).into_iter().enumerate() {
        let ready = before.iter().map(|&j| finish[j]).max().unwrap_or(0);
        finish[i] = ready + records[i].duration_ns();
        *lanes.entry(records[i].lane).or_default() += records[i].duration_ns();
    }
    CriticalPath {
        path_ns: finish.iter().copied().max().unwrap_or(0),
        work_ns: records.iter().map(TraceRecord::duration_ns).sum(),
        busiest_lane_ns: lanes.values().copied().max().unwrap_or(0),
    }
}

/// Nanoseconds during which at least one op of `lane` was running: the union of its ops'
/// intervals. Unlike a sum of run times it never exceeds the wall time, even for a GPU lane
/// whose ops' intervals (enqueue to completion) overlap.
pub fn lane_busy_ns(records: &[TraceRecord], lane: usize) -> u64 {
    let mut spans: Vec<(u64, u64)> = records
        .iter()
        .filter(|r| r.lane == lane)
        .map(|r| (r.started_ns, r.ended_ns))
        .collect();
    spans.sort_unstable();
    let (mut total, mut open): (u64, Option<(u64, u64)>) = (0, None);
    for (s, e) in spans {
        open = match open {
            Some((os, oe)) if s <= oe => Some((os, oe.max(e))),
            Some((os, oe)) => {
                total += oe - os;
                Some((s, e))
            }
            None => Some((s, e)),
        };
    }
    total + open.map_or(0, |(s, e)| e.saturating_sub(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(seq: u64, lane: usize, reads: &[u64], writes: &[u64], at: (u64, u64)) -> TraceRecord {
        TraceRecord {
            lane,
            lane_name: format!("lane:{lane}"),
            name: format!("op{seq}"),
            seq,
            reads: reads.to_vec(),
            writes: writes.to_vec(),
            worker: String::new(),
            pushed_ns: 0,
            started_ns: at.0,
            ended_ns: at.1,
            failed: false,
        }
    }

    #[test]
    fn dependencies_follow_raw_war_and_waw() {
        let t = [
            op(0, 0, &[], &[1], (0, 10)),   // w1
            op(1, 1, &[1], &[2], (10, 20)), // r1 (RAW on 0)
            op(2, 0, &[1], &[3], (10, 30)), // r1 (RAW on 0)
            op(3, 1, &[], &[1], (30, 40)),  // w1: WAW on 0, WAR on 1 and 2
            op(4, 0, &[9], &[8], (0, 5)),   // independent
        ];
        assert_eq!(
            dependencies(&t),
            vec![vec![], vec![0], vec![0], vec![0, 1, 2], vec![]]
        );
        assert!(check_order(&t).is_ok());
        let cp = critical_path(&t);
        // 0 (10) -> 2 (20) -> 3 (10) = 40.
        assert_eq!(cp.path_ns, 40);
        assert_eq!(cp.work_ns, 10 + 10 + 20 + 10 + 5);
        assert_eq!(cp.busiest_lane_ns, 10 + 20 + 5);
    }

    #[test]
    fn lane_busy_is_the_union_of_intervals() {
        let t = [
            op(0, 0, &[], &[1], (0, 10)),
            op(1, 0, &[], &[2], (5, 20)), // overlaps the first: counted once
            op(2, 0, &[], &[3], (30, 40)), // a gap before it
            op(3, 1, &[], &[4], (0, 100)), // another lane
        ];
        assert_eq!(lane_busy_ns(&t, 0), 20 + 10);
        assert_eq!(lane_busy_ns(&t, 1), 100);
        assert_eq!(lane_busy_ns(&t, 7), 0);
    }

    #[test]
    fn check_order_catches_a_write_that_overtook_a_read() {
        // The write (seq 2) starts while the earlier read of the same var still runs.
        let t = [
            op(0, 0, &[], &[1], (0, 10)),
            op(1, 1, &[1], &[2], (10, 50)),
            op(2, 0, &[], &[1], (20, 30)),
        ];
        let e = check_order(&t).unwrap_err();
        assert_eq!((e.op, e.dependency), (2, 1), "{e}");
        assert!(e.to_string().starts_with("op #2 '"), "{e}");
        // A read that overtook the write it depends on is caught too.
        let t = [op(0, 0, &[], &[1], (0, 10)), op(1, 1, &[1], &[], (5, 20))];
        assert!(check_order(&t).is_err());
    }
}
