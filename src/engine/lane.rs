//! Lanes: where ready ops run.
//!
//! A lane is a queue plus its worker threads. A CPU device's lane runs its workers *inside*
//! the device's rayon pool, so an op's inner parallelism (a matmul's `par_iter`, say) uses that
//! device's threads and no other. A CUDA device has two lanes, compute and copy, so copies
//! overlap compute.
//!
//! The queue hands ops over in batches: a submitter pushes an op onto the lane's intake (a
//! stack linked through the ops themselves) and a lane's only worker takes everything there in
//! one swap, so while the worker is busy the intake's line stays on the pushing core, and the
//! two cores exchange it once per batch rather than several lines per op (a channel's head,
//! tail and slot). Ops that an op makes ready on its own single-worker lane skip the intake
//! altogether. A lane of several workers hands ops out one at a time, so each worker gets its
//! share.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use std::panic::{catch_unwind, AssertUnwindSafe};

use super::error::{panic_message, EngineError};
use super::op::{complete, execute, from_thin, into_thin, OpHead, OpRef};
use super::waiting;
use super::{lock, Padded, Shared};

/// Identifies a lane of one engine (returned by [`EngineBuilder::lane`](super::EngineBuilder::lane)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LaneId(pub(crate) usize);

impl LaneId {
    /// The lane's index in the order lanes were added.
    pub fn index(self) -> usize {
        self.0
    }
}

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
///
/// Ops come in through an intake: a stack of ops linked through the ops themselves, which a
/// submitter extends with one compare-and-swap and a worker empties with one swap, so a hand-off
/// moves one cache line (the intake's) besides the op's own, and none when the worker is
/// behind. A lane of several workers moves what one of them took into `ready`, in push order,
/// for any of them to run.
pub(crate) struct LaneQueue {
    /// The newest op handed over and not yet taken (null: none; [`closed`]: no worker is left).
    intake: Padded<AtomicPtr<OpHead>>,
    /// Ops taken from the intake by a worker of a lane of several, for any of them.
    ready: Mutex<VecDeque<OpRef>>,
    /// Mirror of `ready.len()`, so an idle worker can poll without taking the lock.
    ready_len: AtomicUsize,
    /// Read on every hand-off, written only when a worker parks or leaves: a line of its own,
    /// so that reading it costs no trip between cores.
    park: Padded<Park>,
}

#[derive(Default)]
struct Park {
    /// Workers parked (or about to) on `wake`.
    sleepers: AtomicUsize,
    /// Workers still running; the last to leave closes the intake.
    live: AtomicUsize,
    /// Set by shutdown: workers leave once there is nothing left to run.
    stopping: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
}

/// What [`LaneQueue::submit`] did with an op.
pub(crate) enum Submitted {
    Queued,
    /// The workers are gone (the engine is shutting down): the caller must run it.
    NoWorker(OpRef),
}

/// The intake's mark for "no worker left": an address no op can have.
fn closed() -> *mut OpHead {
    static CLOSED: u8 = 0;
    std::ptr::addr_of!(CLOSED).cast::<OpHead>().cast_mut()
}

impl LaneQueue {
    fn new(workers: usize) -> LaneQueue {
        LaneQueue {
            intake: Padded(AtomicPtr::new(null_mut())),
            ready: Mutex::new(VecDeque::new()),
            ready_len: AtomicUsize::new(0),
            park: Padded(Park {
                live: AtomicUsize::new(workers),
                ..Park::default()
            }),
        }
    }

