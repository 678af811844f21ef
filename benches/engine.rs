//! Engine overhead: what dependency tracking costs per op.
//!
//! - `async/*`: push N trivial ops and wait once, in ns per op (the throughput of the
//!   pipeline), for independent ops on fresh vars, ops that all read one var, and a chain of
//!   writes to one var; with N = 1,000, 100,000 and 1,000,000 to show the cost does not grow.
//! - `round_trip`: push one op and wait for it (the synchronous loop's per-op cost).
//! - `floor/boxed-closure-channel`: N boxed closures through a channel to one other thread,
//!   without the engine: what handing work to a thread costs on this machine, the reference
//!   the `async/*` figures are read against (as a ratio from one run).
//! - `tensor-loop/*`: the direct loop src/engine/README.md measures the engine's constants
//!   with, `x.add_scalar(1.0)` 1,000 times on a 1×2 tensor, then `wait_all`: `async`'s loop
//!   without the sampler around it, in six modes that take its costs apart (see
//!   [`bench_tensor_loop`]).
//!
//! Ops run on a CPU device lane (a worker inside a one-thread rayon pool), as in the scenarios.

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use parbench::device::{Runtime, RuntimeOptions};
use parbench::engine::Var;
use parbench::harness::stats::median;
use parbench::machine::channel::channel_round;
use parbench::machine::line::{line_rounds, LINE_HOPS};
use parbench::tensor::Tensor;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The same allocator as the `parbench` binary.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn runtime() -> Runtime {
    // As the binary does, so the allocator behaves as it does in `parbench`'s own figures.
    parbench::harness::allocator::keep_freed_memory();
    Runtime::cpu(&RuntimeOptions::default(), &[1]).expect("runtime")
}

fn bench_async(c: &mut Criterion) {
    let rt = runtime();
    let (engine, lane) = (&rt.engine, rt.devices[0].compute);
    let mut group = c.benchmark_group("async");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for &n in &[1_000u64, 100_000, 1_000_000] {
        group.throughput(Throughput::Elements(n));
        group.bench_with_input(BenchmarkId::new("fresh-var", n), &n, |b, &n| {
            b.iter_batched(
                || (0..n).map(|_| Var::new()).collect::<Vec<_>>(),
                |vars| {
                    for v in &vars {
                        engine.push("nop", lane, &[], &[v], || Ok(()));
                    }
                    engine.wait_all().expect("no op fails");
                    vars
                },
                BatchSize::PerIteration,
            )
        });
        let shared = Var::new();
        group.bench_with_input(BenchmarkId::new("read-shared", n), &n, |b, &n| {
            b.iter(|| {
                for _ in 0..n {
                    engine.push("nop", lane, &[&shared], &[], || Ok(()));
                }
                engine.wait_all().expect("no op fails");
            })
        });
        let chain = Var::new();
        group.bench_with_input(BenchmarkId::new("write-chain", n), &n, |b, &n| {
            b.iter(|| {
                for _ in 0..n {
                    engine.push("nop", lane, &[], &[&chain], || Ok(()));
                }
                engine.wait_all().expect("no op fails");
            })
        });
    }
    group.finish();
}

fn bench_round_trip(c: &mut Criterion) {
    let rt = runtime();
    let (engine, lane) = (&rt.engine, rt.devices[0].compute);
    let v = Var::new();
    let mut group = c.benchmark_group("round_trip");
    group
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    group.bench_function("push+wait_to_read", |b| {
        b.iter(|| {
            engine.push("nop", lane, &[], &[&v], || Ok(()));
            engine.wait_to_read(&v).expect("no op fails");
        })
    });
    group.finish();
}

/// The floor the engine's per-op cost is set against: boxed closures through a channel to one
/// other thread, no engine (`parbench::machine::channel`, one of the machine's limits).
fn bench_floor(c: &mut Criterion) {
    let mut group = c.benchmark_group("floor");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for &n in &[1_000u64, 100_000] {
        group.throughput(Throughput::Elements(n));
        group.bench_with_input(BenchmarkId::new("boxed-closure-channel", n), &n, |b, &n| {
            timed_rounds(b, || channel_round(n).expect("a thread"))
        });
    }
    group.finish();
}

/// Ops per round of the tensor loop: `async`'s default.
const TENSOR_LOOP_OPS: u64 = 1_000;

