//! Ops: a body plus the vars it reads and writes, and the life cycle push → ready → run →
//! complete.
//!
//! Readiness is a counter that starts at `deps + 1`: each granted dependency takes one off, and
//! the pusher takes the last one after registering every dependency, so an op can never fire
//! while it is still half-registered (MXNet's `OprBlock::wait`).
//!
//! Completion is a separate step from "the body returned": an asynchronous body gets a
//! [`Completion`] it may fire later from any thread (a CUDA event callback, say), so no worker
//! thread has to block while a device is busy.
//!
//! An op is one allocation: the body's closure lives inside the op block (an unsized
//! `OpBlock<dyn OpBody>`), not in a box of its own, since every allocation the pushing thread
//! makes is freed by a worker, and each such cross-thread free costs cache-line trips.

use std::borrow::Cow;
use std::cell::{Cell, UnsafeCell};
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::addr_of_mut;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use super::error::{panic_message, EngineError, OpError};
use super::var::{OpVars, Var};
use super::Shared;

pub(crate) type OpRef = Arc<OpBlock>;

/// An op's vars: most ops touch one to four, kept inline so a push allocates less.
pub(crate) type Deps = smallvec::SmallVec<[Var; 4]>;

/// Ops a completion makes ready.
pub(crate) type Granted = smallvec::SmallVec<[OpRef; 4]>;

/// How an op's body completes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyKind {
    /// When it returns, with its result.
    Sync,
    /// When it fires its [`Completion`].
    Async,
    /// Engine-internal: at once, leaving its written vars without error.
    ClearErrors,
}

/// What an op does when it runs, stored inline in its block.
pub(crate) trait OpBody: Send + Sync {
    fn kind(&self) -> BodyKind;

    /// Run a synchronous body (`Ok` if there was none left to run).
    ///
    /// # Safety
    /// At most one of `run_sync`, `run_async` and `discard`, once per body, by the thread that
    /// won [`OpBlock::claim`].
    unsafe fn run_sync(&self, vars: &OpVars<'_>) -> Result<(), OpError> {
        let _ = vars;
        Ok(())
    }

    /// Run an asynchronous body, which completes through `completion`.
    ///
    /// # Safety
    /// As for [`run_sync`](OpBody::run_sync).
    unsafe fn run_async(&self, completion: Completion) {
        drop(completion);
    }

    /// Drop the body without running it (an upstream op failed).
    ///
    /// # Safety
    /// As for [`run_sync`](OpBody::run_sync).
    unsafe fn discard(&self) {}
}

/// A closure, taken out exactly once by the thread that claimed its op.
struct Once<F>(UnsafeCell<Option<F>>);

// SAFETY: the closure is only ever moved out (never shared) by the one thread that claimed the
// op, so sharing the cell between threads needs only `F: Send`.
unsafe impl<F: Send> Sync for Once<F> {}

impl<F> Once<F> {
    fn new(f: F) -> Self {
        Once(UnsafeCell::new(Some(f)))
    }

    /// # Safety
    /// The caller has claimed the op (no other thread can be in here).
    unsafe fn take(&self) -> Option<F> {
        // SAFETY: exclusive access, by the caller's claim.
        unsafe { (*self.0.get()).take() }
    }
}

/// An asynchronous body: the op completes when the [`Completion`] is fired.
pub(crate) struct AsyncBody<F>(Once<F>);

/// A synchronous body: the op completes when it returns. It gets the op's vars ([`OpVars`]),
/// which a plain closure pushed with [`Engine::push`](super::Engine::push) ignores.
pub(crate) struct SyncBody<F>(Once<F>);

/// Engine-internal: complete at once and leave the written vars without error.
pub(crate) struct ClearErrors;

impl<F> SyncBody<F> {
    pub(crate) fn new(f: F) -> Self {
        SyncBody(Once::new(f))
    }
}

impl<F> AsyncBody<F> {
    pub(crate) fn new(f: F) -> Self {
        AsyncBody(Once::new(f))
    }
}

