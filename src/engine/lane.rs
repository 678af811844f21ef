//! Lanes: where ready ops run.
//!
//! A lane is a queue plus its worker threads. A CPU device's lane runs its workers *inside*
//! the device's rayon pool, so an op's inner parallelism (a matmul's `par_iter`, say) uses that
//! device's threads and no other. A CUDA device has two lanes, compute and copy, so copies
//! overlap compute.
//!
//! The queue hands ops over in batches: a lane's only worker takes everything queued in one
//! swap, so while it is busy the pushing thread appends to a buffer no other core touches, and
//! the two cores exchange one cache line per batch rather than several per op (a channel's
//! head, tail and slot). A lane of several workers hands ops out one at a time, so each worker
//! gets its share.

use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

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

pub(crate) struct Lane {
    pub(crate) name: String,
    pub(crate) pool: Option<Arc<rayon::ThreadPool>>,
    pub(crate) workers: usize,
    /// Ops started on this lane while placement is logged (the first few are printed).
    pub(crate) placed: AtomicUsize,
    pub(crate) queue: LaneQueue,
}

impl Lane {
    pub(crate) fn new(spec: LaneSpec) -> Lane {
        Lane {
            queue: LaneQueue::new(spec.workers),
            name: spec.name,
            pool: spec.pool,
            workers: spec.workers,
            placed: AtomicUsize::new(0),
        }
    }
}

/// Ready ops waiting for a worker, and the workers' parking place.
pub(crate) struct LaneQueue {
    state: Mutex<QueueState>,
    /// Ops queued, mirrored outside the lock so an idle worker can poll without taking it.
    queued: AtomicUsize,
    wake: Condvar,
}

struct QueueState {
    ops: VecDeque<OpRef>,
    /// Workers parked on `wake`.
    sleepers: usize,
    /// Workers still running; once none is, an op handed to the lane runs on the caller.
    live: usize,
    /// Set by shutdown: workers leave once the queue is empty.
    stopping: bool,
}

/// What [`LaneQueue::submit`] did with an op.
pub(crate) enum Submitted {
    Queued,
    /// The workers are gone (the engine is shutting down): the caller must run it.
    NoWorker(OpRef),
}

impl LaneQueue {
    fn new(workers: usize) -> LaneQueue {
        LaneQueue {
            state: Mutex::new(QueueState {
                ops: VecDeque::new(),
                sleepers: 0,
                live: workers,
                stopping: false,
            }),
            queued: AtomicUsize::new(0),
            wake: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, QueueState> {
        // Only engine code that cannot panic holds this lock.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queue a ready op, waking a parked worker if there is one.
    pub(crate) fn submit(&self, op: OpRef) -> Submitted {
        let mut s = self.lock();
        if s.live == 0 {
            return Submitted::NoWorker(op);
        }
        s.ops.push_back(op);
        self.queued.store(s.ops.len(), Ordering::Relaxed);
        let wake = s.sleepers > 0;
        drop(s);
        if wake {
            self.wake.notify_one();
        }
        Submitted::Queued
    }

    /// Tell the workers to leave once the queue is empty.
    pub(crate) fn stop(&self) {
        self.lock().stopping = true;
        self.wake.notify_all();
    }

    /// Move the next ops into `batch` (empty on entry): all of them for a lane's only worker,
    /// one for a worker that shares its lane. Polls for [`WORKER_SPIN`] before parking, since
    /// waking a parked thread costs tens of microseconds on a VM, far more than a small op.
    /// Returns false when the worker must leave.
    fn take(&self, batch: &mut VecDeque<OpRef>, workers: usize) -> bool {
        let spin_until = Instant::now() + WORKER_SPIN;
        let mut pause = 1u32;
        while self.queued.load(Ordering::Relaxed) == 0 {
            if Instant::now() >= spin_until {
                break;
            }
            // Each poll pulls the line the pusher writes on every push; polling flat out
            // would steal it back after every op, and the two cores would pay for the line's
            // trips instead of running ops. Backing off to about half a microsecond lets the
            // pusher queue several ops per trip, at a small cost in latency.
            for _ in 0..pause {
                std::hint::spin_loop();
            }
            pause = (pause * 2).min(MAX_PAUSE);
        }
        let mut s = self.lock();
        loop {
            if !s.ops.is_empty() {
                if workers == 1 {
                    std::mem::swap(&mut s.ops, batch);
                } else if let Some(op) = s.ops.pop_front() {
                    batch.push_back(op);
                }
                self.queued.store(s.ops.len(), Ordering::Relaxed);
                return true;
            }
            if s.stopping {
                s.live -= 1;
                return false;
            }
            s.sleepers += 1;
            s = self.wake.wait(s).unwrap_or_else(|p| p.into_inner());
            s.sleepers -= 1;
        }
    }
}

thread_local! {
    static IN_WORKER: Cell<bool> = const { Cell::new(false) };
}

/// True on an engine worker thread (where blocking waits on the engine would deadlock).
pub(crate) fn in_worker() -> bool {
    IN_WORKER.with(|w| w.get())
}

/// How long an idle worker polls its queue before parking: a worker that just finished an op
/// keeps looking for the next for this long, so a synchronous round trip or a hand-off from
/// another lane does not pay a wake-up.
const WORKER_SPIN: Duration = Duration::from_micros(50);

/// The longest pause between two polls of an idle worker, in `spin_loop` hints (a `pause`
/// instruction is about 40 ns on current x86 cores, a few on older ones).
const MAX_PAUSE: u32 = 16;

fn worker_loop(shared: Arc<Shared>, index: usize) {
    IN_WORKER.with(|w| w.set(true));
    let lane = &shared.lanes[index];
    let mut batch = VecDeque::new();
    while lane.queue.take(&mut batch, lane.workers) {
        while let Some(op) = batch.pop_front() {
            run_guarded(&shared, op);
        }
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
/// jobs that end when the lane is stopped.
pub(crate) fn start_workers(
    shared: &Arc<Shared>,
    index: usize,
) -> std::io::Result<Vec<JoinHandle<()>>> {
    let lane = &shared.lanes[index];
    let mut handles = Vec::new();
    for w in 0..lane.workers {
        let shared2 = shared.clone();
        match &lane.pool {
            Some(pool) => pool.spawn(move || worker_loop(shared2, index)),
            None => handles.push(
                std::thread::Builder::new()
                    .name(format!("{} worker {w}", lane.name))
                    .spawn(move || worker_loop(shared2, index))
                    .inspect_err(|_| {
                        // This worker never runs: the lane must not count on it.
                        lane.queue.lock().live -= 1;
                    })?,
            ),
        }
    }
    Ok(handles)
}