    /// Queue a ready op, waking a parked worker if there is one.
    pub(crate) fn submit(&self, op: OpRef) -> Submitted {
        if OWN_LANE.with(Cell::get) == self as *const LaneQueue as usize {
            // Made ready by an op on this lane's only worker: that thread runs it next.
            RUN_NEXT.with(|r| r.borrow_mut().push_back(op));
            return Submitted::Queued;
        }
        let node = into_thin(op);
        let mut head = self.intake.load(Ordering::Relaxed);
        loop {
            if head == closed() {
                // SAFETY: `node` came from `into_thin` above and was not published.
                return Submitted::NoWorker(unsafe { from_thin(node) });
            }
            // SAFETY: `node` is live (it owns a reference) and not yet visible to any worker.
            unsafe { (*node).set_next(head) };
            // SeqCst, with the load of `sleepers` below: a worker going to sleep increments
            // `sleepers` and then re-reads the intake, so one of the two sees the other.
            match self.intake.compare_exchange_weak(
                head,
                node.cast_mut(),
                Ordering::SeqCst,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => head = now,
            }
        }
        if self.park.sleepers.load(Ordering::SeqCst) > 0 {
            self.wake_one();
        }
        Submitted::Queued
    }

    fn wake_one(&self) {
        waiting::note_waker();
        let _g = lock(&self.park.lock);
        self.park.wake.notify_one();
    }

    /// Tell the workers to leave once the queue is empty.
    pub(crate) fn stop(&self) {
        self.park.stopping.store(true, Ordering::SeqCst);
        let _g = lock(&self.park.lock);
        self.park.wake.notify_all();
    }

    /// Everything in the intake, oldest first, appended to `batch`; the intake is left empty
    /// (or closed, with `close`).
    fn take_intake(&self, batch: &mut VecDeque<OpRef>, close: bool) {
        let mark = if close { closed() } else { null_mut() };
        let mut node = self.intake.swap(mark, Ordering::Acquire);
        if node == closed() {
            return;
        }
        // The stack is newest first: reverse its links, then hand the ops out oldest first
        // (in place, so taking a batch allocates nothing).
        let mut oldest = null_mut();
        while !node.is_null() {
            // SAFETY: the nodes of a swapped-out list are live (each owns a reference) and
            // reachable by this thread only.
            let next = unsafe { (*node).next() }.cast_mut();
            // SAFETY: as above.
            unsafe { (*node).set_next(oldest) };
            oldest = node;
            node = next;
        }
        while !oldest.is_null() {
            // SAFETY: every node came from `into_thin` and is turned back once, here.
            let op = unsafe { from_thin(oldest) };
            oldest = op.next().cast_mut();
            batch.push_back(op);
        }
    }

    fn has_work(&self) -> bool {
        let head = self.intake.load(Ordering::SeqCst);
        (!head.is_null() && head != closed()) || self.ready_len.load(Ordering::SeqCst) > 0
    }

    /// Move the next ops into `batch` (empty on entry): all of them for a lane's only worker,
    /// one for a worker that shares its lane. Polls for [`WORKER_SPIN`] before parking, since
    /// waking a parked thread costs tens of microseconds on a VM, far more than a small op.
    /// Returns false when the worker must leave.
    fn take(&self, batch: &mut VecDeque<OpRef>, workers: usize) -> bool {
        loop {
            if workers > 1 && self.take_ready(batch) {
                return true;
            }
            self.take_intake(batch, false);
            if !batch.is_empty() {
                if workers > 1 && batch.len() > 1 {
                    // Keep the oldest, leave the rest to the lane's other workers.
                    let mut ready = lock(&self.ready);
                    ready.extend(batch.drain(1..));
                    self.ready_len.store(ready.len(), Ordering::SeqCst);
                    drop(ready);
                    if self.park.sleepers.load(Ordering::SeqCst) > 0 {
                        self.wake_one();
                    }
                }
                return true;
            }
            if self.park.stopping.load(Ordering::SeqCst) {
                return self.leave(batch);
            }
            if !self.poll() {
                self.park();
            }
        }
    }

    /// The oldest op of `ready` into `batch`, if there is one.
    fn take_ready(&self, batch: &mut VecDeque<OpRef>) -> bool {
        if self.ready_len.load(Ordering::Relaxed) == 0 {
            return false;
        }
        let mut ready = lock(&self.ready);
        let Some(op) = ready.pop_front() else {
            return false;
        };
        self.ready_len.store(ready.len(), Ordering::SeqCst);
        batch.push_back(op);
        true
    }

