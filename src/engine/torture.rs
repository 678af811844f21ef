//! Randomized torture of the engine against a sequential interpreter (MXNet's RandSumExpr
//! idea, bigger): random programs over a handful of vars, ops that read some vars and
//! read-modify-write others in place, some failing, panicking, completing from another
//! thread or dropping their completion, vars listed twice or in reads and writes, waits and
//! error clears at random points, on thread and pool lanes with several workers, with and
//! without `max_inflight`, threaded and naive, and several front-end threads on disjoint
//! vars. Final values, poison (by the op that caused it) and every wait's outcome must equal
//! the sequential interpretation.
//!
//! CI runs a bounded number of ops; `PARBENCH_TORTURE=N` runs about N random ops in total.

use super::*;
use std::sync::atomic::AtomicU64;
use std::sync::mpsc;
use std::time::Duration;

/// Random ops in total when `PARBENCH_TORTURE` is not set: a few seconds in a debug build.
const DEFAULT_OPS: u64 = 12_000;

/// SplitMix64: small, seedable, good enough to draw programs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True with probability `percent` / 100.
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// How an op ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Ok,
    Fail,
    Panic,
    /// Completed from another thread (writes happen there).
    AsyncOk,
    AsyncFail,
    /// The completion handle is dropped unfired.
    AsyncDrop,
}

#[derive(Clone, Debug)]
enum Step {
    Op {
        name: String,
        lane: usize,
        /// As pushed: may repeat vars and overlap `writes`.
        reads: Vec<usize>,
        writes: Vec<usize>,
        outcome: Outcome,
        salt: u64,
    },
    Clear {
        var: usize,
        lane: usize,
    },
    WaitToRead(usize),
    WaitAll,
}

/// The engine's registration rule: reads not also written, then writes, each once, in order.
fn dedupe(reads: &[usize], writes: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let mut r: Vec<usize> = Vec::new();
    for v in reads {
        if !writes.contains(v) && !r.contains(v) {
            r.push(*v);
        }
    }
    let mut w: Vec<usize> = Vec::new();
    for v in writes {
        if !w.contains(v) {
            w.push(*v);
        }
    }
    (r, w)
}

/// The new value of a written var: not commutative, so any reordering shows.
fn mix(old: u64, reads_sum: u64, salt: u64) -> u64 {
    (old.rotate_left(5) ^ reads_sum)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(salt)
}

fn apply(values: &[AtomicU64], reads: &[usize], writes: &[usize], salt: u64) {
    let sum = reads.iter().fold(0u64, |a, &r| {
        a.wrapping_add(values[r].load(Ordering::SeqCst))
    });
    for (i, &w) in writes.iter().enumerate() {
        let old = values[w].load(Ordering::SeqCst);
        values[w].store(mix(old, sum, salt.wrapping_add(i as u64)), Ordering::SeqCst);
    }
}

/// What the sequential interpretation expects of a var.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Expected {
    value: u64,
    /// Name of the op whose error the var carries.
    poison: Option<String>,
}

/// The op an engine error names.
fn origin(e: &EngineError) -> Option<&str> {
    match e {
        EngineError::OpFailed { op, .. }
        | EngineError::OpPanicked { op, .. }
        | EngineError::CompletionDropped { op } => Some(op),
        _ => None,
    }
}

/// Run `steps` sequentially on `state`; returns whether any op raised or inherited an error
/// at a `WaitAll` step and at the end, to check `wait_all` against. `check` is called at each
/// wait step with the expected state of the var (or of all, for `WaitAll`).
struct Reference {
    vars: Vec<Expected>,
    errored_since_wait_all: bool,
}

