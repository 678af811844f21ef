//! What a training run showed and what it teaches, the same for both backends: the checks and
//! figures recorded from the variants' last trained runs ([`record_run`]), those figures as plain
//! numbers worded in sentences ([`explain`]), and the lesson decided from them ([`conclude`]).
//!
//! The lesson is the TF 1 text's §9.2–9.3 (data-parallel training, synchronous and
//! asynchronous updates, several GPUs): k devices train faster than one, less what
//! communication costs, and synchronous training ends where one device ends. The texts print
//! no timings for it: no book figures.

use serde_json::json;

use super::training::{agrees, buckets, curve, thin, time_to_target, Overlap, Trained, AGREEMENT};
use super::Backend;
use super::{mlp, CollectiveLane, Config, Setup, Timed, EVAL_ROWS};
use super::{ALLREDUCE_BYTES, ASYNC_STALENESS_MAX, ASYNC_STALENESS_MEAN, INITIAL_LOSS, PARAMETERS};
use super::{FINAL_LOSS, SAMPLES_PER_SECOND, SCALING_EFFICIENCY};
use crate::harness::Summary;
use crate::report::evidence::{Estimate, Ratio, Side};
use crate::report::finding::{side_phrase, Finding, Want};
use crate::report::{Better, Figure, RunRecord, Unit};
use crate::scenario::kit::{warnings, Explained, LessonSpec, Verdict, BETWEEN_ROUNDS};
use crate::units::{human_bytes, human_time, significant};

pub(super) const LESSON: LessonSpec = LessonSpec {
    source: crate::scenario::book::TF1_DATA_PARALLEL,
    claim: "k devices train faster than one: one-device / the fastest synchronous scheme wholly \
            above 1, and every synchronous scheme ends where one device ends (its agreement \
            checks pass)",
};

/// A share of communication's time: a description, no better or worse.
const SHARE: Figure = Figure::new(Unit::Number, Better::Neither);
/// A time better lower: communication no computation ran beside, per step; the time to the
/// target loss.
const SECONDS_LOWER: Figure = Figure::new(Unit::Seconds, Better::Lower);

/// What the traced runs showed of communication, and the devices' compute threads (in
/// process; empty under MPI).
pub(super) struct Communication<'a> {
    pub shares: &'a [(Timed, f64)],
    pub overlaps: &'a [(Timed, Overlap)],
    pub threads: &'a [usize],
    /// Why a synchronous variant without a share or an overlap has none.
    pub untraced: &'static str,
}

