//! Variables: the unit of dependency tracking.
//!
//! A [`Var`] stands for a piece of data (a tensor's buffer, a parameter, anything) that ops read
//! or write. Like MXNet's `ThreadedVar` it keeps a FIFO of the accesses that are waiting for it,
//! in push order: reads that follow each other run together, a write waits for every earlier
//! access and blocks every later one. The engine never looks at the data itself.
//!
//! The state is split by who writes it. The pushing side counts the reads and writes pushed
//! and holds the accesses that must wait; the completing side counts the reads and writes
//! completed. An access is granted once the completed counts reach the counts pushed before it,
//! so the two sides meet only when something waits: reading a var that nothing writes, or
//! writing a var nothing else touches, moves no cache line between the pushing thread and the
//! workers.
//!
//! A var may also own data on behalf of its users ([`DataVar`]): a tensor's buffer, say. An op
//! body reaches that data through the vars its op names ([`OpVars`]), so it holds no handle of
//! its own, and a worker never moves a reference count that the pushing thread also moves (that
//! count's cache line would cross between the cores twice per op). The data's contents are
//! released as soon as the last owner is gone *and* every access pushed before that has
//! completed, by whichever thread sees both last, so memory is freed when it was before: when
//! the last op that uses it finishes.

use std::any::Any;
use std::collections::VecDeque;
use std::fmt;
use std::ptr::addr_of_mut;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::error::EngineError;
use super::lock;
use super::op::{Granted, OpRef};
use super::waiting::{self, spin_until};

static NEXT_VAR_ID: AtomicU64 = AtomicU64::new(0);

/// Ids a thread takes from [`NEXT_VAR_ID`] at once.
const VAR_ID_BLOCK: u64 = 1024;

thread_local! {
    /// The next id this thread hands out, and the end of its block.
    static VAR_IDS: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
}

/// A process-unique var id, from a block of ids reserved by this thread: every tensor op
/// creates a var, and a shared counter would cost each one an atomic add.
fn next_var_id() -> u64 {
    VAR_IDS.with(|ids| {
        let (mut next, mut end) = ids.get();
        if next == end {
            next = NEXT_VAR_ID.fetch_add(VAR_ID_BLOCK, Ordering::Relaxed);
            end = next + VAR_ID_BLOCK;
        }
        ids.set((next + 1, end));
        next
    })
}

/// A handle to a tracked variable. Cloning is cheap and names the same variable.
#[derive(Clone)]
pub struct Var(pub(crate) Arc<VarInner>);

