//! The machine's limits as figures to follow over reports: a probe that moved may mean
//! another machine, or only a loaded one (the FMA and STREAM probes of one host read 1.3–1.8×
//! apart under load). Which it is takes the probe's own spread over reruns, which
//! `report::identity` judges with the noise model; this file only names the figures.

use crate::units::{human_gbytes_per_s, human_gflops, human_ghz, human_time};

use super::limits::Limits;

/// The smallest move of a probe that can be the machine's, beside its spread: two quiet
/// measurements of one limit read within about ±10% (the best of several loops).
pub const LIMIT_TOLERANCE: f64 = 0.25;

/// How a limit's value is worded (`187.0 GFLOP/s`).
pub type Words = fn(f64) -> String;

/// One measured limit: its name, value and how its value is worded.
#[derive(Debug, Clone, Copy)]
pub struct ProbeFigure {
    pub what: &'static str,
    pub value: f64,
    pub words: Words,
}

/// The limits `l` measured, positive and finite, in a fixed order.
pub fn probe_figures(l: &Limits) -> Vec<ProbeFigure> {
    let fma = l.fma.measured();
    let memory = l.memory.measured();
    let all: [(&'static str, Option<f64>, Words); 6] = [
        (
            "f32 FMA peak per core",
            fma.map(|f| f.per_core_gflops),
            human_gflops,
        ),
        (
            "f32 FMA peak on all cores",
            fma.map(|f| f.all_cores_gflops),
            human_gflops,
        ),
        ("clock", l.clock.measured().map(|c| c.ghz), human_ghz),
        (
            "memory copy on all threads",
            memory.map(|m| m.copy.all_threads_gbytes_per_s),
            human_gbytes_per_s,
        ),
        (
            "cache line between cores",
            l.line.measured().map(|l| l.one_way_s),
            human_time,
        ),
        (
            "closure handed to a thread",
            l.channel.measured().map(|c| c.per_op_s),
            human_time,
        ),
    ];
    all.into_iter()
        .filter_map(|(what, value, words)| {
            let value = value.filter(|v| *v > 0.0 && v.is_finite())?;
            Some(ProbeFigure { what, value, words })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::{Clock, FmaPeak, Probe};

    #[test]
    fn only_measured_limits_are_figures() {
        let mut l = Limits::not_measured("test");
        assert!(probe_figures(&l).is_empty());
        l.fma = Probe::Measured(FmaPeak::of_two_cores(187.0, 374.0));
        l.clock = Probe::Measured(Clock {
            ghz: 0.0,
            method: String::new(),
        });
        let f = probe_figures(&l);
        let named: Vec<(&str, String)> = f.iter().map(|p| (p.what, (p.words)(p.value))).collect();
        assert_eq!(
            named,
            [
                ("f32 FMA peak per core", "187.0 GFLOP/s".to_string()),
                ("f32 FMA peak on all cores", "374.0 GFLOP/s".to_string()),
            ]
        );
    }
}
