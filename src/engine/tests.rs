//! Engine tests: ordering, concurrency, errors, back-pressure, and a property test against a
//! sequential reference. Anything that could hang runs under a watchdog, so a broken engine
//! fails the test instead of stalling the suite.

use super::*;
use proptest::prelude::*;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::AtomicU64;
use std::sync::mpsc;
use std::time::Duration;

/// Run `f` on its own thread; fail if it has not finished within `secs`.
fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(v) => v,
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("timed out after {secs} s: deadlock or lost op")
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("failed: its panic is above"),
    }
}

fn engine(lanes: usize) -> (Engine, Vec<LaneId>) {
    Engine::with_thread_lanes(Mode::Threaded, lanes).unwrap()
}

/// A shared log the ops append to, to observe execution order.
fn log() -> Arc<Mutex<Vec<&'static str>>> {
    Arc::new(Mutex::new(Vec::new()))
}

fn note(
    log: &Arc<Mutex<Vec<&'static str>>>,
    what: &'static str,
) -> impl FnOnce() -> Result<(), OpError> {
    let log = log.clone();
    move || {
        log.lock().unwrap().push(what);
        Ok(())
    }
}

/// An op body that sleeps, so a wrongly ordered later op would overtake it.
fn slow_note(
    log: &Arc<Mutex<Vec<&'static str>>>,
    what: &'static str,
) -> impl FnOnce() -> Result<(), OpError> {
    let log = log.clone();
    move || {
        std::thread::sleep(Duration::from_millis(30));
        log.lock().unwrap().push(what);
        Ok(())
    }
}

#[test]
fn read_after_write_waits_for_the_write() {
    within(10, || {
        let (e, l) = engine(2);
        let (v, log) = (Var::new(), log());
        e.push("w", l[0], &[], &[&v], slow_note(&log, "write"));
        e.push("r", l[1], &[&v], &[], note(&log, "read"));
        e.wait_all().unwrap();
        assert_eq!(*log.lock().unwrap(), vec!["write", "read"]);
    });
}

#[test]
fn write_after_read_waits_for_the_read() {
    within(10, || {
        let (e, l) = engine(2);
        let (v, log) = (Var::new(), log());
        e.push("r", l[0], &[&v], &[], slow_note(&log, "read"));
        e.push("w", l[1], &[], &[&v], note(&log, "write"));
        e.wait_all().unwrap();
        assert_eq!(*log.lock().unwrap(), vec!["read", "write"]);
    });
}

#[test]
fn write_after_write_keeps_push_order() {
    within(10, || {
        let (e, l) = engine(2);
        let (v, log) = (Var::new(), log());
        e.push("w1", l[0], &[], &[&v], slow_note(&log, "first"));
        e.push("w2", l[1], &[], &[&v], note(&log, "second"));
        e.wait_all().unwrap();
        assert_eq!(*log.lock().unwrap(), vec!["first", "second"]);
    });
}

#[test]
fn a_var_in_reads_and_writes_is_a_write() {
    within(10, || {
        let (e, l) = engine(2);
        let (v, log) = (Var::new(), log());
        e.push("rw", l[0], &[&v], &[&v, &v], slow_note(&log, "rw"));
        e.push("r", l[1], &[&v], &[], note(&log, "read"));
        e.wait_all().unwrap();
        assert_eq!(*log.lock().unwrap(), vec!["rw", "read"]);
        assert_eq!(v.pushed_writes(), 1);
    });
}

#[test]
fn independent_ops_meeting_at_a_barrier_do_not_hang() {
    // Each op waits at a two-party barrier: serialized execution would never get past it.
    within(10, || {
        let (e, l) = engine(2);
        let barrier = Arc::new(std::sync::Barrier::new(2));
        let (met, leaders) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (a, b) = (Var::new(), Var::new());
        for (lane, var) in [(l[0], &a), (l[1], &b)] {
            let (barrier, met, leaders) = (barrier.clone(), met.clone(), leaders.clone());
            e.push("meet", lane, &[], &[var], move || {
                if barrier.wait().is_leader() {
                    leaders.fetch_add(1, Ordering::SeqCst);
                }
                met.fetch_add(1, Ordering::SeqCst);
                Ok(())
            });
        }
        assert_eq!(e.wait_all(), Ok(()));
        // Both ops got past the barrier, as one meeting of two.
        assert_eq!(met.load(Ordering::SeqCst), 2, "ops past the barrier");
        assert_eq!(leaders.load(Ordering::SeqCst), 1, "meetings at the barrier");
        assert_eq!((a.pushed_writes(), b.pushed_writes()), (1, 1));
    });
}

