//! Randomized torture of the engine against a sequential interpreter (MXNet's RandSumExpr
//! idea, bigger): random programs over a handful of vars, ops that read some vars and
//! read-modify-write others in place, some failing, panicking, completing from other threads
//! (after a random delay, out of order), completing inline on the worker, completing and then
//! panicking, or dropping their completion; vars listed twice or in reads and writes, read-only
//! ops, waits and error clears at random points, on thread and pool lanes with several
//! workers, with and without `max_inflight`, threaded and naive, and several front-end threads
//! on disjoint vars. Final values, poison (by the op that caused it), every wait's outcome and
//! the values it exposes must equal the sequential interpretation.
//!
//! CI runs a bounded number of ops; `PARBENCH_TORTURE=N` runs about N random ops in total, and
//! `PARBENCH_TORTURE_SEED=S` replays the one program a failure names.

use super::*;
use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::AtomicU64;
use std::sync::mpsc;
use std::time::Duration;

/// Random ops in total when `PARBENCH_TORTURE` is not set: a few seconds in a debug build.
const DEFAULT_OPS: u64 = 20_000;

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
    /// Completed from a completer thread (writes happen there).
    AsyncOk,
    AsyncFail,
    /// The completion handle is dropped unfired on a completer thread.
    AsyncDrop,
    /// A completer thread panics while holding the completion handle.
    AsyncPanic,
    /// An asynchronous body that completes on the worker, before it returns.
    InlineOk,
    /// Completes successfully on the worker, then its body panics: the op still succeeded
    /// (completion is exactly once).
    CompleteThenPanic,
}

impl Outcome {
    fn fails(self) -> bool {
        !matches!(
            self,
            Outcome::Ok | Outcome::AsyncOk | Outcome::InlineOk | Outcome::CompleteThenPanic
        )
    }
}

#[derive(Clone, Debug)]
struct Op {
    name: String,
    lane: usize,
    /// As pushed: may repeat vars and overlap `writes`.
    reads: Vec<usize>,
    writes: Vec<usize>,
    outcome: Outcome,
    salt: u64,
    /// For completer-thread outcomes: which completer, and microseconds it waits first.
    completer: usize,
    delay_us: u64,
}

#[derive(Clone, Debug)]
enum Step {
    Op(Op),
    Clear { var: usize, lane: usize },
    WaitToRead(usize),
    WaitAll,
}

