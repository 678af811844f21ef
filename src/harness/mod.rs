//! Measuring: the book's `Benchmark` timer, the sampler that repeats and interleaves variants,
//! and the statistics of the samples.

pub mod allocator;
pub mod sampler;
pub mod stats;
pub mod timer;

pub use sampler::{Sampler, SamplerConfig, Variant};
pub use stats::Summary;
pub use timer::{synced, Benchmark};
