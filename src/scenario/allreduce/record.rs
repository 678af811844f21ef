//! What a run records per size and at its end, whichever backend measured it: nccl-tests'
//! bandwidths, the checks, the busbw curves, the crossover and the explanation.

use super::explain::{conclude, explain, SizeTimes};
use super::measure::{algbw_gbytes_per_s, busbw_gbytes_per_s, size_label, Checked};
use super::Algorithm;
use crate::report::evidence::Estimate;
use crate::report::{Better, Figure, RunRecord, Unit};
use crate::scenario::backend::Backend;

/// A figure of the `--verbose` table and the JSON.
const fn detail(unit: Unit, better: Better) -> Figure {
    Figure {
        unit,
        better,
        detail: true,
    }
}

const ALGBW: Figure = detail(Unit::GbytesPerSecond, Better::Higher);
const BUSBW: Figure = detail(Unit::GbytesPerSecond, Better::Higher);
const BUSBW_OF_COPY: Figure = detail(Unit::Number, Better::Higher);
const WRONG: Figure = detail(Unit::Number, Better::Lower);

/// The machine's all-thread copy bandwidth (GB/s), when it was measured.
pub(super) fn copy_bandwidth() -> Option<f64> {
    crate::machine::limits()
        .memory
        .measured()
        .map(|m| m.copy.all_threads_gbytes_per_s)
        .filter(|c| c.is_finite() && *c > 0.0)
}

/// A run's figures as its sizes are recorded: the times the crossover needs and each
/// algorithm's busbw curve.
pub(super) struct Tally {
    pub backend: Backend,
    /// Devices (or ranks) taking part.
    pub devices: usize,
    pub copy: Option<f64>,
    times: Vec<SizeTimes>,
    curves: Vec<(Algorithm, Vec<serde_json::Value>)>,
}

impl Tally {
    pub fn new(backend: Backend, devices: usize, copy: Option<f64>) -> Tally {
        Tally {
            backend,
            devices,
            copy,
            times: Vec::new(),
            curves: Algorithm::of(backend)
                .iter()
                .map(|&a| (a, Vec::new()))
                .collect(),
        }
    }

    /// Record one size, whose variants `run` holds already: each algorithm's bandwidths and
    /// `wrong` count, and the check that every device's result equals the float64 sum.
    pub fn size(&mut self, run: &mut RunRecord, bytes: u64, checked: &[(Algorithm, Checked)]) {
        let k = self.devices;
        for (a, c) in checked {
            let stem = a.key(bytes);
            let median = Estimate::of(run, &a.variant(bytes)).median;
            let algbw = algbw_gbytes_per_s(bytes, median);
            let busbw = busbw_gbytes_per_s(algbw, k);
            run.derive_as(&format!("{stem}_algbw_gbytes_per_s"), algbw, ALGBW);
            run.derive_as(&format!("{stem}_busbw_gbytes_per_s"), busbw, BUSBW);
            if let Some(copy) = self.copy {
                run.derive_as(
                    &format!("{stem}_busbw_of_copy"),
                    busbw / copy,
                    BUSBW_OF_COPY,
                );
            }
            run.derive_as(&format!("{stem}_wrong"), c.wrong as f64, WRONG);
            if let Some((_, curve)) = self.curves.iter_mut().find(|(b, _)| b == a) {
                curve.push(serde_json::json!([bytes, busbw]));
            }
        }
        let whose = match self.backend {
            Backend::Engine => "device",
            Backend::Mpi => "rank",
        };
        run.check(
            &format!(
                "every {whose}'s result equals the float64 sum ({})",
                size_label(bytes)
            ),
            checked.iter().all(|(_, c)| c.passed()),
            checked
                .iter()
                .map(|(a, c)| {
                    format!(
                        "{}: {} wrong of {} elements, largest error {:.1e} of the inputs' \
                         magnitude",
                        a.name(),
                        c.wrong,
                        c.checked,
                        c.max_error
                    )
                })
                .collect::<Vec<_>>()
                .join("; "),
        );
        self.times.push(SizeTimes {
            bytes,
            ring: Estimate::of(run, &Algorithm::Ring.variant(bytes)),
            parameter_server: Estimate::of(run, &Algorithm::ParameterServer.variant(bytes)),
        });
    }

    /// The curves, the crossover, the notes, the explanation and the lesson's verdict.
    pub fn finish(self, run: &mut RunRecord) {
        let k = self.devices;
        for (a, points) in self.curves {
            run.derive_detail_series(
                &format!("{}_busbw_curve", a.name().replace('-', "_")),
                serde_json::Value::Array(points),
            );
        }
        if let Some(bytes) = super::explain::ring_faster_from(&self.times) {
            run.derive_as(
                "crossover_bytes",
                bytes as f64,
                Figure::new(Unit::Bytes, Better::Neither),
            );
        }
        if self.copy.is_none() {
            run.notes.push(
                "the machine's copy bandwidth was not measured (a debug build measures \
                 nothing): no busbw_of_copy figures"
                    .into(),
            );
        }
        if k == 1 {
            run.notes.push(format!(
                "one {} moves nothing: busbw is 0 by nccl-tests' definition, and each \
                 algorithm is a copy",
                match self.backend {
                    Backend::Engine => "device",
                    Backend::Mpi => "rank",
                }
            ));
        }
        let largest = self.times.last().and_then(|t| {
            let busbw = busbw_gbytes_per_s(algbw_gbytes_per_s(t.bytes, t.ring.median), k);
            Some((busbw, self.copy?))
        });
        explain(&self.times, k, self.backend, largest.filter(|_| k > 1)).record(run);
        conclude(run, &self.times, k);
    }
}
