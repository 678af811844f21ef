//! What the integration tests share.

#[cfg(feature = "mpi")]
pub mod child;

/// Quick sampling so the tests stay fast; correctness does not depend on the sample count.
pub const QUICK: &[&str] = &[
    "--warmup",
    "0",
    "--min-samples",
    "3",
    "--max-samples",
    "3",
    "--quiet",
];

/// Sampling as small as it goes: a report's shape, or whether a run aborts, does not
/// depend on it.
pub const TINY: &[&str] = &[
    "--warmup",
    "0",
    "--min-samples",
    "1",
    "--max-samples",
    "1",
    "--max-time",
    "0.01",
    "--quiet",
];
