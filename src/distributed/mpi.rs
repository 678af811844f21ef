//! MPI through the `mpi` crate (rsmpi): initialization, and a communicator whose every wait
//! has a deadline.
//!
//! Waits poll non-blocking requests (`MPI_Iallreduce`, `MPI_Isend`/`MPI_Irecv`,
//! `MPI_Ibcast`): spinning briefly, then yielding the core between polls, then sleeping 50 µs
//! between them ([`back_off`]), so a waiting rank keeps its request moving but does not take a
//! core for long from the rank it waits for (two ranks often share two cores here). On the
//! deadline the rank prints who it waited for and calls `MPI_Abort`, which ends every rank.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mpi::collective::SystemOperation;
use mpi::datatype::PartitionMut;
use mpi::environment::Universe;
use mpi::request::{LocalScope, Request, Scope};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use mpi::Count;

use super::{chunk, DistributedError, Place};

/// The MPI environment: initialized once, finalized by [`finalize`].
static UNIVERSE: Mutex<Option<(Universe, Place)>> = Mutex::new(None);
/// Set once MPI was finalized: it cannot be started again in this process.
static FINALIZED: Mutex<bool> = Mutex::new(false);
/// A panic ends the whole job (set while a launched job's MPI is up).
static ABORT_ON_PANIC: AtomicBool = AtomicBool::new(false);

/// Exit code of a job ended because a rank stopped answering.
const ABORT_CODE: i32 = 1;

/// The tag of [`Comm::barrier`]'s messages (callers' tags stay below it).
const TAG_BARRIER: i32 = 30_000;
/// The tag of [`Comm::parameter_server_sum_into`]'s messages.
const TAG_SERVER: i32 = 30_001;

/// Start MPI (once; later calls return the same place).
pub fn init() -> Result<Place, DistributedError> {
    let mut slot = UNIVERSE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, place)) = slot.as_ref() {
        return Ok(*place);
    }
    if *FINALIZED.lock().unwrap_or_else(|e| e.into_inner()) {
        return Err(DistributedError::Init(
            "MPI was already finalized in this process".into(),
        ));
    }
    // Variables a launcher sets (OpenMPI's own, PMIx's, MPICH's Hydra).
    let launched = ["OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"]
        .iter()
        .any(|k| std::env::var_os(k).is_some());
    if !launched && std::env::var_os("OMPI_MCA_ess_singleton_isolated").is_none() {
        // A process started without mpirun is a one-rank job. OpenMPI would start a PMIx
        // server for it, which needs a network listener that a sandbox may not have.
        // Set before MPI starts and before any run starts a thread that could read the
        // environment (the CLI starts MPI first).
        std::env::set_var("OMPI_MCA_ess_singleton_isolated", "1");
    }
    let universe = mpi::initialize().ok_or_else(|| {
        DistributedError::Init("MPI was initialized by someone else in this process".into())
    })?;
    let world = universe.world();
    let size = world.size().max(1) as usize;
    let local_size = std::env::var("OMPI_COMM_WORLD_LOCAL_SIZE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if launched { size } else { 1 });
    let place = Place {
        rank: world.rank().max(0) as usize,
        size,
        local_size,
        launched,
    };
    // A panic in a rank of a launched job must end the job: unwinding would reach
    // MPI_Finalize, which waits for ranks that wait for this one. (A process on its own has
    // no one waiting: its panics unwind as ever, and the engine keeps catching its ops'.)
    if launched {
        ABORT_ON_PANIC.store(true, Ordering::SeqCst);
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            previous(info);
            if ABORT_ON_PANIC.load(Ordering::SeqCst) {
                eprintln!(
                    "parbench: rank {} of {} panicked; ending the MPI job",
                    place.rank, place.size
                );
                SimpleCommunicator::world().abort(101);
            }
        }));
    }
    *slot = Some((universe, place));
    Ok(place)
}

/// This process is a rank other than 0 of a started MPI job (it prints and writes nothing).
pub fn is_secondary_rank() -> bool {
    UNIVERSE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .is_some_and(|(_, p)| p.rank != 0)
}

/// End MPI (`MPI_Finalize`), if it was started.
pub fn finalize() {
    ABORT_ON_PANIC.store(false, Ordering::SeqCst);
    let universe = UNIVERSE.lock().unwrap_or_else(|e| e.into_inner()).take();
    if universe.is_some() {
        *FINALIZED.lock().unwrap_or_else(|e| e.into_inner()) = true;
    }
    drop(universe);
}

