//! The asynchronous dependency engine, after MXNet's threaded engine.
//!
//! The front end [`push`](Engine::push)es ops, each naming the [`Var`]s it reads and writes and
//! the [lane](LaneId) it runs on, and returns at once. The engine runs an op when every earlier
//! conflicting access has finished: reads of a var run together, a write waits for all earlier
//! accesses and blocks later ones, all in push order. Results are therefore exactly those of
//! running the ops one by one in push order, while independent ops overlap across lanes.
//!
//! [`wait_to_read`](Engine::wait_to_read) and [`wait_all`](Engine::wait_all) are the only points
//! where the front end blocks; both return the error of a failed op upstream (an op that fails or
//! panics poisons what it writes, and everything downstream is skipped and inherits the error).
//! A poisoned var keeps its error until [`clear_error`](Engine::clear_error): a later write to
//! it is skipped as well, since a write may read the old value (a read-modify-write).
//! A thread that slept in one of them (or a worker woken for new ops) may come back on another
//! CPU of its affinity mask: one the kernel woke onto its waker's CPU moves off it (see
//! `waiting.rs`); its mask is left as it was.
//!
//! ```
//! use parbench::engine::{Engine, LaneSpec, Mode, Var};
//! use std::sync::{Arc, Mutex};
//!
//! let mut b = Engine::builder(Mode::Threaded);
//! let lane = b.lane(LaneSpec::threads("cpu:0", 1));
//! let engine = b.build().unwrap();
//! let (x, data) = (Var::new(), Arc::new(Mutex::new(0)));
//! let d = data.clone();
//! engine.push("x = 41 + 1", lane, &[], &[&x], move || { *d.lock().unwrap() = 41 + 1; Ok(()) });
//! engine.wait_to_read(&x).unwrap();
//! assert_eq!(*data.lock().unwrap(), 42);
//! ```

mod builder;
mod error;
mod lane;
mod mode;
mod op;
pub mod trace;
mod var;
mod waiting;

pub use builder::{EngineBuilder, SyncHook};
#[cfg(feature = "cuda")]
pub(crate) use error::panic_message;
pub use error::{EngineError, OpError};
pub use lane::{LaneId, LaneSpec};
pub use mode::{Mode, UnknownMode};
pub use op::Completion;
pub use trace::TraceRecord;
pub use var::{DataVar, OpVars, Var, VarData, VarKey};

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Instant;

use lane::{in_worker, Lane, Submitted};
use op::{Accesses, AsyncBody, ClearErrors, OpBlock, OpBody, OpRef, SyncBody};
use waiting::spin_until;

/// A handle to the engine. Clones share the same engine; the workers stop when the last
/// handle is dropped (after everything pushed has completed).
///
/// Dropping the last handle blocks until then, except inside an op on a worker, where a
/// helper thread waits instead. So do not drop it on a thread that an asynchronous op needs
/// in order to complete (one holding a [`Completion`] it has not fired yet): the drop would
/// wait for that op forever.
#[derive(Clone)]
pub struct Engine {
    /// One reference count, not two: every tensor holds an engine handle, so a clone and a
    /// drop of it are on every tensor op's path.
    owner: Arc<Owner>,
}

/// Stops the workers when the last [`Engine`] handle goes away. Ops hold `Arc<Shared>`, not
/// an `Engine`, so this is not kept alive by the work it must wait for.
struct Owner {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Drop for Owner {
    fn drop(&mut self) {
        let threads = std::mem::take(&mut *lock(&self.threads));
        if !in_worker() {
            self.shared.shut_down(threads);
            return;
        }
        // The last handle went away inside an op: this worker cannot wait for the rest (it
        // may be what they wait for), and stopping now would strand every op that becomes
        // ready later behind the stop. A reaper thread waits until everything pushed has
        // completed, then stops and joins the workers. If no thread can be started, the
        // workers are left running (they end with the process) rather than lose ops.
        let shared = self.shared.clone();
        let _ = std::thread::Builder::new()
            .name("parbench engine shutdown".into())
            .spawn(move || shared.shut_down(threads));
    }
}

impl Engine {
    fn shared(&self) -> &Arc<Shared> {
        &self.owner.shared
    }

