//! parbench: reproduce, measure and explain the computational-performance chapter of
//! *Dive into Deep Learning* on a small asynchronous dependency engine.
//!
//! The library is usable without the CLI: [`engine::Engine`] is the dependency engine,
//! [`tensor::Tensor`] a lazy front end over it, [`device`] the CPU (and CUDA) devices, [`distributed`] MPI ranks,
//! [`harness`] the timer and statistics, [`machine`] the host's limits and state, [`scenario`] the experiments, [`report`] the
//! report and its comparison, [`export`] its output formats, [`units`] the wording of
//! figures. The layers, and where to add a scenario, a device or an output format:
//! `ARCHITECTURE.md`.

pub mod cli;
pub mod device;
pub mod distributed;
pub mod engine;
pub mod export;
pub mod harness;
pub mod machine;
pub mod report;
pub mod scenario;
pub mod tensor;
pub mod units;