/// The world communicator, starting MPI if needed, with `timeout` on every wait.
pub fn world(timeout: Duration) -> Result<Comm, DistributedError> {
    let place = init()?;
    let mut comm = Comm {
        world: SimpleCommunicator::world(),
        place,
        timeout,
        hosts: Vec::new(),
    };
    comm.hosts = comm.gather_hosts();
    Ok(comm)
}

/// Bytes of a host name as the ranks exchange it (longer names are cut).
const HOST_BYTES: usize = 64;

/// The world of ranks, every wait bounded by `timeout`.
pub struct Comm {
    world: SimpleCommunicator,
    place: Place,
    timeout: Duration,
    /// Every rank's host, by rank: a rank that stops answering is named with its host.
    hosts: Vec<String>,
}

impl Comm {
    pub fn place(&self) -> Place {
        self.place
    }

    pub fn rank(&self) -> usize {
        self.place.rank
    }

    pub fn size(&self) -> usize {
        self.place.size
    }

    /// The host this rank runs on, as MPI names it.
    pub fn host(&self) -> String {
        mpi::environment::processor_name().unwrap_or_else(|_| "unknown host".into())
    }

    /// Every rank's host, exchanged once when the world is made (within the deadline).
    fn gather_hosts(&self) -> Vec<String> {
        let k = self.size();
        let mut mine = [0u8; HOST_BYTES];
        let host = self.host();
        let n = host.len().min(HOST_BYTES);
        mine[..n].copy_from_slice(&host.as_bytes()[..n]);
        let mut all = vec![0u8; HOST_BYTES * k];
        self.post_and_wait(
            |scope| {
                self.world
                    .immediate_all_gather_into(scope, &mine[..], &mut all[..])
            },
            &|| "the other ranks (their host names)".to_string(),
        );
        all.chunks(HOST_BYTES)
            .map(|name| {
                let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
                String::from_utf8_lossy(&name[..end]).into_owned()
            })
            .collect()
    }

    /// `rank 3 on node-b`: a rank as a message names it, with its host where known.
    pub fn who(&self, rank: usize) -> String {
        format!("rank {rank}{}", self.on(rank))
    }

    /// ` on node-b`, or nothing where the rank's host is not known.
    fn on(&self, rank: usize) -> String {
        match self.hosts.get(rank) {
            Some(host) if !host.is_empty() => format!(" on {host}"),
            _ => String::new(),
        }
    }

    /// Whether the job's ranks run on more than one host.
    fn spans_hosts(&self) -> bool {
        let mine = self.hosts.get(self.rank());
        self.hosts.iter().any(|h| Some(h) != mine)
    }

    /// End the job: print why (naming this rank) and `MPI_Abort` every rank.
    pub fn abort(&self, why: &str) -> ! {
        let when = if self.spans_hosts() {
            format!(
                " (in {} s, unless mpirun ends it first for a lost host)",
                self.timeout.as_secs_f64()
            )
        } else {
            String::new()
        };
        eprintln!(
            "parbench: rank {} of {}{}: {why}; ending the MPI job{when}",
            self.rank(),
            self.size(),
            self.on(self.rank())
        );
        if self.spans_hosts() {
            // OpenMPI 4's mpirun cannot finish an MPI_Abort while a host it launched on is
            // unreachable: it waits for that host's daemon for good. If a host was lost, mpirun
            // notices on its own (its out-of-band keepalive, `oob_tcp_keepalive_*`) and ends the
            // job; give it one more timeout to, then abort.
            std::thread::sleep(self.timeout);
        }
        self.world.abort(ABORT_CODE)
    }

    /// Poll `request` until it completes; past the deadline, end the job naming `what`.
    fn wait<'a, D: ?Sized, S: Scope<'a>>(
        &self,
        mut request: Request<'a, D, S>,
        deadline: Instant,
        what: &dyn Fn() -> String,
    ) -> mpi::point_to_point::Status {
        let mut polls = 0u32;
        loop {
            match request.test() {
                Ok(status) => return status,
                Err(r) => request = r,
            }
            if Instant::now() >= deadline {
                self.abort(&format!(
                    "waited {} s for {}: it failed, died or hangs",
                    self.timeout.as_secs_f64(),
                    what()
                ));
            }
            back_off(&mut polls);
        }
    }

    fn deadline(&self) -> Instant {
        Instant::now() + self.timeout
    }