    pub fn builder(mode: Mode) -> EngineBuilder {
        EngineBuilder::new(mode)
    }

    /// An engine with `n` lanes of one dedicated thread each, named `lane:0`, `lane:1`, ...
    /// (handy for tests and for the library's own examples).
    pub fn with_thread_lanes(
        mode: Mode,
        n: usize,
    ) -> Result<(Engine, Vec<LaneId>), std::io::Error> {
        let mut b = Engine::builder(mode);
        let lanes = (0..n)
            .map(|i| b.lane(LaneSpec::threads(format!("lane:{i}"), 1)))
            .collect();
        Ok((b.build()?, lanes))
    }

    pub fn mode(&self) -> Mode {
        self.shared().mode
    }

    /// Push an op whose body completes when it returns. Returns at once in threaded mode.
    ///
    /// A var listed in both `reads` and `writes` counts as a write; duplicates are ignored.
    ///
    /// # Panics
    /// If `lane` belongs to another engine (a programming error).
    pub fn push<F>(
        &self,
        name: impl Into<Cow<'static, str>>,
        lane: LaneId,
        reads: &[&Var],
        writes: &[&Var],
        body: F,
    ) where
        F: FnOnce() -> Result<(), OpError> + Send + 'static,
    {
        self.push_with(name, lane, reads, writes, move |_| body());
    }

