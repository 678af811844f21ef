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

use std::borrow::Cow;
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::error::{panic_message, EngineError, OpError};
use super::var::Var;
use super::Shared;

pub(crate) type OpRef = Arc<OpBlock>;

/// An op's vars: most ops touch one to four, kept inline so a push allocates less.
pub(crate) type Deps = smallvec::SmallVec<[Var; 4]>;

/// A synchronous body: the op completes when it returns.
pub(crate) type SyncBody = Box<dyn FnOnce() -> Result<(), OpError> + Send + 'static>;
/// An asynchronous body: the op completes when the [`Completion`] is fired.
pub(crate) type AsyncBody = Box<dyn FnOnce(Completion) + Send + 'static>;

pub(crate) enum Body {
    Sync(SyncBody),
    Async(AsyncBody),
    /// Engine-internal: complete at once and leave the written vars without error.
    ClearErrors,
}

pub(crate) struct OpBlock {
    pub(crate) name: Cow<'static, str>,
    pub(crate) lane: usize,
    /// Reads first, then writes, inline for up to four vars.
    deps: Deps,
    n_reads: usize,
    /// Dependencies still missing, plus one held by the pusher until registration ends.
    wait: AtomicUsize,
    body: Mutex<Option<Body>>,
    /// Set by the first completion; later ones are ignored (exactly-once completion).
    completed: AtomicBool,
    /// Set once completion has released every dependant (what the naive mode waits for).
    finished: AtomicBool,
    /// The completion handle was dropped while the op's own body unwound: if the body
    /// itself catches that panic, `execute` still has to complete the op.
    dropped_in_panic: AtomicBool,
    /// What tracing records, for ops pushed while it is on: boxed, so an untraced op (the
    /// hot path) stays small.
    pub(crate) trace: Option<Box<OpTrace>>,
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

impl OpBlock {
    pub(crate) fn new(
        name: Cow<'static, str>,
        lane: usize,
        deps: Deps,
        n_reads: usize,
        body: Body,
        traced: Option<(u64, u64)>,
    ) -> OpBlock {
        OpBlock {
            name,
            lane,
            wait: AtomicUsize::new(deps.len() + 1),
            deps,
            n_reads,
            body: Mutex::new(Some(body)),
            completed: AtomicBool::new(false),
            finished: AtomicBool::new(false),
            dropped_in_panic: AtomicBool::new(false),
            trace: traced.map(|(pushed_ns, seq)| {
                Box::new(OpTrace {
                    pushed_ns,
                    started_ns: AtomicU64::new(0),
                    seq,
                    worker: std::sync::OnceLock::new(),
                })
            }),
        }
    }

    pub(crate) fn reads(&self) -> &[Var] {
        &self.deps[..self.n_reads]
    }

    pub(crate) fn writes(&self) -> &[Var] {
        &self.deps[self.n_reads..]
    }

    /// Take one dependency off; true when this was the last one and the op is ready.
    pub(crate) fn decrement_wait(&self) -> bool {
        self.wait.fetch_sub(1, Ordering::AcqRel) == 1
    }

    /// SeqCst, paired with the store in [`complete`]: a naive-mode pusher sleeps after
    /// registering in `idle_waiters` (SeqCst) and re-checking this flag, while the completing
    /// thread stores the flag and then reads `idle_waiters`. That is a store→load pattern on
    /// two locations on each side (Dekker), which only SeqCst on all four accesses keeps from
    /// losing the wake-up; Release/Acquire allows both sides to miss each other.
    pub(crate) fn is_finished(&self) -> bool {
        self.finished.load(Ordering::SeqCst)
    }

    fn take_body(&self) -> Option<Body> {
        self.body.lock().unwrap_or_else(|p| p.into_inner()).take()
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
    Arc::as_ptr(op) as usize
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

    /// The op's name, for messages.
    pub fn op_name(&self) -> &str {
        self.op.as_ref().map_or("", |op| &op.name)
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
            EngineError::OpPanicked {
                op: op.name.to_string(),
                message: "panicked while holding its completion handle".into(),
            }
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
    let Some(body) = op.take_body() else { return };
    if let Body::ClearErrors = body {
        complete(shared, op, None);
        return;
    }
    if let Some(error) = inherited_error(op) {
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
        panic!("injected panic in the engine's own code");
    }
    match body {
        Body::Sync(f) => {
            let error = match catch_unwind(AssertUnwindSafe(f)) {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(EngineError::OpFailed {
                    op: op.name.to_string(),
                    message: e.to_string(),
                }),
                Err(payload) => Some(EngineError::OpPanicked {
                    op: op.name.to_string(),
                    message: panic_message(payload.as_ref()),
                }),
            };
            complete(shared, op, error);
        }
        Body::Async(f) => {
            let completion = Completion {
                op: Some(op.clone()),
                shared: shared.clone(),
            };
            // Restored after, in case this runs inside another op's body (`dispatch` runs an
            // op in place once the workers are gone).
            let outer = RUNNING_BODY.with(|b| b.replace(body_key(op)));
            let result = catch_unwind(AssertUnwindSafe(move || f(completion)));
            RUNNING_BODY.with(|b| b.set(outer));
            let message = match result {
                Err(payload) => Some(panic_message(payload.as_ref())),
                // The body caught a panic that dropped its completion handle.
                Ok(()) if op.dropped_in_panic.load(Ordering::Acquire) => {
                    Some("panicked while holding its completion handle".to_string())
                }
                Ok(()) => None,
            };
            if let Some(message) = message {
                // A no-op if the completion fired before the panic (exactly once).
                let error = EngineError::OpPanicked {
                    op: op.name.to_string(),
                    message,
                };
                complete(shared, op, Some(error));
            }
        }
        Body::ClearErrors => {}
    }
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
    let mut granted = Vec::new();
    for v in op.reads() {
        v.complete_read(&mut granted);
    }
    for v in op.writes() {
        v.complete_write(error.as_ref(), &mut granted);
    }
    for next in granted {
        if next.decrement_wait() {
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