#[test]
fn concurrent_readers_of_one_var_meeting_at_a_barrier_do_not_hang() {
    // Two readers of one var wait at a two-party barrier: readers run one at a time would
    // never get past it.
    within(10, || {
        let (e, l) = engine(2);
        let v = Var::new();
        let barrier = Arc::new(std::sync::Barrier::new(2));
        let (met, leaders) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        for lane in [l[0], l[1]] {
            let (barrier, met, leaders) = (barrier.clone(), met.clone(), leaders.clone());
            e.push("read", lane, &[&v], &[], move || {
                if barrier.wait().is_leader() {
                    leaders.fetch_add(1, Ordering::SeqCst);
                }
                met.fetch_add(1, Ordering::SeqCst);
                Ok(())
            });
        }
        assert_eq!(e.wait_all(), Ok(()));
        // Both readers got past the barrier, as one meeting of two; neither was a write.
        assert_eq!(met.load(Ordering::SeqCst), 2, "readers past the barrier");
        assert_eq!(leaders.load(Ordering::SeqCst), 1, "meetings at the barrier");
        assert_eq!(v.pushed_writes(), 0);
    });
}

#[test]
fn wait_to_read_sees_the_value_written_before_it() {
    within(10, || {
        let (e, l) = engine(1);
        let v = Var::new();
        let cell = Arc::new(AtomicU64::new(0));
        for i in 1..=100u64 {
            let c = cell.clone();
            e.push("set", l[0], &[], &[&v], move || {
                c.store(i, Ordering::SeqCst);
                Ok(())
            });
            e.wait_to_read(&v).unwrap();
            assert_eq!(cell.load(Ordering::SeqCst), i);
        }
    });
}

#[test]
fn async_completion_from_another_thread() {
    within(10, || {
        let (e, l) = engine(1);
        let (v, log) = (Var::new(), log());
        let log2 = log.clone();
        e.push_async("device op", l[0], &[], &[&v], move |done| {
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                log2.lock().unwrap().push("device");
                done.complete(Ok(()));
            });
        });
        e.push("after", l[0], &[&v], &[], note(&log, "after"));
        e.wait_to_read(&v).unwrap();
        e.wait_all().unwrap();
        assert_eq!(*log.lock().unwrap(), vec!["device", "after"]);
    });
}

#[test]
fn errors_reach_every_downstream_var_and_spare_the_rest() {
    within(10, || {
        let (e, l) = engine(2);
        let (a, b, c, other) = (Var::new(), Var::new(), Var::new(), Var::new());
        e.push("fail", l[0], &[], &[&a], || {
            Err(OpError::msg("disk on fire"))
        });
        let ran = Arc::new(AtomicBool::new(false));
        let ran2 = ran.clone();
        e.push("b = f(a)", l[1], &[&a], &[&b], move || {
            ran2.store(true, Ordering::SeqCst);
            Ok(())
        });
        e.push("c = g(b)", l[0], &[&b], &[&c], || Ok(()));
        e.push("unrelated", l[1], &[], &[&other], || Ok(()));
        let expect = EngineError::OpFailed {
            op: "fail".into(),
            message: "disk on fire".into(),
        };
        assert_eq!(e.wait_to_read(&a), Err(expect.clone()));
        assert_eq!(e.wait_to_read(&b), Err(expect.clone()));
        assert_eq!(e.wait_to_read(&c), Err(expect.clone()));
        assert_eq!(e.wait_to_read(&other), Ok(()));
        assert!(
            !ran.load(Ordering::SeqCst),
            "a dependant of a failed op must be skipped"
        );
        assert_eq!(e.wait_all(), Err(expect));
        // The error was reported once; the engine keeps working.
        assert_eq!(e.wait_all(), Ok(()));
        let fresh = Var::new();
        e.push("new work", l[0], &[&other], &[&fresh], || Ok(()));
        assert_eq!(e.wait_to_read(&fresh), Ok(()));
        // A poisoned var stays poisoned until cleared, in program order.
        e.clear_error(&c, l[0]);
        e.push("c = 1", l[1], &[], &[&c], || Ok(()));
        assert_eq!(e.wait_to_read(&c), Ok(()));
        assert_eq!(e.wait_all(), Ok(()));
    });
}