#[repr(C)]
pub(crate) struct VarInner {
    id: u64,
    /// [`DataVar`] handles alive (0 for a plain var). On the pushing side: owners are cloned
    /// and dropped where ops are pushed.
    owners: AtomicUsize,
    /// Mirror of the reads and writes pushed (`pushed`'s counts summed), stored under its
    /// lock, so the last owner reads it without taking the lock.
    pushed_total: AtomicU64,
    /// The pushing side. Completions take this lock only when `done.waiting` is set.
    pushed: Mutex<Pushed>,
    /// Signalled (under `pushed`) when a write completes and someone sleeps in
    /// `wait_written`.
    written: Condvar,
    /// Keeps `done` off the last line the fields above use. A gap rather than an aligned
    /// [`Padded`](super::Padded): every tensor op creates a var, and an over-aligned
    /// allocation takes the allocator's slow path (it cost a tenth of a push).
    _gap: std::mem::MaybeUninit<[u8; 64]>,
    /// The completing side, on lines of its own.
    done: Done,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Access {
    Read,
    Write,
}

#[derive(Default)]
struct Pushed {
    reads: u64,
    writes: u64,
    /// The completed writes last read from `done`: while it equals `writes`, a read is granted
    /// without reading the completing side's line (which a worker writes on every completion).
    writes_seen_done: u64,
    /// Accesses not granted at push, in push order, each with the counts it waits for.
    queue: VecDeque<Waiting>,
}

struct Waiting {
    access: Access,
    op: OpRef,
    /// Reads and writes pushed before this access.
    reads_before: u64,
    writes_before: u64,
}

struct Done {
    reads: AtomicU64,
    writes: AtomicU64,
    /// Set while `pushed.queue` is not empty (changed only under `pushed`'s lock).
    waiting: AtomicBool,
    /// Threads asleep in `wait_written`.
    sleepers: AtomicUsize,
    /// Mirror of `error.is_some()`, so the no-error path never takes the lock.
    poisoned: AtomicBool,
    /// Total accesses pushed when the last owner went ([`NOT_ORPHANED`] until then): once
    /// that many have completed, the data is released.
    orphaned_at: AtomicU64,
    /// Set by the one thread that releases the data.
    released: AtomicBool,
    /// What the var owns, beside the counts a worker updates as it completes an access (the
    /// worker that runs an op reads it on a line it already holds).
    data: Option<Box<dyn VarData>>,
    /// Error left by the last completed write (an op that failed or was skipped).
    error: Mutex<Option<EngineError>>,
}

/// [`Done::orphaned_at`] while the var still has an owner.
const NOT_ORPHANED: u64 = u64::MAX;

/// Data a var owns on behalf of its [`DataVar`] handles (a tensor's buffer).
pub trait VarData: Any + Send + Sync {
    /// Free what the data holds: its owners are gone and every access pushed before the last
    /// one went has completed, so nothing can read it any more. Called at most once, on the
    /// thread that saw that last (a worker or the thread that dropped the last owner); the
    /// data itself is dropped with the var, once no op names it.
    fn release(&self);
}

impl Done {
    /// True when an access pushed after `reads_before` reads and `writes_before` writes may
    /// run now. Completed counts never pass the access's own, since later accesses wait for it.
    fn reached(&self, access: Access, reads_before: u64, writes_before: u64) -> bool {
        self.writes.load(Ordering::SeqCst) >= writes_before
            && (access == Access::Read || self.reads.load(Ordering::SeqCst) >= reads_before)
    }
}

impl Var {
    pub fn new() -> Var {
        Var::with(None, 0, 0)
    }

    /// A var owning `data` (if any) with `owners` [`DataVar`] handles and `writes` writes
    /// already pushed (see [`DataVar::new_written`]).
    fn with(data: Option<Box<dyn VarData>>, owners: usize, writes: u64) -> Var {
        // SAFETY: `init` writes every field (`every_field_is_written` checks the list; `_gap`
        // is padding, never read).
        Var(unsafe {
            super::arc_in_place(|v: *mut VarInner| {
                /// Never called: its patterns name every field, so a field added to the
                /// var without being written below fails to compile.
                #[allow(dead_code)]
                fn every_field_is_written(v: &VarInner) {
                    let VarInner {
                        id: _,
                        owners: _,
                        pushed_total: _,
                        pushed: _,
                        written: _,
                        _gap: _,
                        done,
                    } = v;
                    let Done {
                        reads: _,
                        writes: _,
                        waiting: _,
                        sleepers: _,
                        poisoned: _,
                        orphaned_at: _,
                        released: _,
                        data: _,
                        error: _,
                    } = done;
                }
                addr_of_mut!((*v).id).write(next_var_id());
                addr_of_mut!((*v).owners).write(AtomicUsize::new(owners));
                addr_of_mut!((*v).pushed_total).write(AtomicU64::new(writes));
                addr_of_mut!((*v).pushed).write(Mutex::new(Pushed {
                    writes,
                    ..Pushed::default()
                }));
                addr_of_mut!((*v).written).write(Condvar::new());
                let done = addr_of_mut!((*v).done);
                addr_of_mut!((*done).reads).write(AtomicU64::new(0));
                addr_of_mut!((*done).writes).write(AtomicU64::new(0));
                addr_of_mut!((*done).waiting).write(AtomicBool::new(false));
                addr_of_mut!((*done).sleepers).write(AtomicUsize::new(0));
                addr_of_mut!((*done).poisoned).write(AtomicBool::new(false));
                addr_of_mut!((*done).orphaned_at).write(AtomicU64::new(NOT_ORPHANED));
                addr_of_mut!((*done).released).write(AtomicBool::new(false));
                addr_of_mut!((*done).data).write(data);
                addr_of_mut!((*done).error).write(Mutex::new(None));
            })
        })
    }