/// The variants (`schemes`, each with its label, in report order: the one-device baseline
/// first and asynchronous last) with their summaries, then the checks, figures, lesson and
/// explanation of a run from their last trained runs; `comm` is from the traced runs.
pub(super) fn record_run(
    run: &mut RunRecord,
    cfg: &Config,
    setup: &Setup,
    schemes: &[(Timed, String)],
    summaries: Vec<Summary>,
    trained: Vec<Trained>,
    comm: &Communication,
) {
    let names = schemes.iter().map(|(v, _)| v.name().to_string()).collect();
    let labels = schemes.iter().map(|(_, l)| Some(l.clone()));
    run.add_variants(names, summaries, labels);
    let trained: Vec<(Timed, Trained)> = schemes.iter().map(|s| s.0).zip(trained).collect();
    let k = setup.devices;
    let samples = cfg.steps as f64 * cfg.batch as f64;
    let eval = (0, EVAL_ROWS.min(cfg.samples));
    let loss_of = |p: &[f32]| mlp::loss(&setup.layers, p, &setup.data, eval);
    run.record(INITIAL_LOSS, loss_of(&setup.initial));
    run.record(PARAMETERS, setup.initial.len() as f64);
    run.record(ALLREDUCE_BYTES, 4.0 * setup.initial.len() as f64);

    let reference = &trained[0];
    let asynchronous = trained.iter().find(|(v, _)| *v == Timed::Async);
    // Every synchronous variant must end where the baseline ends.
    let synchronous: Vec<&(Timed, Trained)> =
        trained.iter().filter(|(v, _)| v.is_synchronous()).collect();
    let mut agreement = |name: String, a: &[f32], b: &[f32], lead: String| {
        let (ok, rel) = agrees(a, b);
        let why = diverged(&[a, b], cfg.lr);
        let detail =
            format!("{lead}difference {rel:.2e} of their norm (tolerance {AGREEMENT:.0e}){why}");
        run.check(&name, ok, detail);
    };
    for (v, t) in synchronous.iter().copied() {
        let name = format!("{} equals {} SGD", v.name(), reference.0.name());
        let lead = format!("{} parameters after {} steps, ", t.weights.len(), cfg.steps);
        agreement(name, &reference.1.weights, &t.weights, lead);
    }
    if let [a, b, ..] = synchronous.as_slice() {
        let name = format!("{} and {} give the same parameters", a.0.name(), b.0.name());
        agreement(name, &a.1.weights, &b.1.weights, String::new());
    }

    let mut variants = Vec::new();
    let base_rate = run.median(reference.0.name()).map(|t| samples / t);
    for &(v, ref t) in &trained {
        let rate = run.median(v.name()).map_or(f64::NAN, |s| samples / s);
        let full = curve(&t.log, cfg.batch);
        // The first crossing on every point; the stored curve is thinned.
        let reached = time_to_target(&full, cfg.target_loss);
        let c = thin(full, 200);
        let final_loss = loss_of(&t.weights);
        let kp = v.key();
        let key = |name: &str| format!("{kp}_{name}");
        run.derive_as(&key("samples_per_second"), rate, SAMPLES_PER_SECOND);
        run.derive_as(&key("final_loss"), final_loss, FINAL_LOSS);
        let to_target = key("time_to_target_s");
        let never = "the loss never reached the target";
        match reached {
            Some(t) => run.derive_as(&to_target, t, SECONDS_LOWER),
            None => run.unmeasured_as(&to_target, SECONDS_LOWER, never),
        }
        run.derive_series(&key("loss_curve"), json!(c));
        let efficiency = base_rate
            .filter(|_| v.is_synchronous())
            .map(|b| rate / (k as f64 * b));
        if let Some(e) = efficiency {
            run.derive_as(&key("scaling_efficiency"), e, SCALING_EFFICIENCY);
        }
        let share = comm.shares.iter().find(|(s, _)| *s == v).map(|(_, s)| *s);
        let overlap = comm.overlaps.iter().find(|(s, _)| *s == v).map(|(_, o)| *o);
        let exposed = overlap.map(|o| o.exposed_ns as f64 * 1e-9 / cfg.steps as f64);
        let traced = [
            ("communication_share", share, SHARE),
            ("exposed_communication_s", exposed, SECONDS_LOWER),
            ("communication_overlap", overlap.map(|o| o.share()), SHARE),
        ];
        for (name, value, figure) in traced {
            match value {
                Some(x) => run.derive_as(&key(name), x, figure),
                None if v.is_synchronous() => run.unmeasured_as(&key(name), figure, comm.untraced),
                None => {}
            }
        }
        variants.push(VariantFigures {
            name: v,
            samples_per_second: rate,
            final_loss,
            time_to_target: reached,
            scaling_efficiency: efficiency,
            communication_share: share,
            exposed_communication: exposed,
            communication_overlap: overlap.map(|o| o.share()),
        });
    }
    let staleness_mean = asynchronous.map(|(_, t)| {
        let s = &t.staleness;
        let max = s.iter().copied().max().unwrap_or(0);
        run.record(ASYNC_STALENESS_MAX, max as f64);
        let mean = s.iter().sum::<u64>() as f64 / s.len().max(1) as f64;
        run.record(ASYNC_STALENESS_MEAN, mean);
        mean
    });
    let timed: Vec<Timed> = trained.iter().map(|(v, _)| *v).collect();
    conclude(run, &timed, k);
    // The overlapped variant of each backend, and the same all-reduce after the whole pass.
    let pair = [
        (Timed::RingOverlapped, Timed::Ring),
        (Timed::AllreduceOverlapped, Timed::Allreduce),
    ]
    .into_iter()
    .find(|(o, plain)| timed.contains(o) && timed.contains(plain));
    let overlapped = pair.filter(|_| k > 1).map(|(variant, plain)| {
        let one = Estimate::of(run, Timed::OneDevice.name());
        let v = Estimate::of(run, variant.name());
        let e = Ratio::of(one, v);
        let kf = k as f64;
        Overlapped {
            variant,
            plain,
            buckets: buckets(&setup.layers, cfg.bucket_bytes).len(),
            against_plain: Ratio::of(Estimate::of(run, plain.name()), v),
            efficiency: Ratio {
                value: e.value / kf,
                lo: e.lo / kf,
                hi: e.hi / kf,
            },
            cores: crate::device::available_cores(),
            threads: comm.threads.iter().sum(),
            on_copy_lanes: variant == Timed::RingOverlapped
                && setup.collective_lane == CollectiveLane::Copy,
        }
    });
    explain(&Figures {
        devices: k,
        backend: cfg.backend,
        parameters: setup.initial.len(),
        target_loss: cfg.target_loss,
        variants,
        staleness_mean,
        overlapped,
    })
    .record(run);
}

