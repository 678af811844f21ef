//! All-reduce between the CPU devices of one engine, as engine ops: the ring (reduce-scatter,
//! then all-gather, over k chunks), the parameter server's reduce onto one device with its
//! broadcast back, and a binomial tree. `data-parallel` sums its gradients with them in place;
//! `allreduce` times them out of place on buffers of every size. The two scenarios share what
//! their backends word alike (`Backend::noun`, `Backend::check_built`, [`note_shared_cores`]),
//! and their MPI backends [`sample_ranks`], `rank_parameters`, `gather_json` and
//! [`note_unlaunched`].
//!
//! Each device's buffers are [`Chunked`]: k chunks, each ordered by a var of its own, so the
//! ring's steps on different chunks run at once on different devices, as on real links.

pub mod chunked;

use std::sync::Arc;

pub use self::chunked::Chunked;
use crate::engine::{Engine, LaneId, Var};
use crate::scenario::backend::Backend;

impl Backend {
    /// What takes part, as the explanations count it ("device": "1 device", "2 devices").
    pub fn noun(self) -> &'static str {
        match self {
            Backend::Engine => "device",
            Backend::Mpi => "rank",
        }
    }

    /// `scenario`'s refusal of `--backend mpi` in a build without the `mpi` feature.
    pub fn check_built(self, scenario: &str) -> Result<(), crate::scenario::ScenarioError> {
        if self == Backend::Mpi && !cfg!(feature = "mpi") {
            return Err(crate::scenario::ScenarioError::Input(format!(
                "{scenario}: --backend mpi needs a build with the mpi feature: {}",
                crate::distributed::INSTALL
            )));
        }
        Ok(())
    }
}

/// One device's side of an all-reduce: what it contributes (`send`) and where its result goes
/// (`recv`), with a var per chunk of `recv`.
///
/// In place (`send` and `recv` the same buffer), the vars order every access to it. Out of
/// place, `send` is read only: nothing may write it while collectives on it are in flight.
#[derive(Clone)]
pub struct Replica {
    pub send: Arc<Chunked>,
    pub recv: Arc<Chunked>,
    pub vars: Vec<Var>,
}

impl Replica {
    /// `send` reduced into a `recv` of the same length and chunks (`send` itself: in place),
    /// with a fresh var per chunk.
    pub fn new(send: Arc<Chunked>, recv: Arc<Chunked>) -> Replica {
        let vars = (0..recv.chunks()).map(|_| Var::new()).collect();
        Replica { send, recv, vars }
    }

    /// `n` zeros in `k` chunks, reduced in place.
    pub fn zeros(n: usize, k: usize) -> Replica {
        let buf = Arc::new(Chunked::new(n, k));
        Replica::new(buf.clone(), buf)
    }

    fn is_in_place(&self) -> bool {
        Arc::ptr_eq(&self.send, &self.recv)
    }
}

/// `d[i] = a[i] + b[i]`, or `d[i] += a[i]` where `b` is `None` (in place).
fn add_into(d: &mut [f32], a: &[f32], b: Option<&[f32]>) {
    match b {
        Some(b) => d
            .iter_mut()
            .zip(a.iter().zip(b))
            .for_each(|(d, (a, b))| *d = a + b),
        None => d.iter_mut().zip(a).for_each(|(d, a)| *d += a),
    }
}

/// Push a ring all-reduce of `replicas` (device `d` on `lanes[d]`): reduce-scatter, then
/// all-gather, k − 1 steps each. Afterwards every `recv` holds the element-wise sum of every
/// `send`.
///
/// Reduce-scatter: at step t device i sends chunk (i − t) mod k to i + 1, which adds its own;
/// after k − 1 steps device i holds the sum of chunk (i + 1) mod k. All-gather: device i
/// passes chunk (i + 1 − t) mod k on, and the receiver keeps it. Each step is one op on the
/// receiver's lane.
pub fn push_ring(engine: &Engine, lanes: &[LaneId], replicas: &[Replica]) {
    let k = replicas.len();
    if k == 1 && !replicas[0].is_in_place() {
        push_pass(engine, lanes[0], &replicas[0], &replicas[0], true);
    }
    for (name, add, shift) in [("reduce-scatter", true, 0), ("all-gather", false, 1)] {
        for t in 0..k.saturating_sub(1) {
            for i in 0..k {
                let to = (i + 1) % k;
                let c = (i + shift + k - t) % k;
                let (src, dst) = (&replicas[i], &replicas[to]);
                // Out of place, the first step sends the sender's own contribution.
                let from_send = add && t == 0 && !src.is_in_place();
                let from = if from_send { &src.send } else { &src.recv }.clone();
                let into = dst.recv.clone();
                let own = (add && !dst.is_in_place()).then(|| dst.send.clone());
                let reads: Vec<&Var> = (!from_send).then_some(&src.vars[c]).into_iter().collect();
                engine.push(name, lanes[to], &reads, &[&dst.vars[c]], move || {
                    let s = from.read(c)?;
                    let own = own.as_ref().map(|o| o.read(c)).transpose()?;
                    let mut d = into.write(c)?;
                    if add {
                        add_into(&mut d, &s, own.as_deref());
                    } else {
                        d.copy_from_slice(&s);
                    }
                    Ok(())
                });
            }
        }
    }
}

