//! `ping-pong`: dependent ops alternating between two single-thread CPU lanes, so every op is
//! a hand-off from one lane's worker to the other's, the cost a multi-device step pays each
//! time it crosses devices; a traced chain gives each hop's latency.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::figures::*;
use super::{per_op, Timed};
use crate::engine::{Engine, LaneId, OpError, Var};
use crate::harness::stats::quantile;
use crate::report::RunRecord;
use crate::scenario::ScenarioError;
use crate::units::human_time;

/// The name of every op of the chain: the traced repeat keeps only these.
const PING_PONG_OP: &str = "ping-pong";

/// Push `n` ops that alternate between two lanes, each writing the same var (so each
/// waits for the one before, on the other lane), each checking it runs in its turn; returns
/// the counter they advance.
pub(super) fn ping_pong(engine: &Engine, lanes: [LaneId; 2], n: u64) -> Arc<AtomicU64> {
    let counter = Arc::new(AtomicU64::new(0));
    let turn = Var::new();
    for i in 0..n {
        let c = counter.clone();
        let lane = lanes[(i % 2) as usize];
        engine.push(PING_PONG_OP, lane, &[], &[&turn], move || {
            match c.compare_exchange(i, i + 1, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => Ok(()),
                Err(seen) => Err(OpError::msg(format!(
                    "op {i} of the ping-pong chain ran when {seen} ops had run, not {i}"
                ))),
            }
        });
    }
    counter
}

/// Each hop's latency in a traced ping-pong chain of `ops` ops: from one op's end on one lane
/// to the next op's start on the other, in seconds, sorted.
pub(super) fn handoffs(
    engine: &Engine,
    lanes: [LaneId; 2],
    ops: u64,
) -> Result<Vec<f64>, ScenarioError> {
    let (_, records) = crate::scenario::kit::traced(engine, || -> Result<(), ScenarioError> {
        ping_pong(engine, lanes, ops);
        engine.wait_all()?;
        Ok(())
    })?;
    let mut records = records.unwrap_or_default();
    records.retain(|r| r.name == PING_PONG_OP);
    let mut hops: Vec<f64> = records
        .windows(2)
        .map(|w| w[1].started_ns.saturating_sub(w[0].ended_ns) as f64 * 1e-9)
        .collect();
    hops.sort_by(f64::total_cmp);
    Ok(hops)
}

/// The hand-off figures and their sentence.
pub(super) fn derive_handoffs(run: &mut RunRecord, n: u64, hops: &[f64]) {
    if hops.is_empty() {
        return;
    }
    let (p50, p99) = (quantile(hops, 0.5), quantile(hops, 0.99));
    run.record(HANDOFF_P50_S, p50);
    run.record(HANDOFF_P99_S, p99);
    let ping_pong = per_op(run, Timed::PingPong, n);
    run.record(PING_PONG_PER_OP_S, ping_pong);
    run.explanation_detail.push(format!(
        "ping-pong: {n} dependent ops alternating between two CPU lanes took {} per op; from \
         one lane's op ending to the next starting on the other lane took {} (median hop) and \
         {} at the 99th percentile, in a traced chain of {} ops: what a multi-device step pays \
         each time it crosses devices.",
        human_time(ping_pong),
        human_time(p50),
        human_time(p99),
        hops.len() + 1
    ));
}