    /// [`push`](Self::push) for a body that reaches the data of the op's vars through
    /// [`OpVars`] (see [`DataVar`]) instead of holding handles of its own: the handles a
    /// closure captures are dropped by the worker that runs it, and each such drop moves a
    /// count the pushing thread also moves.
    pub fn push_with<F>(
        &self,
        name: impl Into<Cow<'static, str>>,
        lane: LaneId,
        reads: &[&Var],
        writes: &[&Var],
        body: F,
    ) where
        F: FnOnce(&OpVars<'_>) -> Result<(), OpError> + Send + 'static,
    {
        self.push_op(name.into(), lane, reads, writes, None, SyncBody::new(body));
    }

    /// [`push_with`](Self::push_with) for an op that writes one new var, made here to own
    /// `data` and returned as its first owner; the body gets its key. No other op can name
    /// that var before this one, so its write is counted when the var is made, without
    /// taking the var's lock: what every tensor op that computes a new tensor pushes.
    pub fn push_with_new<F>(
        &self,
        name: impl Into<Cow<'static, str>>,
        lane: LaneId,
        reads: &[&Var],
        data: Box<dyn VarData>,
        body: F,
    ) -> DataVar
    where
        F: FnOnce(&OpVars<'_>, VarKey) -> Result<(), OpError> + Send + 'static,
    {
        let out = DataVar::new_written(data);
        let key = out.var().key();
        self.push_op(
            name.into(),
            lane,
            reads,
            &[],
            Some(out.var()),
            SyncBody::new(move |vars: &OpVars<'_>| body(vars, key)),
        );
        out
    }

    /// Push an op that completes when its body fires the [`Completion`] (from any thread, at
    /// any later time): how a device op finishes when its hardware does, without a worker
    /// blocking on it.
    pub fn push_async<F>(
        &self,
        name: impl Into<Cow<'static, str>>,
        lane: LaneId,
        reads: &[&Var],
        writes: &[&Var],
        body: F,
    ) where
        F: FnOnce(Completion) + Send + 'static,
    {
        self.push_op(name.into(), lane, reads, writes, None, AsyncBody::new(body));
    }

    /// Clear the error carried by `var`, in program order: ops pushed after this see a
    /// healthy var again (ops pushed before it still see the error).
    pub fn clear_error(&self, var: &Var, lane: LaneId) {
        self.push_op("clear-error".into(), lane, &[], &[var], None, ClearErrors);
    }

    /// The generic part of a push: check the lane, build the op, with its body inline. The
    /// rest is [`register`](Self::register), compiled once rather than once per closure type.
    /// `new_write` is a var made for this op with its write already counted
    /// ([`push_with_new`](Self::push_with_new)): it goes last, and does not register.
    fn push_op<B: OpBody + 'static>(
        &self,
        name: Cow<'static, str>,
        lane: LaneId,
        reads: &[&Var],
        writes: &[&Var],
        new_write: Option<&Var>,
        body: B,
    ) {
        let shared = self.shared();
        assert!(
            lane.0 < shared.lanes.len(),
            "lane {} does not belong to this engine ({} lanes)",
            lane.0,
            shared.lanes.len()
        );
        shared.free_retired();
        shared.acquire_slot();
        let stamp = shared.tracing().then(|| {
            (
                shared.now_ns(),
                shared.trace_seq.fetch_add(1, Ordering::Relaxed),
            )
        });
        let op = OpBlock::new_ref(
            name,
            lane.0,
            Accesses {
                reads,
                writes,
                new_write,
            },
            body,
            stamp,
        );
        // A new write goes last and is already counted.
        let registering = op.deps().len() - usize::from(new_write.is_some());
        self.register(op, registering);
    }

    /// Register the op's accesses with its first `registering` vars (the rest were counted
    /// as they were made), and dispatch it if nothing holds it back.
    fn register(&self, op: OpRef, registering: usize) {
        let shared = self.shared();
        // Accesses granted at once are taken off the wait count in one step at the end,
        // with the pusher's own unit: only completions of earlier ops decrement it before
        // then, and they cannot reach zero while that unit is held.
        let granted = var::append_all(&op, registering) + (op.deps().len() - registering);
        // Naive: wait for the op. Not from inside an op, where the op pushed may queue behind
        // the one pushing it on the same worker. Otherwise the op is handed over without a
        // clone, so this thread does not touch its count again once a worker may have it.
        let awaited = (shared.mode == Mode::Naive && !in_worker()).then(|| op.clone());
        // Every access granted at once: none waits in a var's queue, so no completion will
        // ever take a unit off the wait count, and this thread holds the last ones. The op is
        // ready without the locked decrement.
        if granted == op.deps().len() || op.release_wait(granted + 1) {
            shared.dispatch(op);
        }
        if let Some(op) = awaited {
            shared.block_until(|| op.is_finished());
        }
    }

    /// Block until every write to `var` pushed before this call has completed. Returns the
    /// error of the op that produced the value, if it (or anything upstream) failed.
    ///
    /// Called from inside an op it returns [`EngineError::WaitInsideOp`] instead of
    /// deadlocking the worker.
    pub fn wait_to_read(&self, var: &Var) -> Result<(), EngineError> {
        if in_worker() {
            return Err(EngineError::WaitInsideOp);
        }
        var.wait_written()
    }

    /// Block until everything pushed has completed and every device is synchronized. Returns
    /// the first error raised by any op since the previous `wait_all` (and forgets it: the
    /// vars involved keep their own error until [`clear_error`](Self::clear_error); a later
    /// write to a poisoned var is skipped and leaves the same error, since a write may be a
    /// read-modify-write). A device that fails to synchronize is reported only when no op
    /// failed.
    pub fn wait_all(&self) -> Result<(), EngineError> {
        if in_worker() {
            return Err(EngineError::WaitInsideOp);
        }
        self.shared().wait_idle();
        self.shared().free_retired();
        // Taken first, so a failing device sync cannot leave it to the next wait_all. Every
        // device is synchronized even when one fails; an op's error, the root cause, wins
        // over a sync failure it may have caused.
        let first = lock(&self.shared().first_error).take();
        let mut sync_error = None;
        for hook in &self.shared().sync_hooks {
            if let Err(e) = hook() {
                sync_error.get_or_insert(EngineError::DeviceSync(e));
            }
        }
        first.or(sync_error).map_or(Ok(()), Err)
    }

    /// Ops pushed and not yet completed.
    pub fn pending(&self) -> usize {
        self.shared().pending()
    }

    /// The most ops that were pending at once, on an engine with a
    /// [`max_inflight`](EngineBuilder::max_inflight) bound; `None` without one. Unbounded, the
    /// pushing thread would have to read the workers' completion count on every push, the
    /// very cache-line traffic that splitting the pending count into two counters avoids.
    pub fn max_pending(&self) -> Option<usize> {
        self.shared()
            .max_inflight
            .map(|_| self.shared().max_pending.load(Ordering::Acquire))
    }

    /// Names of the lanes, by [`LaneId::index`].
    pub fn lane_names(&self) -> Vec<String> {
        self.shared().lanes.iter().map(|l| l.name.clone()).collect()
    }

    /// Start or stop recording a [`TraceRecord`] per completed op.
    pub fn set_tracing(&self, on: bool) {
        self.shared().tracing.store(on, Ordering::Release);
    }

    pub fn is_tracing(&self) -> bool {
        self.shared().tracing()
    }

    /// Take the trace records gathered so far (in completion order).
    pub fn take_trace(&self) -> Vec<TraceRecord> {
        std::mem::take(&mut *lock(&self.shared().trace))
    }

    /// Nanoseconds since the engine started, on the clock trace records use.
    pub fn now_ns(&self) -> u64 {
        self.shared().now_ns()
    }
}

/// An `Arc` whose value `init` writes field by field, straight into the new allocation:
/// `Arc::new` builds the value on the stack and then copies it in, and for an op block or a
/// var (a few hundred bytes each) that copy took about a tenth of a push.
///
/// # Safety
/// `init` must initialize every field of the value it is given (padding aside).
#[inline(always)]
unsafe fn arc_in_place<T>(init: impl FnOnce(*mut T)) -> Arc<T> {
    let slot = Arc::into_raw(Arc::<T>::new_uninit()).cast_mut().cast::<T>();
    // SAFETY: `slot` is the value of an `Arc` no one else holds, and its pointer comes from
    // the allocation, with write access. Once `init` has initialized it (the caller's
    // promise), the `Arc<MaybeUninit<T>>` is an `Arc<T>` (same layout), which `from_raw`
    // takes back.
    unsafe {
        init(slot);
        Arc::from_raw(slot)
    }
}

/// A value alone on its own pair of cache lines (x86 prefetches lines in pairs), so writes to
/// it do not evict what other threads read or write beside it.
#[repr(align(128))]
struct Padded<T>(T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Take an engine lock. Only engine code that cannot panic holds one, so a poisoned mutex
/// still guards consistent data: take it either way.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// How many ops of each lane `log_placement` prints.
pub const PLACEMENT_LINES_PER_LANE: usize = 20;

/// One `[placement]` line on stderr. Not `eprintln!`, which panics when stderr is gone (a
/// closed pipe): a worker never panics for want of a place to log.
fn placement_line(text: std::fmt::Arguments) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "[placement] {text}");
}

/// Batches of retired ops kept before the oldest is freed: 24 of 128 ops, about 2 MB of ops,
/// vars and buffers for `add_scalar`, more than a core's L2 (1 MB here), so memory the worker
/// wrote has left its cache by the time the pushing thread frees and reuses it. Freed at
/// once, the pushing thread rewrites lines still in the worker's cache: `tensor-loop/plain`
/// (`cargo bench --bench engine`) costs 1.04-1.05x as much per op in the fast rounds of
/// `scripts/bench-ab.sh`, and 8 or 48 batches kept cannot be told apart from 24 there (see
/// src/engine/README.md, "Tuned constants and decisions").
const RETIRED_LAG: usize = 24;

/// Ops that workers have run, waiting to be freed by a pushing thread.
#[derive(Default)]
struct Retired {
    any: AtomicBool,
    batches: Mutex<std::collections::VecDeque<Vec<OpRef>>>,
}

/// State shared by the front end, the workers and completion callbacks.
pub(crate) struct Shared {
    pub(crate) lanes: Vec<Lane>,
    mode: Mode,
    pub(crate) log_placement: bool,
    max_inflight: Option<usize>,
    /// Ops pushed, and ops completed: pending is the difference. Two counters on lines of
    /// their own, so the pushing thread and the workers each write only their own (one
    /// counter written by both would cross between their cores on every op).
    pushed: Padded<AtomicUsize>,
    completed: Padded<AtomicUsize>,
    /// Tracked only under a `max_inflight` bound (see [`Engine::max_pending`]).
    max_pending: AtomicUsize,
    idle_lock: Mutex<()>,
    idle_cv: Condvar,
    idle_waiters: AtomicUsize,
    /// Ops run by workers, for the pushing side to free (see [`Shared::retire`]).
    retired: Padded<Retired>,
    first_error: Mutex<Option<EngineError>>,
    tracing: AtomicBool,
    /// Push sequence of traced ops (see [`TraceRecord::seq`]).
    trace_seq: AtomicU64,
    trace: Mutex<Vec<TraceRecord>>,
    epoch: Instant,
    sync_hooks: Vec<SyncHook>,
}

impl Shared {
    pub(crate) fn tracing(&self) -> bool {
        self.tracing.load(Ordering::Relaxed)
    }