impl Reference {
    fn step(&mut self, step: &Step) {
        let Step::Op {
            name,
            reads,
            writes,
            outcome,
            salt,
            ..
        } = step
        else {
            if let Step::Clear { var, .. } = step {
                self.vars[*var].poison = None;
            }
            return;
        };
        let (r, w) = dedupe(reads, writes);
        let inherited = r
            .iter()
            .chain(&w)
            .find_map(|&v| self.vars[v].poison.clone());
        let error = match (inherited, outcome) {
            (Some(e), _) => Some(e),
            (None, Outcome::Ok | Outcome::AsyncOk) => None,
            (None, _) => Some(name.clone()),
        };
        match error {
            Some(e) => {
                self.errored_since_wait_all = true;
                for &v in &w {
                    self.vars[v].poison = Some(e.clone());
                }
            }
            None => {
                let sum = r
                    .iter()
                    .fold(0u64, |a, &v| a.wrapping_add(self.vars[v].value));
                for (i, &v) in w.iter().enumerate() {
                    let old = self.vars[v].value;
                    self.vars[v].value = mix(old, sum, salt.wrapping_add(i as u64));
                    self.vars[v].poison = None;
                }
            }
        }
    }
}

/// One random program's shape.
#[derive(Clone, Debug)]
struct Config {
    mode: Mode,
    /// (workers, pool threads): pool threads 0 means a lane of dedicated threads.
    lanes: Vec<(usize, usize)>,
    max_inflight: Option<usize>,
    vars: usize,
    front_ends: usize,
}

fn config(rng: &mut Rng) -> Config {
    let lanes = (0..1 + rng.below(4))
        .map(|_| {
            let workers = 1 + rng.below(3);
            let pool = if rng.chance(40) { 1 + rng.below(2) } else { 0 };
            (workers, pool)
        })
        .collect();
    let front_ends = 1 + rng.below(3);
    Config {
        mode: if rng.chance(25) {
            Mode::Naive
        } else {
            Mode::Threaded
        },
        lanes,
        max_inflight: match rng.below(3) {
            0 => None,
            1 => Some(1 + rng.below(3)),
            _ => Some(4 + rng.below(30)),
        },
        // At least two vars per front end, so each has a var to read and one to write.
        vars: front_ends * 2 + rng.below(8),
        front_ends,
    }
}

/// Steps for one front end, over the vars it owns.
fn steps(rng: &mut Rng, owned: &[usize], lanes: usize, ops: usize, tag: usize) -> Vec<Step> {
    let pick = |rng: &mut Rng, n: usize| -> Vec<usize> {
        (0..n).map(|_| owned[rng.below(owned.len())]).collect()
    };
    let mut out = Vec::new();
    for i in 0..ops {
        let roll = rng.below(1000);
        if roll < 15 {
            out.push(Step::WaitToRead(owned[rng.below(owned.len())]));
        } else if roll < 20 {
            out.push(Step::WaitAll);
        } else if roll < 40 {
            out.push(Step::Clear {
                var: owned[rng.below(owned.len())],
                lane: rng.below(lanes),
            });
        }
        let (nr, nw) = (rng.below(4), 1 + rng.below(3));
        let (reads, writes) = (pick(rng, nr), pick(rng, nw));
        let outcome = match rng.below(100) {
            0..=2 => Outcome::Fail,
            3 => Outcome::Panic,
            4..=17 => Outcome::AsyncOk,
            18 => Outcome::AsyncFail,
            19 => Outcome::AsyncDrop,
            _ => Outcome::Ok,
        };
        out.push(Step::Op {
            name: format!("op {tag}.{i}"),
            lane: rng.below(lanes),
            reads,
            writes,
            outcome,
            salt: rng.next(),
        });
    }
    out
}

/// Completes asynchronous ops from a thread of its own, after doing their writes.
type Job = Box<dyn FnOnce() + Send>;

/// What a wait returned, and the waited var's value right after it.
type Seen = (Result<(), EngineError>, u64);

