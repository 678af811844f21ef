//! Where the devices of a scenario that spans several are: engine lanes of this process, or
//! MPI ranks (one device each, started by `mpirun`).

super::params::choice! {
    /// Where the devices that compute together are.
    pub enum Backend {
        /// Engine lanes of this process.
        Engine = "engine",
        /// MPI ranks, one device each (cargo feature `mpi`).
        Mpi = "mpi",
    }
}
