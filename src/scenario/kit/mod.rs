//! The scenario kit: what every scenario shares, in one place each.
//!
//! - [`device`]: the GPU or the CPU device that stands in for it, the fallback's note, the one
//!   refusal of `--device cuda` without a GPU (a usage error, exit 2);
//! - [`fits`]: every buffer estimated and refused before anything is allocated;
//! - [`workload`]: the book's `run(x)`, its rate, the float64 reference check, a traced run;
//! - [`explained`]: sentences, findings and warnings from a typed summary, recorded at once;
//! - [`lesson`]: the lesson's claim, decided from its [`Finding`](crate::report::finding::Finding)s.
//!
//! A judgment is a [`Finding`](crate::report::finding::Finding): its figure, interval, bound
//! and wanted side. The lesson's verdict and evidence, a limit's warning, the table's and the
//! HTML page's lines are all rendered from it.

pub mod device;
pub mod explained;
pub mod fits;
pub mod lesson;
pub mod workload;

use crate::report::{Better, FigureSpec, Unit};

pub use device::{
    accelerator, check_requested_device, chosen_device, host_ordered, note_fallback, on_gpu,
    ChosenDevice, OnGpu,
};
pub(crate) use explained::warnings;
pub use explained::{Explained, BETWEEN_ROUNDS};
pub use fits::{check_bytes, check_elements, check_matrices, check_threads};
pub use lesson::{LessonSpec, Verdict};
pub use workload::{
    gflops, matmul_error, matmul_tolerance, run_matmuls, sampling_to_95, traced, ALREADY_TRACING,
    SECONDS_PER_ROUND,
};

pub const fn seconds(key: &'static str, better: Better) -> FigureSpec {
    FigureSpec::new(key, Unit::Seconds, better)
}

pub const fn ratio(key: &'static str, better: Better) -> FigureSpec {
    FigureSpec::new(key, Unit::Ratio, better)
}

/// A plain number: an efficiency, a count.
pub const fn number(key: &'static str, better: Better) -> FigureSpec {
    FigureSpec::new(key, Unit::Number, better)
}