/// Push one step; returns the wait's outcome for wait steps.
fn push_step(
    engine: &Engine,
    lanes: &[LaneId],
    vars: &[Var],
    values: &Arc<Vec<AtomicU64>>,
    completer: &mpsc::Sender<Job>,
    step: &Step,
) -> Option<Seen> {
    match step {
        Step::WaitToRead(v) => {
            let r = engine.wait_to_read(&vars[*v]);
            Some((r, values[*v].load(Ordering::SeqCst)))
        }
        Step::WaitAll => Some((engine.wait_all(), 0)),
        Step::Clear { var, lane } => {
            engine.clear_error(&vars[*var], lanes[*lane]);
            None
        }
        Step::Op {
            name,
            lane,
            reads,
            writes,
            outcome,
            salt,
        } => {
            let rv: Vec<&Var> = reads.iter().map(|&v| &vars[v]).collect();
            let wv: Vec<&Var> = writes.iter().map(|&v| &vars[v]).collect();
            let (r, w) = dedupe(reads, writes);
            let (values, salt, name) = (values.clone(), *salt, name.clone());
            let lane = lanes[*lane];
            match outcome {
                Outcome::Ok => engine.push(name, lane, &rv, &wv, move || {
                    apply(&values, &r, &w, salt);
                    Ok(())
                }),
                Outcome::Fail => engine.push(name, lane, &rv, &wv, || Err(OpError::msg("fails"))),
                Outcome::Panic => {
                    engine.push(name, lane, &rv, &wv, || std::panic::panic_any(TorturePanic))
                }
                Outcome::AsyncOk | Outcome::AsyncFail | Outcome::AsyncDrop => {
                    let completer = completer.clone();
                    let outcome = *outcome;
                    engine.push_async(name, lane, &rv, &wv, move |done| {
                        let job: Job = Box::new(move || match outcome {
                            Outcome::AsyncOk => {
                                apply(&values, &r, &w, salt);
                                done.complete(Ok(()));
                            }
                            Outcome::AsyncFail => done.complete(Err(OpError::msg("async fails"))),
                            _ => drop(done),
                        });
                        // If the completer is gone, the job (and its completion) drops: the
                        // op still completes, with an error the check will report.
                        let _ = completer.send(job);
                    });
                }
            }
            None
        }
    }
}

/// The payload of an intended panic, silenced by the hook below.
struct TorturePanic;

fn silence_intended_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<TorturePanic>().is_none() {
                previous(info);
            }
        }));
    });
}

fn build(cfg: &Config) -> (Engine, Vec<LaneId>) {
    let mut b = Engine::builder(cfg.mode);
    b.max_inflight(cfg.max_inflight);
    let lanes = cfg
        .lanes
        .iter()
        .enumerate()
        .map(|(i, &(workers, pool))| {
            if pool == 0 {
                b.lane(LaneSpec::threads(format!("t{i}"), workers))
            } else {
                let p = rayon::ThreadPoolBuilder::new()
                    .num_threads(pool)
                    .build()
                    .expect("a small rayon pool");
                b.lane(LaneSpec::in_pool(format!("p{i}"), Arc::new(p), workers))
            }
        })
        .collect();
    (b.build().expect("engine threads"), lanes)
}