    pub(crate) fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    /// Print where an op runs, for the first [`PLACEMENT_LINES_PER_LANE`] ops of each lane: the
    /// book's `log_device_placement` shows one execution, and a benchmark repeats its work
    /// thousands of times. The rest are counted and summed up at shutdown.
    pub(crate) fn log_placement_of(&self, op: &str, lane: usize) {
        let n = self.lanes[lane].placed.fetch_add(1, Ordering::Relaxed);
        if n < PLACEMENT_LINES_PER_LANE {
            placement_line(format_args!("{op} on {}", self.lanes[lane].name));
        }
    }

    /// The ops of each lane that [`Shared::log_placement_of`] did not print.
    fn log_placement_summary(&self) {
        for lane in &self.lanes {
            let placed = lane.placed.swap(0, Ordering::Relaxed);
            if placed > PLACEMENT_LINES_PER_LANE {
                placement_line(format_args!(
                    "{} more ops on {} not shown (the first {PLACEMENT_LINES_PER_LANE} of each lane are)",
                    crate::units::grouped((placed - PLACEMENT_LINES_PER_LANE) as u64),
                    lane.name
                ));
            }
        }
    }

    /// Hand ops a worker has run to the pushing side, which frees them on its next push or
    /// wait. An op is allocated by the thread that pushes it; freed by a worker, each op's
    /// memory and the counts of the vars it holds would cross back between the cores one op
    /// at a time, and the pusher's allocator would pick them up one by one. Retired in
    /// batches, the worker publishes one list per batch and the pusher frees locally.
    pub(crate) fn retire(&self, ops: &mut Vec<OpRef>) {
        let batch = std::mem::replace(ops, Vec::with_capacity(ops.capacity()));
        let mut batches = lock(&self.retired.batches);
        batches.push_back(batch);
        if batches.len() > RETIRED_LAG {
            self.retired.any.store(true, Ordering::Release);
        }
    }

