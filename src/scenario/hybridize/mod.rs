//! `hybridize`: imperative vs graph execution (the book's hybridization: MXNet `hybridize`,
//! `tf.function`).
//!
//! A small MLP forward pass, `h = relu(h · W_l + b_l)` for every layer, is run two ways:
//! - imperative: three engine ops per layer (product, bias, ReLU), each pushed with its own
//!   dependency resolution, as an eager framework does;
//! - hybridized: the same layers captured once into a graph, whose replay is a single engine op
//!   running the captured kernels in order (MXNet's `CachedOp` after `hybridize()`): one push,
//!   one dependency resolution, no intermediate tensors handed through the engine.
//!
//! The kernels and their order are identical, so the outputs must be bit-identical.

mod explain;
#[cfg(feature = "cuda")]
mod gpu_clock;
mod measure;

use explain::LESSON;

use super::kit::{check_elements, number, ratio, sampling_to_95, seconds};
use super::{Choice, DeviceChoice, Params, RunContext, Scenario, ScenarioError};
use crate::harness::SamplerConfig;
use crate::report::{Better, FigureSpec, RunRecord};

const HYBRIDIZE_SPEEDUP: FigureSpec = ratio("hybridize_speedup", Better::Higher);
const OPS_PER_PASS: FigureSpec = number("ops_per_pass", Better::Neither);
const OVERHEAD_PER_OP_S: FigureSpec = seconds("overhead_per_op_s", Better::Neither);

super::variant::variants! {
    enum Timed {
        /// One engine op per kernel.
        Imperative = "imperative",
        /// The captured graph replayed as one op.
        Hybridized = "hybridized",
    }
}

pub struct Hybridize;

super::params::params! {
    struct Config {
        /// dense layers of the MLP
        layers: usize = Int { min: 1, max: 256 }, "4";
        /// units per layer (and input features)
        width: usize = Int { min: 1, max: 4096 }, "64";
        /// rows of the input
        batch: usize = Int { min: 1, max: 4096 }, "16";
        /// forward passes per sample
        passes: u64 = Int { min: 1, max: 100_000 }, "200";
        /// cpu, or cuda: the graph is then a CUDA graph (an error without a usable GPU, unless
        /// --fallback)
        device: DeviceChoice = Choice(DeviceChoice::WORDS), "cpu";
    }
}

static SPEC: super::Spec = super::Spec {
    name: "hybridize",
    about: "an MLP forward pass op by op (imperative) vs captured once as a graph and replayed as one op",
    params: PARAMS,
    lesson: Some(LESSON),
    book: &[],
    sampling: SamplerConfig {
        warmup: 2,
        min_samples: 10,
        ..sampling_to_95(100, 1)
    },
};

impl Scenario for Hybridize {
    fn spec(&self) -> &'static super::Spec {
        &SPEC
    }

    fn validate(&self, params: &Params) -> Result<(), ScenarioError> {
        let Config {
            layers,
            width,
            batch,
            passes,
            ..
        } = Config::of(params)?;
        let (layers, width, batch) = (layers as u64, width as u64, batch as u64);
        // The weights and biases three times over (host arrays, tensors, the captured graph's
        // copy), and at worst every pass's intermediates pending at once: three tensors per
        // layer and pass, plus each variant's kept outputs.
        let weights = width
            .checked_mul(width + 1)
            .and_then(|w| w.checked_mul(layers))
            .and_then(|w| w.checked_mul(3));
        let activations = batch
            .checked_mul(width)
            .and_then(|a| a.checked_mul(passes))
            .and_then(|a| a.checked_mul(layers.checked_mul(3)?.checked_add(2)?));
        check_elements(
            "hybridize with these sizes",
            weights.and_then(|w| w.checked_add(activations?)),
        )
    }

    fn run(&self, params: &Params, ctx: &RunContext) -> Result<RunRecord, ScenarioError> {
        measure::passes(self, params, ctx, Config::of(params)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_run_records_no_gpu_time() {
        use crate::scenario::gpu_clocks::{few_samples, params_of};
        let params = params_of(
            &Hybridize,
            &[
                ("layers", "1"),
                ("width", "4"),
                ("batch", "2"),
                ("passes", "2"),
            ],
        );
        let ctx = RunContext {
            cpu_threads: Some(1),
            ..few_samples()
        };
        let run = Hybridize.run(&params, &ctx).expect("runs");
        assert!(run.median("hybridized").is_some());
        assert!(
            !run.derived.keys().any(|k| k.contains("gpu")),
            "{:?}",
            run.derived.keys().collect::<Vec<_>>()
        );
        assert!(!run.explanation.join(" ").contains("GPU's clock"));
    }
}