/// Run one random program; panics (with the seed) on any difference from the reference.
fn torture_one(seed: u64, ops: usize) {
    let mut rng = Rng(seed);
    let cfg = config(&mut rng);
    let (engine, lanes) = build(&cfg);
    let vars: Arc<Vec<Var>> = Arc::new((0..cfg.vars).map(|_| Var::new()).collect());
    let values: Arc<Vec<AtomicU64>> = Arc::new((0..cfg.vars).map(|_| AtomicU64::new(0)).collect());
    // Front end k owns vars k, k + F, k + 2F, ...: disjoint sets.
    let owned: Vec<Vec<usize>> = (0..cfg.front_ends)
        .map(|k| (k..cfg.vars).step_by(cfg.front_ends).collect())
        .collect();
    let programs: Vec<Vec<Step>> = owned
        .iter()
        .enumerate()
        .map(|(k, o)| steps(&mut rng, o, lanes.len(), ops / cfg.front_ends + 1, k))
        .collect();
    let (ctx, crx) = mpsc::channel::<Job>();
    let completer = std::thread::spawn(move || {
        for job in crx {
            job();
        }
    });
    let single = cfg.front_ends == 1;
    let outcomes: Vec<Vec<Option<Seen>>> = std::thread::scope(|s| {
        let handles: Vec<_> = programs
            .iter()
            .map(|program| {
                let (engine, lanes, vars, values, ctx) =
                    (&engine, &lanes, &vars, &values, ctx.clone());
                s.spawn(move || {
                    program
                        .iter()
                        .map(|step| match step {
                            // wait_all takes the first error of *any* front end: with several,
                            // what it returns is not this program's to predict.
                            Step::WaitAll if !single => None,
                            _ => push_step(engine, lanes, vars, values, &ctx, step),
                        })
                        .collect()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a front-end thread"))
            .collect()
    });
    let last = engine.wait_all();
    let finals: Vec<Result<(), EngineError>> =
        vars.iter().map(|v| engine.wait_to_read(v)).collect();
    assert_eq!(engine.pending(), 0, "seed {seed}: ops left pending");
    drop(engine);
    drop(ctx);
    completer.join().expect("the completer thread");

    // The sequential interpretation, program by program (their vars are disjoint).
    let mut reference = Reference {
        vars: vec![Expected::default(); cfg.vars],
        errored_since_wait_all: false,
    };
    let mut any_error = false;
    for (program, seen) in programs.iter().zip(&outcomes) {
        for (i, (step, got)) in program.iter().zip(seen).enumerate() {
            match (step, got) {
                (Step::WaitToRead(v), Some((got, value))) => {
                    let want = &reference.vars[*v];
                    let what = format!("step {i}: wait_to_read(var {v})");
                    assert_same(seed, &what, got, want);
                    // Nothing pushed later can have touched the var yet: the value is exact.
                    assert_eq!(*value, want.value, "seed {seed} {cfg:?}: {what}: value");
                }
                (Step::WaitAll, Some((got, _))) => {
                    assert_eq!(
                        got.is_err(),
                        reference.errored_since_wait_all,
                        "seed {seed} {cfg:?}: step {i}: wait_all gave {got:?}"
                    );
                    reference.errored_since_wait_all = false;
                }
                _ => {
                    reference.step(step);
                    any_error |= reference.errored_since_wait_all;
                }
            }
        }
    }
    if single {
        assert_eq!(
            last.is_err(),
            reference.errored_since_wait_all,
            "seed {seed} {cfg:?}: final wait_all gave {last:?}"
        );
    } else {
        assert!(
            last.is_ok() || any_error,
            "seed {seed}: error from nowhere: {last:?}"
        );
    }
    for (v, got) in finals.iter().enumerate() {
        assert_same(seed, &format!("final var {v}"), got, &reference.vars[v]);
        assert_eq!(
            values[v].load(Ordering::SeqCst),
            reference.vars[v].value,
            "seed {seed} {cfg:?}: final value of var {v}"
        );
    }
}

fn assert_same(seed: u64, what: &str, got: &Result<(), EngineError>, want: &Expected) {
    match (got, &want.poison) {
        (Ok(()), None) => {}
        (Err(e), Some(op)) if origin(e) == Some(op.as_str()) => {}
        _ => panic!("seed {seed}: {what}: engine gave {got:?}, reference expects {want:?}"),
    }
}

/// Ops to run in total: `PARBENCH_TORTURE` or the CI default.
fn budget() -> u64 {
    std::env::var("PARBENCH_TORTURE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_OPS)
}

#[test]
fn random_programs_match_the_sequential_interpretation() {
    silence_intended_panics();
    let total = budget();
    let (tx, rx) = mpsc::channel();
    // A watchdog: a deadlock fails the test (with the seed) instead of hanging the suite.
    let seeds = std::thread::spawn(move || {
        let mut done = 0u64;
        let mut seed = 0u64;
        while done < total {
            let ops = 200 + (seed as usize * 7919) % 1800;
            let _ = tx.send(seed);
            torture_one(seed, ops);
            done += ops as u64;
            seed += 1;
        }
        (seed, done)
    });
    let mut last_seed = 0;
    loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(seed) => last_seed = seed,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("seed {last_seed}: no progress in 60 s: deadlock or lost op")
            }
        }
    }
    let (programs, ops) = seeds.join().expect("no difference from the reference");
    eprintln!("engine torture: {programs} random programs, {ops} ops, all equal to the sequential interpretation");
}
