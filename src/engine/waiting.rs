//! How engine threads wait for one another: poll, then sleep; and where a woken one runs.
//!
//! A waiting thread (a pusher for an op's result, an idle worker for its next op) polls
//! before it sleeps, because a futex sleep and wake-up costs tens of microseconds on a VM, far
//! more than a small op; polling pays only while the two threads run on different CPUs.
//!
//! After every CPU was busy (a parallel matrix product), Linux stops looking for an idle CPU
//! when it wakes a thread, for as long as the recent load stays high (tens of ms: the
//! `SIS_UTIL` heuristic), and puts the woken thread on its waker's CPU. A pusher woken by the
//! worker that finished the product then shares that worker's CPU: each op of a synchronous
//! loop waits while the worker polls for its next op on the only CPU the pusher can run on,
//! then parks, to be woken onto the same CPU again. Such ops cost 65-100 µs instead of under
//! 1 µs, hundreds in a row, while the other CPU sits idle, and the load balancer does not soon
//! move a thread that ran a moment ago. So a thread that an engine thread woke moves itself
//! off its waker's CPU when the kernel put it there: over seven runs of `parbench async`, no
//! `sync` sample is then above 3 µs per op, against 44 of 105 without the move (see
//! src/engine/README.md).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, MutexGuard};

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

/// Sleep on `cv` (its mutex held by `guard`) until `done()`, counted in `sleepers` (SeqCst: a
/// waker that changes what `done` reads, then reads `sleepers`, sees this sleeper, or the
/// re-check sees its change); then leave the waker's CPU if this thread slept.
pub(crate) fn sleep_until<T>(
    mut guard: MutexGuard<'_, T>,
    cv: &Condvar,
    sleepers: &AtomicUsize,
    done: impl Fn() -> bool,
) {
    sleepers.fetch_add(1, Ordering::SeqCst);
    let mut slept = false;
    while !done() {
        guard = cv.wait(guard).unwrap_or_else(|p| p.into_inner());
        slept = true;
    }
    sleepers.fetch_sub(1, Ordering::SeqCst);
    drop(guard);
    if slept {
        leave_wakers_cpu();
    }
}

/// The CPU of the last engine thread to wake a sleeping one, or `usize::MAX`. One for the
/// whole process: a wake-up racing another at worst moves a thread that had no need to move.
static WAKER_CPU: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Say where this thread runs, before it wakes a sleeping engine thread.
pub(crate) fn note_waker() {
    if let Some(cpu) = current_cpu() {
        WAKER_CPU.store(cpu, Ordering::Relaxed);
    }
}

/// After a sleep that an engine thread ended: leave the waker's CPU if the kernel put this
/// thread there, since the two are about to hand work back and forth.
pub(crate) fn leave_wakers_cpu() {
    leave_if_on(current_cpu(), &WAKER_CPU);
}

/// [`leave_wakers_cpu`] for a thread on `cpu`, the waker's noted in `waker`; `None` if it
/// stays because it is not on the waker's CPU.
fn leave_if_on(cpu: Option<usize>, waker: &AtomicUsize) -> Option<Hop> {
    cpu.filter(|&cpu| cpu == waker.load(Ordering::Relaxed))
        .map(|_| hop_off())
}

/// The CPU this thread runs on now, if the platform says.
fn current_cpu() -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        // glibc reads it from the thread's rseq area: a few ns, no system call.
        usize::try_from(unsafe { libc::sched_getcpu() }).ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// What [`hop_off`] did.
#[derive(Debug, PartialEq, Eq)]
enum Hop {
    /// The thread was moved from one CPU to another of its affinity mask (read while the
    /// mask excluded the first), and the mask restored.
    Moved { from: usize, to: usize },
    /// Its mask (or the platform) allows no other CPU; nothing was changed.
    Stayed,
}

/// Move this thread off the CPU it runs on to another its affinity mask allows, then restore
/// the mask: narrowing the mask migrates the thread at once, and restoring it does not move
/// it back. A thread pinned to one CPU (by `taskset`, say) stays where it is.
fn hop_off() -> Hop {
    #[cfg(target_os = "linux")]
    {
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: `cpu_set_t` is plain bits; the calls read and write exactly `size` bytes of
        // sets owned here, for the calling thread (pid 0).
        unsafe {
            let mut mask: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, size, &mut mask) != 0 {
                return Hop::Stayed;
            }
            let Some(cpu) = current_cpu() else {
                return Hop::Stayed;
            };
            let mut elsewhere = mask;
            libc::CPU_CLR(cpu, &mut elsewhere);
            if libc::CPU_COUNT(&elsewhere) == 0 || libc::sched_setaffinity(0, size, &elsewhere) != 0
            {
                return Hop::Stayed;
            }
            // Until the mask is restored, this thread cannot run on `cpu`.
            let to = current_cpu().unwrap_or(cpu);
            // Restoring a mask that held this thread a moment ago cannot fail for want of a
            // CPU; if it failed anyway, the thread would only run on fewer CPUs.
            libc::sched_setaffinity(0, size, &mask);
            Hop::Moved { from: cpu, to }
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        Hop::Stayed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_os = "linux")]
    use crate::machine::affinity::allowed;

    #[test]
    fn spin_until_returns_as_soon_as_the_condition_holds_and_false_when_it_never_does() {
        assert!(spin_until(|| true));
        assert!(!spin_until(|| false));
        let calls = std::cell::Cell::new(0);
        assert!(spin_until(|| {
            calls.set(calls.get() + 1);
            calls.get() == 50
        }));
        assert_eq!(calls.get(), 50);
    }

    #[cfg(target_os = "linux")]
    fn pin_to(cpus: &[usize]) {
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: as in `hop_off`.
        unsafe {
            let mut mask: libc::cpu_set_t = std::mem::zeroed();
            for &c in cpus {
                libc::CPU_SET(c, &mut mask);
            }
            assert_eq!(libc::sched_setaffinity(0, size, &mask), 0);
        }
    }

    /// On a thread of its own, whose mask the test may change.
    #[test]
    #[cfg(target_os = "linux")]
    fn a_hop_moves_the_thread_when_its_mask_allows_and_leaves_the_mask_as_it_was() {
        std::thread::spawn(|| {
            let mask = allowed();
            if mask.len() < 2 {
                assert_eq!(hop_off(), Hop::Stayed);
                assert_eq!(allowed(), mask);
                return;
            }
            // Pinned to one CPU: no hop, mask unchanged.
            pin_to(&mask[..1]);
            assert_eq!(hop_off(), Hop::Stayed);
            assert_eq!(allowed(), &mask[..1]);
            // Two CPUs: the hop lands on the other one.
            pin_to(&mask[..2]);
            match hop_off() {
                Hop::Moved { from, to } => {
                    assert_ne!(from, to);
                    assert!(mask[..2].contains(&from) && mask[..2].contains(&to));
                }
                Hop::Stayed => panic!("a thread free to run on two CPUs did not hop"),
            }
            assert_eq!(allowed(), &mask[..2], "the mask was not restored");
            pin_to(&mask);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn only_a_thread_on_its_wakers_cpu_leaves_it() {
        let waker = AtomicUsize::new(3);
        assert_eq!(leave_if_on(Some(2), &waker), None);
        assert_eq!(leave_if_on(None, &waker), None);
        // On the waker's CPU it tries to hop (where it lands depends on this thread's mask).
        std::thread::spawn(move || assert!(leave_if_on(Some(3), &waker).is_some()))
            .join()
            .unwrap();
        let unset = AtomicUsize::new(usize::MAX);
        assert_eq!(leave_if_on(Some(3), &unset), None);
    }
}