    /// Poll for work for up to [`WORKER_SPIN`]; true once there is some.
    fn poll(&self) -> bool {
        let spin_until = Instant::now() + WORKER_SPIN;
        let mut pause = 1u32;
        loop {
            if self.has_work() || self.park.stopping.load(Ordering::Relaxed) {
                return true;
            }
            if Instant::now() >= spin_until {
                return false;
            }
            // Each poll pulls the intake's line, which the pusher writes on every hand-off;
            // polling flat out would steal it back after every op. Backing off to about half
            // a microsecond lets the pusher queue several ops per trip, at a small cost in
            // latency.
            for _ in 0..pause {
                std::hint::spin_loop();
            }
            pause = (pause * 2).min(MAX_PAUSE);
        }
    }

    /// Sleep until there is work or the lane stops.
    fn park(&self) {
        // Paired with `submit`: after the increment a submitter sees a sleeper, or the
        // re-check sees its op.
        let (g, park) = (lock(&self.park.lock), &self.park);
        waiting::sleep_until(g, &park.wake, &park.sleepers, || {
            self.has_work() || park.stopping.load(Ordering::SeqCst)
        });
    }

    /// A worker leaves (returns false). The last one closes the intake, so later hand-offs
    /// run on their caller, and leaves in `batch` what was handed over meanwhile, for it to
    /// run before it goes.
    fn leave(&self, batch: &mut VecDeque<OpRef>) -> bool {
        if self.park.live.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.take_intake(batch, true);
            batch.extend(lock(&self.ready).drain(..));
            self.ready_len.store(0, Ordering::SeqCst);
        }
        false
    }
}

impl Drop for LaneQueue {
    /// Release ops still in the intake (none after an orderly shutdown).
    fn drop(&mut self) {
        let mut rest = VecDeque::new();
        self.take_intake(&mut rest, true);
    }
}

thread_local! {
    static IN_WORKER: Cell<bool> = const { Cell::new(false) };
    /// The queue of the lane this thread is the only worker of (its address), or 0.
    static OWN_LANE: Cell<usize> = const { Cell::new(0) };
    /// Ops that ops run on this thread made ready on its own lane: they need no hand-off, so
    /// a chain on one lane never touches the intake the pushing thread writes.
    static RUN_NEXT: RefCell<VecDeque<OpRef>> = const { RefCell::new(VecDeque::new()) };
}

/// True on an engine worker thread (where blocking waits on the engine would deadlock).
pub(crate) fn in_worker() -> bool {
    IN_WORKER.with(|w| w.get())
}

/// How long an idle worker polls its queue before parking: a worker that just finished an op
/// keeps looking for the next for this long, so a synchronous round trip or a hand-off from
/// another lane does not pay a wake-up.
const WORKER_SPIN: Duration = Duration::from_micros(50);

/// Ops a worker retires at once (see [`Shared::retire`]), and only full batches. A worker
/// that also retires what it holds whenever it goes idle (every few ops, when it keeps up with
/// the pusher) makes the pusher free ops that have just run, on lines still in the worker's
/// cache, and pay a hand-off per handful of ops: a loop of independent `add_scalar` ops costs
/// 0.83-0.89x as much per op with 128-op batches and no idle retiring, against 64-op batches
/// retired from 16 ops on idle. 256-op batches do as well there but make a dependent chain
/// 1.2-1.4x slower, probably because each burst frees more ops (see src/engine/README.md).
const RETIRE_BATCH: usize = 128;

/// A batch shorter than this, run in less than [`STREAM_BATCH_TIME`] and with more ops already
/// waiting after it, means the worker keeps up with a stream of tiny ops: it then pauses
/// [`STREAM_PAUSE`] before its next take.
const STREAM_BATCH: usize = 16;