    /// What names this var inside an op body ([`OpVars::data`]): a plain address, so a body
    /// that keeps it holds no reference count.
    pub fn key(&self) -> VarKey {
        VarKey(Arc::as_ptr(&self.0) as usize)
    }

    /// The data the var owns, if it is a `T`.
    pub fn data<T: VarData>(&self) -> Option<&T> {
        let data: &dyn Any = self.0.done.data.as_deref()?;
        data.downcast_ref()
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
        self.lock().writes
    }

    fn lock(&self) -> MutexGuard<'_, Pushed> {
        lock(&self.0.pushed)
    }

    /// Register an access by `op`, with this var's pushing side locked (`p`). Returns true
    /// when it is granted at once.
    fn append_locked(&self, p: &mut Pushed, access: Access, op: &OpRef) -> bool {
        let done = &self.0.done;
        let (reads_before, writes_before) = (p.reads, p.writes);
        match access {
            Access::Read => p.reads += 1,
            Access::Write => p.writes += 1,
        }
        self.0
            .pushed_total
            .store(p.reads + p.writes, Ordering::Relaxed);
        if p.queue.is_empty() {
            // Nothing waits, so this access waits only for accesses that were granted.
            if access == Access::Read && p.writes_seen_done == writes_before {
                return true;
            }
            if done.reached(access, reads_before, writes_before) {
                p.writes_seen_done = writes_before;
                return true;
            }
        }
        p.queue.push_back(Waiting {
            access,
            op: op.clone(),
            reads_before,
            writes_before,
        });
        if p.queue.len() == 1 {
            // SeqCst with the completions' increment-then-load: a completion that this
            // check misses sees `waiting` and grants the access itself.
            done.waiting.store(true, Ordering::SeqCst);
            if done.reached(access, reads_before, writes_before) {
                p.queue.clear();
                done.waiting.store(false, Ordering::SeqCst);
                return true;
            }
        }
        false
    }

    /// Grant the waiting accesses whose turn has come, oldest first, into `granted`.
    fn grant_waiting(&self, granted: &mut Granted) {
        let done = &self.0.done;
        let mut p = self.lock();
        // Each waits for at least what the one before it waits for, so the first that may
        // not run yet holds back the rest.
        while let Some(w) = p.queue.front() {
            if !done.reached(w.access, w.reads_before, w.writes_before) {
                break;
            }
            if let Some(w) = p.queue.pop_front() {
                granted.push(w.op);
            }
        }
        if p.queue.is_empty() {
            done.waiting.store(false, Ordering::SeqCst);
        }
    }

    /// A granted read finished. Ops whose access becomes granted are appended to `granted`.
    pub(crate) fn complete_read(&self, granted: &mut Granted) {
        let done = &self.0.done;
        done.reads.fetch_add(1, Ordering::SeqCst);
        if done.waiting.load(Ordering::SeqCst) {
            self.grant_waiting(granted);
        }
        self.release_if_drained();
    }

    /// A granted write finished, leaving `error` as the var's state.
    pub(crate) fn complete_write(&self, error: Option<&EngineError>, granted: &mut Granted) {
        let done = &self.0.done;
        if error.is_some() || done.poisoned.load(Ordering::Acquire) {
            let mut e = lock(&done.error);
            *e = error.cloned();
            done.poisoned.store(e.is_some(), Ordering::Release);
        }
        done.writes.fetch_add(1, Ordering::SeqCst);
        if done.sleepers.load(Ordering::SeqCst) > 0 {
            waiting::note_waker();
            let _g = self.lock();
            self.0.written.notify_all();
        }
        if done.waiting.load(Ordering::SeqCst) {
            self.grant_waiting(granted);
        }
        self.release_if_drained();
    }

