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