impl<F> OpBody for SyncBody<F>
where
    F: FnOnce(&OpVars<'_>) -> Result<(), OpError> + Send,
{
    fn kind(&self) -> BodyKind {
        BodyKind::Sync
    }

    unsafe fn run_sync(&self, vars: &OpVars<'_>) -> Result<(), OpError> {
        // SAFETY: forwarded from the caller.
        unsafe { self.0.take() }.map_or(Ok(()), |f| f(vars))
    }

    unsafe fn discard(&self) {
        // SAFETY: forwarded from the caller.
        drop(unsafe { self.0.take() });
    }
}

impl<F> OpBody for AsyncBody<F>
where
    F: FnOnce(Completion) + Send,
{
    fn kind(&self) -> BodyKind {
        BodyKind::Async
    }

    unsafe fn run_async(&self, completion: Completion) {
        // SAFETY: forwarded from the caller.
        if let Some(f) = unsafe { self.0.take() } {
            f(completion);
        }
    }

    unsafe fn discard(&self) {
        // SAFETY: forwarded from the caller.
        drop(unsafe { self.0.take() });
    }
}

impl OpBody for ClearErrors {
    fn kind(&self) -> BodyKind {
        BodyKind::ClearErrors
    }
}

/// An op: its bookkeeping, then its body inline (one allocation). `repr(C)` puts the head at
/// offset 0 whatever the body, so a thin pointer to the head names the whole block (a lane's
/// intake links ops by thin pointers; see [`into_thin`]).
#[repr(C)]
pub(crate) struct OpBlock<B: ?Sized = dyn OpBody> {
    head: OpHead,
    /// Last, so the block can be unsized to `OpBlock<dyn OpBody>`.
    body: B,
}

impl<B: ?Sized> std::ops::Deref for OpBlock<B> {
    type Target = OpHead;
    fn deref(&self) -> &OpHead {
        &self.head
    }
}

/// The part of an op that does not depend on its body.
pub(crate) struct OpHead {
    pub(crate) name: Cow<'static, str>,
    pub(crate) lane: usize,
    /// Reads first, then writes, inline for up to four vars.
    deps: Deps,
    n_reads: usize,
    /// Dependencies still missing, plus one held by the pusher until registration ends.
    wait: AtomicUsize,
    /// Set by the thread that runs (or discards) the body: exactly one does.
    claimed: AtomicBool,
    /// Set by the first completion; later ones are ignored (exactly-once completion).
    completed: AtomicBool,
    /// Set once completion has released every dependant (what the naive mode waits for).
    finished: AtomicBool,
    /// The completion handle was dropped while the op's own body unwound: if the body
    /// itself catches that panic, `execute` still has to complete the op.
    dropped_in_panic: AtomicBool,
    /// The next op in a lane's intake (an op is dispatched once, so it is in one intake at
    /// most, once).
    next: AtomicPtr<OpHead>,
    /// Rebuilds the block's full (unsized) pointer from a thin one.
    unsize: fn(*const OpHead) -> *const OpBlock,
    /// What tracing records, for ops pushed while it is on: boxed, so an untraced op (the
    /// hot path) stays small.
    pub(crate) trace: Option<Box<OpTrace>>,
}

/// [`OpHead::unsize`] for a body of type `B`.
fn unsize<B: OpBody + 'static>(head: *const OpHead) -> *const OpBlock {
    head.cast::<OpBlock<B>>() as *const OpBlock
}

/// The op as one thin pointer that owns the reference `op` held (see [`from_thin`]).
pub(crate) fn into_thin(op: OpRef) -> *const OpHead {
    Arc::into_raw(op).cast::<OpHead>()
}

/// The reference [`into_thin`] gave away.
///
/// # Safety
/// `head` came from [`into_thin`] and is turned back at most once.
pub(crate) unsafe fn from_thin(head: *const OpHead) -> OpRef {
    // SAFETY: `head` points at a live block's head (the reference it owns keeps the block
    // alive), `unsize` was set for that block's body type, and the head is at offset 0 of the
    // block (`repr(C)`), so this is the pointer `Arc::into_raw` returned.
    unsafe { Arc::from_raw(((*head).unsize)(head)) }
}