    /// The last owner is gone: release the data once every access pushed so far has
    /// completed (now, if they all have).
    fn orphan(&self) {
        // Relaxed: every access pushed before the last owner went happens before this (it
        // was pushed by this thread, or by one whose handle was dropped before this one), and
        // a load sees every store that happens before it.
        let total = self.0.pushed_total.load(Ordering::Relaxed);
        // SeqCst, with the completions' increment-then-load in `release_if_drained`: this
        // thread sees the last completion, or that completion sees this mark (Dekker).
        self.0.done.orphaned_at.store(total, Ordering::SeqCst);
        self.release_if_drained();
    }

    /// Release the data if the var is orphaned and every access pushed before that has
    /// completed; exactly one thread does.
    fn release_if_drained(&self) {
        let done = &self.0.done;
        let Some(data) = &done.data else { return };
        let at = done.orphaned_at.load(Ordering::SeqCst);
        if at == NOT_ORPHANED {
            return;
        }
        // Completed counts only grow, and never pass what was pushed: a sum that reaches the
        // total pushed means every one of those accesses has completed.
        let completed = done.reads.load(Ordering::SeqCst) + done.writes.load(Ordering::SeqCst);
        if completed >= at && !done.released.swap(true, Ordering::AcqRel) {
            data.release();
        }
    }

    /// The error this var carries, if the last write to complete failed.
    /// Only meaningful to a caller whose access is granted (nothing else can write meanwhile).
    pub(crate) fn error(&self) -> Option<EngineError> {
        let done = &self.0.done;
        if !done.poisoned.load(Ordering::Acquire) {
            return None;
        }
        lock(&done.error).clone()
    }

    /// Block until every write pushed before this call has completed; return the var's error.
    pub(crate) fn wait_written(&self) -> Result<(), EngineError> {
        let done = &self.0.done;
        let target = self.lock().writes;
        if !spin_until(|| done.writes.load(Ordering::Acquire) >= target) {
            // Paired with `complete_write`'s increment-then-load of `sleepers`.
            waiting::sleep_until(self.lock(), &self.0.written, &done.sleepers, || {
                done.writes.load(Ordering::SeqCst) >= target
            });
        }
        self.error().map_or(Ok(()), Err)
    }
}

/// Register every access of `op` with its vars; returns how many were granted at once.
///
/// An op's accesses register atomically with respect to every other op that shares a var
/// with it: two threads registering {x, y} in interleaved order could otherwise each queue
/// behind the other, at x one way round and at y the other, and wait forever. The vars are
/// locked in address order and all held until every access is in (two-phase locking), so the
/// order of two ops is the same at every var they share. No engine-wide lock is taken:
/// pushers of disjoint vars do not meet, and a completion only ever holds one var's lock.
/// One var alone cannot form such a cycle, so it takes its lock for the append only.
///
/// Only the first `n` vars register: the rest are new vars whose write the op was pushed
/// with (see [`DataVar::new_written`]).
pub(crate) fn append_all(op: &OpRef, n: usize) -> usize {
    let (deps, n_reads) = (&op.deps()[..n], op.reads().len());
    let access = |i: usize| {
        if i < n_reads {
            Access::Read
        } else {
            Access::Write
        }
    };
    match deps {
        [] => return 0,
        [v] => return usize::from(v.append_locked(&mut v.lock(), access(0), op)),
        [a, b] => {
            // The common case (an input and an output), without the general case's vectors.
            let (mut pa, mut pb) = if a.key().0 < b.key().0 {
                let pa = a.lock();
                (pa, b.lock())
            } else {
                let pb = b.lock();
                (a.lock(), pb)
            };
            let granted = usize::from(a.append_locked(&mut pa, access(0), op))
                + usize::from(b.append_locked(&mut pb, access(1), op));
            return granted;
        }
        _ => {}
    }
    let mut order: smallvec::SmallVec<[usize; 4]> = (0..deps.len()).collect();
    order.sort_unstable_by_key(|&i| deps[i].key().0);
    let mut guards: smallvec::SmallVec<[Option<MutexGuard<'_, Pushed>>; 4]> =
        deps.iter().map(|_| None).collect();
    for i in order {
        guards[i] = Some(deps[i].lock());
    }
    let mut granted = 0;
    for (i, (v, guard)) in deps.iter().zip(&mut guards).enumerate() {
        if let Some(p) = guard {
            granted += usize::from(v.append_locked(p, access(i), op));
        }
    }
    granted
}

/// A var's address, which an op body uses to find the var's data among its op's vars
/// ([`OpVars::data`]). It names the var only while the var lives: a body should look up only
/// vars its op names, which the op keeps alive, so their addresses cannot have gone to
/// another var meanwhile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VarKey(usize);

/// What a body pushed with [`Engine::push_with`](super::Engine::push_with) may reach: the
/// vars its op names, which the op keeps alive while the body runs.
pub struct OpVars<'a> {
    pub(crate) deps: &'a [Var],
}

