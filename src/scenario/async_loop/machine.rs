//! async's cost per op beside the machine's limits: the latency of a cache line between two
//! cores and the cost of handing a closure to another thread through a channel. `async` does not
//! measure them: it reads the process's limits ([`crate::machine::limits()`], measured once,
//! at the start of the process), the same figures `parbench devices --probe` prints and the
//! report's environment records.

use super::{per_op, Timed};
use crate::machine::Limits;
use crate::report::RunRecord;
use crate::units::human_time;

/// The sentence that sets async's cost per op against the limits measured (none where neither
/// was, as in a debug build).
pub(super) fn derive_against_limits(run: &mut RunRecord, n: u64, limits: &Limits) {
    let usable = |s: f64| (s.is_finite() && s > 0.0).then_some(s);
    let line = limits.line.measured().and_then(|l| usable(l.one_way_s));
    let channel = limits.channel.measured().and_then(|c| usable(c.per_op_s));
    let async_time = per_op(run, Timed::Async, n);
    let mut parts = Vec::new();
    if let Some(line) = line {
        parts.push(format!(
            "{:.1}× a cache line's trip between two cores ({} one way): an op moves several \
             lines between the pushing thread and the worker",
            async_time / line,
            human_time(line),
        ));
    }
    if let Some(channel) = channel {
        parts.push(format!(
            "{:.2}× a closure handed to another thread through a channel, with no engine ({} \
             each): a reference, not a bound, as an engine may batch where the channel does not",
            async_time / channel,
            human_time(channel),
        ));
    }
    if parts.is_empty() || !async_time.is_finite() {
        return;
    }
    run.explanation_detail.push(format!(
        "against this machine's limits, measured once at the start of the process (`parbench \
         devices --probe`): async's {} per op is {}. On a VM the host changes the cache line's \
         latency from minute to minute, so compare two runs' per-op figures beside their \
         reports' limits.",
        human_time(async_time),
        parts.join("; "),
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::{ChannelHandoff, LineLatency, Probe};

    /// A run whose async variant took 1 ms for 1000 ops (1 µs per op).
    fn run_with_async() -> RunRecord {
        let mut run = RunRecord::new("async", serde_json::Map::new(), vec![]);
        let one_ms = crate::harness::Summary::from_samples(&[1e-3; 5]).expect("samples");
        run.add_variants(vec!["async".into()], vec![one_ms], [None]);
        run
    }

    #[test]
    fn async_is_quoted_against_the_limits_measured_and_records_no_figure() {
        let mut limits = Limits::not_measured("test");
        limits.line = Probe::Measured(LineLatency {
            one_way_s: 200e-9,
            method: String::new(),
        });
        limits.channel = Probe::Measured(ChannelHandoff {
            per_op_s: 400e-9,
            method: String::new(),
        });
        let mut run = run_with_async();
        derive_against_limits(&mut run, 1000, &limits);
        let text = run.explanation_detail.join(" ");
        for quoted in [
            "async's 1.000 µs per op is 5.0× a cache line's trip between two cores (200.0 ns \
             one way)",
            "2.50× a closure handed to another thread through a channel, with no engine (400.0 \
             ns each)",
        ] {
            assert!(text.contains(quoted), "{quoted}\n{text}");
        }
        assert!(run.derived.is_empty(), "{:?}", run.derived);

        // Only the line measured (the channel probe failed): only the line is quoted.
        limits.channel = Probe::NotMeasured("the channel probe failed".into());
        let mut run = run_with_async();
        derive_against_limits(&mut run, 1000, &limits);
        let text = run.explanation_detail.join(" ");
        assert!(
            text.contains("5.0× a cache line") && !text.contains("channel,"),
            "{text}"
        );

        // A debug build measures no limit: no sentence.
        let mut run = run_with_async();
        derive_against_limits(&mut run, 1000, &Limits::not_measured("debug build"));
        assert!(
            run.explanation_detail.is_empty(),
            "{:?}",
            run.explanation_detail
        );
    }
}
