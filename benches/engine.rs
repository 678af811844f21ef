//! Engine overhead: what dependency tracking costs per op.
//!
//! - `async/*`: push N trivial ops and wait once, in ns per op (the throughput of the
//!   pipeline), for independent ops on fresh vars, ops that all read one var, and a chain of
//!   writes to one var; with N = 1,000, 100,000 and 1,000,000 to show the cost does not grow.
//! - `round_trip`: push one op and wait for it (the synchronous loop's per-op cost).
//! - `floor/boxed-closure-channel`: N boxed closures through a channel to one other thread,
//!   without the engine: what handing work to a thread costs on this machine, the reference
//!   the `async/*` figures are read against (as a ratio from one run).
//!
//! Ops run on a CPU device lane (a worker inside a one-thread rayon pool), as in the scenarios.

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use parbench::device::{Runtime, RuntimeOptions};
use parbench::engine::Var;
use parbench::harness::floor::channel_round;
use std::time::Duration;

/// The same allocator as the `parbench` binary.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn runtime() -> Runtime {
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
/// other thread, no engine (`parbench::harness::floor`).
fn bench_floor(c: &mut Criterion) {
    let mut group = c.benchmark_group("floor");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    for &n in &[1_000u64, 100_000] {
        group.throughput(Throughput::Elements(n));
        group.bench_with_input(BenchmarkId::new("boxed-closure-channel", n), &n, |b, &n| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| channel_round(n).expect("a thread"))
                    .sum()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_async, bench_round_trip, bench_floor);
criterion_main!(benches);
