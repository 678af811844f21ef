//! `memory`'s live bytes over an epoch, a line per variant.

use crate::export::chart::{self, Axis, LineChart, Series};
use crate::report::RunRecord;

/// Live bytes over time (`<variant>_live_bytes` series of `[seconds, bytes]`, as `memory`
/// records them), a line per variant; `None` when the run has none. Bytes are shown in the
/// binary unit that suits the largest value, so ticks fall on round numbers of it.
pub fn memory_chart(run: &RunRecord, width: f64) -> Option<String> {
    let mut series = super::curves(run, "_live_bytes");
    // In the order of the variants, so lines keep the order of the table.
    let order = |name: &str| {
        run.variants
            .iter()
            .position(|v| v.name == name)
            .unwrap_or(usize::MAX)
    };
    series.sort_by_key(|(name, _)| order(name));
    let most = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.1))
        .fold(0.0, f64::max);
    let (unit, per) = [("GiB", 30), ("MiB", 20), ("KiB", 10)]
        .into_iter()
        .map(|(u, shift)| (u, (1u64 << shift) as f64))
        .find(|(_, per)| most >= *per)
        .unwrap_or(("bytes", 1.0));
    let series = series
        .into_iter()
        .map(|(label, c)| Series::line(label, c.iter().map(|p| (p.0, p.1 / per)).collect()))
        .collect();
    LineChart::new(
        format!("{}: live bytes over one epoch, per variant", run.scenario),
        Axis::new(
            "time since the epoch started (one more, untimed epoch of each variant)",
            false,
            crate::units::human_time,
        ),
        Axis::new(format!("live memory ({unit})"), false, chart::plain),
        series,
    )
    .svg(width)
}
