//! Per-op trace records: which lane ran what, and when.
//!
//! Recording is off by default (three clock reads and a lock per op); scenarios switch it on
//! for the repeat they want to show, and the report layer turns the records into a Chrome
//! trace or a text timeline.

use serde::Serialize;

/// One completed op. Times are nanoseconds since the engine started ([`Engine::now_ns`](super::Engine::now_ns)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TraceRecord {
    /// Lane index and display name.
    pub lane: usize,
    pub lane_name: String,
    /// The op's name as pushed.
    pub name: String,
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