#[test]
fn a_panicking_op_is_an_error_not_a_crash() {
    within(10, || {
        let (e, l) = engine(1);
        let (a, b) = (Var::new(), Var::new());
        e.push("boom", l[0], &[], &[&a], || panic!("kaboom"));
        e.push("after", l[0], &[&a], &[&b], || Ok(()));
        let err = e.wait_to_read(&b).unwrap_err();
        assert_eq!(
            err,
            EngineError::OpPanicked {
                op: "boom".into(),
                message: "kaboom".into()
            }
        );
        assert!(e.wait_all().is_err());
        let c = Var::new();
        e.push("still alive", l[0], &[], &[&c], || Ok(()));
        assert_eq!(e.wait_to_read(&c), Ok(()));
    });
}

#[test]
fn a_panicking_async_op_reports_its_message() {
    within(10, || {
        let (e, l) = engine(1);
        let a = Var::new();
        e.push_async("async boom", l[0], &[], &[&a], |_done| {
            panic!("async kaboom")
        });
        assert_eq!(
            e.wait_to_read(&a),
            Err(EngineError::OpPanicked {
                op: "async boom".into(),
                message: "async kaboom".into()
            })
        );
        // wait_all reports the same first error.
        assert_eq!(
            e.wait_all(),
            Err(EngineError::OpPanicked {
                op: "async boom".into(),
                message: "async kaboom".into()
            })
        );
    });
}

#[test]
fn a_dropped_completion_completes_with_an_error() {
    within(10, || {
        let (e, l) = engine(1);
        let a = Var::new();
        e.push_async("forgetful", l[0], &[], &[&a], drop);
        assert_eq!(
            e.wait_to_read(&a),
            Err(EngineError::CompletionDropped {
                op: "forgetful".into()
            })
        );
        assert_eq!(
            e.wait_all(),
            Err(EngineError::CompletionDropped {
                op: "forgetful".into()
            })
        );
    });
}

#[test]
fn waiting_inside_an_op_is_refused_not_deadlocked() {
    within(10, || {
        let (e, l) = engine(1);
        let (a, b) = (Var::new(), Var::new());
        let inner = e.clone();
        let seen = Arc::new(Mutex::new(None));
        let seen2 = seen.clone();
        let a2 = a.clone();
        e.push("waits", l[0], &[], &[&b], move || {
            *seen2.lock().unwrap() = Some(inner.wait_to_read(&a2));
            Ok(())
        });
        e.wait_all().unwrap();
        assert_eq!(*seen.lock().unwrap(), Some(Err(EngineError::WaitInsideOp)));
    });
}

#[test]
fn max_inflight_bounds_pending_ops() {
    within(20, || {
        const MAX: usize = 3;
        let mut b = Engine::builder(Mode::Threaded);
        let lane = b.lane(LaneSpec::threads("cpu:0", 2));
        b.max_inflight(Some(MAX));
        let e = b.build().unwrap();
        // Ops block on a gate, so nothing completes until the test opens it.
        let gate = Arc::new((Mutex::new(false), Condvar::new()));
        let pushed = Arc::new(AtomicUsize::new(0));
        let pusher = {
            let (e, gate, pushed) = (e.clone(), gate.clone(), pushed.clone());
            std::thread::spawn(move || {
                for _ in 0..MAX + 5 {
                    let gate = gate.clone();
                    e.push("gated", lane, &[], &[&Var::new()], move || {
                        let (m, cv) = &*gate;
                        let mut open = m.lock().unwrap();
                        while !*open {
                            open = cv.wait(open).unwrap();
                        }
                        Ok(())
                    });
                    pushed.fetch_add(1, Ordering::SeqCst);
                }
            })
        };
        while pushed.load(Ordering::SeqCst) < MAX {
            std::thread::yield_now();
        }
        // With the gate shut, the pusher must stay blocked at MAX pending ops.
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(pushed.load(Ordering::SeqCst), MAX);
        assert_eq!(e.pending(), MAX);
        {
            let (m, cv) = &*gate;
            *m.lock().unwrap() = true;
            cv.notify_all();
        }
        pusher.join().unwrap();
        e.wait_all().unwrap();
        assert_eq!(pushed.load(Ordering::SeqCst), MAX + 5);
        assert_eq!(
            e.max_pending(),
            Some(MAX),
            "the high-water mark must equal the bound"
        );
    });
}

