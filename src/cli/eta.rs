//! The estimate a long sweep prints after its first measured point: how long the points still
//! to measure take at the pace so far.

use crate::units::{grouped, human_time};

/// "about 3 h 20 min for 9,999 more points at 1.20 s each"; `None` when nothing is left.
pub(super) fn remaining(seconds_each: f64, left: u64) -> Option<String> {
    if left == 0 || !seconds_each.is_finite() {
        return None;
    }
    let noun = if left == 1 { "point" } else { "points" };
    Some(format!(
        "about {} for {} more {noun} at {} each",
        coarse(seconds_each * left as f64),
        grouped(left),
        human_time(seconds_each)
    ))
}

/// A duration worded to the minute past an hour, to the second below: "3 h 20 min", "4 min 5 s",
/// "12 s".
fn coarse(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    match (s / 3600, s % 3600 / 60, s % 60) {
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

    #[test]
    fn the_estimate_names_the_total_the_count_and_the_pace() {
        assert_eq!(
            remaining(1.2, 9_999).as_deref(),
            Some("about 3 h 19 min for 9,999 more points at 1.200 s each")
        );
        assert_eq!(
            remaining(0.5, 1).as_deref(),
            Some("about 1 s for 1 more point at 500.0 ms each")
        );
        assert_eq!(remaining(1.0, 0), None);
        assert_eq!(coarse(245.0), "4 min 5 s");
        assert_eq!(coarse(120.0), "2 min");
        assert_eq!(coarse(7200.0), "2 h");
    }
}