/// `to.recv = from.send` (`own`: a device's own input, after no op) or `from.recv` (after
/// `from`'s ops), chunk by chunk, as one op on `lane` (the receiver's).
fn push_pass(engine: &Engine, lane: LaneId, from: &Replica, to: &Replica, own: bool) {
    let (name, src, reads): (_, _, Vec<&Var>) = if own {
        ("copy", from.send.clone(), vec![])
    } else {
        ("broadcast", from.recv.clone(), from.vars.iter().collect())
    };
    let dst = to.recv.clone();
    let writes: Vec<&Var> = to.vars.iter().collect();
    engine.push(name, lane, &reads, &writes, move || {
        let mut d = dst.write_all()?;
        for c in 0..src.chunks() {
            d[src.range(c)].copy_from_slice(&src.read(c)?);
        }
        Ok(())
    });
}

/// Push the parameter server's reduce: one op on `lane` (device 0's) that leaves the sum of
/// every replica's `send` in replica 0's `recv`.
pub fn push_reduce(engine: &Engine, lane: LaneId, replicas: &[Replica]) {
    let in_place = replicas[0].is_in_place();
    let sends: Vec<Arc<Chunked>> = replicas.iter().map(|r| r.send.clone()).collect();
    let sum = replicas[0].recv.clone();
    // In place the others' buffers are their results too: ordered by their vars.
    let others = replicas[1..].iter().filter(|_| in_place);
    let reads: Vec<&Var> = others.flat_map(|r| &r.vars).collect();
    let writes: Vec<&Var> = replicas[0].vars.iter().collect();
    engine.push("reduce", lane, &reads, &writes, move || {
        let mut out = sum.write_all()?;
        for c in 0..sum.chunks() {
            let range = sum.range(c);
            let mut rest = &sends[1..];
            // Out of place the first two inputs are added in one pass, as a tree step does.
            if !in_place {
                let first = sends[0].read(c)?;
                match rest.split_first() {
                    Some((second, others)) => {
                        add_into(&mut out[range.clone()], &first, Some(&second.read(c)?));
                        rest = others;
                    }
                    None => out[range.clone()].copy_from_slice(&first),
                }
            }
            for g in rest {
                add_into(&mut out[range.clone()], &g.read(c)?, None);
            }
        }
        Ok(())
    });
}

/// Push the parameter server's broadcast: replica 0's `recv` copied into every other one's,
/// an op on each receiver's lane.
pub fn push_broadcast(engine: &Engine, lanes: &[LaneId], replicas: &[Replica]) {
    for (d, dst) in replicas.iter().enumerate().skip(1) {
        push_pass(engine, lanes[d], &replicas[0], dst, false);
    }
}

/// Push a binomial-tree all-reduce: ⌈log₂ k⌉ levels of reduce, device i adding device
/// i + span's partial sum where i is a multiple of 2·span, then the same levels in reverse
/// passing the sum back down. Each step is one op on the receiver's lane, on whole buffers:
/// 2(k − 1) ops in 2⌈log₂ k⌉ steps, where the ring takes 2(k − 1) steps of chunks.
pub fn push_tree(engine: &Engine, lanes: &[LaneId], replicas: &[Replica]) {
    let k = replicas.len();
    // Whether a device's `recv` holds its partial sum yet (in place: from the start).
    let mut partial: Vec<bool> = replicas.iter().map(Replica::is_in_place).collect();
    let mut span = 1;
    while span < k {
        for i in (0..k).step_by(2 * span) {
            let j = i + span;
            if j >= k {
                continue;
            }
            let (src, dst) = (&replicas[j], &replicas[i]);
            let from = if partial[j] { &src.recv } else { &src.send }.clone();
            let own = (!partial[i]).then(|| dst.send.clone());
            let into = dst.recv.clone();
            let reads: Vec<&Var> = src.vars.iter().filter(|_| partial[j]).collect();
            let writes: Vec<&Var> = dst.vars.iter().collect();
            engine.push("tree-reduce", lanes[i], &reads, &writes, move || {
                let mut out = into.write_all()?;
                for c in 0..into.chunks() {
                    let own = own.as_ref().map(|o| o.read(c)).transpose()?;
                    add_into(&mut out[into.range(c)], &from.read(c)?, own.as_deref());
                }
                Ok(())
            });
            partial[i] = true;
        }
        span *= 2;
    }
    if !partial[0] {
        push_pass(engine, lanes[0], &replicas[0], &replicas[0], true);
    }
    while span > 1 {
        span /= 2;
        for i in (0..k).step_by(2 * span) {
            if let Some(to) = replicas.get(i + span) {
                push_pass(engine, lanes[i + span], &replicas[i], to, false);
            }
        }
    }
}

