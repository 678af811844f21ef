//! Processes that compute together: MPI (cargo feature `mpi`, the `mpi` crate over the
//! system's OpenMPI).
//!
//! MPI is initialized once per process and finalized by [`finalize`] (the binary calls it on
//! its way out; mpirun treats a rank that exits without finalizing as failed). Every wait on
//! another rank has a deadline: a rank that died or hangs ends the whole job with a message
//! naming who waited for whom ([`Comm`]), never a hang. Without the feature, [`init`] says how
//! to get it and [`is_secondary_rank`] is always false.

pub mod launch;
#[cfg(feature = "mpi")]
mod mpi;

#[cfg(feature = "mpi")]
pub use self::mpi::{init, is_secondary_rank, world, Comm};

/// Why processes could not be set up to compute together.
#[derive(Debug, thiserror::Error)]
pub enum DistributedError {
    #[error("this parbench was built without MPI: {0}")]
    NotBuilt(&'static str),
    /// MPI could not be started (or was already finalized).
    #[error("MPI could not be initialized: {0}")]
    Init(String),
}

/// This process's place in the job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    pub rank: usize,
    pub size: usize,
    /// Ranks on this host (threads are split between them).
    pub local_size: usize,
    /// Started by a launcher (mpirun); false for a process run on its own (one rank).
    pub launched: bool,
}

/// Chunk `c` of `n` elements cut into `k` (sizes differ by at most one): how a ring
/// all-reduce cuts its buffer, across ranks and across the devices of one process alike.
pub fn chunk(n: usize, k: usize, c: usize) -> std::ops::Range<usize> {
    c * n / k..(c + 1) * n / k
}

/// The install line for a build with MPI.
pub const INSTALL: &str = "apt-get install -y libopenmpi-dev openmpi-bin libclang-dev, then \
     cargo build --release --features mpi, and run mpirun -n 2 parbench data-parallel \
     --backend mpi";

/// Without MPI support there is nothing to start.
#[cfg(not(feature = "mpi"))]
pub fn init() -> Result<Place, DistributedError> {
    Err(DistributedError::NotBuilt(INSTALL))
}

/// Without MPI support every process is the only one.
#[cfg(not(feature = "mpi"))]
pub fn is_secondary_rank() -> bool {
    false
}

/// Finalize MPI if this process initialized it (a no-op otherwise, and without the feature).
pub fn finalize() {
    #[cfg(feature = "mpi")]
    self::mpi::finalize();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_every_element_once() {
        for (n, k) in [(10, 3), (7, 4), (1_000_003, 4)] {
            let mut at = 0;
            for c in 0..k {
                let r = chunk(n, k, c);
                assert_eq!(r.start, at);
                at = r.end;
            }
            assert_eq!(at, n);
        }
    }
}