/// The trace-only part of an op.
pub(crate) struct OpTrace {
    /// Trace clock readings (ns since the engine's epoch).
    pub(crate) pushed_ns: u64,
    pub(crate) started_ns: AtomicU64,
    /// Push order among the ops pushed while tracing.
    pub(crate) seq: u64,
    /// The thread that ran the body: where an op *actually* ran, which a check must not
    /// infer from the lane it was pushed to.
    pub(crate) worker: std::sync::OnceLock<String>,
}

/// The vars an op is pushed with.
#[derive(Clone, Copy)]
pub(crate) struct Accesses<'a> {
    pub(crate) reads: &'a [&'a Var],
    pub(crate) writes: &'a [&'a Var],
    /// A var made for this op with its write already counted: it goes last, and does not
    /// register (see [`DataVar::new_written`](super::DataVar::new_written)).
    pub(crate) new_write: Option<&'a Var>,
}

/// Fill `deps` (empty) with the op's vars, reads first: duplicates removed, and a var that is
/// also written counted as a write only. Returns the number of reads.
fn fill_deps(deps: &mut Deps, reads: &[&Var], writes: &[&Var]) -> usize {
    for v in reads {
        if !writes.iter().any(|w| w.same(v)) && !deps.iter().any(|x| x.same(v)) {
            deps.push((*v).clone());
        }
    }
    let n_reads = deps.len();
    for v in writes {
        if !deps[n_reads..].iter().any(|x| x.same(v)) {
            deps.push((*v).clone());
        }
    }
    n_reads
}

impl<B: OpBody + 'static> OpBlock<B> {
    /// A new op, as the one allocation the engine makes for it. Its vars are listed straight
    /// into the block (a new write last): a list built on the stack and moved in was copied
    /// twice, and read back in wider loads than it was written with, which the CPU cannot
    /// forward from its store buffer.
    pub(crate) fn new_ref(
        name: Cow<'static, str>,
        lane: usize,
        accesses: Accesses<'_>,
        body: B,
        traced: Option<(u64, u64)>,
    ) -> OpRef {
        let trace = traced.map(|(pushed_ns, seq)| {
            Box::new(OpTrace {
                pushed_ns,
                started_ns: AtomicU64::new(0),
                seq,
                worker: std::sync::OnceLock::new(),
            })
        });
        // Moved in by reference, once the block is allocated: captured by value, the name and
        // the body were copied onto the stack first, with loads wider than the stores that
        // had just written them (a stall the CPU cannot forward around, on every push).
        let (mut name, mut body) = (ManuallyDrop::new(name), ManuallyDrop::new(body));
        // SAFETY: `init` writes every field (`every_field_is_written` checks the list), and
        // takes `name` and `body` exactly once.
        unsafe {
            super::arc_in_place(|op: *mut OpBlock<B>| {
                /// Never called: its patterns name every field, so a field added to the
                /// op without being written below fails to compile.
                #[allow(dead_code)]
                fn every_field_is_written<B: ?Sized>(op: &OpBlock<B>) {
                    let OpBlock { head, body: _ } = op;
                    let OpHead {
                        name: _,
                        lane: _,
                        deps: _,
                        n_reads: _,
                        wait: _,
                        claimed: _,
                        completed: _,
                        finished: _,
                        dropped_in_panic: _,
                        next: _,
                        unsize: _,
                        trace: _,
                    } = head;
                }
                let head = addr_of_mut!((*op).head);
                addr_of_mut!((*head).name).write(ManuallyDrop::take(&mut name));
                addr_of_mut!((*head).lane).write(lane);
                addr_of_mut!((*head).deps).write(Deps::new());
                // The field is written: a reference to it alone is sound.
                let deps = &mut *addr_of_mut!((*head).deps);
                let n_reads = fill_deps(deps, accesses.reads, accesses.writes);
                deps.extend(accesses.new_write.cloned());
                addr_of_mut!((*head).wait).write(AtomicUsize::new(deps.len() + 1));
                addr_of_mut!((*head).n_reads).write(n_reads);
                addr_of_mut!((*head).claimed).write(AtomicBool::new(false));
                addr_of_mut!((*head).completed).write(AtomicBool::new(false));
                addr_of_mut!((*head).finished).write(AtomicBool::new(false));
                addr_of_mut!((*head).dropped_in_panic).write(AtomicBool::new(false));
                addr_of_mut!((*head).next).write(AtomicPtr::new(std::ptr::null_mut()));
                addr_of_mut!((*head).unsize).write(unsize::<B>);
                addr_of_mut!((*head).trace).write(trace);
                addr_of_mut!((*op).body).write(ManuallyDrop::take(&mut body));
            })
        }
    }
}

