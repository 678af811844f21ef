//! Two machines' limits side by side, for `compare` and `ab`: a figure that moved may have
//! moved with the machine (another host, a slower clock) rather than with the code. Each limit
//! measured on both sides whose figures differ by more than [`LIMIT_TOLERANCE`] is named.

use crate::units::{human_gbytes_per_s, human_gflops, human_ghz, human_time};

use super::limits::Limits;
use super::probe::Probe;

/// How far apart two measurements of one limit may be and still be called the same machine:
/// the FMA and memory probes of one quiet host read within about ±10% from run to run (the
/// best of several loops), so a 25% difference is the machine's.
pub const LIMIT_TOLERANCE: f64 = 0.25;

/// One line per limit measured on both sides that differs by more than [`LIMIT_TOLERANCE`]:
/// `"f32 FMA peak on all cores: 374.1 GFLOP/s vs 187.0 GFLOP/s (0.50×)"`.
pub fn limits_differences(base: &Limits, new: &Limits) -> Vec<String> {
    let mut out = Vec::new();
    let mut differ = |what: &str, b: Option<f64>, n: Option<f64>, words: fn(f64) -> String| {
        let (Some(b), Some(n)) = (b, n) else { return };
        if !(b.is_finite() && n.is_finite() && b > 0.0 && n > 0.0) {
            return;
        }
        let ratio = n / b;
        if (ratio - 1.0).abs() > LIMIT_TOLERANCE {
            out.push(format!(
                "{what}: {} vs {} ({ratio:.2}×)",
                words(b),
                words(n)
            ));
        }
    };
    let fma = |l: &Limits, f: fn(&super::FmaPeak) -> f64| measured(&l.fma).map(f);
    differ(
        "f32 FMA peak per core",
        fma(base, |f| f.per_core_gflops),
        fma(new, |f| f.per_core_gflops),
        human_gflops,
    );
    differ(
        "f32 FMA peak on all cores",
        fma(base, |f| f.all_cores_gflops),
        fma(new, |f| f.all_cores_gflops),
        human_gflops,
    );
    differ(
        "clock",
        measured(&base.clock).map(|c| c.ghz),
        measured(&new.clock).map(|c| c.ghz),
        human_ghz,
    );
    let copy = |l: &Limits| measured(&l.memory).map(|m| m.copy.all_threads_gbytes_per_s);
    differ(
        "memory copy on all threads",
        copy(base),
        copy(new),
        human_gbytes_per_s,
    );
    differ(
        "cache line between cores",
        measured(&base.line).map(|l| l.one_way_s),
        measured(&new.line).map(|l| l.one_way_s),
        human_time,
    );
    differ(
        "closure handed to a thread",
        measured(&base.channel).map(|c| c.per_op_s),
        measured(&new.channel).map(|c| c.per_op_s),
        human_time,
    );
    out
}

fn measured<T>(p: &Probe<T>) -> Option<&T> {
    p.measured()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::{Clock, FmaPeak, VectorUnit};

    fn limits(per_core: f64, ghz: f64) -> Limits {
        let mut l = Limits::not_measured("test");
        l.fma = Probe::Measured(FmaPeak {
            unit: VectorUnit::Avx512,
            per_core_gflops: per_core,
            all_cores_gflops: 2.0 * per_core,
            cores: 2,
            pinned: true,
            method: String::new(),
        });
        l.clock = Probe::Measured(Clock {
            ghz,
            method: String::new(),
        });
        l
    }

    #[test]
    fn the_same_machine_within_its_noise_differs_in_nothing() {
        assert!(limits_differences(&limits(187.0, 3.1), &limits(200.0, 2.9)).is_empty());
    }

    #[test]
    fn another_machine_is_named_limit_by_limit() {
        let d = limits_differences(&limits(187.0, 3.1), &limits(93.5, 3.1));
        assert_eq!(
            d,
            [
                "f32 FMA peak per core: 187.0 GFLOP/s vs 93.5 GFLOP/s (0.50×)",
                "f32 FMA peak on all cores: 374.0 GFLOP/s vs 187.0 GFLOP/s (0.50×)",
            ]
        );
        let d = limits_differences(&limits(187.0, 2.0), &limits(187.0, 3.0));
        assert_eq!(d, ["clock: 2.00 GHz vs 3.00 GHz (1.50×)"]);
    }

    #[test]
    fn a_limit_measured_on_one_side_only_is_not_compared() {
        let none = Limits::not_measured("debug build");
        assert!(limits_differences(&limits(187.0, 3.1), &none).is_empty());
        assert!(limits_differences(&none, &limits(93.0, 1.0)).is_empty());
    }
}