/// Sample `variants` in lockstep on every rank of an MPI job (`--backend mpi` of `allreduce`
/// and `data-parallel`): the same rounds on every rank, since time-based stopping would let
/// ranks disagree on when to stop and a rank left alone in a collective waits until its
/// deadline; rank 0 alone reports progress.
#[cfg(feature = "mpi")]
pub fn sample_ranks(
    scenario: &dyn crate::scenario::Scenario,
    ctx: &crate::scenario::RunContext,
    rank: usize,
    variants: &mut [crate::harness::Variant<'_, crate::scenario::ScenarioError>],
) -> Result<Vec<crate::harness::Summary>, crate::scenario::ScenarioError> {
    let mut config = ctx.sampling.apply(scenario.sampling());
    config.max_samples = config.min_samples;
    config.min_time = std::time::Duration::ZERO;
    config.max_time = std::time::Duration::from_secs(86_400);
    let progress = |p| {
        if let (0, Some(report)) = (rank, &ctx.progress) {
            report(scenario.name(), p)
        }
    };
    crate::harness::Sampler::new(config)
        .with_progress(&progress)
        .run(variants)
}

/// A run's parameters under MPI, with `devices` the ranks the job has (`k`).
#[cfg(feature = "mpi")]
pub fn rank_parameters(
    params: &crate::scenario::Params,
    k: usize,
) -> serde_json::Map<String, serde_json::Value> {
    let mut parameters = params.to_json();
    parameters.insert("devices".into(), k.into());
    parameters
}

/// `mine` gathered from every rank onto rank 0, each parsed (`null` where it is not JSON);
/// `None` on the other ranks.
#[cfg(feature = "mpi")]
pub fn gather_json(
    comm: &crate::distributed::Comm,
    mine: &serde_json::Value,
) -> Option<Vec<serde_json::Value>> {
    let all = comm.gather_bytes(mine.to_string().as_bytes())?;
    let parse = |b: &Vec<u8>| serde_json::from_slice(b).unwrap_or(serde_json::Value::Null);
    Some(all.iter().map(parse).collect())
}

/// A note where the devices' `threads` outnumber the machine's cores, `consequence` after.
pub fn note_shared_cores(run: &mut crate::report::RunRecord, threads: &[usize], consequence: &str) {
    let sum: usize = threads.iter().sum();
    let cores = crate::device::available_cores();
    if sum > cores {
        run.notes.push(format!(
            "the devices' {sum} threads share {cores} cores{consequence}"
        ));
    }
}

/// A rank started without `mpirun` says so in its run's notes: it is a world of one.
#[cfg(feature = "mpi")]
pub fn note_unlaunched(run: &mut crate::report::RunRecord, launched: bool) {
    if !launched {
        run.notes.push(format!(
            "started without mpirun: running as one rank (mpirun -n 2 parbench {} --backend \
             mpi for two)",
            run.scenario
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{Runtime, RuntimeOptions};

    fn filled(n: usize, k: usize, f: impl Fn(usize) -> f32) -> Arc<Chunked> {
        let b = Arc::new(Chunked::new(n, k));
        b.write_all()
            .expect("fresh")
            .iter_mut()
            .enumerate()
            .for_each(|(i, v)| *v = f(i));
        b
    }

    /// Small integers sum exactly in any order: both algorithms, in and out of place, give
    /// the exact sum on every device, for sizes that do not divide into the chunks.
    #[test]
    fn ring_and_parameter_server_sum_exactly_in_and_out_of_place() {
        for k in [1, 2, 3, 5, 6] {
            let rt = Runtime::cpu(&RuntimeOptions::default(), &vec![1; k]).expect("devices");
            let lanes: Vec<LaneId> = rt.devices.iter().map(|d| d.compute).collect();
            for n in [1, 2, 7, 100] {
                let value = |d: usize, i: usize| ((d * 31 + i * 7) % 13) as f32;
                let want: Vec<f32> = (0..n).map(|i| (0..k).map(|d| value(d, i)).sum()).collect();
                for in_place in [false, true] {
                    for algorithm in ["ring", "parameter server", "tree"] {
                        let replicas: Vec<Replica> = (0..k)
                            .map(|d| {
                                let send = filled(n, k, |i| value(d, i));
                                let recv = match in_place {
                                    true => send.clone(),
                                    false => Arc::new(Chunked::new(n, k)),
                                };
                                Replica::new(send, recv)
                            })
                            .collect();
                        match algorithm {
                            "ring" => push_ring(&rt.engine, &lanes, &replicas),
                            "tree" => push_tree(&rt.engine, &lanes, &replicas),
                            _ => {
                                push_reduce(&rt.engine, lanes[0], &replicas);
                                push_broadcast(&rt.engine, &lanes, &replicas);
                            }
                        }
                        rt.engine.wait_all().expect("ops run");
                        for r in &replicas {
                            let got = r.recv.write_all().expect("idle").to_vec();
                            assert_eq!(got, want, "k {k} n {n} {algorithm}");
                        }
                    }
                }
            }
        }
    }
}