impl OpHead {
    /// The op after this one in an intake.
    pub(crate) fn next(&self) -> *const OpHead {
        self.next.load(Ordering::Relaxed)
    }

    /// Link this op in front of `next`, before the intake publishes it.
    pub(crate) fn set_next(&self, next: *const OpHead) {
        self.next.store(next.cast_mut(), Ordering::Relaxed);
    }

    /// Every var the op names: its reads, then its writes.
    pub(crate) fn deps(&self) -> &[Var] {
        &self.deps
    }

    pub(crate) fn reads(&self) -> &[Var] {
        &self.deps[..self.n_reads]
    }

    pub(crate) fn writes(&self) -> &[Var] {
        &self.deps[self.n_reads..]
    }

    /// Take `n` off the wait count at once; true when they were the last.
    pub(crate) fn release_wait(&self, n: usize) -> bool {
        self.wait.fetch_sub(n, Ordering::AcqRel) == n
    }

    /// SeqCst, paired with the store in [`complete`]: a naive-mode pusher sleeps after
    /// registering in `idle_waiters` (SeqCst) and re-checking this flag, while the completing
    /// thread stores the flag and then reads `idle_waiters`. That is a store→load pattern on
    /// two locations on each side (Dekker), which only SeqCst on all four accesses keeps from
    /// losing the wake-up; Release/Acquire allows both sides to miss each other.
    pub(crate) fn is_finished(&self) -> bool {
        self.finished.load(Ordering::SeqCst)
    }

    /// True for the one caller that gets to run or discard the body.
    fn claim(&self) -> bool {
        !self.claimed.swap(true, Ordering::AcqRel)
    }
}

/// The handle an asynchronous op body uses to say it has finished.
///
/// Fire it exactly once with [`Completion::complete`], from any thread. Dropping it unfired
/// completes the op with an error, so an op is never lost and no wait can hang on it.
pub struct Completion {
    op: Option<OpRef>,
    shared: Arc<Shared>,
}

thread_local! {
    /// The op whose asynchronous body this thread is running (its address), or 0. A
    /// completion dropped while *that* body unwinds is left to `execute`, which catches the
    /// panic and reports its message. Not the thread alone: a later op on the same worker
    /// may drop a parked completion while it panics, long after that op's `execute` ended.
    static RUNNING_BODY: Cell<usize> = const { Cell::new(0) };
}

/// The [`RUNNING_BODY`] key of an op.
fn body_key(op: &OpRef) -> usize {
    Arc::as_ptr(op) as *const () as usize
}

impl Completion {
    /// Finish the op with the body's result.
    pub fn complete(mut self, result: Result<(), OpError>) {
        if let Some(op) = self.op.take() {
            let error = result.err().map(|e| EngineError::OpFailed {
                op: op.name.to_string(),
                message: e.to_string(),
            });
            complete(&self.shared, &op, error);
        }
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        let Some(op) = self.op.take() else { return };
        if std::thread::panicking() && RUNNING_BODY.with(Cell::get) == body_key(&op) {
            // The op's own body is unwinding: `execute` catches this panic and completes the
            // op with its message (or, if the body caught it, completes it when it returns).
            op.dropped_in_panic.store(true, Ordering::Release);
            return;
        }
        let error = if std::thread::panicking() {
            EngineError::panicked(&op.name, "panicked while holding its completion handle")
        } else {
            EngineError::CompletionDropped {
                op: op.name.to_string(),
            }
        };
        complete(&self.shared, &op, Some(error));
    }
}

/// The first error carried by a var the op reads or writes (writes count: a write may be a
/// read-modify-write, so it must not run on garbage either).
fn inherited_error(op: &OpBlock) -> Option<EngineError> {
    op.deps.iter().find_map(|v| v.error())
}

