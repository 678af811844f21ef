//! Engine tests of failure: errors reaching every downstream var, panics in op bodies and in
//! engine code, dropped completions, poisoned vars, a closed stderr. Each runs under the
//! watchdog of `tests.rs`.

use super::tests::{count, on_engine, within};
use super::*;
use std::panic::AssertUnwindSafe;
use std::time::Duration;

/// One lane of each kind on `b`: a thread of its own, and a one-thread rayon pool.
fn thread_and_pool_lanes(b: &mut EngineBuilder) -> [LaneId; 2] {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build();
    [
        b.lane(LaneSpec::threads("thread lane", 1)),
        b.lane(LaneSpec::in_pool("pool lane", Arc::new(pool.unwrap()), 1)),
    ]
}

#[test]
fn errors_reach_every_downstream_var_and_spare_the_rest() {
    on_engine(2, |e, l| {
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
    on_engine(1, |e, l| {
        let (a, b) = (Var::new(), Var::new());
        e.push("boom", l[0], &[], &[&a], || panic!("kaboom"));
        e.push("after", l[0], &[&a], &[&b], || Ok(()));
        let want = Err(EngineError::panicked("boom", "kaboom"));
        assert_eq!(e.wait_to_read(&b), want);
        assert!(e.wait_all().is_err());
        let c = Var::new();
        e.push("still alive", l[0], &[], &[&c], || Ok(()));
        assert_eq!(e.wait_to_read(&c), Ok(()));
    });
}

#[test]
fn a_panicking_async_op_reports_its_message_and_a_dropped_completion_is_an_error() {
    type Body = Box<dyn FnOnce(Completion) + Send>;
    let dropped = EngineError::CompletionDropped {
        op: "forgetful".into(),
    };
    let cases: [(&str, Body, EngineError); 2] = [
        (
            "async boom",
            Box::new(|_done| panic!("async kaboom")),
            EngineError::panicked("async boom", "async kaboom"),
        ),
        ("forgetful", Box::new(drop), dropped),
    ];
    for (name, body, want) in cases {
        on_engine(1, move |e, l| {
            let a = Var::new();
            e.push_async(name, l[0], &[], &[&a], body);
            assert_eq!(e.wait_to_read(&a), Err(want.clone()), "{name}");
            // wait_all reports the same first error.
            assert_eq!(e.wait_all(), Err(want), "{name}");
        });
    }
}

#[test]
fn waiting_inside_an_op_is_refused_not_deadlocked() {
    on_engine(1, |e, l| {
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
fn an_async_body_that_catches_its_own_panic_still_completes() {
    on_engine(1, |e, l| {
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
    on_engine(2, |e, l| {
        let counter = Arc::new(AtomicUsize::new(0));
        let a = Var::new();
        // Op A holds the only other handle, sleeps, then drops it on its worker.
        let held = e.clone();
        let a_ran = Arc::new(AtomicUsize::new(0));
        let counted = count(&a_ran);
        e.push("a", l[0], &[], &[&a], move || {
            std::thread::sleep(Duration::from_millis(50));
            drop(held);
            counted()
        });
        // Op B becomes ready only after A: it must still run.
        e.push("b", l[1], &[&a], &[], count(&counter));
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
        let mut b = Engine::builder(Mode::Threaded);
        let lanes = thread_and_pool_lanes(&mut b);
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
    on_engine(1, |e, l| {
        let v = Var::new();
        let ran = Arc::new(AtomicUsize::new(0));
        e.push("fail", l[0], &[], &[&v], || Err(OpError::msg("first")));
        e.push("overwrite", l[0], &[], &[&v], count(&ran));
        let err = e.wait_to_read(&v).unwrap_err();
        assert!(err.to_string().contains("first"), "{err}");
        assert_eq!(
            ran.load(Ordering::SeqCst),
            0,
            "a write to a poisoned var ran"
        );
        assert!(e.wait_all().is_err(), "wait_all reports the first error");
        e.clear_error(&v, l[0]);
        e.push("overwrite", l[0], &[], &[&v], count(&ran));
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
            let mut b = Engine::builder(Mode::Threaded);
            let lanes = thread_and_pool_lanes(&mut b);
            b.log_placement(true);
            let e = b.build().unwrap();
            let ran = Arc::new(AtomicUsize::new(0));
            for i in 0..100 {
                e.push("logged", lanes[i % 2], &[], &[&Var::new()], count(&ran));
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
    on_engine(1, |e, l| {
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
        let message = "panicked while holding its completion handle";
        assert_eq!(
            e.wait_to_read(&a),
            Err(EngineError::panicked("parks its completion", message))
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
    on_engine(1, |e, l| {
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
