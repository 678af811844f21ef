//! `deps`: the chapter's exercise "try tasks with more complex data dependencies: are the
//! results still correct, and is it faster?".
//!
//! A seeded random DAG over `width` slots: each op reads one or two slots and writes one,
//! either a product `(x · y) / n` or a mix `(x + y) / 2`, on a device chosen by the seed. The
//! same program runs op by op (each op waited for: no overlap at all) and pushed at once (the
//! engine finds the parallelism). Results must be bit-identical. The critical path through the
//! DAG, from per-op times measured in the op-by-op run, bounds what any schedule could reach.

use std::time::{Duration, Instant};

use super::support::check_matrices;
use super::{ParamKind, ParamSpec, Params, RunContext, Scenario, ScenarioError};
use crate::device::{Device, Runtime};
use crate::harness::{synced, SamplerConfig, Variant};
use crate::report::table::human_time;
use crate::report::RunRecord;
use crate::tensor::Tensor;

/// The `deps` scenario.
pub struct Deps;

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "width",
        help: "slots (variables) the DAG reads and writes",
        kind: ParamKind::Int { min: 1, max: 1024 },
        default: "8",
    },
    ParamSpec {
        name: "depth",
        help: "ops in the DAG",
        kind: ParamKind::Int {
            min: 1,
            max: 100_000,
        },
        default: "64",
    },
    ParamSpec {
        name: "size",
        help: "matrix size N of every slot (N×N float32)",
        kind: ParamKind::Int {
            min: 1,
            max: 20_000,
        },
        default: "200",
    },
    ParamSpec {
        name: "devices",
        help: "CPU devices (lanes) the ops are spread over",
        kind: ParamKind::Int { min: 1, max: 64 },
        default: "2",
    },
    ParamSpec {
        name: "seed",
        help: "seed of the DAG and of the data",
        kind: ParamKind::Int {
            min: 0,
            max: u64::MAX,
        },
        default: "1",
    },
];

/// One op of the program.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Node {
    out: usize,
    a: usize,
    b: usize,
    product: bool,
    device: usize,
}

/// The seeded program (SplitMix64 draws, so the DAG is the same on every machine).
fn program(width: usize, depth: usize, devices: usize, seed: u64) -> Vec<Node> {
    let mut state = seed;
    let mut next = |n: usize| {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) % n as u64) as usize
    };
    (0..depth)
        .map(|_| Node {
            out: next(width),
            a: next(width),
            b: next(width),
            product: next(2) == 0,
            device: next(devices),
        })
        .collect()
}

/// Push the program; `wait_each` waits for every op (the op-by-op reference) and returns the
/// time each took. The slots' final tensors come back.
fn execute(
    nodes: &[Node],
    inputs: &[Tensor],
    devices: &[std::sync::Arc<Device>],
    n: usize,
    wait_each: bool,
) -> Result<(Vec<Tensor>, Vec<f64>), ScenarioError> {
    let mut slots: Vec<Tensor> = inputs.to_vec();
    let mut times = Vec::new();
    for node in nodes {
        let t = Instant::now();
        let (a, b) = (&slots[node.a], &slots[node.b]);
        let out = if node.product {
            a.placed_on(&devices[node.device])?
                .matmul(b)?
                .scale(1.0 / n as f32)
        } else {
            a.placed_on(&devices[node.device])?.axpby(0.5, b, 0.5)?
        };
        if wait_each {
            out.wait_to_read()?;
            times.push(t.elapsed().as_secs_f64());
        }
        slots[node.out] = out;
    }
    Ok((slots, times))
}

