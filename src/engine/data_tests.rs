//! Engine tests of a var's data: released once, when the last owner and the last pending
//! access are gone, and found only by the ops that name the var.

use super::tests::{engine, on_engine, within, Gate};
use super::*;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// Data whose releases are counted, to check when and how often the engine frees it.
struct Counted {
    value: u64,
    released: Arc<AtomicUsize>,
}

impl VarData for Counted {
    fn release(&self) {
        self.released.fetch_add(1, Ordering::SeqCst);
    }
}

fn counted(value: u64) -> (DataVar, Arc<AtomicUsize>) {
    let released = Arc::new(AtomicUsize::new(0));
    let var = DataVar::new(Box::new(Counted {
        value,
        released: released.clone(),
    }));
    (var, released)
}

#[test]
fn data_is_released_when_the_last_owner_goes_and_nothing_is_pending() {
    let (var, released) = counted(7);
    let other = var.clone();
    assert_eq!(other.data::<Counted>().map(|c| c.value), Some(7));
    drop(var);
    assert_eq!(released.load(Ordering::SeqCst), 0, "an owner is left");
    drop(other);
    assert_eq!(released.load(Ordering::SeqCst), 1);
}

#[test]
fn data_outlives_its_owners_until_the_last_pending_access_completes() {
    on_engine(1, |e, l| {
        let (var, released) = counted(3);
        let go = Gate::closed();
        let seen = Arc::new(AtomicU64::new(0));
        let (wait, seen2, key) = (go.waiter(), seen.clone(), var.var().key());
        e.push_with("reader", l[0], &[var.var()], &[], move |vars| {
            wait()?;
            let data = vars.data::<Counted>(key).ok_or(OpError::msg("no data"))?;
            seen2.store(data.value, Ordering::SeqCst);
            Ok(())
        });
        drop(var);
        assert_eq!(
            released.load(Ordering::SeqCst),
            0,
            "released while an op still reads it"
        );
        drop(go);
        e.wait_all().unwrap();
        assert_eq!(seen.load(Ordering::SeqCst), 3, "the body found the data");
        assert_eq!(released.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn an_op_body_finds_only_the_data_of_vars_its_op_names() {
    on_engine(1, |e, l| {
        let (named, _) = counted(1);
        let (other, _) = counted(2);
        let plain = Var::new();
        let found = Arc::new(Mutex::new(Vec::new()));
        let (f, keys) = (
            found.clone(),
            [named.var().key(), other.var().key(), plain.key()],
        );
        e.push_with("probe", l[0], &[named.var(), &plain], &[], move |vars| {
            let got: Vec<Option<u64>> = keys
                .iter()
                .map(|k| vars.data::<Counted>(*k).map(|c| c.value))
                .collect();
            *f.lock().unwrap() = got;
            Ok(())
        });
        e.wait_all().unwrap();
        assert_eq!(*found.lock().unwrap(), vec![Some(1), None, None]);
    });
}

#[test]
fn data_is_released_exactly_once_whoever_sees_the_last_access() {
    within(60, || {
        let (e, l) = engine(2);
        // Owners dropped on other threads while ops on the var complete on the workers: the
        // release must come once, after every op, however the two sides interleave.
        for round in 0..300u64 {
            let (var, released) = counted(round);
            let ran = Arc::new(AtomicUsize::new(0));
            let ops = 1 + (round % 5) as usize;
            for i in 0..ops {
                let (r, rel, key) = (ran.clone(), released.clone(), var.var().key());
                let body = move |vars: &OpVars<'_>| {
                    if rel.load(Ordering::SeqCst) != 0 || vars.data::<Counted>(key).is_none() {
                        return Err(OpError::msg("data released before its last access"));
                    }
                    r.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                };
                if i % 2 == 0 {
                    e.push_with("read", l[i % 2], &[var.var()], &[], body);
                } else {
                    e.push_with("write", l[i % 2], &[], &[var.var()], body);
                }
            }
            let owners: Vec<DataVar> = (0..3).map(|_| var.clone()).collect();
            drop(var);
            let dropper = std::thread::spawn(move || drop(owners));
            dropper.join().unwrap();
            e.wait_all().unwrap();
            assert_eq!(ran.load(Ordering::SeqCst), ops);
            assert_eq!(released.load(Ordering::SeqCst), 1, "round {round}");
        }
    });
}

#[test]
fn an_access_after_the_release_does_not_release_again() {
    on_engine(1, |e, l| {
        let (var, released) = counted(0);
        let plain = var.var().clone();
        drop(var);
        assert_eq!(released.load(Ordering::SeqCst), 1);
        // A plain handle may still name the var: its accesses run (on released data), and
        // each completion sees a drained, orphaned var again.
        e.push("late read", l[0], &[&plain], &[], || Ok(()));
        e.push("late write", l[0], &[], &[&plain], || Ok(()));
        e.wait_all().unwrap();
        assert_eq!(released.load(Ordering::SeqCst), 1);
    });
}

/// A value one op stores and another reads, through the var that owns it.
struct Slot(AtomicU64);

impl VarData for Slot {
    fn release(&self) {}
}

/// An op that sleeps, then stores `value` in the new var it was pushed with.
fn slow_new_slot(e: &Engine, lane: LaneId, value: u64) -> DataVar {
    e.push_with_new(
        "writer",
        lane,
        &[],
        Box::new(Slot(AtomicU64::new(0))),
        move |vars, key| {
            std::thread::sleep(Duration::from_millis(50));
            let slot = vars.data::<Slot>(key).ok_or(OpError::msg("no slot"))?;
            slot.0.store(value, Ordering::SeqCst);
            Ok(())
        },
    )
}

#[test]
fn a_var_made_with_its_writer_is_read_only_after_the_write() {
    on_engine(2, |e, l| {
        let out = slow_new_slot(&e, l[0], 7);
        assert_eq!(out.var().pushed_writes(), 1, "the op's write is counted");
        // On another lane, so a read granted too early would run during the write.
        let seen = Arc::new(AtomicU64::new(0));
        let (seen2, key) = (seen.clone(), out.var().key());
        e.push_with("reader", l[1], &[out.var()], &[], move |vars| {
            let slot = vars.data::<Slot>(key).ok_or(OpError::msg("no slot"))?;
            seen2.store(slot.0.load(Ordering::SeqCst), Ordering::SeqCst);
            Ok(())
        });
        e.wait_all().unwrap();
        assert_eq!(
            seen.load(Ordering::SeqCst),
            7,
            "the read ran before the write"
        );
        let out = slow_new_slot(&e, l[0], 9);
        e.wait_to_read(out.var()).unwrap();
        let slot = out.data::<Slot>().unwrap();
        assert_eq!(
            slot.0.load(Ordering::SeqCst),
            9,
            "the wait ended before the write"
        );
    });
}