    /// Post one request in a scope of its own and [`Comm::wait`] for it within one timeout.
    fn post_and_wait<'a, D: ?Sized + 'a>(
        &self,
        post: impl for<'s> FnOnce(&'s LocalScope<'a>) -> Request<'a, D, &'s LocalScope<'a>>,
        what: &dyn Fn() -> String,
    ) -> mpi::point_to_point::Status {
        let deadline = self.deadline();
        mpi::request::scope(|scope| self.wait(post(scope), deadline, what))
    }

    /// Wait until every rank is here. Point-to-point, not `MPI_Ibarrier`, so that a timeout
    /// can name the ranks that did not come: each rank tells rank 0 it arrived, and rank 0
    /// tells them all to go on.
    pub fn barrier(&self, what: &str) {
        let k = self.size();
        if k == 1 {
            return;
        }
        let deadline = self.deadline();
        let mut flags = vec![0u8; k];
        if self.rank() != 0 {
            // Twice as long as rank 0 waits: when another rank is missing, rank 0 (which knows
            // who) ends the job first; this rank names rank 0 only if rank 0 is the one gone.
            let deadline = deadline + self.timeout;
            let root = self.world.process_at_rank(0);
            mpi::request::scope(|scope| {
                let (here, go) = flags.split_at_mut(1);
                let tx = root.immediate_send_with_tag(scope, &here[..], TAG_BARRIER);
                let rx = root.immediate_receive_into_with_tag(scope, &mut go[..1], TAG_BARRIER);
                self.wait(tx, deadline, &|| format!("{} ({what})", self.who(0)));
                self.wait(rx, deadline, &|| format!("{} ({what})", self.who(0)));
            });
            return;
        }
        mpi::request::scope(|scope| {
            // Rank r's request at r - 1.
            let mut pending: Vec<_> = flags
                .chunks_mut(1)
                .enumerate()
                .skip(1)
                .map(|(r, flag)| {
                    let from = self.world.process_at_rank(r as i32);
                    Some(from.immediate_receive_into_with_tag(scope, flag, TAG_BARRIER))
                })
                .collect();
            let mut polls = 0u32;
            while test_all(&mut pending) {
                if Instant::now() >= deadline {
                    let missing: Vec<String> = (1..k)
                        .filter(|r| pending[r - 1].is_some())
                        .map(|r| self.who(r))
                        .collect();
                    self.abort(&format!(
                        "{} did not reach {what} within {} s: it failed, died or hangs",
                        missing.join(", "),
                        self.timeout.as_secs_f64()
                    ));
                }
                back_off(&mut polls);
            }
        });
        let go = [1u8];
        for r in 1..k {
            self.send(r, TAG_BARRIER, &go, what);
        }
    }

    /// `recv = Σ over ranks of send` (`MPI_Allreduce`, non-blocking and polled).
    pub fn all_reduce_sum(&self, send: &[f32], recv: &mut [f32], what: &str) {
        self.post_and_wait(
            |scope| {
                self.world
                    .immediate_all_reduce_into(scope, send, recv, SystemOperation::sum())
            },
            &|| format!("the other ranks ({what})"),
        );
    }

    /// `recvs[i] = Σ over ranks of sends[i]` for buckets made ready one after another:
    /// `fill(i, bucket)` writes bucket i (a backward step, say), then its `MPI_Iallreduce` is
    /// posted at once and the next bucket is filled while it moves (PyTorch DDP's overlap).
    /// Posted requests are tested after each fill, since OpenMPI moves a non-blocking
    /// collective on only inside `MPI_Test`; the end waits for all of them within the
    /// deadline. Returns the time spent in MPI calls: the communication no fill covered.
    pub fn all_reduce_sum_as_ready(
        &self,
        sends: Vec<&mut [f32]>,
        recvs: Vec<&mut [f32]>,
        what: &str,
        mut fill: impl FnMut(usize, &mut [f32]),
    ) -> Duration {
        let mut in_mpi = Duration::ZERO;
        mpi::request::scope(|scope| {
            let mut pending = Vec::new();
            for (i, (send, recv)) in sends.into_iter().zip(recvs).enumerate() {
                fill(i, send);
                let send: &[f32] = send;
                let posting = Instant::now();
                pending.push(Some(self.world.immediate_all_reduce_into(
                    scope,
                    send,
                    recv,
                    SystemOperation::sum(),
                )));
                test_all(&mut pending);
                in_mpi += posting.elapsed();
            }
            let waiting = Instant::now();
            let deadline = self.deadline();
            for (i, slot) in pending.into_iter().enumerate() {
                if let Some(r) = slot {
                    self.wait(r, deadline, &|| {
                        format!("the other ranks ({what}: bucket {i})")
                    });
                }
            }
            in_mpi += waiting.elapsed();
        });
        in_mpi
    }

