//! Where the devices of a scenario that spans several are: engine lanes of this process, or
//! MPI ranks (one device each, started by `mpirun`); and the two parameters every such
//! scenario declares.

use super::{Choice, ParamKind, ParamSpec};

super::params::choice! {
    /// Where the devices that compute together are.
    pub enum Backend {
        /// Engine lanes of this process.
        Engine = "engine",
        /// MPI ranks, one device each (cargo feature `mpi`).
        Mpi = "mpi",
    }
}

/// `--backend`: where the devices are.
pub const BACKEND_PARAM: ParamSpec = ParamSpec {
    name: "backend",
    help: "engine: devices of this process; mpi: one rank per device (cargo feature mpi, \
           started by mpirun)",
    kind: ParamKind::Choice(Backend::WORDS),
    default: "engine",
};

/// `--timeout`: how long a rank waits for another under MPI.
pub const TIMEOUT_PARAM: ParamSpec = ParamSpec {
    name: "timeout",
    help: "seconds a rank waits for another before it ends the MPI job (mpi backend)",
    kind: ParamKind::Float {
        min: 0.1,
        max: 86_400.0,
    },
    default: "60",
};