#[test]
fn naive_mode_completes_each_op_before_push_returns() {
    within(10, || {
        let (e, l) = Engine::with_thread_lanes(Mode::Naive, 2).unwrap();
        let v = Var::new();
        let pusher = std::thread::current().id();
        let ran_on = Arc::new(Mutex::new(None));
        let r2 = ran_on.clone();
        e.push("slow", l[1], &[], &[&v], move || {
            std::thread::sleep(Duration::from_millis(30));
            *r2.lock().unwrap() = Some(std::thread::current().id());
            Ok(())
        });
        // No wait: in naive mode the op has already completed, on its lane's worker.
        let ran = ran_on
            .lock()
            .unwrap()
            .expect("the op ran before push returned");
        assert_ne!(
            ran, pusher,
            "the op runs on its lane, not on the pushing thread"
        );
        assert_eq!(e.pending(), 0);
        // Two independent ops on two lanes never overlap: the second starts after the first ended.
        let times = Arc::new(Mutex::new((None, None)));
        let t1 = times.clone();
        e.push("first", l[0], &[], &[&Var::new()], move || {
            std::thread::sleep(Duration::from_millis(30));
            t1.lock().unwrap().0 = Some(std::time::Instant::now());
            Ok(())
        });
        let t2 = times.clone();
        e.push("second", l[1], &[], &[&Var::new()], move || {
            t2.lock().unwrap().1 = Some(std::time::Instant::now());
            Ok(())
        });
        let (end_first, start_second) = *times.lock().unwrap();
        assert!(start_second.unwrap() >= end_first.unwrap());
        e.push("fail", l[0], &[&v], &[&v], || Err(OpError::msg("no")));
        assert!(e.wait_to_read(&v).is_err());
        assert!(e.wait_all().is_err());
    });
}

#[test]
fn pool_lanes_run_inside_their_pool() {
    within(10, || {
        let pool = Arc::new(
            rayon::ThreadPoolBuilder::new()
                .num_threads(2)
                .thread_name(|i| format!("test-pool-{i}"))
                .build()
                .unwrap(),
        );
        let mut b = Engine::builder(Mode::Threaded);
        let lane = b.lane(LaneSpec::in_pool("cpu:0", pool.clone(), 1));
        let e = b.build().unwrap();
        let v = Var::new();
        let seen = Arc::new(Mutex::new((None, 0usize)));
        let s2 = seen.clone();
        e.push("where", lane, &[], &[&v], move || {
            *s2.lock().unwrap() = (rayon::current_thread_index(), rayon::current_num_threads());
            Ok(())
        });
        e.wait_all().unwrap();
        let (index, threads) = *seen.lock().unwrap();
        assert!(
            index.is_some(),
            "the op must run on a thread of the lane's pool"
        );
        assert_eq!(threads, 2);
    });
}

#[test]
fn trace_records_each_op_with_its_lane() {
    within(10, || {
        let (e, l) = engine(2);
        e.set_tracing(true);
        let (a, b) = (Var::new(), Var::new());
        e.push("first", l[0], &[], &[&a], || Ok(()));
        e.push("second", l[1], &[&a], &[&b], || Ok(()));
        e.wait_all().unwrap();
        let mut t = e.take_trace();
        t.sort_by_key(|r| r.started_ns);
        assert_eq!(t.len(), 2);
        assert_eq!(
            (t[0].name.as_str(), t[0].lane_name.as_str()),
            ("first", "lane:0")
        );
        assert_eq!((t[1].name.as_str(), t[1].lane), ("second", 1));
        assert!(t[0].ended_ns <= t[1].started_ns, "second depends on first");
        assert!(t
            .iter()
            .all(|r| r.pushed_ns <= r.started_ns && r.started_ns <= r.ended_ns));
    });
}

#[test]
fn dropping_the_engine_finishes_pending_work() {
    within(10, || {
        let done = Arc::new(AtomicUsize::new(0));
        let shared;
        {
            let (e, l) = engine(2);
            for i in 0..100 {
                let d = done.clone();
                e.push("count", l[i % 2], &[], &[&Var::new()], move || {
                    d.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                });
            }
            shared = Arc::downgrade(e.shared());
        }
        assert_eq!(done.load(Ordering::SeqCst), 100);
        assert_eq!(shared.strong_count(), 0, "the workers were not all joined");
    });
}

#[test]
fn ops_are_freed_once_run_whoever_frees_them() {
    // Workers hand run ops back in batches for the pushing side to free, and hold a few back
    // while idle: every op (and the var handles it holds) must still be freed, by a later push,
    // a wait, or the workers leaving.
    within(10, || {
        let v = Var::new();
        {
            let (e, l) = engine(2);
            for i in 0..1000 {
                e.push("read", l[i % 2], &[&v], &[], || Ok(()));
            }
            e.wait_all().unwrap();
            e.push("write", l[0], &[], &[&v], || Ok(()));
            e.wait_to_read(&v).unwrap();
        }
        assert_eq!(Arc::strong_count(&v.0), 1, "an op still holds the var");
    });
}

