//! `allreduce`: the all-reduce alone, measured as nccl-tests measures it: for each message
//! size, the time of one all-reduce of float32 on k CPU devices of one engine, its algorithm
//! and bus bandwidth, and a check of every device's result against a float64 sum.
//!
//! Three algorithms on the engine ([`collective`]): the two that `data-parallel` trains with, `ring`
//! (reduce-scatter and all-gather over k chunks, each step an op on its receiver's device, so
//! chunks move at once on different devices) and `parameter-server` (a reduce onto device 0,
//! then a broadcast back), and `tree` (a binomial tree of whole-buffer steps, up then down).
//! Under `--backend mpi` ([`ranks`]) one rank per device: the ring and the parameter server
//! over point-to-point messages, and the MPI library's own `MPI_Allreduce`. All run out of
//! place, as nccl-tests does by default: each input stays as it is, so every timed run
//! reduces the same data.
//!
//! # Design: sizes in the report
//!
//! A report's runs are variants × figures, and `compare`, `ab` and the A/B gate match runs by
//! their parameters and variants by name. So each size is a variant per algorithm with a stable
//! name, `ring 1MiB`, `parameter-server 1MiB`, `tree 1MiB`, and its figures carry the same stem
//! (`ring_1MiB_busbw_gbytes_per_s`): two reports of the same `--sizes` compare size by size,
//! each with its own interval, and one run shows the whole curve, which the crossover needs.
//! Each size is sampled on its own (its variants interleaved), so a 1 GiB size does not
//! stretch the rounds of an 8 B one. A sweep over `--sizes` (`--set sizes=1K,1MiB`) gives one
//! size per run instead, for `plot`'s time-against-parameter charts.

mod engine;
mod explain;
mod measure;
#[cfg(feature = "mpi")]
mod ranks;

use std::time::Duration;

use self::explain::LESSON;
use super::backend::{Backend, BACKEND_PARAM, TIMEOUT_PARAM};
use super::kit::check_bytes;
use super::{Params, RunContext, Scenario, ScenarioError};
use crate::harness::SamplerConfig;
use crate::report::RunRecord;

pub struct Allreduce;

/// The largest size `--sizes` takes; what fits is decided by `validate`.
const MAX_SIZE: u64 = 64 << 30;

super::params::params! {
    /// The validated parameters of a run.
    struct Config {
        /// message sizes in bytes, each a whole number of float32 (8,4K,1MiB), or a range of
        /// powers of two (8..64MiB); K, M and G are binary
        // nccl-tests' sweep: -b 8 -e 1G -f 2.
        sizes: Vec<u64> = Sizes { max: MAX_SIZE, max_items: 64 }, "8..1GiB" => increasing;
        /// CPU devices of one engine taking part (engine backend; under MPI, the ranks)
        devices: usize = Int { min: 1, max: 64 }, "2";
        backend: Backend = BACKEND_PARAM;
        #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
        timeout: Duration = TIMEOUT_PARAM => Duration::from_secs_f64;
    }
}

/// `--sizes` in increasing order, without repeats.
fn increasing(mut sizes: Vec<u64>) -> Vec<u64> {
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

super::variant::variants! {
    pub enum Algorithm {
        /// Reduce-scatter + all-gather over k chunks.
        Ring = "ring",
        /// Reduce onto device 0, broadcast back.
        ParameterServer = "parameter-server",
        /// A binomial tree: reduce up, broadcast down, ⌈log₂ k⌉ levels each (engine).
        Tree = "tree",
        /// The MPI library's `MPI_Allreduce`, whatever algorithm it picks (MPI).
        MpiAllreduce = "mpi-allreduce",
    }
}

impl Algorithm {
    /// The algorithms a backend runs, in the order they are timed.
    pub fn of(backend: Backend) -> &'static [Algorithm] {
        use Algorithm::*;
        match backend {
            Backend::Engine => &[Ring, ParameterServer, Tree],
            Backend::Mpi => &[Ring, ParameterServer, MpiAllreduce],
        }
    }

    /// The variant of this algorithm at `bytes` (`ring 1MiB`).
    pub fn variant(self, bytes: u64) -> String {
        format!("{} {}", self.name(), size_label(bytes))
    }

    /// The stem of its figures at `bytes` (`ring_1MiB`).
    fn key(self, bytes: u64) -> String {
        format!("{}_{}", self.name().replace('-', "_"), size_label(bytes))
    }
}

