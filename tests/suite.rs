//! The integration tests, in one binary: the library is linked once, not once a file.
//! `tests/busy.rs` alone is a binary of its own: it measures the machine's other processes,
//! and a test running beside it would be one.
//!
//! A module per concern; run one with `cargo test --test suite <module>::`. The MPI modules
//! build with `--features mpi`; what needs root or a release build is `#[ignore]`d and says so.

mod common;

mod cli;
#[cfg(feature = "mpi")]
mod cluster;
mod docs;
mod faults;
mod layers;
#[cfg(feature = "mpi")]
mod mpi;
mod report_schema;
mod workflows;
