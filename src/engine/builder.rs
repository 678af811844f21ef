//! Building an [`Engine`]: its mode, lanes, bound on ops in flight, placement log and the
//! devices' synchronizations for `wait_all`.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use super::lane::{self, Lane};
use super::{Engine, LaneId, LaneSpec, Mode, Owner, Padded, Retired, Shared};

/// A function `wait_all` calls after every op has completed, to synchronize a device (a CUDA
/// device synchronizes its streams).
pub type SyncHook = Box<dyn Fn() -> Result<(), String> + Send + Sync>;

/// Builds an [`Engine`]: choose the mode, add lanes, then [`build`](EngineBuilder::build).
#[derive(Default)]
pub struct EngineBuilder {
    mode: Mode,
    lanes: Vec<LaneSpec>,
    max_inflight: Option<usize>,
    log_placement: bool,
    sync_hooks: Vec<SyncHook>,
}

impl EngineBuilder {
    pub(super) fn new(mode: Mode) -> EngineBuilder {
        EngineBuilder {
            mode,
            ..EngineBuilder::default()
        }
    }

    /// Add a lane; ops are pushed to it by the returned id.
    pub fn lane(&mut self, spec: LaneSpec) -> LaneId {
        self.lanes.push(spec);
        LaneId(self.lanes.len() - 1)
    }

    /// Bound the ops pushed and not yet completed: `push` blocks while `n` are pending.
    /// `None` (the default) is unbounded. `Some(0)` is treated as `Some(1)`.
    pub fn max_inflight(&mut self, n: Option<usize>) -> &mut Self {
        self.max_inflight = n.map(|n| n.max(1));
        self
    }

    /// Print each op's lane to stderr as it starts (the book's `log_device_placement`), for
    /// the first [`PLACEMENT_LINES_PER_LANE`](super::PLACEMENT_LINES_PER_LANE) ops of each lane, and a count of the rest at
    /// shutdown.
    pub fn log_placement(&mut self, on: bool) -> &mut Self {
        self.log_placement = on;
        self
    }

    /// Register a device synchronization for `wait_all`.
    pub fn on_wait_all(&mut self, hook: SyncHook) -> &mut Self {
        self.sync_hooks.push(hook);
        self
    }

    /// Start the workers. Fails only if the OS refuses a thread.
    pub fn build(self) -> Result<Engine, std::io::Error> {
        let shared = Arc::new(Shared {
            lanes: self.lanes.into_iter().map(Lane::new).collect(),
            mode: self.mode,
            log_placement: self.log_placement,
            max_inflight: self.max_inflight,
            pushed: Padded(AtomicUsize::new(0)),
            completed: Padded(AtomicUsize::new(0)),
            max_pending: AtomicUsize::new(0),
            idle_lock: Mutex::new(()),
            idle_cv: Condvar::new(),
            idle_waiters: AtomicUsize::new(0),
            retired: Padded(Retired::default()),
            first_error: Mutex::new(None),
            tracing: AtomicBool::new(false),
            trace_seq: AtomicU64::new(0),
            trace: Mutex::new(Vec::new()),
            epoch: Instant::now(),
            sync_hooks: self.sync_hooks,
        });
        let mut threads = Vec::new();
        for i in 0..shared.lanes.len() {
            threads.extend(lane::start_workers(&shared, i)?);
        }
        Ok(Engine {
            owner: Arc::new(Owner {
                shared,
                threads: Mutex::new(threads),
            }),
        })
    }
}
