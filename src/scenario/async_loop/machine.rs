//! The machine beside the engine, measured in the same run: the channel hand-off (a hand-off to
//! a thread with no engine) and the one-way latency of a cache line between two CPUs, before
//! the samples, after each round of them and after them. A VM's host changes that latency
//! from minute to minute, and every op moves a few lines between the pushing core and the
//! worker's, so a run whose rounds saw two latencies says so and quotes async's cost in each.

use std::time::Duration;

use super::figures::*;
use super::{per_op, Timed};
use crate::harness::stats::median;
use crate::report::{FigureSpec, RunRecord};
use crate::units::human_time;

/// Record a machine reference time measured beside the samples (`reference`, in seconds)
/// and async's cost per op as a multiple of it (`ratio`); returns async's cost per op.
fn record_reference(
    run: &mut RunRecord,
    n: u64,
    reference: (FigureSpec, f64),
    ratio: FigureSpec,
) -> f64 {
    let (spec, seconds) = reference;
    run.record(spec, seconds);
    let async_time = per_op(run, Timed::Async, n);
    run.record(ratio, async_time / seconds);
    async_time
}

/// Rounds of the channel hand-off (each of `--iterations` closures); the median is quoted.
pub(super) const FLOOR_ROUNDS: usize = 15;

/// The engine's per-op cost against the machine's cost of handing work to a thread,
/// measured in the same run ([`floor::channel_round`]). Not a bound the engine cannot beat
/// (it could batch where the channel does not), so the sentence claims none.
pub(super) fn derive_floor(run: &mut RunRecord, n: u64, floor: f64) {
    let async_time = record_reference(
        run,
        n,
        (CHANNEL_HANDOFF_PER_OP_S, floor),
        ASYNC_OVER_CHANNEL_RATIO,
    );
    let push = per_op(run, Timed::PushOnly, n);
    run.explanation_detail.push(format!(
        "for reference, measured beside the run: {n} boxed closures sent through a channel to one \
         other thread, which runs and frees them, took {} each here (median of {FLOOR_ROUNDS} \
         rounds): handing work to a thread, with no dependency tracking, no output tensor and no \
         bookkeeping (a reference, not a bound: an engine may batch where the channel does not). \
         async's {} per op is {:.2}× that, push-only's {} is {:.2}×.",
        human_time(floor),
        human_time(async_time),
        async_time / floor,
        human_time(push),
        push / floor,
    ));
}

/// How long the engine is left idle before the line latency is measured (its workers park).
pub(super) const LINE_QUIET: Duration = Duration::from_millis(5);

/// Rounds of [`crate::machine::line::line_round`] before and after the samples.
pub(super) const LINE_ROUNDS: usize = 5;

/// Before and after differing by more than this factor, the run is flagged as spanning two
/// regimes of the host.
const LINE_SHIFT: f64 = 1.5;

/// The probes of the cross-core line latency around the samples, in seconds per hop.
pub(super) struct LineProbes {
    /// [`LINE_ROUNDS`] rounds just before the samples.
    pub(super) before: Vec<f64>,
    /// One round after each round of samples, in order.
    pub(super) each_round: Vec<f64>,
    /// [`LINE_ROUNDS`] rounds just after the samples.
    pub(super) after: Vec<f64>,
}

