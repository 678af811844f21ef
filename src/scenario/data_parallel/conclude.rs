//! The checks, figures and explanation of a run, from its variants' last trained runs: the
//! same for both backends.

use serde_json::json;

use super::explain::{explain, Figures, Overlapped, VariantFigures};
use super::in_process::{buckets, Setup};
use super::training::{agrees, curve, thin, time_to_target, Overlap, Trained, AGREEMENT};
use super::{mlp, Config, Participants, Timed, EVAL_ROWS};
use super::{ALLREDUCE_BYTES, ASYNC_STALENESS_MAX, ASYNC_STALENESS_MEAN, INITIAL_LOSS};
use super::{FINAL_LOSS, SAMPLES_PER_SECOND, SCALING_EFFICIENCY};
use crate::report::evidence::{Estimate, Ratio};
use crate::report::{Better, Figure, RunRecord, Unit};

/// What the traced runs showed of communication, and the devices' compute threads (in
/// process; empty under MPI).
pub(super) struct Communication<'a> {
    pub shares: &'a [(Timed, f64)],
    pub overlaps: &'a [(Timed, Overlap)],
    pub threads: &'a [usize],
}

/// The checks, figures and explanation of a run from its variants' last trained runs.
/// `variants` is in report order, the one-device baseline first and asynchronous last;
/// `comm` is from the traced runs.
pub(super) fn conclude(
    run: &mut RunRecord,
    cfg: &Config,
    setup: &Setup,
    participants: Participants,
    trained: &[(Timed, Trained)],
    comm: &Communication,
) {
    let Communication {
        shares,
        overlaps,
        threads,
    } = *comm;
    let k = setup.devices;
    let samples = cfg.steps as f64 * cfg.batch as f64;
    let eval = (0, EVAL_ROWS.min(cfg.samples));
    let loss_of = |p: &[f32]| mlp::loss(&setup.layers, p, &setup.data, eval);
    run.record(INITIAL_LOSS, loss_of(&setup.initial));
    run.derive_as(
        "parameters",
        setup.initial.len() as f64,
        Figure::new(Unit::Number, Better::Neither),
    );
    run.record(ALLREDUCE_BYTES, 4.0 * setup.initial.len() as f64);

    let reference = &trained[0];
    let asynchronous = trained.iter().find(|(v, _)| *v == Timed::Async);
    // Every synchronous variant must end where the baseline ends.
    let synchronous: Vec<&(Timed, Trained)> =
        trained.iter().filter(|(v, _)| v.is_synchronous()).collect();
    for (v, t) in synchronous.iter().copied() {
        let (ok, rel) = agrees(&reference.1.weights, &t.weights);
        run.check(
            &format!("{} equals {} SGD", v.name(), reference.0.name()),
            ok,
            format!(
                "{} parameters after {} steps, difference {rel:.2e} of their norm \
                 (tolerance {AGREEMENT:.0e})",
                t.weights.len(),
                cfg.steps
            ),
        );
    }
    if let [a, b, ..] = synchronous.as_slice() {
        let (ok, rel) = agrees(&a.1.weights, &b.1.weights);
        run.check(
            &format!("{} and {} give the same parameters", a.0.name(), b.0.name()),
            ok,
            format!("difference {rel:.2e} of their norm (tolerance {AGREEMENT:.0e})"),
        );
    }

    let mut variants = Vec::new();
    let base_rate = run.median(reference.0.name()).map(|t| samples / t);
    for &(v, ref t) in trained {
        let rate = run.median(v.name()).map_or(f64::NAN, |s| samples / s);
        let full = curve(&t.log, cfg.batch);
        // The first crossing on every point; the stored curve is thinned.
        let reached = time_to_target(&full, cfg.target_loss);
        let c = thin(full, 200);
        let final_loss = loss_of(&t.weights);
        let kp = v.key();
        run.derive_as(
            &format!("{kp}_samples_per_second"),
            rate,
            SAMPLES_PER_SECOND,
        );
        run.derive_as(&format!("{kp}_final_loss"), final_loss, FINAL_LOSS);
        run.derive_as(
            &format!("{kp}_time_to_target_s"),
            reached.unwrap_or(f64::NAN),
            Figure::new(Unit::Seconds, Better::Lower),
        );
        run.derive_series(&format!("{kp}_loss_curve"), json!(c));
        let efficiency = base_rate
            .filter(|_| v.is_synchronous())
            .map(|b| rate / (k as f64 * b));
        if let Some(e) = efficiency {
            run.derive_as(&format!("{kp}_scaling_efficiency"), e, SCALING_EFFICIENCY);
        }
        let share = shares.iter().find(|(s, _)| *s == v).map(|(_, s)| *s);
        if let Some(s) = share {
            run.derive_as(
                &format!("{kp}_communication_share"),
                s,
                Figure::new(Unit::Number, Better::Neither),
            );
        }
        let overlap = overlaps.iter().find(|(s, _)| *s == v).map(|(_, o)| *o);
        let exposed = overlap.map(|o| o.exposed_ns as f64 * 1e-9 / cfg.steps as f64);
        if let (Some(o), Some(e)) = (overlap, exposed) {
            run.derive_as(
                &format!("{kp}_exposed_communication_s"),
                e,
                Figure::new(Unit::Seconds, Better::Lower),
            );
            run.derive_as(
                &format!("{kp}_communication_overlap"),
                o.share(),
                Figure::new(Unit::Number, Better::Neither),
            );
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
        run.record(
            ASYNC_STALENESS_MAX,
            s.iter().copied().max().unwrap_or(0) as f64,
        );
        s.iter().sum::<u64>() as f64 / s.len().max(1) as f64
    });
    if let Some(m) = staleness_mean {
        run.record(ASYNC_STALENESS_MEAN, m);
    }
    let timed: Vec<Timed> = trained.iter().map(|(v, _)| *v).collect();
    super::lesson::conclude(run, &timed, k);
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
            threads: threads.iter().sum(),
            on_copy_lanes: variant == Timed::RingOverlapped
                && setup.collective_lane == super::in_process::CollectiveLane::Copy,
        }
    });
    explain(&Figures {
        devices: k,
        participants,
        parameters: setup.initial.len(),
        target_loss: cfg.target_loss,
        variants,
        staleness_mean,
        overlapped,
    })
    .record(run);
}