    /// `data = Σ over ranks of send`, by a ring over point-to-point messages, out of place (as
    /// nccl-tests times it): reduce-scatter (k − 1 steps: send chunk (r − s) mod k right, add
    /// chunk (r − s − 1) mod k from the left to `send`'s) then all-gather (k − 1 steps passing
    /// the reduced chunks on). `send` stays as it is, and every rank ends with the same sums,
    /// added in the same order.
    pub fn ring_all_reduce_sum_into(
        &self,
        send: &[f32],
        data: &mut [f32],
        tmp: &mut Vec<f32>,
        what: &str,
    ) {
        let k = self.size();
        if k == 1 {
            data.copy_from_slice(send);
            return;
        }
        let (r, n) = (self.rank(), data.len());
        let (right, left) = ((r + 1) % k, (r + k - 1) % k);
        let (to, from) = (
            self.world.process_at_rank(right as i32),
            self.world.process_at_rank(left as i32),
        );
        tmp.resize(n / k + 1, 0.0);
        // Reduce-scatter receives into `tmp` and adds; all-gather keeps what it receives.
        for (phase, shift, tags) in [("reduce-scatter", 0, 100), ("all-gather", 1, 200)] {
            let add = shift == 0;
            for s in 0..k - 1 {
                let out_at = chunk(n, k, (r + shift + k - s) % k);
                let recv = chunk(n, k, (r + shift + 2 * k - s - 1) % k);
                let deadline = self.deadline();
                let tag = tags + s as i32;
                let (out, into) = if add {
                    // The first step sends this rank's own contribution; later ones a
                    // partial sum.
                    let out = if s == 0 { &send[out_at] } else { &data[out_at] };
                    (out, &mut tmp[..recv.len()])
                } else {
                    disjoint(data, out_at, recv.clone())
                };
                mpi::request::scope(|scope| {
                    let rx = from.immediate_receive_into_with_tag(scope, into, tag);
                    let tx = to.immediate_send_with_tag(scope, out, tag);
                    let step = |dir: &'static str, peer: usize| {
                        move || {
                            let who = self.who(peer);
                            format!("{who} ({what}: ring {phase} step {s}, {dir})")
                        }
                    };
                    self.wait(rx, deadline, &step("receive", left));
                    self.wait(tx, deadline, &step("send", right));
                });
                if add {
                    let into = data[recv.clone()].iter_mut();
                    for ((d, t), x) in into.zip(tmp.iter()).zip(&send[recv]) {
                        *d = *x + *t;
                    }
                }
            }
        }
    }

    /// `recv = Σ over ranks of send` through a parameter server on rank 0, over
    /// point-to-point messages: rank 0 receives every other rank's buffer in rank order and
    /// adds it to its own, then sends the sum to each rank in turn; the others send theirs
    /// and receive the sum. Rank 0 moves 2(k − 1) buffers where a ring moves 2(k − 1)/k.
    pub fn parameter_server_sum_into(
        &self,
        send: &[f32],
        recv: &mut [f32],
        tmp: &mut Vec<f32>,
        what: &str,
    ) {
        let k = self.size();
        if self.rank() != 0 {
            self.send(
                0,
                TAG_SERVER,
                send,
                &format!("{what}: its part, to the server"),
            );
            self.receive(Some(0), TAG_SERVER, recv, &format!("{what}: the sum"));
            return;
        }
        recv.copy_from_slice(send);
        tmp.resize(send.len(), 0.0);
        for r in 1..k {
            self.receive(Some(r), TAG_SERVER, tmp, &format!("{what}: its part"));
            for (d, t) in recv.iter_mut().zip(tmp.iter()) {
                *d += *t;
            }
        }
        for r in 1..k {
            self.send(r, TAG_SERVER, recv, &format!("{what}: the sum"));
        }
    }

    /// Send `data` to rank `to` with `tag`.
    pub fn send<T: Equivalence>(&self, to: usize, tag: i32, data: &[T], what: &str) {
        let to_rank = self.world.process_at_rank(to as i32);
        self.post_and_wait(
            |scope| to_rank.immediate_send_with_tag(scope, data, tag),
            &|| format!("{} to receive ({what})", self.who(to)),
        );
    }

    /// Receive exactly `buf.len()` values with `tag` from rank `from`, or from any rank when
    /// `from` is `None`; returns the sender.
    pub fn receive(&self, from: Option<usize>, tag: i32, buf: &mut [f32], what: &str) -> usize {
        let status = match from {
            Some(f) => {
                let peer = self.world.process_at_rank(f as i32);
                self.post_and_wait(
                    |scope| peer.immediate_receive_into_with_tag(scope, buf, tag),
                    &|| format!("{} ({what})", self.who(f)),
                )
            }
            None => self.post_and_wait(
                |scope| {
                    self.world
                        .any_process()
                        .immediate_receive_into_with_tag(scope, buf, tag)
                },
                &|| format!("any other rank ({what})"),
            ),
        };
        status.source_rank().max(0) as usize
    }

    /// The cores this rank computes with: its own when it is bound to fewer than the host has
    /// (mpirun binds each of 2 ranks or fewer to a core), else the host's split between its
    /// ranks on this host.
    pub fn cores(&self) -> usize {
        let mine = std::thread::available_parallelism().map_or(1, |n| n.get());
        match crate::machine::affinity::online() {
            Some(host) if mine >= host => (host / self.place.local_size.max(1)).max(1),
            _ => mine,
        }
    }

    /// Every rank's `bytes`, on rank 0 (`None` on the others).
    pub fn gather_bytes(&self, bytes: &[u8]) -> Option<Vec<Vec<u8>>> {
        // Sizes first (fixed size, blocking: each rank is here after the same barrier), then
        // the bytes, each rank's at its offset.
        self.barrier("gathering the report");
        let root = self.world.process_at_rank(0);
        let len = bytes.len() as Count;
        if self.rank() != 0 {
            root.gather_into(&len);
            root.gather_varcount_into(bytes);
            return None;
        }
        let mut counts = vec![0 as Count; self.size()];
        root.gather_into_root(&len, &mut counts[..]);
        let offsets: Vec<Count> = counts
            .iter()
            .scan(0, |at, &c| {
                *at += c;
                Some(*at - c)
            })
            .collect();
        let mut all = vec![0u8; counts.iter().map(|&c| c as usize).sum()];
        {
            let mut parts = PartitionMut::new(&mut all[..], &counts[..], &offsets[..]);
            root.gather_varcount_into_root(bytes, &mut parts);
        }
        Some(
            counts
                .iter()
                .zip(&offsets)
                .map(|(&c, &o)| all[o as usize..(o + c) as usize].to_vec())
                .collect(),
        )
    }

    /// Rank 0's `values`, on every rank.
    pub fn broadcast(&self, values: &mut [f64], what: &str) {
        let root = self.world.process_at_rank(0);
        self.post_and_wait(
            |scope| root.immediate_broadcast_into(scope, values),
            &|| format!("{} ({what})", self.who(0)),
        );
    }
}

