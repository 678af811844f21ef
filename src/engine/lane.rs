//! Lanes: where ready ops run.
//!
//! A lane is a queue plus its worker threads. A CPU device's lane runs its workers *inside*
//! the device's rayon pool, so an op's inner parallelism (a matmul's `par_iter`, say) uses that
//! device's threads and no other. A CUDA device has two lanes, compute and copy, so copies
//! overlap compute.

use std::cell::Cell;
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, TryRecvError};

use std::panic::{catch_unwind, AssertUnwindSafe};

use super::error::{panic_message, EngineError};
use super::op::{complete, execute, OpRef};
use super::Shared;

/// Identifies a lane of one engine (returned by [`EngineBuilder::lane`](super::EngineBuilder::lane)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LaneId(pub(crate) usize);

impl LaneId {
    /// The lane's index in the order lanes were added.
    pub fn index(self) -> usize {
        self.0
    }
}

/// How to build a lane.
#[derive(Clone)]
pub struct LaneSpec {
    pub(crate) name: String,
    pub(crate) workers: usize,
    pub(crate) pool: Option<Arc<rayon::ThreadPool>>,
}

impl LaneSpec {
    /// A lane served by `workers` dedicated OS threads.
    pub fn threads(name: impl Into<String>, workers: usize) -> LaneSpec {
        LaneSpec {
            name: name.into(),
            workers: workers.max(1),
            pool: None,
        }
    }

    /// A lane whose `workers` run inside `pool` (at most the pool's size), so ops pushed to
    /// it run on, and parallelize over, that pool's threads only.
    pub fn in_pool(
        name: impl Into<String>,
        pool: Arc<rayon::ThreadPool>,
        workers: usize,
    ) -> LaneSpec {
        let workers = workers.clamp(1, pool.current_num_threads().max(1));
        LaneSpec {
            name: name.into(),
            workers,
            pool: Some(pool),
        }
    }

    /// The lane's display name (`cpu:0`, `cuda:0 copy`, ...).
    pub fn name(&self) -> &str {
        &self.name
    }
}

pub(crate) enum Msg {
    Run(OpRef),
    Stop,
}

pub(crate) struct Lane {
    pub(crate) name: String,
    pub(crate) tx: Sender<Msg>,
    pub(crate) pool: Option<Arc<rayon::ThreadPool>>,
    pub(crate) workers: usize,
    /// Ops started on this lane while placement is logged (the first few are printed).
    pub(crate) placed: std::sync::atomic::AtomicUsize,
}

thread_local! {
    static IN_WORKER: Cell<bool> = const { Cell::new(false) };
}

/// True on an engine worker thread (where blocking waits on the engine would deadlock).
pub(crate) fn in_worker() -> bool {
    IN_WORKER.with(|w| w.get())
}

/// Polls before a worker parks. Waking a parked thread costs tens of microseconds on a VM,
/// far more than a small op: a worker that just finished one keeps looking for the next
/// for a few tens of microseconds, so a synchronous round trip does not pay a wake-up.
const WORKER_SPIN: u32 = 4_000;

fn next_message(rx: &Receiver<Msg>) -> Option<Msg> {
    for _ in 0..WORKER_SPIN {
        match rx.try_recv() {
            Ok(m) => return Some(m),
            Err(TryRecvError::Disconnected) => return None,
            Err(TryRecvError::Empty) => std::hint::spin_loop(),
        }
    }
    rx.recv().ok()
}

fn worker_loop(shared: Arc<Shared>, rx: Receiver<Msg>) {
    IN_WORKER.with(|w| w.set(true));
    while let Some(Msg::Run(op)) = next_message(&rx) {
        run_guarded(&shared, op);
    }
    IN_WORKER.with(|w| w.set(false));
}

/// Run an op so that nothing can unwind out of the worker: a body's panic is already an
/// error, and a panic in the engine's own code around it (logging, tracing) completes the op
/// with an error too, instead of killing the worker (rayon aborts the process when a pool
/// job panics; a dead thread lane would leave every wait hanging).
pub(crate) fn run_guarded(shared: &Arc<Shared>, op: OpRef) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(|| execute(shared, &op))) {
        let error = EngineError::OpPanicked {
            op: op.name.to_string(),
            message: format!(
                "engine error around the op: {}",
                panic_message(payload.as_ref())
            ),
        };
        // A no-op if the op had completed before the panic (exactly once).
        complete(shared, &op, Some(error));
    }
}

/// Start the lane's workers. Plain threads are returned for joining; pool workers are rayon
/// jobs that end when they receive `Msg::Stop`.
pub(crate) fn start_workers(
    shared: &Arc<Shared>,
    index: usize,
    rx: Receiver<Msg>,
) -> std::io::Result<Vec<JoinHandle<()>>> {
    let lane = &shared.lanes[index];
    let mut handles = Vec::new();
    for w in 0..lane.workers {
        let shared2 = shared.clone();
        let rx2 = rx.clone();
        match &lane.pool {
            Some(pool) => pool.spawn(move || worker_loop(shared2, rx2)),
            None => handles.push(
                std::thread::Builder::new()
                    .name(format!("{} worker {w}", lane.name))
                    .spawn(move || worker_loop(shared2, rx2))?,
            ),
        }
    }
    Ok(handles)
}