/// One variant's figures, as the explanation quotes them.
#[derive(Clone, Debug, PartialEq)]
pub struct VariantFigures {
    pub name: Timed,
    pub samples_per_second: f64,
    pub final_loss: f64,
    pub time_to_target: Option<f64>,
    /// Synchronous variants on k devices: throughput_k / (k × throughput of one device).
    pub scaling_efficiency: Option<f64>,
    /// From the traced run: communication's share of the lanes' busy time.
    pub communication_share: Option<f64>,
    /// From the traced run: seconds a step during which a collective ran and no computation.
    pub exposed_communication: Option<f64>,
    /// From the traced run: the share of communication's time that computation ran beside.
    pub communication_overlap: Option<f64>,
}

/// How an overlapped variant (`ring-overlapped`, or `allreduce-overlapped` under MPI) did
/// against the same all-reduce after the whole backward pass, and the efficiency goal.
#[derive(Clone, Debug, PartialEq)]
pub struct Overlapped {
    /// The overlapped variant, and the one it is set beside.
    pub variant: Timed,
    pub plain: Timed,
    /// Its buckets at this run's cap.
    pub buckets: usize,
    /// The plain variant's time over the overlapped one's: above 1, the overlap is faster.
    pub against_plain: Ratio,
    /// Its scaling efficiency with the interval the medians' intervals allow.
    pub efficiency: Ratio,
    /// The machine's cores, and the devices' compute threads in all.
    pub cores: usize,
    pub threads: usize,
    /// In process: its collectives ran on the copy lanes' own threads (`--collective-lane
    /// copy`), not after the backward ops on the compute lanes.
    pub on_copy_lanes: bool,
}

/// The scaling efficiency `ring-overlapped` is measured against (issue 39's goal).
pub const EFFICIENCY_GOAL: f64 = 0.95;

/// The figures a run's explanation quotes, as plain numbers (tests feed synthetic ones).
#[derive(Clone, Debug, PartialEq)]
pub struct Figures {
    pub devices: usize,
    /// What the run trains on: devices of one engine, or MPI ranks.
    pub backend: Backend,
    pub parameters: usize,
    pub target_loss: f64,
    pub variants: Vec<VariantFigures>,
    pub staleness_mean: Option<f64>,
    /// In process, on more than one device: the overlapped ring's comparisons.
    pub overlapped: Option<Overlapped>,
}

warnings! {
    pub enum Warning {
        /// A scaling efficiency above 1.1.
        ScalingEfficiencyAboveOne { variant: &'static str } => (
            "{variant}'s scaling efficiency above 1.1: {BETWEEN_ROUNDS}"
        ),
    }
}