/// See [`STREAM_BATCH`]: a batch that took longer holds ops whose run time dwarfs a hand-off.
const STREAM_BATCH_TIME: Duration = Duration::from_micros(2);

/// The pause of a worker that keeps up with a stream, in `spin_loop` hints: about 4 µs on the
/// machine src/engine/README.md measures on (a `pause` there takes about 25 ns), long enough
/// for the next batch to reach [`STREAM_BATCH`] ops of `async`'s loop, so the pause is not
/// repeated. In slow rounds of `tensor-loop/plain`, 160 takes 540-564 µs per 1,000 ops
/// against 721-806 µs with no pause, 586-604 µs at 40 and 524-569 µs at 400 (see
/// src/engine/README.md).
const STREAM_PAUSE: u32 = 160;

/// The longest pause between two polls of an idle worker, in `spin_loop` hints (a `pause`
/// instruction is about 40 ns on current x86 cores, a few on older ones).
const MAX_PAUSE: u32 = 16;

fn worker_loop(shared: Arc<Shared>, index: usize) {
    IN_WORKER.with(|w| w.set(true));
    let lane = &shared.lanes[index];
    let own = match lane.workers {
        1 => &lane.queue as *const LaneQueue as usize,
        _ => 0,
    };
    // Restored on leaving, in case this runs nested in another worker's pool job.
    let outer_lane = OWN_LANE.with(|l| l.replace(own));
    let mut batch = VecDeque::new();
    let mut retired = Vec::with_capacity(RETIRE_BATCH);
    let mut run_all = |batch: &mut VecDeque<OpRef>| {
        while let Some(op) = batch
            .pop_front()
            .or_else(|| RUN_NEXT.with(|r| r.borrow_mut().pop_front()))
        {
            run_guarded(&shared, &op);
            retired.push(op);
            if retired.len() == RETIRE_BATCH {
                shared.retire(&mut retired);
            }
        }
        // Going idle, a worker keeps what it holds for its next full batch. Ops held back
        // keep only their names and var handles (their bodies are gone, and a var's data is
        // released when its last access completes, not when its handles go), and are freed
        // when the worker leaves.
    };
    while lane.queue.take(&mut batch, lane.workers) {
        // Timed only when short, so a worker taking long batches reads no clock.
        let short = (lane.workers == 1 && batch.len() < STREAM_BATCH).then(Instant::now);
        run_all(&mut batch);
        if short.is_some_and(|t| t.elapsed() < STREAM_BATCH_TIME) && lane.queue.has_work() {
            // Tiny ops keep coming while the worker takes them a few at a time: it is as fast
            // as the pusher, and each take pulls the intake and the fresh ops' lines from a
            // core still writing beside them. Pausing lets the next batch grow, so the two
            // cores meet once per batch. Only then: after a lone op (a synchronous round
            // trip, a hand-off from another lane) the intake is empty, and after longer ops
            // the pause would cost more than it saves, so the worker goes straight on.
            for _ in 0..STREAM_PAUSE {
                std::hint::spin_loop();
            }
        }
    }
    // What the last worker took as it closed the lane.
    run_all(&mut batch);
    OWN_LANE.with(|l| l.set(outer_lane));
    IN_WORKER.with(|w| w.set(false));
}

/// Run an op so that nothing can unwind out of the worker: a body's panic is already an
/// error, and a panic in the engine's own code around it (logging, tracing) completes the op
/// with an error too, instead of killing the worker (rayon aborts the process when a pool
/// job panics; a dead thread lane would leave every wait hanging).
pub(crate) fn run_guarded(shared: &Arc<Shared>, op: &OpRef) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(|| execute(shared, op))) {
        let message = panic_message(payload.as_ref());
        let error =
            EngineError::panicked(&op.name, format!("engine error around the op: {message}"));
        // A no-op if the op had completed before the panic (exactly once).
        complete(shared, op, Some(error));
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
                        lane.queue.park.live.fetch_sub(1, Ordering::AcqRel);
                    })?,
            ),
        }
    }
    Ok(handles)
}
