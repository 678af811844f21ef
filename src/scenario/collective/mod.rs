//! All-reduce between the CPU devices of one engine, as engine ops: the ring (reduce-scatter,
//! then all-gather, over k chunks) and the parameter server's reduce onto one device, with its
//! broadcast back. `data-parallel` sums its gradients with them in place; `allreduce` times
//! them out of place on buffers of every size.
//!
//! Each device's buffers are [`Chunked`]: k chunks, each ordered by a var of its own, so the
//! ring's steps on different chunks run at once on different devices, as on real links.

pub mod chunked;

use std::sync::Arc;

pub use self::chunked::Chunked;
use crate::engine::{Engine, LaneId, OpError, Var};

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
    /// A buffer reduced in place, its chunks ordered by `vars`.
    pub fn in_place(buf: Arc<Chunked>, vars: Vec<Var>) -> Replica {
        Replica {
            send: buf.clone(),
            recv: buf,
            vars,
        }
    }

    /// `send` reduced into a `recv` of the same length and chunks, with fresh vars.
    pub fn out_of_place(send: Arc<Chunked>, recv: Arc<Chunked>) -> Replica {
        let vars = (0..recv.chunks()).map(|_| Var::new()).collect();
        Replica { send, recv, vars }
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
        push_copy(engine, lanes[0], &replicas[0], &replicas[0]);
    }
    for (name, add, shift) in [("reduce-scatter", true, 0), ("all-gather", false, 1)] {
        for t in 0..k.saturating_sub(1) {
            for i in 0..k {
                let to = (i + 1) % k;
                let c = (i + shift + k - t) % k;
                let (src, dst) = (&replicas[i], &replicas[to]);
                // Out of place, the first step sends the sender's own contribution.
                let from_send = add && t == 0 && !src.is_in_place();
                let (from, into) = (
                    if from_send {
                        src.send.clone()
                    } else {
                        src.recv.clone()
                    },
                    dst.recv.clone(),
                );
                let own = (add && !dst.is_in_place()).then(|| dst.send.clone());
                let reads: Vec<&Var> = if from_send {
                    vec![]
                } else {
                    vec![&src.vars[c]]
                };
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

/// `to.recv = from.send`, chunk by chunk, as one op on `lane`.
fn push_copy(engine: &Engine, lane: LaneId, from: &Replica, to: &Replica) {
    let (src, dst) = (from.send.clone(), to.recv.clone());
    let writes: Vec<&Var> = to.vars.iter().collect();
    engine.push("copy", lane, &[], &writes, move || {
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
    let reads: Vec<&Var> = if in_place {
        replicas[1..].iter().flat_map(|r| &r.vars).collect()
    } else {
        vec![]
    };
    let writes: Vec<&Var> = replicas[0].vars.iter().collect();
    engine.push("reduce", lane, &reads, &writes, move || {
        let mut out = sum.write_all()?;
        for c in 0..sum.chunks() {
            let range = sum.range(c);
            if !in_place {
                out[range.clone()].copy_from_slice(&sends[0].read(c)?);
            }
            for g in &sends[1..] {
                add_into(&mut out[range.clone()], &g.read(c)?, None);
            }
        }
        Ok(())
    });
}

/// Push the parameter server's broadcast: replica 0's `recv` copied into every other one's,
/// an op on each receiver's lane.
pub fn push_broadcast(engine: &Engine, lanes: &[LaneId], replicas: &[Replica]) {
    let root = &replicas[0];
    let reads: Vec<&Var> = root.vars.iter().collect();
    for (d, dst) in replicas.iter().enumerate().skip(1) {
        let (from, into) = (root.recv.clone(), dst.recv.clone());
        let writes: Vec<&Var> = dst.vars.iter().collect();
        engine.push("broadcast", lanes[d], &reads, &writes, move || {
            let mut out = into.write_all()?;
            for c in 0..from.chunks() {
                out[from.range(c)].copy_from_slice(&from.read(c)?);
            }
            Ok(())
        });
    }
}

/// The error of an op that found a buffer it needs poisoned.
pub fn poisoned() -> OpError {
    OpError::msg("a buffer was poisoned by a failed op")
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

    fn whole(b: &Chunked) -> Vec<f32> {
        b.write_all().expect("idle").to_vec()
    }

    /// Small integers sum exactly in any order: both algorithms, in and out of place, give
    /// the exact sum on every device, for sizes that do not divide into the chunks.
    #[test]
    fn ring_and_parameter_server_sum_exactly_in_and_out_of_place() {
        for k in [1, 2, 3, 5] {
            let rt = Runtime::cpu(&RuntimeOptions::default(), &vec![1; k]).expect("devices");
            let lanes: Vec<LaneId> = rt.devices.iter().map(|d| d.compute).collect();
            for n in [1, 2, 7, 100] {
                let value = |d: usize, i: usize| ((d * 31 + i * 7) % 13) as f32;
                let want: Vec<f32> = (0..n).map(|i| (0..k).map(|d| value(d, i)).sum()).collect();
                for in_place in [false, true] {
                    for ring in [true, false] {
                        let replicas: Vec<Replica> = (0..k)
                            .map(|d| {
                                let send = filled(n, k, |i| value(d, i));
                                if in_place {
                                    let vars = (0..k).map(|_| Var::new()).collect();
                                    Replica::in_place(send, vars)
                                } else {
                                    Replica::out_of_place(send, Arc::new(Chunked::new(n, k)))
                                }
                            })
                            .collect();
                        if ring {
                            push_ring(&rt.engine, &lanes, &replicas);
                        } else {
                            push_reduce(&rt.engine, lanes[0], &replicas);
                            push_broadcast(&rt.engine, &lanes, &replicas);
                        }
                        rt.engine.wait_all().expect("ops run");
                        for r in &replicas {
                            assert_eq!(whole(&r.recv), want, "k {k} n {n} ring {ring}");
                        }
                    }
                }
            }
        }
    }
}
