//! The crossover of the two algorithms, and the lesson, worded within the intervals.

use super::size_label;
use crate::report::evidence::{Estimate, Ratio, Side};
use crate::report::finding::Finding;
use crate::report::RunRecord;
use crate::scenario::backend::Backend;
use crate::scenario::kit::{Explained, LessonSpec, Verdict};

pub(super) const LESSON: LessonSpec = LessonSpec {
    source: crate::scenario::book::TF1_DATA_PARALLEL,
    claim: "a ring all-reduce spreads the work over every device where a parameter server \
            makes one device do it all: at the largest size, parameter-server / ring wholly \
            above 1, and every device's result equals the float64 sum",
};

/// One size's times, ring and parameter server.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct SizeTimes {
    pub bytes: u64,
    pub ring: Estimate,
    pub parameter_server: Estimate,
}

impl SizeTimes {
    /// parameter server / ring: above 1 where the ring is faster. The one comparison every
    /// sentence and the lesson quote, in this direction only.
    pub fn ring_speedup(&self) -> Ratio {
        Ratio::of(self.parameter_server, self.ring)
    }

    /// [`ring_speedup`](Self::ring_speedup) as its figure and value are printed.
    fn quoted(&self) -> String {
        format!(
            "at {}, parameter-server / ring = {}",
            size_label(self.bytes),
            self.ring_speedup()
        )
    }
}

/// The sizes (in increasing order) as runs on which parameter server / ring lies on one side
/// of 1 within the intervals: `(side, first size, last size)`.
pub(super) fn regions(sizes: &[SizeTimes]) -> Vec<(Side, u64, u64)> {
    let mut out: Vec<(Side, u64, u64)> = Vec::new();
    for s in sizes {
        let side = s.ring_speedup().against(1.0);
        match out.last_mut() {
            Some((last, _, to)) if *last == side => *to = s.bytes,
            _ => out.push((side, s.bytes, s.bytes)),
        }
    }
    out
}

/// The crossover as measured: the smallest size from which the ring's time is below the
/// parameter server's beyond the intervals at every larger size measured too.
pub(super) fn ring_faster_from(sizes: &[SizeTimes]) -> Option<u64> {
    match regions(sizes).last() {
        Some(&(Side::Above, from, _)) => Some(from),
        _ => None,
    }
}

/// Bytes of memory traffic per byte of bus bandwidth of the ring on `k` devices that share
/// one memory, as STREAM counts a copy's (a read and a write each count). Per device and
/// message of S bytes, reduce-scatter's k − 1 steps each read two chunks of S/k and write one
/// (`add_into`), and all-gather's k − 1 steps each read one and write one: 5(k − 1)S/k per
/// device, 5(k − 1)S in all, while busbw counts 2(k − 1)S/k: 5k/2 bytes of traffic for each
/// (5 on 2 devices).
pub(super) fn ring_traffic_per_busbw_byte(k: usize) -> f64 {
    5.0 * k as f64 / 2.0
}