/// What a training run showed, each figure worded as the table prints it.
pub fn explain(f: &Figures) -> Explained<Warning> {
    let rate = |v: f64| SAMPLES_PER_SECOND.format(&v.into());
    let mut sentences = Vec::new();
    let base = f.variants.first();
    for v in &f.variants[1..] {
        let mut s = format!("{}: {}", v.name.name(), rate(v.samples_per_second));
        if let (Some(e), Some(b)) = (v.scaling_efficiency, base) {
            s += &format!(
                ", a scaling efficiency of {:.2} ({} against {} × {} on one)",
                e,
                crate::units::count(f.devices, f.backend.noun()),
                f.devices,
                rate(b.samples_per_second)
            );
        }
        if let Some(c) = v.communication_share {
            s += &format!(
                "; communication took {:.1}% of {} (all-reduce of {} a step)",
                100.0 * c,
                match f.backend {
                    Backend::Engine => "the devices' busy time",
                    Backend::Mpi => "rank 0's time, waits included",
                },
                human_bytes(4 * f.parameters as u64)
            );
            if let (Some(e), Some(o)) = (v.exposed_communication, v.communication_overlap) {
                s += &format!(
                    ", {} a step of it with no computation running ({:.0}% of it beside \
                     computation)",
                    human_time(e),
                    100.0 * o
                );
            }
        }
        sentences.push(s + ".");
    }
    if let Some(o) = &f.overlapped {
        sentences.push(overlapped(o, f.parameters));
    }
    let reached: Vec<String> = f
        .variants
        .iter()
        .map(|v| match v.time_to_target {
            Some(t) => format!("{} in {}", v.name.name(), human_time(t)),
            None => format!("{} not within its run", v.name.name()),
        })
        .collect();
    sentences.push(format!(
        "Time to a loss of {} (each scheme's run nearest its median): {}; final loss {}.",
        significant(f.target_loss),
        reached.join(", "),
        f.variants
            .iter()
            .map(|v| format!("{} {}", v.name.name(), significant(v.final_loss)))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    if let Some(s) = f.staleness_mean {
        sentences.push(if s > 0.0 {
            // A mean that rounds to 0.0 at one decimal is still stale: never print "0.0 old".
            let age = if s < 0.05 {
                "under 0.1".to_string()
            } else {
                format!("{s:.1}")
            };
            format!(
                "Asynchronous updates read parameters {age} updates old on average: no device \
                 waits for another, but a stale gradient is worth less than a fresh one."
            )
        } else {
            "Asynchronous updates were never stale in this run: each gradient was applied \
             before the next parameters were read (as with a single worker)."
                .to_string()
        });
    }
    let mut out = Explained {
        sentences,
        ..Explained::default()
    };
    for v in &f.variants {
        if let Some(e) = v.scaling_efficiency {
            let figure = format!("{}'s scaling efficiency", v.name.name());
            let limit = Finding::limit(&figure, Ratio::exact(e), 1.1, Want::Below);
            out.limit(limit, || Warning::ScalingEfficiencyAboveOne {
                variant: v.name.name(),
            });
        }
    }
    out
}

/// The overlapped ring against the ring and the goal, each comparison as far as its interval
/// allows, and what stops the overlap where the run shows it.
fn overlapped(o: &Overlapped, parameters: usize) -> String {
    let (name, plain) = (o.variant.name(), o.plain.name());
    let against = match o.against_plain.against(1.0) {
        Side::Above => format!("faster than {plain}"),
        Side::Below => format!("slower than {plain}"),
        Side::Within => format!("indistinguishable from {plain}"),
        Side::Unknown => format!("not compared with {plain}"),
    };
    let goal = side_phrase(o.efficiency.against(EFFICIENCY_GOAL));
    let mut s = format!(
        "{name} in {}: {plain} / {name} = {} ({against}); its scaling efficiency, \
         {:.2} (95% interval {:.2}–{:.2}), is {goal} {EFFICIENCY_GOAL}",
        crate::units::count(o.buckets, "bucket"),
        o.against_plain,
        o.efficiency.value,
        o.efficiency.lo,
        o.efficiency.hi,
    );
    if o.buckets == 1 {
        s += &format!(
            ". One bucket holds all {} of gradients, so no all-reduce starts before the \
             whole backward pass is done (a smaller --bucket-mb splits it)",
            human_bytes(4 * parameters as u64)
        );
    } else if o.threads >= o.cores && o.efficiency.against(EFFICIENCY_GOAL) != Side::Above {
        let (threads, cores) = (o.threads, crate::units::count(o.cores, "core"));
        s += &if o.on_copy_lanes {
            format!(
                ". The devices' {threads} compute threads take all of the machine's {cores}, so \
                 its collectives, on the copy lanes' own threads, run beside the backward pass \
                 in time but take their cores from it (--collective-lane compute runs them \
                 after the backward ops instead)"
            )
        } else {
            format!(
                ". Its collectives run on the compute lanes, after each device's backward ops: \
                 with the devices' {threads} compute threads on all of the machine's {cores}, a \
                 bucket's all-reduce overlaps only the other devices' computation"
            )
        };
    }
    s + "."
}

/// Decide the lesson from the medians and the agreement checks.
pub(super) fn conclude(run: &mut RunRecord, trained: &[Timed], devices: usize) {
    let base = Estimate::of(run, Timed::OneDevice.name());
    let fastest = trained
        .iter()
        .filter(|v| v.is_synchronous())
        .map(|v| (*v, Ratio::of(base, Estimate::of(run, v.name()))))
        .filter(|(_, r)| r.value.is_finite())
        .max_by(|a, b| a.1.value.total_cmp(&b.1.value));
    let agree = run.checks_passed();
    let verdict = match fastest {
        Some((v, r)) => Verdict::new(
            vec![
                Finding::faster(&format!("one-device / {}", v.name()), r),
                Finding::checks("agreement checks", agree),
            ],
            format!(
                "{} on {devices} devices: {:.2}× one device",
                v.name(),
                r.value
            ),
        ),
        None => Verdict::one_device("no synchronous scheme on more than one device was timed."),
    };
    LESSON.conclude(run, &[], verdict);
}

/// Why an agreement check compares no numbers: `"; the training diverged …"` where a run's
/// parameters are no longer finite (a learning rate too large for the model), else empty.
fn diverged(weights: &[&[f32]], lr: f32) -> String {
    if weights.iter().all(|w| w.iter().all(|x| x.is_finite())) {
        return String::new();
    }
    format!(
        "; the training diverged (parameters no longer finite at --lr {lr}): try a smaller --lr"
    )
}

#[cfg(test)]
mod tests {

    #[test]
    fn an_agreement_check_on_diverged_parameters_says_so() {
        let fine = [0.5f32, -1.0];
        assert_eq!(diverged(&[&fine, &fine], 0.1), "");
        let blown = [f32::NAN, f32::INFINITY];
        let why = diverged(&[&fine, &blown], 10.0);
        assert!(why.contains("diverged") && why.contains("--lr 10"), "{why}");
    }
    use super::*;

    /// A variant's figures: its rate, scaling efficiency, communication share, time to target.
    fn v(name: Timed, rate: f64, e: Option<f64>, c: Option<f64>, t: Option<f64>) -> VariantFigures {
        VariantFigures {
            name,
            samples_per_second: rate,
            final_loss: 0.1234,
            time_to_target: t,
            scaling_efficiency: e,
            communication_share: c,
            exposed_communication: None,
            communication_overlap: None,
        }
    }

    fn figures() -> Figures {
        Figures {
            devices: 2,
            backend: Backend::Engine,
            parameters: 1_000_000,
            target_loss: 0.5,
            variants: vec![
                v(Timed::OneDevice, 1000.0, None, None, Some(0.5)),
                v(Timed::Ring, 1800.4, Some(0.9002), Some(0.0412), Some(0.3)),
                v(Timed::Async, 1900.0, None, None, None),
            ],
            staleness_mean: Some(0.96),
            overlapped: None,
        }
    }

    #[test]
    fn the_explanation_quotes_the_figures_as_the_table_prints_them() {
        let e = explain(&figures());
        assert_eq!(
            e.sentences,
            [
                "ring: 1,800 samples/s, a scaling efficiency of 0.90 (2 devices against 2 × \
                 1,000 samples/s on one); communication took 4.1% of the devices' busy time \
                 (all-reduce of 3.8 MiB a step).",
                "async: 1,900 samples/s.",
                "Time to a loss of 0.500 (each scheme's run nearest its median): one-device in 500.0 ms, ring in 300.0 ms, async not \
                 within its run; final loss one-device 0.123, ring 0.123, async 0.123.",
                "Asynchronous updates read parameters 1.0 updates old on average: no device \
                 waits for another, but a stale gradient is worth less than a fresh one.",
            ]
        );
        assert!(e.warnings.is_empty());
        let mut f = figures();
        f.staleness_mean = Some(0.0);
        assert!(explain(&f).sentences[3].contains("never stale"));
        f.variants[1].scaling_efficiency = Some(1.3);
        assert_eq!(explain(&f).warnings.len(), 1);
    }

    #[test]
    fn the_overlap_sentence_claims_no_more_than_the_intervals() {
        let r = |value, lo, hi| Ratio { value, lo, hi };
        let mut o = Overlapped {
            variant: Timed::RingOverlapped,
            plain: Timed::Ring,
            buckets: 2,
            against_plain: r(0.74, 0.69, 0.81),
            efficiency: r(0.68, 0.62, 0.73),
            cores: 2,
            threads: 2,
            on_copy_lanes: true,
        };
        let s = overlapped(&o, 1_000_000);
        assert!(
            s.starts_with(
                "ring-overlapped in 2 buckets: ring / ring-overlapped = 0.74×, 95% \
             interval 0.69–0.81× (slower than ring); its scaling efficiency, 0.68 (95% \
             interval 0.62–0.73), is wholly below 0.95. The devices' 2 compute threads take \
             all of the machine's 2 cores"
            ),
            "{s}"
        );
        o.on_copy_lanes = false;
        let s = overlapped(&o, 1_000_000);
        assert!(
            s.contains("run on the compute lanes") && !s.contains("copy lanes"),
            "{s}"
        );
        o.on_copy_lanes = true;
        o.against_plain = r(1.02, 0.95, 1.1);
        o.efficiency = r(0.96, 0.94, 0.99);
        let s = overlapped(&o, 1_000_000);
        assert!(s.contains("(indistinguishable from ring)") && s.contains("reaching across"));
        o.buckets = 1;
        assert!(overlapped(&o, 1_000_000).contains("One bucket holds all 3.8 MiB"));
        // Spare cores: no claim about sharing them.
        (o.buckets, o.cores) = (2, 8);
        assert!(!overlapped(&o, 1_000_000).contains("cores"));
        // Under MPI: the library's all-reduce, and no threads counted.
        (o.variant, o.plain, o.threads, o.cores) =
            (Timed::AllreduceOverlapped, Timed::Allreduce, 0, 2);
        let s = overlapped(&o, 1_000_000);
        assert!(
            s.starts_with(
                "allreduce-overlapped in 2 buckets: allreduce / allreduce-overlapped = 1.02×"
            ),
            "{s}"
        );
        assert!(s.contains("(indistinguishable from allreduce)") && !s.contains("cores"));
    }

    fn variant() -> impl proptest::strategy::Strategy<Value = VariantFigures> {
        use proptest::prelude::*;
        (
            0.1f64..1e6,
            proptest::option::of(0.0f64..2.0),
            proptest::option::of(0.0f64..1.0),
            proptest::option::of(1e-4f64..100.0),
        )
            .prop_map(|(rate, e, c, t)| v(Timed::Ring, rate, e, c, t))
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Random figures: each variant's sentence quotes its own rate, efficiency and share as
        /// given, the above-one warning fires exactly for efficiencies above 1.1, and the
        /// staleness sentence calls updates "never stale" exactly when none was, and never
        /// prints a stale mean as 0.0.
        #[test]
        fn no_sentence_contradicts_its_figures(
            others in proptest::collection::vec(variant(), 1..4),
            staleness in proptest::option::of(proptest::prop_oneof![
                proptest::strategy::Just(0.0f64),
                1e-6f64..0.2,
                0.2f64..50.0,
            ]),
        ) {
            let mut f = figures();
            f.variants.truncate(1);
            f.variants.extend(others.iter().cloned());
            f.staleness_mean = staleness;
            let e = explain(&f);
            let rate = |v: f64| SAMPLES_PER_SECOND.format(&v.into());
            for (v, s) in others.iter().zip(&e.sentences) {
                proptest::prop_assert!(s.contains(&rate(v.samples_per_second)), "{}", s);
                proptest::prop_assert_eq!(
                    v.scaling_efficiency.map(|x| format!("efficiency of {x:.2} ")),
                    v.scaling_efficiency.and_then(|_| s
                        .split_once("efficiency of ")
                        .map(|(_, r)| format!("efficiency of {} ", r.split(' ').next().unwrap_or("")))),
                    "{}", s
                );
                proptest::prop_assert_eq!(
                    s.contains("communication took"),
                    v.communication_share.is_some(),
                    "{}", s
                );
            }
            let above = others.iter().filter(|v| v.scaling_efficiency.is_some_and(|x| x > 1.1)).count();
            proptest::prop_assert_eq!(e.warnings.len(), above);
            let text = e.sentences.join(" ");
            match staleness {
                Some(s) => {
                    proptest::prop_assert_eq!(text.contains("never stale"), s == 0.0, "{}", text);
                    proptest::prop_assert!(!text.contains(" 0.0 updates old"), "{}", text);
                }
                None => proptest::prop_assert!(!text.contains("stale"), "{}", text),
            }
        }
    }
}
