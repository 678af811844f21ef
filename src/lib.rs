//! parbench: reproduce, measure and explain the computational-performance chapter of
//! *Dive into Deep Learning* on a small asynchronous dependency engine.
//!
//! The library is usable without the CLI: [`engine::Engine`] is the dependency engine,
//! [`tensor::Tensor`] a lazy front end over it, [`harness`] the timer and statistics,
//! [`scenario`] the experiments and [`report`] the table and JSON output.

pub mod engine;
