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

/// A report of `runs` in this process's environment, without the machine's limits.
pub(crate) fn report(runs: Vec<RunRecord>) -> Report {
    let env = Environment::capture_without_limits(
        crate::engine::Mode::Threaded,
        GpuInfo::unavailable("x"),
    );
    Report::new(env, runs)
}