/// What the run shows: where the ring is faster and where it is not, size by size within the
/// intervals, and how close the largest size's bus bandwidth comes to the bound the ring's
/// own memory traffic and the machine's copy bandwidth set.
pub(super) fn explain(
    sizes: &[SizeTimes],
    devices: usize,
    backend: Backend,
    largest_busbw: Option<(f64, f64)>,
) -> Explained {
    let mut out = Explained::default();
    let (Some(first), Some(last)) = (sizes.first(), sizes.last()) else {
        return out;
    };
    let parts: Vec<String> = regions(sizes)
        .into_iter()
        .map(|(side, from, to)| {
            let what = match side {
                Side::Above => "faster",
                Side::Below => "slower",
                Side::Within => "indistinguishable",
                Side::Unknown => "not measured",
            };
            // A run of sizes as a reader reads it: `8B`, or `8B–512KiB`.
            let mut span = size_label(from);
            if to != from {
                span += &format!("–{}", size_label(to));
            }
            format!("{what} at {span}")
        })
        .collect();
    out.sentences.push(format!(
        "The ring against the parameter server, size by size within the intervals: {}.",
        parts.join("; ")
    ));
    out.sentences.push(match ring_faster_from(sizes) {
        Some(from) if from == first.bytes => format!(
            "The ring is faster at every size measured ({}).",
            last.quoted()
        ),
        Some(from) => format!(
            "The crossover as measured: from {} on, the ring is faster at every larger size \
             ({}).",
            size_label(from),
            last.quoted()
        ),
        None => format!(
            "No crossover from {} to {}: the ring is not faster beyond the intervals at the \
             largest size ({}).",
            size_label(first.bytes),
            size_label(last.bytes),
            last.quoted()
        ),
    });
    if first.ring_speedup().against(1.0) == Side::Below && devices > 1 {
        let why = match backend {
            Backend::Engine => format!(
                "it pushes 2k(k − 1) = {} ops, one per step and device, to the parameter \
                 server's k = {devices}, a fixed cost per op",
                2 * (devices - 1) * devices
            ),
            Backend::Mpi => format!(
                "each rank sends and receives 2(k − 1) = {} messages one after another where \
                 a worker of the parameter server sends one and receives one, a fixed latency \
                 per message",
                2 * (devices - 1)
            ),
        };
        out.sentences.push(format!(
            "The ring is slower {}: {why} that a small message does not amortize.",
            first.quoted(),
        ));
    }
    if let (Some((busbw, copy)), Backend::Engine) = (largest_busbw, backend) {
        let per_byte = ring_traffic_per_busbw_byte(devices);
        let bound = copy / per_byte;
        let lead = format!(
            "At {} the ring's bus bandwidth is {}: on {devices} devices sharing one memory it \
             reads and writes {per_byte} bytes for each byte of busbw, so the machine's \
             all-thread STREAM copy bandwidth of {} allows {} if every byte comes from memory",
            size_label(last.bytes),
            crate::units::human_gbytes_per_s(busbw),
            crate::units::human_gbytes_per_s(copy),
            crate::units::human_gbytes_per_s(bound),
        );
        let of_bound = busbw / bound;
        let reached = crate::units::human_percent(of_bound);
        out.sentences.push(if of_bound <= 1.0 {
            format!("{lead}; it reached {reached} of that.")
        } else {
            format!(
                "{lead}; it reached {reached}, more than memory alone allows: part of its \
                 traffic came from the caches (the gather reads back the chunks the reduce has \
                 just written), or the copy bandwidth was measured low."
            )
        });
    }
    out
}

/// Under MPI, the library's own all-reduce beside the ring over point-to-point at `bytes`
/// (the largest size), worded within the intervals.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(super) fn library_against_ring(bytes: u64, library: Estimate, ring: Estimate) -> String {
    let r = Ratio::of(library, ring);
    let verdict = match r.against(1.0) {
        Side::Below => "MPI_Allreduce is faster, beyond the intervals",
        Side::Above => "MPI_Allreduce is slower, beyond the intervals",
        Side::Within => "the two are indistinguishable here",
        Side::Unknown => "one of them was not measured",
    };
    format!(
        "At {}, MPI_Allreduce / the ring over point-to-point = {r}: {verdict}.",
        size_label(bytes)
    )
}