impl<'a> OpVars<'a> {
    /// The data of the var `key` names, if the op names that var and its data is a `T`.
    pub fn data<T: VarData>(&self, key: VarKey) -> Option<&'a T> {
        self.deps.iter().find(|v| v.key() == key)?.data()
    }
}

/// A handle that owns a var's data (see [`VarData`]): cloning adds an owner; once the last is
/// dropped the data is released as soon as every access pushed until then has completed.
/// Ops name it as its [`var`](DataVar::var), like any other.
pub struct DataVar(Var);

impl DataVar {
    /// A fresh var owning `data`, with this handle as its one owner.
    pub fn new(data: Box<dyn VarData>) -> DataVar {
        DataVar(Var::with(Some(data), 1, 0))
    }

    /// [`new`](Self::new), with one write already pushed: that of the op being pushed with
    /// it, which no other op can precede ([`Engine::push_with_new`](super::Engine::push_with_new)).
    pub(crate) fn new_written(data: Box<dyn VarData>) -> DataVar {
        DataVar(Var::with(Some(data), 1, 1))
    }

    /// The var ops name to read or write the data.
    pub fn var(&self) -> &Var {
        &self.0
    }

    pub fn data<T: VarData>(&self) -> Option<&T> {
        self.0.data()
    }
}

impl Clone for DataVar {
    fn clone(&self) -> DataVar {
        // Relaxed, as for `Arc`: a new owner comes from an existing one, which keeps the
        // count above zero meanwhile.
        self.0 .0.owners.fetch_add(1, Ordering::Relaxed);
        DataVar(self.0.clone())
    }
}

impl Drop for DataVar {
    fn drop(&mut self) {
        // A count of one is this handle alone, and no other can appear: a new owner is a
        // clone of an existing one, and this one is going. The Acquire load sees everything
        // the owners that went before did, as the AcqRel decrement would, without a locked
        // instruction.
        let owners = &self.0 .0.owners;
        if owners.load(Ordering::Acquire) == 1 || owners.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.orphan();
        }
    }
}

impl fmt::Debug for DataVar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DataVar#{}", self.0 .0.id)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_completing_side_is_a_line_past_the_pushing_side() {
        let pushing_end = std::mem::offset_of!(VarInner, written) + std::mem::size_of::<Condvar>();
        assert!(std::mem::offset_of!(VarInner, done) >= pushing_end + 64);
    }

    #[test]
    fn var_ids_are_unique_across_threads_and_blocks() {
        // Each thread goes through several of its id blocks while the others take theirs.
        let per_thread = 3 * VAR_ID_BLOCK as usize + 7;
        let threads: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(move || {
                    (0..per_thread).map(|_| Var::new().id()).collect::<Vec<_>>()
                })
            })
            .collect();
        let mut ids: Vec<u64> = threads
            .into_iter()
            .flat_map(|t| t.join().expect("no panic"))
            .collect();
        let n = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), n, "an id was handed out twice");
    }
}
