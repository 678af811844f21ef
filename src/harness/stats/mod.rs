//! Statistics of benchmark samples (seconds, `f64`).
//!
//! Why this set of numbers: benchmark timings are few, noisy and skewed (a long right tail from
//! preemption, page faults, frequency changes), so the report leads with robust,
//! distribution-free figures — the median, the median absolute deviation, an order-statistic
//! confidence interval of the median and a Tukey outlier count — and keeps mean and standard
//! deviation for readers who expect them. Two runs are compared with the Mann-Whitney U test for
//! the same reason: it assumes no normality.

mod bootstrap;
mod percentiles;
mod rank_tests;
mod student_t;
mod summary;

pub use bootstrap::bootstrap_median_ci95;
pub use percentiles::Percentiles;
pub use rank_tests::{mann_whitney_p, mann_whitney_u, wilcoxon_signed_rank_p, MannWhitney};
pub use student_t::student_t_p;
pub use summary::{median, quantile, range_coverage, Summary, SAMPLES_FOR_95};
