//! A scenario of your own, with parbench's whole command line around it.
//!
//! A crate that depends on `parbench` declares its workload as a [`Scenario`] — parameters,
//! variants, figures, checks — and hands it to [`parbench::cli::main_with_scenarios`]. Its
//! binary then runs it like a built-in scenario: `run` with a suite file, `sweep`, `compare`,
//! `ab` (two builds of the binary), `history` and the exports, with the machine's state and its
//! busy warnings recorded as for the chapter's scenarios.
//!
//! The code measured here lives outside parbench: the standard library's stable and unstable
//! sorts, on the same pseudo-random input.
//!
//! ```text
//! cargo run --release --example own_scenario -- sorts --n 1000000 -o sorts.json
//! cargo run --release --example own_scenario -- compare base.json -- sorts.json
//! ```

use std::hint::black_box;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use parbench::harness::{SamplerConfig, Variant};
use parbench::report::{Better, FigureSpec, RunRecord, Unit};
use parbench::scenario::kit::check_bytes;
use parbench::scenario::{Params, RunContext, Scenario, ScenarioError, Spec};

/// The scenario: one type, its declaration in a static.
struct Sorts;

// The parameters, declared once: the `PARAMS` table and `Config`, read by `Config::of`.
parbench::scenario::params::params! {
    struct Config {
        /// elements to sort (u64)
        n: usize = Int { min: 1, max: 1_000_000_000 }, "1000000";
    }
}

/// Stable over unstable: how much the unstable sort saves on this input.
const UNSTABLE_SPEEDUP: FigureSpec =
    FigureSpec::new("unstable_speedup", Unit::Ratio, Better::Neither);

static SPEC: Spec = Spec {
    name: "sorts",
    about: "the standard library's stable and unstable sorts on the same random u64s",
    params: PARAMS,
    lesson: None,
    book: &[],
    sampling: SamplerConfig {
        warmup: 1,
        min_samples: 10,
        max_samples: 200,
        min_time: Duration::from_secs(1),
        max_time: Duration::from_secs(10),
    },
};

/// The variants, in the order they are timed and reported.
const VARIANTS: [&str; 2] = ["stable", "unstable"];

impl Scenario for Sorts {
    fn spec(&self) -> &'static Spec {
        &SPEC
    }

    /// The input and one working copy per variant, refused up front when they cannot fit.
    fn validate(&self, params: &Params) -> Result<(), ScenarioError> {
        let n = Config::of(params)?.n as u64;
        check_bytes("sorts with this --n", n.checked_mul(8 * 3))
    }

    fn run(&self, params: &Params, ctx: &RunContext) -> Result<RunRecord, ScenarioError> {
        let Config { n } = Config::of(params)?;
        let input = random_u64s(n);
        let (mut stable, mut unstable) = (input.clone(), input.clone());
        let mut variants = vec![
            Variant::new(VARIANTS[0], || {
                Ok(timed_sort(&input, &mut stable, <[u64]>::sort))
            }),
            Variant::new(VARIANTS[1], || {
                Ok(timed_sort(&input, &mut unstable, <[u64]>::sort_unstable))
            }),
        ];
        let summaries = ctx.sample_plain(self, &mut variants)?;
        drop(variants);

        let mut run = RunRecord::new(
            self.name(),
            params.to_json(),
            vec!["the calling thread".to_string()],
        );
        let ratio = summaries[0].median_s / summaries[1].median_s;
        run.add_variants(
            VARIANTS.map(String::from).to_vec(),
            summaries,
            [
                Some(format!("slice::sort on {n} u64s")),
                Some(format!("slice::sort_unstable on {n} u64s")),
            ],
        );
        run.record(UNSTABLE_SPEEDUP, ratio);
        let sorted = stable.windows(2).all(|w| w[0] <= w[1]);
        run.check(
            "both sorts agree and are sorted",
            sorted && stable == unstable,
            format!("{n} elements, last sorted copies compared"),
        );
        Ok(run)
    }
}

/// Copy `input` into `buf`, then time sorting it.
fn timed_sort(input: &[u64], buf: &mut [u64], sort: fn(&mut [u64])) -> Duration {
    buf.copy_from_slice(input);
    let t = Instant::now();
    sort(black_box(buf));
    t.elapsed()
}

/// `n` pseudo-random u64s (xorshift64*), the same on every run.
fn random_u64s(n: usize) -> Vec<u64> {
    let mut x = 0x9E37_79B9_7F4A_7C15_u64;
    (0..n)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            x.wrapping_mul(0x2545_F491_4F6C_DD1D)
        })
        .collect()
}

fn main() -> ExitCode {
    parbench::cli::main_with_scenarios(&[&Sorts], std::env::args_os().collect())
}
