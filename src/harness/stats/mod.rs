//! Statistics of benchmark samples (seconds, `f64`).
//!
//! Why this set of numbers: benchmark timings are few, noisy and skewed (a long right tail from
//! preemption, page faults, frequency changes), so the report leads with robust,
//! distribution-free figures — the median, the median absolute deviation, an order-statistic
//! confidence interval of the median and a Tukey outlier count — and keeps mean and standard
//! deviation for readers who expect them. Paired runs (`ab`) are compared with Wilcoxon's
//! signed-rank test for the same reason: it assumes no normality. Reports compared by `compare`
//! are judged against their run-to-run spread with Student's t (`report::noise`), since a
//! report's figure is one median, not a set of samples.

mod bootstrap;
mod percentiles;
mod signed_rank;
mod student_t;
mod summary;

pub use bootstrap::bootstrap_median_ci95;
pub use percentiles::Percentiles;
pub use signed_rank::wilcoxon_signed_rank_p;
pub use student_t::student_t_p;
pub use summary::{median, quantile, range_coverage, Summary, SAMPLES_FOR_95};
