//! Engine tests: ordering, concurrency, back-pressure, and a property test against a
//! sequential reference (failures in `failure_tests.rs`, a var's data in `data_tests.rs`, with
//! the helpers here). Anything that could hang runs under a watchdog, so a broken engine fails
//! the test instead of stalling the suite.

use super::*;
use proptest::prelude::*;
use std::sync::atomic::AtomicU64;
use std::sync::mpsc;
use std::time::Duration;

/// Run `f` on its own thread; fail if it has not finished within `secs`.
pub(super) fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
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

pub(super) fn engine(lanes: usize) -> (Engine, Vec<LaneId>) {
    Engine::with_thread_lanes(Mode::Threaded, lanes).unwrap()
}

/// Run `f` on a threaded engine of `lanes` lanes, under a 10 s [`within`].
pub(super) fn on_engine<T: Send + 'static>(
    lanes: usize,
    f: impl FnOnce(Engine, Vec<LaneId>) -> T + Send + 'static,
) -> T {
    within(10, move || {
        let (e, l) = engine(lanes);
        f(e, l)
    })
}

/// A flag that held ops spin on until it opens. Dropping it opens it, so a failed assertion
/// cannot leave the engine's drop waiting on a held op.
pub(crate) struct Gate(Arc<AtomicBool>);

impl Gate {
    pub(crate) fn closed() -> Gate {
        Gate(Arc::new(AtomicBool::new(false)))
    }