/// `async`'s loop, timed directly, in six modes (each a round of 1,000 ops, reported per op
/// through the throughput):
/// - `plain`: push the ops, each output dropped as the next is made, then `wait_all`; the
///   whole round is timed. This is the figure src/engine/README.md quotes as "plain".
/// - `held-worker`: an op that spins until released holds the device's worker while the
///   1,000 ops are pushed, and only the pushing is timed: a push without a running worker
///   beside it, so the gap to `plain` is what sharing lines with the worker costs.
/// - `held-worker-busy`: as `held-worker`, but the held worker computes instead of polling
///   with `pause`: the same figure says the two CPUs do not share a core.
/// - `worker-drain`: the other side of `held-worker`: the 1,000 ops are pushed while the
///   worker is held, and what is timed is the worker running them alone, from the release
///   until a last op sets a flag. The pushing thread polls that flag, not `wait_all`, whose
///   poll reads the completion counter the worker writes on every op.
/// - `kept-outputs`: as `plain`, but every output stays alive until the round is timed, so no
///   output is orphaned, released or freed inside the loop: the gap to `plain` is what an
///   output's end of life costs.
/// - `chain`: `y = y + 1` 1,000 times, each op waiting for the one before.
///
/// Read the modes as ratios from one run: the host's periods move all of them together. The
/// group prints the cross-core line latency (`machine::line::line_rounds`) before and after
/// its modes, so a run that changed period says so.
fn bench_tensor_loop(c: &mut Criterion) {
    print_line("before");
    let rt = runtime();
    let (engine, dev) = (&rt.engine, &rt.devices[0]);
    let x = Tensor::ones(engine, dev, &[1, 2]);
    x.wait_to_read().expect("no op fails");
    let n = TENSOR_LOOP_OPS;
    let mut group = c.benchmark_group("tensor-loop");
    group
        .sample_size(50)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(n));
    group.bench_function("plain", |b| {
        timed_rounds(b, || {
            let t = Instant::now();
            let mut last = None;
            for _ in 0..n {
                last = Some(x.add_scalar(1.0));
            }
            drop(last);
            engine.wait_all().expect("no op fails");
            t.elapsed()
        })
    });
    for (mode, busy) in [("held-worker", false), ("held-worker-busy", true)] {
        group.bench_function(mode, |b| {
            timed_rounds(b, || {
                let release = Arc::new(AtomicBool::new(false));
                engine.push("hold", dev.compute, &[], &[], hold(&release, busy));
                let t = Instant::now();
                for _ in 0..n {
                    drop(x.add_scalar(1.0));
                }
                let pushed = t.elapsed();
                release.store(true, Ordering::Release);
                engine.wait_all().expect("no op fails");
                pushed
            })
        });
    }
    group.bench_function("worker-drain", |b| {
        timed_rounds(b, || {
            let release = Arc::new(AtomicBool::new(false));
            engine.push("hold", dev.compute, &[], &[], hold(&release, false));
            for _ in 0..n {
                drop(x.add_scalar(1.0));
            }
            let done = Arc::new(AtomicBool::new(false));
            let flag = Arc::clone(&done);
            engine.push("done", dev.compute, &[], &[], move || {
                flag.store(true, Ordering::Release);
                Ok(())
            });
            let t = Instant::now();
            release.store(true, Ordering::Release);
            while !done.load(Ordering::Acquire) {
                std::hint::spin_loop();
            }
            let drained = t.elapsed();
            engine.wait_all().expect("no op fails");
            drained
        })
    });
    group.bench_function("kept-outputs", |b| {
        timed_rounds(b, || {
            let mut kept = Vec::with_capacity(n as usize);
            let t = Instant::now();
            for _ in 0..n {
                kept.push(x.add_scalar(1.0));
            }
            engine.wait_all().expect("no op fails");
            let elapsed = t.elapsed();
            drop(kept);
            elapsed
        })
    });
    group.bench_function("chain", |b| {
        timed_rounds(b, || {
            let t = Instant::now();
            let mut y = x.add_scalar(1.0);
            for _ in 1..n {
                y = y.add_scalar(1.0);
            }
            engine.wait_all().expect("no op fails");
            t.elapsed()
        })
    });
    group.finish();
    print_line("after");
}

/// Criterion's iterations as rounds that time themselves: `round` returns the time of the part
/// it measures, so set-up and clean-up inside a round stay off the clock.
fn timed_rounds(b: &mut criterion::Bencher<'_>, mut round: impl FnMut() -> Duration) {
    b.iter_custom(|rounds| (0..rounds).map(|_| round()).sum());
}

/// An op body that holds its worker until `release` is set: polling with `pause` (`busy`
/// false), or doing multiply-adds between polls (`busy` true), so the worker's CPU computes
/// while the pushing thread pushes. If the two vCPUs shared a physical core, the busy hold
/// would slow the pushes.
fn hold(
    release: &Arc<AtomicBool>,
    busy: bool,
) -> impl FnOnce() -> Result<(), parbench::engine::OpError> + Send + 'static {
    let release = Arc::clone(release);
    move || {
        let mut acc = 1u64;
        while !release.load(Ordering::Acquire) {
            if busy {
                for i in 0..64u64 {
                    acc = acc.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i);
                }
                std::hint::black_box(acc);
            } else {
                std::hint::spin_loop();
            }
        }
        Ok(())
    }
}

/// Prints the median of five rounds of the cross-core line probe, where the machine has two
/// CPUs.
fn print_line(when: &str) {
    match line_rounds(LINE_HOPS, 5) {
        Ok(Some(rounds)) => match median(&rounds) {
            Some(per_hop) => println!("cross-core line {when}: {:.0} ns", per_hop * 1e9),
            None => println!("cross-core line {when}: no rounds"),
        },
        Ok(None) => println!("cross-core line {when}: not measured (fewer than two CPUs)"),
        Err(e) => println!("cross-core line {when}: not measured ({e})"),
    }
}

criterion_group!(
    benches,
    bench_async,
    bench_round_trip,
    bench_floor,
    bench_tensor_loop
);
criterion_main!(benches);