/// The latency of a cache line between two cores, measured just before the samples, after
/// each round of them and just after them, beside async's cost per op: on a VM the host
/// changes that latency from minute to minute (it moves the vCPUs), and every op moves several
/// lines between the pushing thread and the worker, so a reader needs it to compare two runs'
/// per-op figures, and to know whether one run's samples all saw the same machine. `None` on
/// a machine with one CPU.
pub(super) fn derive_line(run: &mut RunRecord, n: u64, probes: Option<LineProbes>) {
    let Some(probes) = probes else {
        run.notes.push(
            "the cross-core line latency was not measured: this machine offers one CPU".into(),
        );
        return;
    };
    let med = |v: &[f64]| median(v).unwrap_or(f64::NAN);
    let (b, a) = (med(&probes.before), med(&probes.after));
    run.record(CROSS_CORE_LINE_BEFORE_S, b);
    run.record(CROSS_CORE_LINE_AFTER_S, a);
    run.derive_detail_series(
        CROSS_CORE_LINE_EACH_ROUND_S,
        serde_json::json!(probes.each_round),
    );
    // The latency on either side of each round: round i lies between points i and i + 1.
    let points: Vec<f64> = std::iter::once(b)
        .chain(probes.each_round.iter().copied())
        .chain(std::iter::once(a))
        .collect();
    let unusable = points
        .iter()
        .filter(|p| !(p.is_finite() && **p > 0.0))
        .count();
    if unusable > 0 {
        // Nothing says which regime those rounds ran in: no latency is quoted.
        run.notes.push(format!(
            "{unusable} of the {} probes of the cross-core line latency gave no figure: async's \
             cost per op is not quoted against it",
            points.len()
        ));
        return;
    }
    let (lo, hi) = points.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &p| {
        (lo.min(p), hi.max(p))
    });
    let shift = hi / lo;
    let steady = shift <= LINE_SHIFT;
    if !steady {
        // No single latency describes the run: a median of all rounds would fall between
        // the two regimes, at a value the machine never showed.
        let async_time = per_op(run, Timed::Async, n);
        run.notes.push(format!(
            "the host's cross-core latency changed {shift:.1}× during the run (from {} to {} \
             across the probes before, between and after the rounds of samples): the per-op \
             figures of this run mix two regimes of the machine",
            human_time(lo),
            human_time(hi),
        ));
        run.explanation_detail.push(format!(
            "a cache line took {} to move one way between two threads' cores just before the \
             samples and {} just after (median of {LINE_ROUNDS} rounds each), and from {} to {} \
             in the probes between rounds: the host changed during the run, so async's {} per \
             op is not quoted against any of them.",
            human_time(b),
            human_time(a),
            human_time(lo),
            human_time(hi),
            human_time(async_time),
        ));
        derive_by_regime(run, n, &points, (lo * hi).sqrt());
        return;
    }
    let all: Vec<f64> = probes
        .before
        .iter()
        .chain(&probes.each_round)
        .chain(&probes.after)
        .copied()
        .collect();
    let line = med(&all);
    let async_time = record_reference(run, n, (CROSS_CORE_LINE_S, line), ASYNC_OVER_LINE_RATIO);
    run.explanation_detail.push(format!(
        "a cache line took {} to move one way between two threads' cores here ({} before the \
         samples, {} after, median of {LINE_ROUNDS} rounds each; every probe, before, between \
         and after the rounds of samples, within {LINE_SHIFT}× of the others). async's {} per \
         op is {:.1}× that: an op moves several lines between the pushing thread and the worker \
         (the op, its output, reference and memory counts), so on a VM, whose host changes this \
         latency from minute to minute, compare per-op figures between runs only beside it.",
        human_time(line),
        human_time(b),
        human_time(a),
        human_time(async_time),
        async_time / line,
    ));
}