/// Run a ready op on the current thread. Never panics: a panicking body becomes an error.
pub(crate) fn execute(shared: &Arc<Shared>, op: &OpRef) {
    if !op.claim() {
        return;
    }
    if op.body.kind() == BodyKind::ClearErrors {
        complete(shared, op, None);
        return;
    }
    if let Some(error) = inherited_error(op) {
        // SAFETY: claimed above.
        unsafe { op.body.discard() };
        complete(shared, op, Some(error));
        return;
    }
    if let Some(t) = &op.trace {
        t.started_ns.store(shared.now_ns(), Ordering::Relaxed);
        let thread = std::thread::current();
        let _ = t
            .worker
            .set(thread.name().unwrap_or("unnamed thread").to_string());
    }
    if shared.log_placement {
        shared.log_placement_of(&op.name, op.lane);
    }
    #[cfg(test)]
    if op.name == tests_support::PANIC_IN_ENGINE {
        // SAFETY: claimed above.
        unsafe { op.body.discard() };
        panic!("injected panic in the engine's own code");
    }
    let error = match op.body.kind() {
        BodyKind::Sync => {
            // SAFETY: claimed above.
            let vars = OpVars { deps: &op.deps };
            match catch_unwind(AssertUnwindSafe(|| unsafe { op.body.run_sync(&vars) })) {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(EngineError::OpFailed {
                    op: op.name.to_string(),
                    message: e.to_string(),
                }),
                Err(p) => Some(EngineError::panicked(&op.name, panic_message(p.as_ref()))),
            }
        }
        BodyKind::Async => {
            let completion = Completion {
                op: Some(op.clone()),
                shared: shared.clone(),
            };
            // Restored after, in case this runs inside another op's body (`dispatch` runs an
            // op in place once the workers are gone).
            let outer = RUNNING_BODY.with(|b| b.replace(body_key(op)));
            // SAFETY: claimed above.
            let result = catch_unwind(AssertUnwindSafe(|| unsafe {
                op.body.run_async(completion)
            }));
            RUNNING_BODY.with(|b| b.set(outer));
            let message = match result {
                Err(payload) => panic_message(payload.as_ref()),
                // The body caught a panic that dropped its completion handle.
                Ok(()) if op.dropped_in_panic.load(Ordering::Acquire) => {
                    "panicked while holding its completion handle".to_string()
                }
                Ok(()) => return,
            };
            // A no-op if the completion fired before the panic (exactly once).
            Some(EngineError::panicked(&op.name, message))
        }
        BodyKind::ClearErrors => None,
    };
    complete(shared, op, error);
}

/// Release the op's dependencies, record its trace, and dispatch the ops it unblocks.
pub(crate) fn complete(shared: &Arc<Shared>, op: &OpRef, error: Option<EngineError>) {
    if op.completed.swap(true, Ordering::AcqRel) {
        return;
    }
    if shared.tracing() {
        shared.record_trace(op, error.is_some());
    }
    if let Some(e) = &error {
        shared.record_error(e);
    }
    // Inline: a chain grants one op per completion, which must not cost an allocation.
    let mut granted = Granted::new();
    for v in op.reads() {
        v.complete_read(&mut granted);
    }
    for v in op.writes() {
        v.complete_write(error.as_ref(), &mut granted);
    }
    for next in granted {
        // One dependency off: ready when it was the last.
        if next.release_wait(1) {
            shared.dispatch(next);
        }
    }
    // Only naive mode waits on this flag (see `is_finished`); elsewhere the full fence of a
    // SeqCst store would be paid by every op for nothing.
    let order = if shared.mode == super::Mode::Naive {
        Ordering::SeqCst
    } else {
        Ordering::Release
    };
    op.finished.store(true, order);
    shared.op_finished();
}

/// Names the engine's tests use to inject faults into engine code (not into op bodies).
#[cfg(test)]
pub(crate) mod tests_support {
    /// An op with this name makes `execute` panic outside the body's `catch_unwind`.
    pub(crate) const PANIC_IN_ENGINE: &str = "test: panic in engine code";
}
