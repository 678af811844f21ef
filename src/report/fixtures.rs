//! Small reports built in code, for the report layer's unit tests.

use serde_json::Value;

use super::{Environment, GpuInfo, Report, RunRecord};

/// A run of `scenario` with whole-number `params` and `variants`, each three samples of 1 s.
pub(crate) fn run(scenario: &str, params: &[(&str, u64)], variants: &[&str]) -> RunRecord {
    let params = params
        .iter()
        .map(|(k, v)| (k.to_string(), Value::from(*v)))
        .collect();
    let mut run = RunRecord::new(scenario, params, vec![]);
    let summary = crate::harness::Summary::from_samples(&[1.0; 3]).expect("samples");
    run.add_variants(
        variants.iter().map(|v| v.to_string()).collect(),
        vec![summary; variants.len()],
        variants.iter().map(|_| None),
    );
    run
}

/// A run whose value is `v` and whose own interval is ±`half` (relative).
pub(crate) fn observed(v: f64, half: f64) -> super::noise::Observation {
    super::noise::Observation {
        value: v,
        lo: v * (1.0 - half),
        hi: v * (1.0 + half),
    }
}

/// A report of `runs` in this process's environment, without the machine's limits.
pub(crate) fn report(runs: Vec<RunRecord>) -> Report {
    let env = Environment::capture_without_limits(
        crate::engine::Mode::Threaded,
        GpuInfo::unavailable("x"),
    );
    Report::new(env, runs)
}

/// A report of run `s` with variant `v` (as [`run`] makes it) and the derived figures `derive`
/// adds.
pub(crate) fn deriving(derive: impl FnOnce(&mut RunRecord)) -> Report {
    let mut r = run("s", &[], &["v"]);
    derive(&mut r);
    report(vec![r])
}

/// The entries of run `s` whose variant `v` took `seconds` (three samples), as `ab` pairs them.
pub(crate) fn entries_taking(seconds: f64) -> Vec<super::compare::Entry> {
    let mut r = run("s", &[], &["v"]);
    r.variants[0].summary = crate::harness::Summary::from_samples(&[seconds; 3]).expect("samples");
    super::compare::run_entries(&r)
}

/// `n` pairs whose candidate is `ratio` times the base, on a base that drifts by up to 2×
/// between pairs (as this machine does) and with ±`jitter` noise inside each pair.
pub(crate) fn drifting(n: usize, ratio: f64, jitter: f64) -> Vec<(f64, f64)> {
    (0..n)
        .map(|i| {
            let drift = 1.0 + (i % 5) as f64 * 0.25;
            let wobble = 1.0 + jitter * (((i * 7) % 5) as f64 - 2.0) / 2.0;
            (drift, drift * ratio * wobble)
        })
        .collect()
}

/// A report of run `s` timing `seq` and `par` (seconds, three samples each), with `speedup` =
/// seq/par and `fraction_of_peak` (read against the machine's limits), on a machine in `state`.
pub(crate) fn timed(
    seq: f64,
    par: f64,
    fraction: f64,
    state: Option<crate::machine::RunState>,
) -> Report {
    use super::{Better, Figure, FigureSpec, Unit};
    let mut r = run("s", &[], &["seq", "par"]);
    for (v, t) in r.variants.iter_mut().zip([seq, par]) {
        v.summary = crate::harness::Summary::from_samples(&[t; 3]).expect("samples");
    }
    let ratio = Figure::new(Unit::Ratio, Better::Higher);
    r.derive_as("speedup", seq / par, ratio);
    let against = FigureSpec::new("fraction_of_peak", Unit::Number, Better::Higher);
    r.record(against.against_limits(), fraction);
    if let Some(state) = state {
        r.record_state(state);
    }
    report(vec![r])
}

/// Limits of which only the FMA peak was measured: `per_core` and `all_cores` GFLOP/s.
pub(crate) fn fma_limits(per_core: f64, all_cores: f64) -> crate::machine::Limits {
    use crate::machine::{FmaPeak, Limits, Probe};
    let mut limits = Limits::not_measured("test");
    limits.fma = Probe::Measured(FmaPeak::of_two_cores(per_core, all_cores));
    limits
}

/// A history of `n` reports of the CI suite's shape (5 runs, 4 variants and 2 derived figures
/// each), two reruns per commit, a day per commit: every time wanders by ±`wander` from run
/// to run (a fixed pattern, no randomness), and the machine's FMA probe by 1.3–1.8× as it does
/// under load.
pub(crate) fn history(n: usize, wander: f64) -> super::history::History {
    use super::{Better, Figure, Unit};
    let ratio = Figure::new(Unit::Ratio, Better::Higher);
    let seconds = Figure::new(Unit::Seconds, Better::Lower);
    let reports = (0..n)
        .map(|i| {
            let jitter = 1.0 + wander * (((i * 7919) % 13) as f64 / 6.0 - 1.0);
            let runs = (0..5)
                .map(|s| {
                    let mut r = run(
                        &format!("scenario{s}"),
                        &[("size", 100)],
                        &["a", "b", "c", "d"],
                    );
                    for (k, v) in r.variants.iter_mut().enumerate() {
                        let t = 1e-3 * (1 + k) as f64 * jitter;
                        v.summary = crate::harness::Summary::from_samples(&[t * 0.99, t, t * 1.01])
                            .expect("samples");
                    }
                    r.derive_as("speedup", 2.0 * jitter, ratio);
                    r.derive_as("per_op_s", 1e-6 * jitter, seconds);
                    r
                })
                .collect();
            let mut report = report(runs);
            report.environment.started_at =
                super::environment::rfc3339_from_unix(1_700_000_000 + 43_200 * i as i64);
            report.tool.git_commit = format!("{:07x}", 0xabc0000 + i / 2);
            let per_core = [100.0, 180.0, 130.0, 75.0][i % 4];
            report.environment.limits = Some(fma_limits(per_core, 200.0));
            super::history::Dated {
                name: format!("r{i}.json"),
                report,
            }
        })
        .collect();
    super::history::History::new(reports, Vec::new())
}