    /// The body of a held op: returns once the gate is open.
    pub(crate) fn waiter(&self) -> impl Fn() -> Result<(), OpError> + Clone + Send + 'static {
        let open = self.0.clone();
        move || {
            while !open.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
            Ok(())
        }
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// An op body that adds one to `ran`.
pub(super) fn count(ran: &Arc<AtomicUsize>) -> impl FnOnce() -> Result<(), OpError> {
    let ran = ran.clone();
    move || {
        ran.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// A shared log the ops append to, to observe execution order.
type Log = Arc<Mutex<Vec<&'static str>>>;

fn note(log: &Log, what: &'static str) -> impl FnOnce() -> Result<(), OpError> {
    let log = log.clone();
    move || {
        log.lock().unwrap().push(what);
        Ok(())
    }
}

/// An op body that sleeps, so a wrongly ordered later op would overtake it.
fn slow_note(log: &Log, what: &'static str) -> impl FnOnce() -> Result<(), OpError> {
    let note = note(log, what);
    move || {
        std::thread::sleep(Duration::from_millis(30));
        note()
    }
}

/// Two ops on one var, on two lanes, each reading it (`true`) or writing it: the first,
/// slow, must still run first. The order they ran in.
fn run_order(first_reads: bool, second_reads: bool) -> Vec<&'static str> {
    on_engine(2, move |e, l| {
        let (v, log) = (Var::new(), Log::default());
        let access = |reads: bool| {
            if reads {
                (vec![&v], vec![])
            } else {
                (vec![], vec![&v])
            }
        };
        let (r, w) = access(first_reads);
        e.push("first", l[0], &r, &w, slow_note(&log, "first"));
        let (r, w) = access(second_reads);
        e.push("second", l[1], &r, &w, note(&log, "second"));
        e.wait_all().unwrap();
        let order = log.lock().unwrap().clone();
        order
    })
}

#[test]
fn conflicting_accesses_keep_push_order() {
    // Read after write, write after read, write after write.
    for (first_reads, second_reads) in [(false, true), (true, false), (false, false)] {
        let order = run_order(first_reads, second_reads);
        assert_eq!(order, ["first", "second"], "{first_reads} {second_reads}");
    }
}

#[test]
fn a_var_in_reads_and_writes_is_a_write() {
    on_engine(2, |e, l| {
        let (v, log) = (Var::new(), Log::default());
        e.push("rw", l[0], &[&v], &[&v, &v], slow_note(&log, "rw"));
        e.push("r", l[1], &[&v], &[], note(&log, "read"));
        e.wait_all().unwrap();
        assert_eq!(*log.lock().unwrap(), vec!["rw", "read"]);
        assert_eq!(v.pushed_writes(), 1);
    });
}

/// Two ops on `e`'s lanes `l`, the first on `vars[0]` and the second on `vars[1]`, read
/// (`reads`) or written, each waiting at a two-party barrier: serialized execution would never
/// get past it. The ops past the barrier, and the meetings there.
fn meet_at_a_barrier(e: &Engine, l: &[LaneId], vars: [&Var; 2], reads: bool) -> (usize, usize) {
    let barrier = Arc::new(std::sync::Barrier::new(2));
    let (met, leaders) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    for (lane, var) in [(l[0], vars[0]), (l[1], vars[1])] {
        let (barrier, met, leaders) = (barrier.clone(), met.clone(), leaders.clone());
        let (r, w): (&[&Var], &[&Var]) = if reads { (&[var], &[]) } else { (&[], &[var]) };
        e.push("meet", lane, r, w, move || {
            if barrier.wait().is_leader() {
                leaders.fetch_add(1, Ordering::SeqCst);
            }
            met.fetch_add(1, Ordering::SeqCst);
            Ok(())
        });
    }
    assert_eq!(e.wait_all(), Ok(()));
    (met.load(Ordering::SeqCst), leaders.load(Ordering::SeqCst))
}

#[test]
fn independent_ops_and_readers_of_one_var_meeting_at_a_barrier_do_not_hang() {
    on_engine(2, |e, l| {
        let (a, b) = (Var::new(), Var::new());
        // Both ops got past the barrier, as one meeting of two.
        assert_eq!(meet_at_a_barrier(&e, &l, [&a, &b], false), (2, 1));
        assert_eq!((a.pushed_writes(), b.pushed_writes()), (1, 1));
        // Readers run one at a time would never get past it; neither was a write.
        let v = Var::new();
        assert_eq!(meet_at_a_barrier(&e, &l, [&v, &v], true), (2, 1));
        assert_eq!(v.pushed_writes(), 0);
    });
}

#[test]
fn wait_to_read_sees_the_value_written_before_it() {
    on_engine(1, |e, l| {
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
    on_engine(1, |e, l| {
        let (v, log) = (Var::new(), Log::default());
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
fn max_inflight_bounds_pending_ops() {
    within(20, || {
        const MAX: usize = 3;
        let mut b = Engine::builder(Mode::Threaded);
        let lane = b.lane(LaneSpec::threads("cpu:0", 2));
        b.max_inflight(Some(MAX));
        let e = b.build().unwrap();
        // Ops block on a gate, so nothing completes until the test opens it.
        let gate = Gate::closed();
        let pushed = Arc::new(AtomicUsize::new(0));
        let pusher = {
            let (e, wait, pushed) = (e.clone(), gate.waiter(), pushed.clone());
            std::thread::spawn(move || {
                for _ in 0..MAX + 5 {
                    e.push("gated", lane, &[], &[&Var::new()], wait.clone());
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
        drop(gate);
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
    on_engine(2, |e, l| {
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
                e.push("count", l[i % 2], &[], &[&Var::new()], count(&done));
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
    let (vars, counter) = ([x.clone(), y.clone()], ran.clone());
    push_together(2, move |e, lane, t, _| {
        // Opposite orders from the two threads.
        let writes = if t == 0 { [&x, &y] } else { [&y, &x] };
        e.push("xy", lane, &[], &writes, count(&counter));
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
    let (pushed, counter) = (vars.clone(), ran.clone());
    push_together(3, move |e, lane, t, i| {
        // Each thread rotates the order its own way; one var is read.
        let k = (t + i) % 3;
        let order = if t == 1 { [2, 1, 0] } else { [0, 1, 2] };
        let at = |j: usize| &vars[order[(k + j) % 3]];
        e.push("xyz", lane, &[at(0)], &[at(1), at(2)], count(&counter));
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
            let body = count(&ran);
            e.push("outer", lane, &[], &[&Var::new()], move || {
                inner.push("inner", lane, &[], &[&d2], body);
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