/// The engine's registration rule: reads not also written, then writes, each once, in order.
fn dedupe(reads: &[usize], writes: &[usize]) -> (Vec<usize>, Vec<usize>) {
    // The vars of `vars` not in `but`, each once, in order.
    let once = |vars: &[usize], but: &[usize]| {
        let mut out: Vec<usize> = Vec::new();
        for v in vars.iter().filter(|v| !but.contains(v)) {
            if !out.contains(v) {
                out.push(*v);
            }
        }
        out
    };
    (once(reads, writes), once(writes, &[]))
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

/// The sequential interpretation of the ops of one or more programs on disjoint vars.
struct Reference {
    vars: Vec<Expected>,
    /// The errors (by origin op) ops raised or inherited since the last `wait_all`: the one
    /// `wait_all` reports is the first to *complete*, which only the run decides.
    errors_since_wait_all: HashSet<String>,
}

impl Reference {
    /// Whether `wait_all`'s result fits the errors since the last one. With several front
    /// ends it reports any front end's first error: only its kind is this program's to
    /// predict.
    fn wait_all_agrees(&self, got: &Result<(), EngineError>, single: bool) -> bool {
        let errors = &self.errors_since_wait_all;
        match got {
            Ok(()) => !single || errors.is_empty(),
            Err(e) => origin(e).is_some_and(|op| !single || errors.contains(op)),
        }
    }

    fn step(&mut self, step: &Step) {
        let Step::Op(op) = step else {
            if let Step::Clear { var, .. } = step {
                self.vars[*var].poison = None;
            }
            return;
        };
        let (r, w) = dedupe(&op.reads, &op.writes);
        // The engine's `inherited_error`: the first poisoned var, reads then writes.
        let inherited = r
            .iter()
            .chain(&w)
            .find_map(|&v| self.vars[v].poison.clone());
        let error = match inherited {
            Some(e) => Some(e),
            None => op.outcome.fails().then(|| op.name.clone()),
        };
        match error {
            Some(e) => {
                for &v in &w {
                    self.vars[v].poison = Some(e.clone());
                }
                self.errors_since_wait_all.insert(e);
            }
            None => {
                let sum = r
                    .iter()
                    .fold(0u64, |a, &v| a.wrapping_add(self.vars[v].value));
                for (i, &v) in w.iter().enumerate() {
                    let old = self.vars[v].value;
                    self.vars[v].value = mix(old, sum, op.salt.wrapping_add(i as u64));
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
    /// Threads that complete asynchronous ops, each in the order it receives them.
    completers: usize,
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
        completers: 1 + rng.below(3),
    }
}

/// Steps for one front end, over the vars it owns.
fn steps(rng: &mut Rng, owned: &[usize], cfg: &Config, ops: usize, tag: usize) -> Vec<Step> {
    let lanes = cfg.lanes.len();
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
        // Mostly writers; some read-only ops (whose only trace is an error, if any).
        let nw = if rng.chance(10) { 0 } else { 1 + rng.below(3) };
        let nr = rng.below(4);
        let (reads, writes) = (pick(rng, nr), pick(rng, nw));
        let outcome = match rng.below(100) {
            0..=2 => Outcome::Fail,
            3 => Outcome::Panic,
            4..=15 => Outcome::AsyncOk,
            16 => Outcome::AsyncFail,
            17 => Outcome::AsyncDrop,
            18 => Outcome::AsyncPanic,
            19..=22 => Outcome::InlineOk,
            23 => Outcome::CompleteThenPanic,
            _ => Outcome::Ok,
        };
        out.push(Step::Op(Op {
            name: format!("op {tag}.{i}"),
            lane: rng.below(lanes),
            reads,
            writes,
            outcome,
            salt: rng.next(),
            completer: rng.below(cfg.completers),
            delay_us: if rng.chance(10) {
                rng.below(200) as u64
            } else {
                0
            },
        }));
    }
    out
}

/// Work for a completer thread: an asynchronous op's writes and its completion.
type Job = Box<dyn FnOnce() + Send>;

/// What a wait returned, and the values of the vars it exposes right after it (the waited
/// var for `wait_to_read`, every var of the front end for `wait_all`).
type Seen = (Result<(), EngineError>, Vec<(usize, u64)>);

/// What a front end pushes with.
struct FrontEnd<'a> {
    engine: &'a Engine,
    lanes: &'a [LaneId],
    vars: &'a [Var],
    values: &'a Arc<Vec<AtomicU64>>,
    completers: Vec<mpsc::Sender<Job>>,
    owned: &'a [usize],
}

impl FrontEnd<'_> {
    /// Push one step; returns the wait's outcome for wait steps.
    fn push(&self, step: &Step) -> Option<Seen> {
        let value = |v: usize| (v, self.values[v].load(Ordering::SeqCst));
        match step {
            Step::WaitToRead(v) => {
                Some((self.engine.wait_to_read(&self.vars[*v]), vec![value(*v)]))
            }
            Step::WaitAll => Some((
                self.engine.wait_all(),
                self.owned.iter().map(|&v| value(v)).collect(),
            )),
            Step::Clear { var, lane } => {
                self.engine.clear_error(&self.vars[*var], self.lanes[*lane]);
                None
            }
            Step::Op(op) => {
                self.push_op(op);
                None
            }
        }
    }

    fn push_op(&self, op: &Op) {
        let (engine, vars) = (self.engine, self.vars);
        let (name, lane, outcome, salt) =
            (op.name.clone(), self.lanes[op.lane], op.outcome, op.salt);
        let rv: Vec<&Var> = op.reads.iter().map(|&v| &vars[v]).collect();
        let wv: Vec<&Var> = op.writes.iter().map(|&v| &vars[v]).collect();
        let (r, w) = dedupe(&op.reads, &op.writes);
        let values = self.values.clone();
        match outcome {
            Outcome::Ok => engine.push(name, lane, &rv, &wv, move || {
                apply(&values, &r, &w, salt);
                Ok(())
            }),
            Outcome::Fail => engine.push(name, lane, &rv, &wv, || Err(OpError::msg("fails"))),
            Outcome::Panic => {
                engine.push(name, lane, &rv, &wv, || std::panic::panic_any(TorturePanic))
            }
            Outcome::InlineOk | Outcome::CompleteThenPanic => {
                engine.push_async(name, lane, &rv, &wv, move |done| {
                    apply(&values, &r, &w, salt);
                    done.complete(Ok(()));
                    if outcome == Outcome::CompleteThenPanic {
                        std::panic::panic_any(TorturePanic);
                    }
                })
            }
            Outcome::AsyncOk | Outcome::AsyncFail | Outcome::AsyncDrop | Outcome::AsyncPanic => {
                let (completer, delay) = (
                    self.completers[op.completer].clone(),
                    Duration::from_micros(op.delay_us),
                );
                engine.push_async(name, lane, &rv, &wv, move |done| {
                    let job: Job = Box::new(move || {
                        if !delay.is_zero() {
                            std::thread::sleep(delay);
                        }
                        match outcome {
                            Outcome::AsyncOk => {
                                apply(&values, &r, &w, salt);
                                done.complete(Ok(()));
                            }
                            Outcome::AsyncFail => done.complete(Err(OpError::msg("async fails"))),
                            Outcome::AsyncPanic => {
                                let _held = done;
                                std::panic::panic_any(TorturePanic);
                            }
                            _ => drop(done),
                        }
                    });
                    // If the completer is gone, the job (and its completion) drops: the op
                    // still completes, with an error the check will report.
                    let _ = completer.send(job);
                });
            }
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

/// Ops in the program of `seed`: 200 to 2,000, so both short and long runs are drawn.
fn ops_for(seed: u64) -> usize {
    200 + (seed as usize).wrapping_mul(7919) % 1800
}

/// Run one random program; panics (with the seed) on any difference from the reference.
fn torture_one(seed: u64) {
    let mut rng = Rng(seed);
    let cfg = config(&mut rng);
    let ops = ops_for(seed);
    let (engine, lanes) = build(&cfg);
    let vars: Vec<Var> = (0..cfg.vars).map(|_| Var::new()).collect();
    let values: Arc<Vec<AtomicU64>> = Arc::new((0..cfg.vars).map(|_| AtomicU64::new(0)).collect());
    // Front end k owns vars k, k + F, k + 2F, ...: disjoint sets.
    let owned: Vec<Vec<usize>> = (0..cfg.front_ends)
        .map(|k| (k..cfg.vars).step_by(cfg.front_ends).collect())
        .collect();
    let programs: Vec<Vec<Step>> = owned
        .iter()
        .enumerate()
        .map(|(k, o)| steps(&mut rng, o, &cfg, ops / cfg.front_ends + 1, k))
        .collect();
    let (senders, completers): (Vec<_>, Vec<_>) = (0..cfg.completers)
        .map(|_| {
            let (tx, rx) = mpsc::channel::<Job>();
            let thread = std::thread::spawn(move || {
                for job in rx {
                    // An `AsyncPanic` job panics on purpose; the completer lives on.
                    let _ = catch_unwind(AssertUnwindSafe(job));
                }
            });
            (tx, thread)
        })
        .unzip();
    let outcomes: Vec<Vec<Option<Seen>>> = std::thread::scope(|s| {
        let handles: Vec<_> = programs
            .iter()
            .zip(&owned)
            .map(|(program, owned)| {
                let front = FrontEnd {
                    engine: &engine,
                    lanes: &lanes,
                    vars: &vars,
                    values: &values,
                    completers: senders.clone(),
                    owned,
                };
                s.spawn(move || program.iter().map(|step| front.push(step)).collect())
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
    drop(senders);
    for c in completers {
        c.join().expect("a completer thread");
    }

    // The sequential interpretation, program by program (their vars are disjoint).
    let single = cfg.front_ends == 1;
    let mut reference = Reference {
        vars: vec![Expected::default(); cfg.vars],
        errors_since_wait_all: HashSet::new(),
    };
    let fail = |what: String| -> ! { panic!("seed {seed} {cfg:?}: {what}") };
    for (program, seen) in programs.iter().zip(&outcomes) {
        for (i, (step, got)) in program.iter().zip(seen).enumerate() {
            let Some((got, exposed)) = got else {
                reference.step(step);
                continue;
            };
            // Nothing pushed later can have touched the vars yet: the values are exact.
            for &(v, value) in exposed {
                if value != reference.vars[v].value {
                    fail(format!(
                        "step {i} {step:?}: var {v} is {value}, expected {:?}",
                        reference.vars[v]
                    ));
                }
            }
            match step {
                Step::WaitToRead(v) => {
                    if !same(got, &reference.vars[*v]) {
                        fail(format!(
                            "step {i}: wait_to_read(var {v}) gave {got:?}, expected {:?}",
                            reference.vars[*v]
                        ));
                    }
                }
                _ => {
                    if !reference.wait_all_agrees(got, single) {
                        fail(format!(
                            "step {i}: wait_all gave {got:?}, errors since the last: {:?}",
                            reference.errors_since_wait_all
                        ));
                    }
                    reference.errors_since_wait_all.clear();
                }
            }
        }
    }
    if !reference.wait_all_agrees(&last, single) {
        fail(format!(
            "final wait_all gave {last:?}, errors since the last: {:?}",
            reference.errors_since_wait_all
        ));
    }
    for (v, got) in finals.iter().enumerate() {
        let (want, value) = (&reference.vars[v], values[v].load(Ordering::SeqCst));
        if !same(got, want) || value != want.value {
            fail(format!(
                "final var {v}: engine gave {got:?} and value {value}, expected {want:?}"
            ));
        }
    }
}

/// True when a wait's result is the poison (by origin op) the reference expects.
fn same(got: &Result<(), EngineError>, want: &Expected) -> bool {
    match (got, &want.poison) {
        (Ok(()), None) => true,
        (Err(e), Some(op)) => origin(e) == Some(op.as_str()),
        _ => false,
    }
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

#[test]
fn random_programs_match_the_sequential_interpretation() {
    silence_intended_panics();
    let total = env_number("PARBENCH_TORTURE").unwrap_or(DEFAULT_OPS);
    let only = env_number("PARBENCH_TORTURE_SEED");
    let (tx, rx) = mpsc::channel();
    // A watchdog: a deadlock fails the test (with the seed) instead of hanging the suite.
    let seeds = std::thread::spawn(move || {
        let (mut done, mut seed, mut programs) = (0u64, only.unwrap_or(0), 0u64);
        while done < total {
            let _ = tx.send(seed);
            torture_one(seed);
            done += ops_for(seed) as u64;
            programs += 1;
            if only.is_some() {
                break;
            }
            seed += 1;
        }
        (programs, done)
    });
    let mut last_seed = 0;
    loop {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(seed) => last_seed = seed,
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => panic!(
                "seed {last_seed}: no progress in 60 s: deadlock or lost op \
                 (replay: PARBENCH_TORTURE_SEED={last_seed})"
            ),
        }
    }
    let (programs, ops) = seeds.join().unwrap_or_else(|_| {
        panic!("seed {last_seed} differs (replay: PARBENCH_TORTURE_SEED={last_seed})")
    });
    // Every program the budget called for ran (one, when replaying a seed).
    assert!(programs >= 1, "no program ran");
    if only.is_none() {
        assert!(ops >= total, "{ops} ops run of the {total} asked for");
    }
    eprintln!("engine torture: {programs} random programs, {ops} ops, all equal to the sequential interpretation");
}
