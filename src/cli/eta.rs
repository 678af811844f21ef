//! A sweep's estimate: before the first point, how the points' work compares (the scenario's
//! [`crate::scenario::Scenario::work`] of each point, over the first's); after it, how long
//! the rest take, the first point's time scaled by each point's work through the sampler's
//! rules (a point twice the work has rounds twice as long, but may take fewer of them to reach
//! `--min-time`). Never the first point's time times the count: a grid whose points grow does
//! not take as long as its smallest point.

use crate::harness::sampler::SamplerConfig;
use crate::units::{grouped, human_time};

/// Each point's work over the first's (a work that is not positive and finite counts as the
/// first's).
pub(super) fn relative(work: &[f64]) -> Vec<f64> {
    let usable = |w: f64| w.is_finite() && w > 0.0;
    let first = work.first().copied().filter(|&w| usable(w)).unwrap_or(1.0);
    work.iter()
        .map(|&w| if usable(w) { w / first } else { 1.0 })
        .collect()
}

/// Before the first point: "16 points to measure; by their parameters the largest does 4,096×
/// the first's work, all together 10,923×: the time follows the first point"; `None` for one
/// point.
pub(super) fn before(relative: &[f64]) -> Option<String> {
    if relative.len() < 2 {
        return None;
    }
    let largest = relative.iter().copied().fold(1.0, f64::max);
    let total: f64 = relative.iter().sum();
    Some(format!(
        "{} points to measure; by their parameters the largest does {}× the first's work, all \
         together {}×: the time follows the first point",
        grouped(relative.len() as u64),
        times(largest),
        times(total)
    ))
}

/// After the first point, which took `first_s` in all with rounds of `round_s` (its variants'
/// medians summed): "about 3 h 20 min for 15 more points (the first took 1.200 s; the rest
/// scaled by their work)"; `None` when nothing is left. `rest` holds the points still to
/// measure, each its work over the first's.
pub(super) fn remaining(
    first_s: f64,
    round_s: f64,
    rest: &[f64],
    sampling: &SamplerConfig,
) -> Option<String> {
    if rest.is_empty() || !(first_s.is_finite() && first_s > 0.0) {
        return None;
    }
    let seconds: f64 = if round_s.is_finite() && round_s > 0.0 {
        // What the first took beyond its rounds (setup, checks, the machine's state) is taken
        // as the same for every point: most of it does not grow with the work.
        let beyond = (first_s - point_seconds(round_s, sampling)).max(0.0);
        rest.iter()
            .map(|w| beyond + point_seconds(round_s * w, sampling))
            .sum()
    } else {
        rest.iter().map(|w| first_s * w).sum()
    };
    let noun = if rest.len() == 1 { "point" } else { "points" };
    Some(format!(
        "about {} for {} more {noun} (the first took {}; the rest scaled by their work)",
        coarse(seconds),
        grouped(rest.len() as u64),
        human_time(first_s)
    ))
}

/// The time a point whose rounds take `round_s` spends sampling: warm-up, then rounds until
/// `--min-samples` and `--min-time` are both met, at most `--max-samples`, and no more than
/// `--max-time` allows (but 3 rounds at least), as the sampler does.
fn point_seconds(round_s: f64, s: &SamplerConfig) -> f64 {
    let by_time = (s.min_time.as_secs_f64() / round_s).ceil();
    let cap = (s.max_time.as_secs_f64() / round_s).ceil().max(3.0);
    let rounds = by_time
        .max(s.min_samples as f64)
        .min(s.max_samples as f64)
        .min(cap);
    (rounds + s.warmup as f64) * round_s
}

/// A ratio as the estimate words it: `4,096`, `2.5`.
fn times(x: f64) -> String {
    if x >= 100.0 {
        grouped(x.round() as u64)
    } else {
        format!("{:.3}", x)
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}

/// A duration worded to the minute past an hour, to the second below: "3 h 20 min", "4 min 5 s",
/// "12 s".
fn coarse(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, 0) => "under 1 s".to_string(),
        (0, 0, s) => format!("{s} s"),
        (0, m, 0) => format!("{m} min"),
        (0, m, s) => format!("{m} min {s} s"),
        (h, 0, _) => format!("{h} h"),
        (h, m, _) => format!("{h} h {m} min"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn sampling(min_samples: usize, min_time: f64) -> SamplerConfig {
        SamplerConfig {
            warmup: 0,
            min_samples,
            max_samples: 1000,
            min_time: Duration::from_secs_f64(min_time),
            max_time: Duration::from_secs(60),
        }
    }

    #[test]
    fn before_the_first_point_the_work_is_compared() {
        let sizes = [16.0f64, 32.0, 64.0];
        let work = relative(&sizes.map(|n| n * n * n));
        assert_eq!(work, [1.0, 8.0, 64.0]);
        assert_eq!(
            before(&work).as_deref(),
            Some(
                "3 points to measure; by their parameters the largest does 64× the first's \
                 work, all together 73×: the time follows the first point"
            )
        );
        assert_eq!(before(&[1.0]), None);
        assert_eq!(relative(&[0.0, 2.0, f64::NAN]), [1.0, 2.0, 1.0]);
    }

    #[test]
    fn the_rest_is_scaled_by_work_not_by_count() {
        // Ten samples, no time floor: a point of 8× the work takes 8× as long.
        let s = sampling(10, 0.0);
        assert_eq!(
            remaining(1.0, 0.1, &[8.0, 64.0], &s).as_deref(),
            Some("about 1 min 12 s for 2 more points (the first took 1.000 s; the rest scaled by their work)")
        );
        // What the first took beyond its rounds (0.5 s) is added to each point.
        assert!(remaining(1.5, 0.1, &[8.0, 64.0], &s)
            .unwrap()
            .starts_with("about 1 min 13 s for 2 more points"));
        // The same points at the first's pace alone would be 2 s: the count is not the model.
        // A time floor of 1 s: the first's tiny rounds ran 1 s; a 10× point still does.
        let s = sampling(3, 1.0);
        let text = remaining(1.0, 0.001, &[10.0, 10_000.0], &s).unwrap();
        // 10×: rounds of 10 ms, 100 of them: 1 s. 10,000×: rounds of 10 s, 3 of them: 30 s.
        assert!(text.starts_with("about 31 s for 2 more points"), "{text}");
        assert_eq!(remaining(1.0, 0.1, &[], &s), None);
        // Without a round time, the first's time scaled by work.
        assert!(remaining(2.0, 0.0, &[3.0], &s)
            .unwrap()
            .starts_with("about 6 s for 1 more point"));
        let worded = [245.0, 120.0, 7200.0, 12_000.0].map(coarse);
        assert_eq!(worded, ["4 min 5 s", "2 min", "2 h", "3 h 20 min"]);
    }
}
