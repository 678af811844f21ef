//! Which machine a report was measured on: its identity, as asv names machines. The CPU
//! model, the cores, the memory, the kernel, the compiler, the engine, the GPU and the name
//! the user gave it (`--machine`) say what a timing can be compared with; the host name does
//! not (a CI runner's changes every job). The machine's probed limits are not part of it:
//! under load they wander 1.3–1.8×, so a probe counts as a change of environment only where
//! it moves beyond its own spread over reruns ([`environment_differences`]).

use std::collections::BTreeMap;

use super::noise::{judge, Call, Observation, Rule, Spread};
use super::{Environment, Report};
use crate::machine::drift::{probe_figures, ProbeFigure, Words, LIMIT_TOLERANCE};

/// What makes two reports' timings comparable.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Identity {
    pub machine: Option<String>,
    pub cpu: String,
    pub cores: usize,
    /// Total memory in whole GiB (the kernel's count moves by megabytes between boots).
    pub memory_gib: u64,
    /// The OS, architecture and kernel release.
    pub kernel: String,
    pub compiler: String,
    pub engine: String,
    pub gpu: String,
}

impl Identity {
    pub fn of(env: &Environment) -> Identity {
        Identity {
            machine: env.machine.clone(),
            cpu: env.cpu_model.clone(),
            cores: env.cores,
            memory_gib: (env.memory_bytes as f64 / f64::from(1u32 << 30)).round() as u64,
            kernel: env.os.clone(),
            compiler: env.rustc.clone(),
            engine: env.engine.clone(),
            gpu: env.gpu.name.clone().unwrap_or_else(|| "none".into()),
        }
    }

    /// `what: 'this' vs 'other'` for each part that differs; empty for the same machine.
    pub fn differences(&self, other: &Identity) -> Vec<String> {
        let name = |m: &Option<String>| m.clone().unwrap_or_else(|| "unnamed".into());
        [
            ("machine", name(&self.machine), name(&other.machine)),
            ("CPU", self.cpu.clone(), other.cpu.clone()),
            ("cores", self.cores.to_string(), other.cores.to_string()),
            (
                "memory",
                format!("{} GiB", self.memory_gib),
                format!("{} GiB", other.memory_gib),
            ),
            ("kernel", self.kernel.clone(), other.kernel.clone()),
            ("compiler", self.compiler.clone(), other.compiler.clone()),
            ("engine", self.engine.clone(), other.engine.clone()),
            ("GPU", self.gpu.clone(), other.gpu.clone()),
        ]
        .into_iter()
        .filter(|(_, a, b)| a != b)
        .map(|(what, a, b)| format!("{what}: '{a}' vs '{b}'"))
        .collect()
    }
}

/// Each report's probed limits, by name.
fn probes(reports: &[&Report]) -> BTreeMap<&'static str, (Vec<Observation>, Words)> {
    let mut out = BTreeMap::new();
    for limits in reports.iter().filter_map(|r| r.environment.limits.as_ref()) {
        for ProbeFigure { what, value, words } in probe_figures(limits) {
            out.entry(what)
                .or_insert_with(|| (Vec::new(), words))
                .0
                .push(Observation::exact(value));
        }
    }
    out
}

/// How two sides' machines differ: their identities (the first report of each side), and
/// each probe that moved by more than [`LIMIT_TOLERANCE`] and beyond its own spread over the
/// sides' reruns (`learned` adds spreads learned elsewhere, by probe name). With one report a
/// side a probe has no spread, and its move is not the machine's: empty when they match.
pub fn environment_differences(
    base: &[&Report],
    new: &[&Report],
    learned: &dyn Fn(&str) -> Spread,
) -> Vec<String> {
    let (Some(b0), Some(n0)) = (base.first(), new.first()) else {
        return Vec::new();
    };
    let mut out = Identity::of(&b0.environment).differences(&Identity::of(&n0.environment));
    let (pb, pn) = (probes(base), probes(new));
    let rule = Rule::new(LIMIT_TOLERANCE, pb.len());
    for (what, (b, words)) in &pb {
        let Some((n, _)) = pn.get(what) else {
            continue;
        };
        let j = judge(b, n, learned(what), rule);
        if j.p.is_some() && matches!(j.call, Call::Up | Call::Down) {
            out.push(format!(
                "{what}: {} vs {} ({:.2}×, beyond its spread over reruns)",
                words(j.base),
                words(j.new),
                j.new / j.base
            ));
        }
    }
    out
}

/// The probes of `reports` as series by name, for a history to follow.
pub fn probe_series(reports: &[&Report]) -> BTreeMap<&'static str, Vec<Option<f64>>> {
    let mut out: BTreeMap<&'static str, Vec<Option<f64>>> = BTreeMap::new();
    for (i, r) in reports.iter().enumerate() {
        let figures = r
            .environment
            .limits
            .as_ref()
            .map(probe_figures)
            .unwrap_or_default();
        for f in figures {
            let s = out.entry(f.what).or_default();
            s.resize(i, None);
            s.push(Some(f.value));
        }
    }
    for s in out.values_mut() {
        s.resize(reports.len(), None);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixtures;

    fn with_fma(per_core: f64) -> Report {
        let mut r = fixtures::report(vec![fixtures::run("s", &[], &["v"])]);
        r.environment.limits = Some(fixtures::fma_limits(per_core, 2.0 * per_core));
        r
    }

    #[test]
    fn the_identity_names_what_differs_and_not_the_host() {
        let a = with_fma(187.0);
        let mut b = with_fma(187.0);
        b.environment.host = "runner-42".into();
        b.environment.memory_bytes = a.environment.memory_bytes + (1 << 20);
        let none = |_: &str| Spread::default();
        assert!(environment_differences(&[&a], &[&b], &none).is_empty());
        b.environment.machine = Some("ci-2core".into());
        b.environment.cores = a.environment.cores + 8;
        let d = environment_differences(&[&a], &[&b], &none);
        assert_eq!(d.len(), 2, "{d:?}");
        assert_eq!(d[0], "machine: 'unnamed' vs 'ci-2core'");
        assert!(d[1].starts_with("cores: "), "{d:?}");
    }

    fn refs(s: &[Report]) -> Vec<&Report> {
        s.iter().collect()
    }

    #[test]
    fn a_probe_moves_the_environment_only_beyond_its_spread() {
        let none = |_: &str| Spread::default();
        // One report a side: a probe read at half under load is not another machine.
        let (a, b) = (with_fma(187.0), with_fma(93.5));
        assert!(environment_differences(&[&a], &[&b], &none).is_empty());
        // Three a side, each within 2% of its level: the halving is the machine's.
        let side = |v: f64| [with_fma(v), with_fma(v * 1.02), with_fma(v * 0.99)];
        let (base, new) = (side(187.0), side(93.5));
        let d = environment_differences(&refs(&base), &refs(&new), &none);
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(d[0].contains("(0.50×, beyond its spread"), "{d:?}");
        // Three a side that wander 1.3–1.8× under load: no change of machine.
        let wander = [with_fma(187.0), with_fma(110.0), with_fma(150.0)];
        let wander2 = [with_fma(104.0), with_fma(180.0), with_fma(140.0)];
        assert!(environment_differences(&refs(&wander), &refs(&wander2), &none).is_empty());
    }

    #[test]
    fn probe_series_align_with_the_reports() {
        let (a, b) = (with_fma(100.0), fixtures::report(vec![]));
        let s = probe_series(&[&a, &b, &a]);
        assert_eq!(
            s.get("f32 FMA peak per core"),
            Some(&vec![Some(100.0), None, Some(100.0)])
        );
    }
}