/// A size as the report names it: `8B`, `1KiB`, `4MiB`, `1GiB`, or bytes where it is not a
/// whole number of the unit.
fn size_label(bytes: u64) -> String {
    for (unit, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    format!("{bytes}B")
}

static SPEC: super::Spec = super::Spec {
    name: "allreduce",
    about: "all-reduce of 8 B to 1 GiB on k devices or MPI ranks, ring vs parameter server vs tree or MPI_Allreduce: time, algbw, busbw (nccl-tests' figures), crossover",
    params: PARAMS,
    lesson: Some(LESSON),
    book: &[],
    sampling: SamplerConfig {
            warmup: 1,
            min_samples: 10,
            max_samples: 200,
            min_time: Duration::from_millis(200),
            max_time: Duration::from_secs(3),
        },
};

impl Scenario for Allreduce {
    fn spec(&self) -> &'static super::Spec {
        &SPEC
    }

    fn validate(&self, params: &Params) -> Result<(), ScenarioError> {
        let cfg = Config::of(params)?;
        if let Some(odd) = cfg.sizes.iter().find(|&&s| !s.is_multiple_of(4)) {
            return Err(ScenarioError::Input(format!(
                "allreduce: --sizes {odd} is not a whole number of float32 elements (a \
                 multiple of 4 bytes)"
            )));
        }
        cfg.backend.check_built("allreduce")?;
        // Each device's input and result, 2·k·S, of one size at a time; but the allocator
        // may keep a size's freed buffers while the next is allocated, so all of them count.
        // A rank holds a third buffer (what it receives) and this host may run --devices of
        // them.
        let per_device = match cfg.backend {
            Backend::Engine => 2,
            Backend::Mpi => 3,
        };
        let total = cfg.sizes.iter().try_fold(0u64, |t, &s| t.checked_add(s));
        let total = total.and_then(|t| t.checked_mul(per_device * cfg.devices as u64));
        check_bytes("allreduce's inputs and results", total)
    }

    fn distributed(&self, params: &Params) -> bool {
        Config::of(params).is_ok_and(|cfg| cfg.backend == Backend::Mpi)
    }

    fn run(&self, params: &Params, ctx: &RunContext) -> Result<RunRecord, ScenarioError> {
        let cfg = Config::of(params)?;
        match cfg.backend {
            #[cfg(feature = "mpi")]
            Backend::Mpi => ranks::run(self, params, &cfg, ctx),
            // `validate` refuses mpi in a build without the feature.
            _ => engine::run(self, params, &cfg, ctx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::RuntimeOptions;

    fn parse(given: &[(&str, &str)]) -> Result<Params, crate::scenario::ParamError> {
        let given: Vec<(String, String)> = given
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Params::parse("allreduce", PARAMS, &given)
    }

    #[test]
    fn labels_name_whole_units() {
        let labels: Vec<String> = [8, 1024, 1536, 4 << 20, 1 << 30, 3 << 30]
            .iter()
            .map(|&b| size_label(b))
            .collect();
        assert_eq!(labels, ["8B", "1KiB", "1536B", "4MiB", "1GiB", "3GiB"]);
    }

    #[test]
    fn sizes_take_suffixes_and_ranges() {
        let sizes = |given: &[_]| parse(given).unwrap().sizes("sizes").unwrap().to_vec();
        for (given, want) in [
            ("8,4K,1MiB,2mb", &[8, 4096, 1 << 20, 2 << 20][..]),
            ("1K..8K", &[1024, 2048, 4096, 8192]),
        ] {
            assert_eq!(sizes(&[("sizes", given)]), want, "{given}");
        }
        let d = sizes(&[]);
        assert_eq!((d.len(), d[0], d[27]), (28, 8, 1 << 30));
        for bad in [
            "0",
            "",
            "8..4",
            "1T",
            "x",
            "65GiB",
            "0..8",
            "1..1GiB,1..1GiB,1..1GiB",
        ] {
            assert!(parse(&[("sizes", bad)]).is_err(), "{bad}");
        }
    }

    use super::engine::{buffers, verify};
    use super::measure::input;
    use crate::device::Runtime;
    use crate::engine::LaneId;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

        /// On random inputs, both algorithms leave on every device the sequential float64 sum
        /// (within float32 rounding), for any k and sizes that do not divide into k chunks.
        #[test]
        fn both_algorithms_equal_a_sequential_sum(
            k in 1usize..6,
            n in 1usize..300,
            seed in 0u64..1000,
        ) {
            let rt = Runtime::cpu(&RuntimeOptions::default(), &vec![1; k]).expect("devices");
            let lanes: Vec<LaneId> = rt.devices.iter().map(|d| d.compute).collect();
            let value = |d: usize, i: usize| input(d + seed as usize * 7, i) * 100.0;
            let want: Vec<f64> = (0..n).map(|i| (0..k).map(|d| value(d, i) as f64).sum()).collect();
            let replicas = buffers(n, k, value);
            for &a in Algorithm::of(Backend::Engine) {
                // Twice: a second run on the same buffers gives the same result.
                a.push(&rt.engine, &lanes, &replicas);
                let c = verify(&replicas, &rt.engine, &lanes, a).expect("runs");
                proptest::prop_assert!(c.passed(), "{:?} k {} n {}: {:?}", a, k, n, c);
                proptest::prop_assert_eq!(c.checked, (n * k) as u64);
                for r in &replicas {
                    let got = r.recv.write_all().expect("idle");
                    for (g, w) in got.iter().zip(&want) {
                        let allowed = measure::tolerance(k, 100.0 * k as f64);
                        proptest::prop_assert!((*g as f64 - w).abs() <= allowed);
                    }
                }
            }
        }
    }

    #[test]
    fn a_small_run_records_every_size_and_passes_its_checks() {
        let p = parse(&[("sizes", "8,4096,12"), ("devices", "3")]).expect("params");
        let ctx = crate::scenario::gpu_clocks::few_samples();
        let run = Allreduce.execute(&p, &ctx).expect("runs");
        let names: Vec<&str> = run.variants.iter().map(|v| v.name.as_str()).collect();
        // Size by size, in increasing order; each size's algorithms in the order they run.
        let sizes = ["8B", "12B", "4KiB"].iter();
        let want =
            sizes.flat_map(|s| ["ring", "parameter-server", "tree"].map(|a| format!("{a} {s}")));
        assert_eq!(names, want.collect::<Vec<_>>());
        assert!(run.checks_passed() && run.checks.len() == 3);
        for key in [
            "ring_4KiB_busbw_gbytes_per_s",
            "parameter_server_8B_algbw_gbytes_per_s",
        ] {
            assert!(run.derived[key].as_f64().is_some_and(|v| v > 0.0), "{key}");
        }
        assert_eq!(run.derived["ring_12B_wrong"].as_f64(), Some(0.0));
        assert!(run.lesson.is_some() && !run.explanation.is_empty());
    }
}
