//! Variables: the unit of dependency tracking.
//!
//! A [`Var`] stands for a piece of data (a tensor's buffer, a parameter, anything) that ops read
//! or write. Like MXNet's `ThreadedVar` it keeps a FIFO of the accesses that are waiting for it,
//! in push order: reads that follow each other run together, a write waits for every earlier
//! access and blocks every later one. The engine never looks at the data itself.

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::error::EngineError;
use super::op::{Granted, OpRef};

static NEXT_VAR_ID: AtomicU64 = AtomicU64::new(0);

/// A handle to a tracked variable. Cloning is cheap and names the same variable.
#[derive(Clone)]
pub struct Var(pub(crate) Arc<VarInner>);

pub(crate) struct VarInner {
    id: u64,
    state: Mutex<VarState>,
    /// Signalled when a write completes and someone waits in `wait_to_read`.
    written: Condvar,
    /// Mirror of `state.completed_writes`, so waiters can spin without the lock.
    completed_writes: AtomicU64,
    /// Mirror of `state.error.is_some()`, so the no-error path never takes the lock.
    poisoned: AtomicBool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Access {
    Read,
    Write,
}

#[derive(Default)]
struct VarState {
    /// Accesses that could not be granted at push, in push order.
    queue: VecDeque<(Access, OpRef)>,
    /// Reads granted and not yet completed.
    running_reads: usize,
    /// A write is granted and not yet completed.
    writing: bool,
    pushed_writes: u64,
    completed_writes: u64,
    /// Error left by the last completed write (an op that failed or was skipped).
    error: Option<EngineError>,
    /// Threads blocked in `wait_to_read` on this var.
    waiters: usize,
}

impl Var {
    /// A fresh variable with no pending accesses.
    pub fn new() -> Var {
        Var(Arc::new(VarInner {
            id: NEXT_VAR_ID.fetch_add(1, Ordering::Relaxed),
            state: Mutex::new(VarState::default()),
            written: Condvar::new(),
            completed_writes: AtomicU64::new(0),
            poisoned: AtomicBool::new(false),
        }))
    }

    /// A process-unique id, for traces and debugging.
    pub fn id(&self) -> u64 {
        self.0.id
    }

    /// True when both handles name the same variable.
    pub fn same(&self, other: &Var) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// The number of writes pushed on this var so far (its version, in MXNet's terms).
    pub fn pushed_writes(&self) -> u64 {
        self.lock().pushed_writes
    }

    fn lock(&self) -> MutexGuard<'_, VarState> {
        // The state is only mutated by engine code that cannot panic while holding the lock;
        // a poisoned mutex would still hold consistent data, so take it either way.
        self.0.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Register an access by `op`. Returns true when it is granted at once.
    pub(crate) fn append(&self, access: Access, op: &OpRef) -> bool {
        let mut s = self.lock();
        match access {
            Access::Read => {
                if !s.writing && s.queue.is_empty() {
                    s.running_reads += 1;
                    true
                } else {
                    s.queue.push_back((Access::Read, op.clone()));
                    false
                }
            }
            Access::Write => {
                s.pushed_writes += 1;
                if !s.writing && s.running_reads == 0 && s.queue.is_empty() {
                    s.writing = true;
                    true
                } else {
                    s.queue.push_back((Access::Write, op.clone()));
                    false
                }
            }
        }
    }

    /// A granted read finished. Ops whose access becomes granted are appended to `granted`.
    pub(crate) fn complete_read(&self, granted: &mut Granted) {
        let mut s = self.lock();
        debug_assert!(s.running_reads > 0);
        s.running_reads -= 1;
        if s.running_reads == 0 && !s.writing {
            // Reads are only ever queued behind a write, so the front is a write (or nothing).
            if let Some((Access::Write, _)) = s.queue.front() {
                if let Some((_, op)) = s.queue.pop_front() {
                    s.writing = true;
                    granted.push(op);
                }
            }
        }
    }

    /// A granted write finished, leaving `error` as the var's state.
    pub(crate) fn complete_write(&self, error: Option<&EngineError>, granted: &mut Granted) {
        let mut s = self.lock();
        debug_assert!(s.writing);
        s.writing = false;
        s.completed_writes += 1;
        s.error = error.cloned();
        self.0.poisoned.store(s.error.is_some(), Ordering::Release);
        self.0
            .completed_writes
            .store(s.completed_writes, Ordering::Release);
        if s.waiters > 0 {
            self.0.written.notify_all();
        }
        // Grant every read up to the next write; if the front is a write, grant it alone.
        while let Some((Access::Read, _)) = s.queue.front() {
            if let Some((_, op)) = s.queue.pop_front() {
                s.running_reads += 1;
                granted.push(op);
            }
        }
        if s.running_reads == 0 {
            if let Some((Access::Write, _)) = s.queue.front() {
                if let Some((_, op)) = s.queue.pop_front() {
                    s.writing = true;
                    granted.push(op);
                }
            }
        }
    }

    /// The error this var carries, if the last write to complete failed.
    /// Only meaningful to a caller whose access is granted (nothing else can write meanwhile).
    pub(crate) fn error(&self) -> Option<EngineError> {
        if !self.0.poisoned.load(Ordering::Acquire) {
            return None;
        }
        self.lock().error.clone()
    }

    /// Block until every write pushed before this call has completed; return the var's error.
    pub(crate) fn wait_written(&self) -> Result<(), EngineError> {
        let target = self.lock().pushed_writes;
        if !spin_until(|| self.0.completed_writes.load(Ordering::Acquire) >= target) {
            let mut s = self.lock();
            s.waiters += 1;
            while s.completed_writes < target {
                s = self.0.written.wait(s).unwrap_or_else(|p| p.into_inner());
            }
            s.waiters -= 1;
        }
        match self.0.poisoned.load(Ordering::Acquire) {
            false => Ok(()),
            true => self.lock().error.clone().map_or(Ok(()), Err),
        }
    }
}

/// Busy-wait iterations before yielding, then sleeping. Tuned so a synchronous round trip
/// stays in the microsecond range without burning a core for long.
const SPIN_LIMIT: u32 = 2_000;
const YIELD_LIMIT: u32 = 200;

/// Spin, then yield, until `done()` holds; false if it still does not after that, when the
/// caller should sleep. A round trip through a busy worker takes well under a microsecond,
/// far less than a futex sleep and wake-up.
pub(crate) fn spin_until(done: impl Fn() -> bool) -> bool {
    for i in 0..SPIN_LIMIT + YIELD_LIMIT {
        if done() {
            return true;
        }
        if i < SPIN_LIMIT {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
    done()
}

impl Default for Var {
    fn default() -> Self {
        Var::new()
    }
}

impl fmt::Debug for Var {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Var#{}", self.0.id)
    }
}