/// For a run whose line latency changed: async's cost per op in the rounds that ran wholly
/// below `threshold` (`async_per_op_low_line_s`) and wholly above it
/// (`async_per_op_high_line_s`), judged by the probes on either side of each round (`points`,
/// one more than the rounds), so a reader sees what each regime cost instead of a median of
/// both. Rounds with a probe on each side of the threshold are left out of both.
fn derive_by_regime(run: &mut RunRecord, n: u64, points: &[f64], threshold: f64) {
    let Some(samples) = run
        .variants
        .iter()
        .find(|v| v.name == Timed::Async.name())
        .map(|v| v.summary.samples_s.clone())
    else {
        return;
    };
    let (mut low, mut high, mut low_line, mut high_line) = (vec![], vec![], vec![], vec![]);
    for (sample, side) in samples.iter().zip(points.windows(2)) {
        let (x, y) = (side[0], side[1]);
        if x < threshold && y < threshold {
            low.push(sample / n as f64);
            low_line.extend([x, y]);
        } else if x >= threshold && y >= threshold {
            high.push(sample / n as f64);
            high_line.extend([x, y]);
        }
    }
    let mut parts = Vec::new();
    for (spec, per_op, line, label) in [
        (ASYNC_PER_OP_LOW_LINE_S, &low, &low_line, "lower"),
        (ASYNC_PER_OP_HIGH_LINE_S, &high, &high_line, "higher"),
    ] {
        if let (Some(cost), Some(line)) = (median(per_op), median(line)) {
            run.record(spec, cost);
            parts.push(format!(
                "{} of the {} rounds ran wholly at the {label} latency (about {}), async {} per op",
                per_op.len(),
                samples.len(),
                human_time(line),
                human_time(cost),
            ));
        }
    }
    let straddled = samples.len().min(points.len().saturating_sub(1)) - low.len() - high.len();
    if straddled > 0 {
        parts.push(format!("{straddled} straddled the change"));
    }
    if !parts.is_empty() {
        run.explanation_detail.push(format!(
            "By the probes on either side of each round: {}.",
            parts.join("; ")
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Better;

    /// A run whose async variant took 1 ms for 1000 ops (1 µs per op).
    fn run_with_async() -> RunRecord {
        let mut run = RunRecord::new("async", serde_json::Map::new(), vec![]);
        let one_ms = crate::harness::Summary::from_samples(&[1e-3; 5]).expect("samples");
        run.add_variants(vec!["async".into()], vec![one_ms], [None]);
        run
    }

    fn probes(before: Vec<f64>, each_round: Vec<f64>, after: Vec<f64>) -> Option<LineProbes> {
        Some(LineProbes {
            before,
            each_round,
            after,
        })
    }

    #[test]
    fn the_line_latency_is_quoted_beside_async_and_a_shift_is_flagged() {
        let figure = |run: &RunRecord, k: &str| run.derived[k].as_f64().expect(k);
        // Steady enough (250 ns before, 200 ns after and between rounds): the figure is the
        // median of every probe, 200 ns, and async's 1 µs per op is 5 lines.
        let mut run = run_with_async();
        derive_line(
            &mut run,
            1000,
            probes(vec![250e-9; 3], vec![200e-9; 5], vec![200e-9; 5]),
        );
        assert!((figure(&run, "cross_core_line_s") - 200e-9).abs() < 1e-15);
        assert!((figure(&run, "async_over_line_ratio") - 5.0).abs() < 1e-9);
        assert!(run.notes.is_empty(), "{:?}", run.notes);
        assert_eq!(
            run.derived["cross_core_line_each_round_s"]
                .as_array()
                .unwrap()
                .len(),
            5
        );
        // The latency describes the host; only the engine's multiple of it is a score.
        assert_eq!(run.figure("cross_core_line_s").better, Better::Neither);
        assert_eq!(run.figure("async_over_line_ratio").better, Better::Lower);
        let text = run.explanation_detail.join(" ");
        assert!(text.contains("1.000 µs per op is 5.0× that"), "{text}");
        // The host moved the vCPUs between the two measurements: flagged, and no figure
        // between the two regimes is quoted as the latency.
        let mut run = run_with_async();
        derive_line(
            &mut run,
            1000,
            probes(vec![50e-9; 5], vec![50e-9; 5], vec![240e-9; 5]),
        );
        assert!((figure(&run, "cross_core_line_before_s") - 50e-9).abs() < 1e-15);
        assert!((figure(&run, "cross_core_line_after_s") - 240e-9).abs() < 1e-15);
        assert!(
            run.notes.iter().any(|n| n.contains("changed 4.8×")),
            "{:?}",
            run.notes
        );
        assert!(!run.derived.contains_key("cross_core_line_s"));
        assert!(!run.derived.contains_key("async_over_line_ratio"));
        let text = run.explanation_detail.join(" ");
        assert!(
            text.contains("50.00 ns to move one way") && text.contains("not quoted"),
            "{text}"
        );
        // A probe with no usable figure: the run is not called steady.
        let mut run = run_with_async();
        derive_line(
            &mut run,
            1000,
            probes(vec![50e-9; 5], vec![f64::NAN], vec![50e-9; 5]),
        );
        assert!(!run.derived.contains_key("cross_core_line_s"));
        assert!(
            run.notes.iter().any(|n| n.contains("1 of the 3 probes")),
            "{:?}",
            run.notes
        );
        // One CPU: no figure, and a note that says why.
        let mut run = run_with_async();
        derive_line(&mut run, 1000, None);
        assert!(!run.derived.contains_key("cross_core_line_s"));
        assert!(run.notes[0].contains("one CPU"), "{:?}", run.notes);
    }

    #[test]
    fn a_shift_between_rounds_is_flagged_and_each_regime_quoted_apart() {
        let figure = |run: &RunRecord, k: &str| run.derived[k].as_f64().expect(k);
        // Before and after agree (40 ns), but the host was slow (200 ns) around rounds 3 and
        // 4 of six: the before/after pair alone would call this run steady.
        let mut run = RunRecord::new("async", serde_json::Map::new(), vec![]);
        let samples = [0.3e-3, 0.3e-3, 0.6e-3, 0.6e-3, 0.3e-3, 0.3e-3];
        let summary = crate::harness::Summary::from_samples(&samples).expect("samples");
        run.add_variants(vec!["async".into()], vec![summary], [None]);
        // Probes: before, after rounds 1..6, after. Round i lies between probes i and i + 1:
        // rounds 1, 2 and 6 see 40 ns on both sides, round 4 200 ns on both, rounds 3 and 5
        // a probe on each side of the change.
        let each_round = vec![40e-9, 40e-9, 200e-9, 200e-9, 40e-9, 40e-9];
        derive_line(
            &mut run,
            1000,
            probes(vec![40e-9; 5], each_round, vec![40e-9; 5]),
        );
        assert!(
            run.notes.iter().any(|n| n.contains("changed 5.0×")),
            "{:?}",
            run.notes
        );
        assert!(!run.derived.contains_key("cross_core_line_s"));
        // Rounds 1, 2 and 6 are low (0.3 µs per op), round 4 high (0.6 µs); 3 and 5 straddle.
        assert!((figure(&run, "async_per_op_low_line_s") - 0.3e-6).abs() < 1e-15);
        assert!((figure(&run, "async_per_op_high_line_s") - 0.6e-6).abs() < 1e-15);
        let text = run.explanation_detail.join(" ");
        assert!(
            text.contains("3 of the 6 rounds ran wholly at the lower latency")
                && text.contains("1 of the 6 rounds ran wholly at the higher latency")
                && text.contains("2 straddled the change"),
            "{text}"
        );
    }
}