/// Between two polls of a request: spin for the first few thousand, then yield the core for
/// some tens of thousands (a few tens of ms), then sleep 50 µs each.
///
/// OpenMPI moves a non-blocking collective on only inside `MPI_Test`: a poll every 50 µs made
/// an `MPI_Iallreduce` of 1 MiB on 2 ranks take 2.2× as long as a blocking one (412 against
/// 188 µs, `scripts/allreduce-vs-mpi4py.sh`). Yielding keeps it moving while letting a
/// thread that shares the core run; sleeping only after that leaves a rank that waits long
/// for another (a slow step, a hung rank) off the core.
fn back_off(polls: &mut u32) {
    *polls = polls.saturating_add(1);
    if *polls > 50_000 {
        std::thread::sleep(Duration::from_micros(50));
    } else if *polls > 2000 {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

/// Test each pending request once, emptying the slots of those complete; whether any is left.
fn test_all<'a, D: ?Sized, S: Scope<'a>>(pending: &mut [Option<Request<'a, D, S>>]) -> bool {
    for slot in pending.iter_mut() {
        if let Some(r) = slot.take() {
            *slot = r.test().err();
        }
    }
    pending.iter().any(Option::is_some)
}

/// `send` to read and `recv` to write of one buffer (disjoint ranges).
fn disjoint(data: &mut [f32], send: Range<usize>, recv: Range<usize>) -> (&[f32], &mut [f32]) {
    if send.start < recv.start {
        let (a, b) = data.split_at_mut(recv.start);
        (&a[send], &mut b[..recv.len()])
    } else {
        let (a, b) = data.split_at_mut(send.start);
        (&b[..send.len()], &mut a[recv])
    }
}