/// Decide the lesson from the largest size's times and the checks.
pub(super) fn conclude(run: &mut RunRecord, sizes: &[SizeTimes], devices: usize) {
    let agree = run.checks_passed();
    let verdict = match sizes.last() {
        Some(last) if devices > 1 => {
            let r = last.ring_speedup();
            let figure = format!("at {}, parameter-server / ring", size_label(last.bytes));
            let findings = vec![
                Finding::faster(&figure, r),
                Finding::checks("checks", agree),
            ];
            let here = format!("{figure} = {:.2}× on {devices} devices", r.value);
            Verdict::new(findings, here)
        }
        _ => Verdict::one_device("an all-reduce on one device moves nothing: no comparison."),
    };
    LESSON.conclude(run, &[], verdict);
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::scenario::kit::explained::testing::around as est;

    fn size(bytes: u64, ring: f64, ps: f64) -> SizeTimes {
        SizeTimes {
            bytes,
            ring: est(ring, 0.05),
            parameter_server: est(ps, 0.05),
        }
    }

    #[test]
    fn the_library_is_compared_with_the_ring_within_the_intervals() {
        let faster = library_against_ring(1 << 20, est(0.5, 0.05), est(1.0, 0.05));
        assert!(faster.contains("is faster, beyond"), "{faster}");
        let slower = library_against_ring(1 << 20, est(2.0, 0.05), est(1.0, 0.05));
        assert!(slower.contains("is slower, beyond"), "{slower}");
        let same = library_against_ring(1 << 20, est(1.02, 0.1), est(1.0, 0.1));
        assert!(same.contains("indistinguishable"), "{same}");
        assert!(same.starts_with("At 1MiB"), "{same}");
    }

    /// The run: the ring faster at 8 B–512 KiB, slower at 1–8 MiB, faster again from
    /// 16 MiB; the crossover is 16 MiB, and every region is named.
    #[test]
    fn the_regions_and_the_crossover_are_read_as_measured() {
        let sizes: Vec<SizeTimes> = [8, 512 << 10, 1 << 20, 8 << 20, 16 << 20, 64 << 20]
            .into_iter()
            .zip([0.5, 0.5, 2.0, 2.0, 0.5, 0.5])
            .map(|(b, ring)| size(b, ring, 1.0))
            .collect();
        assert_eq!(ring_faster_from(&sizes), Some(16 << 20));
        let text = |sizes: &[SizeTimes], busbw, sep| {
            let e = explain(sizes, 2, Backend::Engine, busbw);
            e.sentences.join(sep)
        };
        // 21.6 / 5 = 4.32 GB/s: 3.5 is 81% of it (once "16% of … 21.6 GB/s").
        assert_eq!(text(&sizes, Some((3.5, 21.6)), "\n"), "The ring against the parameter server, size by size within the intervals: faster at 8B–512KiB; slower at 1MiB–8MiB; faster at 16MiB–64MiB.\nThe crossover as measured: from 16MiB on, the ring is faster at every larger size (at 64MiB, parameter-server / ring = 2.00×, 95% interval 1.81–2.21×).\nAt 64MiB the ring's bus bandwidth is 3.5 GB/s: on 2 devices sharing one memory it reads and writes 5 bytes for each byte of busbw, so the machine's all-thread STREAM copy bandwidth of 21.6 GB/s allows 4.3 GB/s if every byte comes from memory; it reached 81% of that.");
        // Above the bound: said, with why it can be.
        let t = text(&sizes, Some((5.4, 20.3)), " ");
        assert!(
            t.contains("it reached 133%, more than memory alone allows: part of its traffic"),
            "{t}"
        );
        assert_eq!(ring_traffic_per_busbw_byte(2), 5.0);

        let slow_at_last = [size(8, 0.5, 1.0), size(1024, 1.02, 1.0)];
        assert_eq!(ring_faster_from(&slow_at_last), None);
        let t = text(&slow_at_last, None, " ");
        assert!(t.contains("No crossover from 8B to 1KiB"), "{t}");
        let always = [size(8, 0.5, 1.0), size(1024, 0.5, 1.0)];
        let t = text(&always, None, " ");
        assert!(t.contains("faster at every size measured"), "{t}");
        // The exercise's run (1KiB, 1MiB, 64MiB): slower at the smallest size, no crossover;
        // every sentence quotes parameter-server / ring, as the lesson does.
        let exercise = [
            SizeTimes {
                bytes: 1024,
                ring: est(226.9e-6, 0.025),
                parameter_server: est(202.4e-6, 0.025),
            },
            size(1 << 20, 505.8e-6, 353.8e-6),
            size(64 << 20, 13.07e-3, 13.67e-3),
        ];
        assert_eq!(text(&exercise, None, "\n"), "The ring against the parameter server, size by size within the intervals: slower at 1KiB–1MiB; indistinguishable at 64MiB.\nNo crossover from 1KiB to 64MiB: the ring is not faster beyond the intervals at the largest size (at 64MiB, parameter-server / ring = 1.05×, 95% interval 0.95–1.16×).\nThe ring is slower at 1KiB, parameter-server / ring = 0.89×, 95% interval 0.85–0.94×: it pushes 2k(k − 1) = 4 ops, one per step and device, to the parameter server's k = 2, a fixed cost per op that a small message does not amortize.");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1000))]

        /// Whatever the intervals, the explanation names a crossover exactly when the ring's
        /// interval lies wholly below the parameter server's at the largest size, and names the
        /// first size of that last run of such sizes.
        #[test]
        fn the_explanation_never_claims_more_than_its_intervals(
            times in proptest::collection::vec(
                ((0.5f64..2.0, 0.0f64..0.5), (0.5f64..2.0, 0.0f64..0.5)), 1..8),
        ) {
            let sizes: Vec<SizeTimes> = times
                .iter()
                .enumerate()
                .map(|(i, &((r, rr), (p, pr)))| SizeTimes {
                    bytes: 8 << i,
                    ring: est(r, rr),
                    parameter_server: est(p, pr),
                })
                .collect();
            let text = explain(&sizes, 2, Backend::Engine, None).sentences.join(" ");
            let below = |s: &SizeTimes| s.ring.hi < s.parameter_server.lo;
            let tail = sizes.iter().rev().take_while(|s| below(s)).count();
            match tail {
                0 => proptest::prop_assert!(text.contains("No crossover"), "{}", text),
                t if t == sizes.len() => proptest::prop_assert!(
                    text.contains("faster at every size measured"), "{}", text
                ),
                t => proptest::prop_assert!(
                    text.contains(&format!(
                        "from {} on, the ring is faster",
                        size_label(sizes[sizes.len() - t].bytes)
                    )),
                    "{}", text
                ),
            }
        }
    }
}