    /// Free what workers retired beyond the last [`RETIRED_LAG`] batches, if anything.
    fn free_retired(&self) {
        if !self.retired.any.load(Ordering::Relaxed) {
            return;
        }
        let old: Vec<Vec<OpRef>> = {
            let mut b = lock(&self.retired.batches);
            self.retired.any.store(false, Ordering::Relaxed);
            let n = b.len().saturating_sub(RETIRED_LAG);
            b.drain(..n).collect()
        };
        drop(old);
    }

    /// Hand a ready op to its lane's workers.
    pub(crate) fn dispatch(self: &Arc<Self>, op: OpRef) {
        if let Submitted::NoWorker(op) = self.lanes[op.lane].queue.submit(op) {
            // Workers are gone (engine shutting down): run it here so it still completes.
            lane::run_guarded(self, &op);
        }
    }

    /// Count a new pending op, blocking while the `max_inflight` bound is reached.
    fn acquire_slot(&self) {
        let max = match self.max_inflight {
            // An op pushing from inside another op counts but never blocks on the bound: the
            // op it would wait for may be the one pushing.
            Some(max) if !in_worker() => max,
            _ => {
                self.pushed.fetch_add(1, Ordering::SeqCst);
                if self.max_inflight.is_some() {
                    self.note_pending_peak();
                }
                return;
            }
        };
        loop {
            // Completions only lower the count, so a slot seen free stays free until taken.
            let p = self.pushed.load(Ordering::SeqCst);
            let pending = p.saturating_sub(self.completed.load(Ordering::SeqCst));
            if pending < max {
                if self
                    .pushed
                    .compare_exchange_weak(p, p + 1, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
                {
                    break;
                }
            } else {
                self.block_until(|| self.pending() < max);
            }
        }
        self.note_pending_peak();
    }

    fn note_pending_peak(&self) {
        let now = self.pending();
        if now > self.max_pending.load(Ordering::Relaxed) {
            self.max_pending.fetch_max(now, Ordering::AcqRel);
        }
    }

    /// Ops pushed and not yet completed. Completed is read first: every op it counts was
    /// pushed before, so the difference never goes below zero.
    fn pending(&self) -> usize {
        let completed = self.completed.load(Ordering::SeqCst);
        self.pushed.load(Ordering::SeqCst).saturating_sub(completed)
    }

    /// Called once per op, after its dependants were dispatched.
    pub(crate) fn op_finished(&self) {
        let done = self.completed.fetch_add(1, Ordering::SeqCst) + 1;
        // Wake sleepers only when what they wait for may have become true: a wake-up is a
        // syscall, and doing one per completed op while `wait_all` sleeps would cost more than
        // the ops themselves. The pushed count is read only then, so a worker does not pull
        // the pushing thread's line on every op.
        if self.idle_waiters.load(Ordering::SeqCst) == 0 {
            return;
        }
        let now = self.pushed.load(Ordering::SeqCst).saturating_sub(done);
        let may_matter =
            now == 0 || self.mode == Mode::Naive || self.max_inflight.is_some_and(|max| now < max);
        if may_matter {
            waiting::note_waker();
            let _g = lock(&self.idle_lock);
            self.idle_cv.notify_all();
        }
    }

    pub(crate) fn record_error(&self, e: &EngineError) {
        lock(&self.first_error).get_or_insert_with(|| e.clone());
    }

    pub(crate) fn record_trace(&self, op: &OpBlock, failed: bool) {
        let ended_ns = self.now_ns();
        let (pushed_ns, seq, started, worker) = match &op.trace {
            Some(t) => (
                t.pushed_ns,
                t.seq,
                t.started_ns.load(Ordering::Relaxed),
                t.worker.get().cloned().unwrap_or_default(),
            ),
            // Pushed before tracing was switched on.
            None => (0, 0, 0, String::new()),
        };
        let record = TraceRecord {
            lane: op.lane,
            lane_name: self.lanes[op.lane].name.clone(),
            name: op.name.to_string(),
            seq,
            reads: op.reads().iter().map(Var::id).collect(),
            writes: op.writes().iter().map(Var::id).collect(),
            worker,
            pushed_ns,
            started_ns: if started == 0 { ended_ns } else { started },
            ended_ns,
            failed,
        };
        lock(&self.trace).push(record);
    }

    /// Wait until everything pushed has completed, then stop the workers and join the
    /// lanes' own threads (pool workers end when they receive the stop).
    fn shut_down(&self, threads: Vec<JoinHandle<()>>) {
        self.wait_idle();
        if self.log_placement {
            self.log_placement_summary();
        }
        for lane in &self.lanes {
            lane.queue.stop();
        }
        for t in threads {
            let _ = t.join();
        }
    }

    fn wait_idle(&self) {
        self.block_until(|| self.pending() == 0);
    }

    /// Spin, then yield, then sleep until `done()` holds. Every op completion re-checks
    /// sleepers, so no wake-up is lost: a sleeper registers, re-checks under the lock, and
    /// `op_finished` takes the same lock before notifying.
    fn block_until(&self, done: impl Fn() -> bool) {
        if !spin_until(&done) {
            let g = lock(&self.idle_lock);
            waiting::sleep_until(g, &self.idle_cv, &self.idle_waiters, done);
        }
    }
}

#[cfg(test)]
mod data_tests;
#[cfg(test)]
mod failure_tests;
#[cfg(test)]
pub(crate) mod tests;
#[cfg(test)]
mod torture;