/// True when every slot of `got` holds exactly the values of the same slot of `reference`.
fn same_values(reference: &[Tensor], got: &[Tensor]) -> Result<bool, ScenarioError> {
    if reference.len() != got.len() {
        return Ok(false);
    }
    for (r, g) in reference.iter().zip(got) {
        if r.to_vec()? != g.to_vec()? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Longest chain of dependent ops, weighting each op by its measured time.
fn critical_path(nodes: &[Node], times: &[f64], width: usize) -> f64 {
    // finish[slot] = when the current value of the slot is ready at the earliest.
    let mut finish = vec![0f64; width];
    for (node, t) in nodes.iter().zip(times) {
        let ready = finish[node.a].max(finish[node.b]);
        finish[node.out] = ready + t;
    }
    finish.into_iter().fold(0.0, f64::max)
}

impl Scenario for Deps {
    fn name(&self) -> &'static str {
        "deps"
    }

    fn about(&self) -> &'static str {
        "a seeded random DAG of matmul/add ops on several lanes vs op by op: identical results, speed-up, critical path"
    }

    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }

    fn sampling(&self) -> SamplerConfig {
        SamplerConfig {
            warmup: 1,
            min_samples: 5,
            max_samples: 50,
            min_time: Duration::from_secs(2),
            max_time: Duration::from_secs(30),
        }
    }

    fn validate(&self, params: &Params) -> Result<(), ScenarioError> {
        // The slots, the outputs of one run (at most one per op), and two runs compared.
        let tensors = (params.int("width") + params.int("depth")).saturating_mul(2);
        check_matrices("deps with this --size", params.int("size"), tensors, None)
    }

    fn run(&self, params: &Params, ctx: &RunContext) -> Result<RunRecord, ScenarioError> {
        self.validate(params)?;
        let (width, depth) = (params.int("width") as usize, params.int("depth") as usize);
        let (n, devices, seed) = (
            params.int("size") as usize,
            params.int("devices") as usize,
            params.int("seed"),
        );
        let threads = ctx.cpu_split(devices);
        let rt = Runtime::cpu(&ctx.runtime, &threads)?;
        let engine = &rt.engine;
        let nodes = program(width, depth, devices, seed);
        let inputs: Vec<Tensor> = (0..width)
            .map(|i| {
                Tensor::uniform(
                    engine,
                    &rt.devices[i % devices],
                    &[n, n],
                    seed.wrapping_add(i as u64),
                )
            })
            .collect();
        engine.wait_all()?;

        let mut variants: Vec<Variant<ScenarioError>> = vec![
            Variant::new("op-by-op", || {
                synced(engine, || {
                    Ok::<_, ScenarioError>(execute(&nodes, &inputs, &rt.devices, n, true)?.0)
                })
            }),
            Variant::new("parallel", || {
                synced(engine, || {
                    Ok::<_, ScenarioError>(execute(&nodes, &inputs, &rt.devices, n, false)?.0)
                })
            }),
        ];
        let names: Vec<String> = variants.iter().map(|v| v.name.clone()).collect();
        let summaries = ctx.sample(self, engine, &mut variants)?;
        drop(variants);

        let mut run = RunRecord::new(self.name(), params.to_json(), rt.describe_devices());
        let products = nodes.iter().filter(|x| x.product).count();
        run.add_variants(
            names,
            summaries,
            [
                Some("each op waited for before the next is pushed".to_string()),
                Some(format!("{depth} ops ({products} products) pushed at once")),
            ],
        );

        // Correctness: the parallel schedule gives exactly the op-by-op values, twice.
        let (reference, times) = execute(&nodes, &inputs, &rt.devices, n, true)?;
        let (first, _) = execute(&nodes, &inputs, &rt.devices, n, false)?;
        let (second, _) = execute(&nodes, &inputs, &rt.devices, n, false)?;
        let identical = same_values(&reference, &first)? && same_values(&reference, &second)?;
        run.check(
            "bit-identical to op-by-op execution",
            identical,
            format!("{width} slots compared element by element, two parallel runs"),
        );

        let m = |v: &str| run.median(v).unwrap_or(f64::NAN);
        let (seq, par) = (m("op-by-op"), m("parallel"));
        let work: f64 = times.iter().sum();
        let path = critical_path(&nodes, &times, width);
        let bound = path.max(work / devices as f64);
        run.derive("parallel_speedup", seq / par);
        run.derive("work_s", work);
        run.derive("critical_path_s", path);
        run.derive("lower_bound_s", bound);
        run.derive("parallel_over_bound_ratio", par / bound);
        run.explanation.push(format!(
            "pushed at once, the DAG ran in {} instead of {} op by op ({:.2}×); no schedule can beat \
             max(critical path {}, work / {devices} devices {}) = {}, so the engine is {:.2}× from the bound.",
            human_time(par),
            human_time(seq),
            seq / par,
            human_time(path),
            human_time(work / devices as f64),
            human_time(bound),
            par / bound
        ));
        Ok(run)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_is_a_function_of_the_seed() {
        assert_eq!(program(8, 50, 2, 7), program(8, 50, 2, 7));
        assert_ne!(program(8, 50, 2, 7), program(8, 50, 2, 8));
        assert!(program(8, 200, 3, 1)
            .iter()
            .all(|x| x.out < 8 && x.a < 8 && x.b < 8 && x.device < 3));
    }

    #[test]
    fn the_check_catches_a_wrong_reference() {
        let rt = Runtime::cpu(&Default::default(), &[1, 1]).unwrap();
        let nodes = program(4, 20, 2, 3);
        let inputs: Vec<Tensor> = (0..4)
            .map(|i| Tensor::uniform(&rt.engine, &rt.devices[i % 2], &[9, 9], i as u64))
            .collect();
        let (reference, _) = execute(&nodes, &inputs, &rt.devices, 9, true).unwrap();
        let (parallel, _) = execute(&nodes, &inputs, &rt.devices, 9, false).unwrap();
        assert!(same_values(&reference, &parallel).unwrap());
        // A reference from another program (another seed) must not pass.
        let (wrong, _) = execute(&program(4, 20, 2, 4), &inputs, &rt.devices, 9, true).unwrap();
        assert!(!same_values(&wrong, &parallel).unwrap());
    }

    #[test]
    fn critical_path_follows_dependencies() {
        let node = |out, a, b| Node {
            out,
            a,
            b,
            product: false,
            device: 0,
        };
        // 0 <- 1 ; 1 <- 0 : a chain of two; 2 <- 3 independent.
        let nodes = [node(0, 1, 1), node(1, 0, 0), node(2, 3, 3)];
        assert_eq!(critical_path(&nodes, &[1.0, 2.0, 5.0], 4), 5.0);
        assert_eq!(critical_path(&nodes, &[1.0, 2.0, 0.5], 4), 3.0);
    }
}