// ---- property test: the engine gives exactly the result of running ops in push order ----

/// One op of a random program: `dst[w] = f(sum of src[r]) ` for every written var, with an
/// op-specific constant so that any reordering of conflicting ops changes the result.
#[derive(Debug, Clone)]
struct ProgOp {
    reads: Vec<usize>,
    writes: Vec<usize>,
    lane: usize,
    salt: u64,
}

fn prog_op(vars: usize, lanes: usize) -> impl Strategy<Value = ProgOp> {
    (
        proptest::collection::vec(0..vars, 0..3),
        proptest::collection::vec(0..vars, 1..3),
        0..lanes,
        any::<u64>(),
    )
        .prop_map(|(reads, writes, lane, salt)| ProgOp {
            reads,
            writes,
            lane,
            salt,
        })
}

/// The op's effect on plain data, shared by the engine run and the reference.
fn apply(op: &ProgOp, values: &[AtomicU64]) {
    let mut acc = op.salt;
    for &r in op.reads.iter().chain(op.writes.iter()) {
        acc = acc
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(values[r].load(Ordering::Relaxed));
    }
    for &w in &op.writes {
        values[w].store(acc ^ w as u64, Ordering::Relaxed);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn threaded_engine_matches_sequential_reference(
        program in proptest::collection::vec(prog_op(5, 3), 1..60),
    ) {
        const VARS: usize = 5;
        let reference: Vec<AtomicU64> = (0..VARS).map(|i| AtomicU64::new(i as u64)).collect();
        for op in &program {
            apply(op, &reference);
        }

        let program2 = program.clone();
        let result = within(20, move || {
            let (e, lanes) = Engine::with_thread_lanes(Mode::Threaded, 3).unwrap();
            let vars: Vec<Var> = (0..VARS).map(|_| Var::new()).collect();
            let values: Arc<Vec<AtomicU64>> = Arc::new((0..VARS).map(|i| AtomicU64::new(i as u64)).collect());
            for op in program2 {
                let reads: Vec<&Var> = op.reads.iter().map(|&i| &vars[i]).collect();
                let writes: Vec<&Var> = op.writes.iter().map(|&i| &vars[i]).collect();
                let values = values.clone();
                let lane = lanes[op.lane];
                e.push("op", lane, &reads, &writes, move || {
                    // A little jitter lets later ops overtake when the engine would allow it.
                    if op.salt % 3 == 0 { std::thread::yield_now(); }
                    apply(&op, &values);
                    Ok(())
                });
            }
            e.wait_all().unwrap();
            values.iter().map(|v| v.load(Ordering::SeqCst)).collect::<Vec<u64>>()
        });
        let expected: Vec<u64> = reference.iter().map(|v| v.load(Ordering::SeqCst)).collect();
        prop_assert_eq!(result, expected);
    }
}

/// Pushers on `threads` threads, started together, each pushing `ops(thread, i)` 20,000
/// times: long enough that the threads overlap for most of it.
fn push_together(
    threads: usize,
    ops: impl Fn(&Engine, LaneId, usize, usize) + Send + Sync + 'static,
) {
    within(60, move || {
        let (e, l) = engine(threads);
        let start = Arc::new(std::sync::Barrier::new(threads));
        let ops = Arc::new(ops);
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (e, lane, start, ops) = (e.clone(), l[t], start.clone(), ops.clone());
                std::thread::spawn(move || {
                    start.wait();
                    for i in 0..20_000 {
                        ops(&e, lane, t, i);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        e.wait_all().unwrap();
    });
}

#[test]
fn concurrent_pushers_of_overlapping_var_sets_do_not_deadlock() {
    let (x, y) = (Var::new(), Var::new());
    let ran = Arc::new(AtomicUsize::new(0));
    let (vars, count) = ([x.clone(), y.clone()], ran.clone());
    push_together(2, move |e, lane, t, _| {
        // Opposite orders from the two threads.
        let writes = if t == 0 { [&x, &y] } else { [&y, &x] };
        let ran = count.clone();
        e.push("xy", lane, &[], &writes, move || {
            ran.fetch_add(1, Ordering::SeqCst);
            Ok(())
        });
    });
    // push_together has waited for all of them: every op ran, and wrote both vars.
    assert_eq!(ran.load(Ordering::SeqCst), 2 * 20_000, "ops run");
    for v in &vars {
        assert_eq!(v.pushed_writes(), 2 * 20_000);
    }
}

#[test]
fn concurrent_pushers_of_three_overlapping_vars_do_not_deadlock() {
    // Ops of three vars take the general registration path (two take a shortcut).
    let vars = [Var::new(), Var::new(), Var::new()];
    let ran = Arc::new(AtomicUsize::new(0));
    let (pushed, count) = (vars.clone(), ran.clone());
    push_together(3, move |e, lane, t, i| {
        // Each thread rotates the order its own way; one var is read.
        let k = (t + i) % 3;
        let order = if t == 1 { [2, 1, 0] } else { [0, 1, 2] };
        let at = |j: usize| &vars[order[(k + j) % 3]];
        let ran = count.clone();
        e.push("xyz", lane, &[at(0)], &[at(1), at(2)], move || {
            ran.fetch_add(1, Ordering::SeqCst);
            Ok(())
        });
    });
    // push_together has waited for all of them: every op ran, and each wrote two vars.
    assert_eq!(ran.load(Ordering::SeqCst), 3 * 20_000, "ops run");
    let writes: u64 = pushed.iter().map(Var::pushed_writes).sum();
    assert_eq!(writes, 2 * 3 * 20_000);
}

#[test]
fn pushing_from_inside_an_op_never_blocks_on_the_bound_or_in_naive_mode() {
    for mode in [Mode::Threaded, Mode::Naive] {
        within(10, move || {
            let mut b = Engine::builder(mode);
            let lane = b.lane(LaneSpec::threads("cpu:0", 1));
            b.max_inflight(Some(1));
            let e = b.build().unwrap();
            let inner = e.clone();
            let done = Var::new();
            let d2 = done.clone();
            let ran = Arc::new(AtomicUsize::new(0));
            let r = ran.clone();
            e.push("outer", lane, &[], &[&Var::new()], move || {
                inner.push("inner", lane, &[], &[&d2], move || {
                    r.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                });
                Ok(())
            });
            assert_eq!(e.wait_all(), Ok(()), "{mode:?}");
            assert_eq!(e.wait_to_read(&done), Ok(()), "{mode:?}");
            // The op pushed from inside the outer one was pushed, and ran, once.
            assert_eq!(done.pushed_writes(), 1, "{mode:?}");
            assert_eq!(ran.load(Ordering::SeqCst), 1, "{mode:?}: the inner op ran");
        });
    }
}

#[test]
fn an_async_body_that_catches_its_own_panic_still_completes() {
    within(10, || {
        let (e, l) = engine(1);
        let a = Var::new();
        e.push_async("self-catching", l[0], &[], &[&a], |done| {
            let _ = std::panic::catch_unwind(AssertUnwindSafe(move || {
                let _held = done;
                panic!("inner");
            }));
        });
        assert!(matches!(
            e.wait_to_read(&a),
            Err(EngineError::OpPanicked { .. })
        ));
        // It completed with its panic, which wait_all reports too.
        assert!(
            matches!(e.wait_all(), Err(EngineError::OpPanicked { ref op, .. }) if op == "self-catching")
        );
    });
}

#[test]
fn ops_run_when_the_last_handle_is_dropped_inside_an_op_and_the_workers_finish() {
    within(10, || {
        let (e, l) = engine(2);
        let counter = Arc::new(AtomicUsize::new(0));
        let a = Var::new();
        // Op A holds the only other handle, sleeps, then drops it on its worker.
        let held = e.clone();
        let a_ran = Arc::new(AtomicUsize::new(0));
        let c = a_ran.clone();
        e.push("a", l[0], &[], &[&a], move || {
            std::thread::sleep(Duration::from_millis(50));
            drop(held);
            c.fetch_add(1, Ordering::SeqCst);
            Ok(())
        });
        // Op B becomes ready only after A: it must still run.
        let c = counter.clone();
        e.push("b", l[1], &[&a], &[], move || {
            c.fetch_add(1, Ordering::SeqCst);
            Ok(())
        });
        let shared = Arc::downgrade(e.shared());
        drop(e);
        // The front end has no handle left to wait with: poll for B (under the watchdog).
        while counter.load(Ordering::SeqCst) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Then the workers stop and are joined: the last holders of the shared state go.
        while shared.strong_count() > 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Each op ran exactly once, and nothing is left of the engine.
        assert_eq!(a_ran.load(Ordering::SeqCst), 1, "op a runs");
        assert_eq!(counter.load(Ordering::SeqCst), 1, "op b runs");
        assert!(
            shared.upgrade().is_none(),
            "the engine's shared state is freed"
        );
    });
}

#[test]
fn a_panic_in_engine_code_is_an_error_on_every_kind_of_lane() {
    within(10, || {
        let pool = Arc::new(
            rayon::ThreadPoolBuilder::new()
                .num_threads(1)
                .build()
                .unwrap(),
        );
        let mut b = Engine::builder(Mode::Threaded);
        let lanes = [
            b.lane(LaneSpec::threads("thread lane", 1)),
            b.lane(LaneSpec::in_pool("pool lane", pool, 1)),
        ];
        let e = b.build().unwrap();
        for lane in lanes {
            let v = Var::new();
            e.push(op::tests_support::PANIC_IN_ENGINE, lane, &[], &[&v], || {
                Ok(())
            });
            let err = e.wait_to_read(&v).unwrap_err();
            assert!(
                matches!(&err, EngineError::OpPanicked { message, .. } if message.contains("injected")),
                "{err:?}"
            );
            assert!(e.wait_all().is_err());
            // The worker survived: the lane still runs ops.
            let w = Var::new();
            e.push("after", lane, &[], &[&w], || Ok(()));
            e.wait_to_read(&w).unwrap();
            e.wait_all().unwrap();
        }
    });
}

#[test]
fn wait_all_reports_an_op_error_before_a_failing_device_sync_and_runs_every_sync() {
    within(10, || {
        let synced = Arc::new(AtomicUsize::new(0));
        let mut b = Engine::builder(Mode::Threaded);
        let lane = b.lane(LaneSpec::threads("lane", 1));
        b.on_wait_all(Box::new(|| Err("device lost".into())));
        let s = synced.clone();
        b.on_wait_all(Box::new(move || {
            s.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }));
        let e = b.build().unwrap();
        e.push("bad", lane, &[], &[&Var::new()], || {
            Err(OpError::msg("root cause"))
        });
        let err = e.wait_all().unwrap_err();
        assert!(err.to_string().contains("root cause"), "{err}");
        assert_eq!(
            synced.load(Ordering::SeqCst),
            1,
            "the second device was not synced"
        );
        // With no op error left, the sync failure itself is reported.
        assert_eq!(
            e.wait_all().unwrap_err(),
            EngineError::DeviceSync("device lost".into())
        );
    });
}

#[test]
fn a_write_to_a_poisoned_var_is_skipped_until_the_error_is_cleared() {
    within(10, || {
        let (e, l) = engine(1);
        let v = Var::new();
        let ran = Arc::new(AtomicUsize::new(0));
        e.push("fail", l[0], &[], &[&v], || Err(OpError::msg("first")));
        let r = ran.clone();
        e.push("overwrite", l[0], &[], &[&v], move || {
            r.fetch_add(1, Ordering::SeqCst);
            Ok(())
        });
        let err = e.wait_to_read(&v).unwrap_err();
        assert!(err.to_string().contains("first"), "{err}");
        assert_eq!(
            ran.load(Ordering::SeqCst),
            0,
            "a write to a poisoned var ran"
        );
        assert!(e.wait_all().is_err(), "wait_all reports the first error");
        e.clear_error(&v, l[0]);
        let r = ran.clone();
        e.push("overwrite", l[0], &[], &[&v], move || {
            r.fetch_add(1, Ordering::SeqCst);
            Ok(())
        });
        e.wait_to_read(&v).unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    });
}

/// Set in the child process that `placement_logging_survives_a_closed_stderr` starts.
const CLOSED_STDERR_CHILD: &str = "PARBENCH_TEST_CLOSED_STDERR_CHILD";

/// `--log-placement` piped into `head -n 1`: stderr's reader goes away while ops still run.
/// The test re-runs itself as a child process whose stderr is a pipe closed at once, and the
/// child logs placements on a thread lane and a pool lane. A worker that panicked on the
/// failed write would hang the child's waits (thread lane) or abort it (rayon pool).
#[test]
fn placement_logging_survives_a_closed_stderr() {
    use std::io::{Read, Write};
    use std::process::{Command, Stdio};
    if std::env::var_os(CLOSED_STDERR_CHILD).is_some() {
        // The child: first make sure stderr is closed, so every placement line meets it.
        within(10, || {
            while writeln!(std::io::stderr(), "probe").is_ok() {
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        within(10, || {
            let pool = Arc::new(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(1)
                    .build()
                    .unwrap(),
            );
            let mut b = Engine::builder(Mode::Threaded);
            let lanes = [
                b.lane(LaneSpec::threads("thread lane", 1)),
                b.lane(LaneSpec::in_pool("pool lane", pool, 1)),
            ];
            b.log_placement(true);
            let e = b.build().unwrap();
            let ran = Arc::new(AtomicUsize::new(0));
            for i in 0..100 {
                let r = ran.clone();
                e.push("logged", lanes[i % 2], &[], &[&Var::new()], move || {
                    r.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                });
            }
            e.wait_all().unwrap();
            assert_eq!(ran.load(Ordering::SeqCst), 100);
        });
        return;
    }
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "engine::tests::placement_logging_survives_a_closed_stderr",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CLOSED_STDERR_CHILD, "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    let mut stdout = child.stdout.take().unwrap();
    let (status, out) = within(60, move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        (child.wait().unwrap(), out)
    });
    assert!(status.success(), "child {status}:\n{out}");
}

#[test]
fn a_completion_dropped_by_a_later_op_panicking_on_the_same_worker_completes_its_op() {
    within(10, || {
        let (e, l) = engine(1);
        let (a, b) = (Var::new(), Var::new());
        let parked: Arc<Mutex<Option<Completion>>> = Arc::default();
        let p = parked.clone();
        e.push_async("parks its completion", l[0], &[], &[&a], move |done| {
            *p.lock().unwrap() = Some(done);
        });
        // The lane's only worker runs this after the first op's body has returned: the
        // completion it drops while unwinding is no longer its executor's to report.
        let p = parked.clone();
        e.push("panics holding it", l[0], &[], &[&b], move || {
            let _held = p.lock().unwrap().take();
            std::panic::panic_any(())
        });
        assert_eq!(
            e.wait_to_read(&a),
            Err(EngineError::OpPanicked {
                op: "parks its completion".into(),
                message: "panicked while holding its completion handle".into()
            })
        );
        assert!(e.wait_to_read(&b).is_err());
        assert!(matches!(
            e.wait_all(),
            Err(EngineError::OpPanicked { ref op, .. }) if op == "parks its completion"
        ));
    });
}

#[test]
fn a_skipped_op_inherits_the_error_of_its_first_poisoned_var_reads_before_writes() {
    within(10, || {
        let (e, l) = engine(1);
        let (r1, r2, w, out) = (Var::new(), Var::new(), Var::new(), Var::new());
        let fail = |what: &'static str| move || Err(OpError::msg(what));
        e.push("poison w", l[0], &[], &[&w], fail("w"));
        e.push("poison r2", l[0], &[], &[&r2], fail("r2"));
        e.push("poison r1", l[0], &[], &[&r1], fail("r1"));
        // Vars as pushed: writes w, out; reads r2, w (a write, so not a read), r1. The first
        // poisoned in reads-then-writes order, each var once, is r2, not the first failure.
        e.push("skipped", l[0], &[&r2, &w, &r1], &[&w, &out], || Ok(()));
        let origin = |v: &Var| match e.wait_to_read(v) {
            Err(EngineError::OpFailed { op, .. }) => op,
            other => panic!("{other:?}"),
        };
        assert_eq!(origin(&out), "poison r2");
        assert_eq!(origin(&w), "poison r2");
        assert_eq!(origin(&r1), "poison r1");
        assert!(
            matches!(e.wait_all(), Err(EngineError::OpFailed { ref op, .. }) if op == "poison w"),
            "wait_all reports the first failure"
        );
    });
}

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
    within(10, || {
        let (e, l) = engine(1);
        let (var, released) = counted(3);
        // Opened on the way out too, so a failed assertion cannot leave the engine's drop
        // waiting on the held op.
        struct Gate(Arc<AtomicBool>);
        impl Drop for Gate {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Release);
            }
        }
        let go = Gate(Arc::new(AtomicBool::new(false)));
        let seen = Arc::new(AtomicU64::new(0));
        let (go2, seen2, key) = (go.0.clone(), seen.clone(), var.var().key());
        e.push_with("reader", l[0], &[var.var()], &[], move |vars| {
            while !go2.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
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
    within(10, || {
        let (e, l) = engine(1);
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
    within(10, || {
        let (e, l) = engine(1);
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
    within(10, || {
        let (e, l) = engine(2);
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
