//! An all-reduce run's bus bandwidth against message size, a line per algorithm.

use crate::export::chart::{self, Axis, LineChart, Series};
use crate::report::RunRecord;

/// The `<algorithm>_busbw_curve` figures of a run (`[bytes, GB/s]` points) as one chart, both
/// axes logarithmic where every point is positive; `None` where the run has none.
pub fn busbw_chart(run: &RunRecord, width: f64) -> Option<String> {
    let curves = super::curves(run, "_busbw_curve");
    let positive = curves.iter().all(|(_, c)| c.iter().all(|p| p.1 > 0.0));
    let series = curves
        .into_iter()
        .map(|(label, c)| Series::line(label, c.iter().map(|p| (p.0, p.1)).collect()))
        .collect();
    LineChart::new(
        format!("{}: bus bandwidth against message size", run.scenario),
        Axis::new("message size", true, decimal_bytes),
        Axis::new("busbw", positive, |v| format!("{} GB/s", chart::plain(v))),
        series,
    )
    .svg(width)
}

/// A tick of the size axis, whose log ticks fall on powers of ten: `10 B`, `1 kB`, `100 MB`.
fn decimal_bytes(v: f64) -> String {
    let (scale, unit) = [(1e9, "GB"), (1e6, "MB"), (1e3, "kB")]
        .into_iter()
        .find(|(s, _)| v >= *s)
        .unwrap_or((1.0, "B"));
    format!("{} {unit}", chart::plain(v / scale))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_per_algorithm_and_none_without_curves() {
        let mut run = RunRecord::new("allreduce", Default::default(), vec![]);
        assert!(busbw_chart(&run, 600.0).is_none());
        run.derive_series(
            "ring_busbw_curve",
            serde_json::json!([[8, 0.001], [1024, 0.1], [1048576, 2.0]]),
        );
        run.derive_series(
            "parameter_server_busbw_curve",
            serde_json::json!([[8, 0.002], [1024, 0.1], [1048576, 1.0]]),
        );
        let svg = busbw_chart(&run, 600.0).expect("a chart");
        assert!(
            svg.contains("parameter-server") && svg.contains("ring"),
            "{svg}"
        );
        assert!(svg.contains("message size"));
        assert_eq!(decimal_bytes(1e3), "1 kB");
        assert_eq!(decimal_bytes(10.0), "10 B");
    }
}
