//! What a `matmul` run showed: its rate and time per product, its fraction of the machine's FMA
//! peak, and the lesson (the yardstick the other scenarios measure against).

use super::{Timed, FRACTION_OF_PEAK};
use crate::machine::{FmaPeak, Probe};
use crate::report::finding::{Finding, Want};
use crate::report::{BookFigure, RunRecord};
use crate::scenario::book;
use crate::scenario::kit::{gflops, warnings, LessonSpec, Verdict};
use crate::units::human_percent;

warnings! {
    enum Warning {
        /// Products faster than the FMA peak measured before the run.
        AboveFmaPeak { fraction: f64 } => (
            "the products ran at {} of the FMA peak measured before the run: the machine was \
             busier while the peak was measured (another process on its cores) than during the \
             run, so the peak, and fraction_of_peak, read wrong; parbench devices --probe on a \
             quiet machine measures it again",
            human_percent(fraction)
        ),
    }
}

/// What the run showed: the rate of `ops` products of m×k · k×n taking `median` seconds in all,
/// and the time of one product, both from that one median.
fn explain(device: &str, median: f64, ops: u64, (m, k, n): (usize, usize, usize)) -> String {
    format!(
        "{device} reaches {:.1} GFLOP/s on {m}×{k} · {k}×{n} ({} per product).",
        gflops(ops, (m, k, n), median),
        crate::units::human_time(median / ops as f64)
    )
}

/// The explanation of a run of `ops` products of `dims` on `device` (its CPU threads; `None`
/// on a GPU) taking `median` seconds, its fraction of the FMA peak (CPU devices) and its
/// lesson.
pub(super) fn explain_run(
    run: &mut RunRecord,
    device: &str,
    median: f64,
    ops: u64,
    dims: (usize, usize, usize),
    cpu_threads: Option<usize>,
    fma: &Probe<FmaPeak>,
) {
    let rate = gflops(ops, dims, median);
    run.explanation.push(explain(device, median, ops, dims));
    match (cpu_threads, fma) {
        (Some(threads), Probe::Measured(peak)) => {
            let (fraction, sentence) = of_peak(rate, threads, peak);
            run.record(FRACTION_OF_PEAK, fraction);
            run.explanation.push(sentence);
            if fraction > ABOVE_PEAK {
                run.warn(Warning::AboveFmaPeak { fraction }.to_string());
            }
        }
        (Some(_), Probe::NotMeasured(why)) => run.unmeasured(
            FRACTION_OF_PEAK,
            format!("the machine's FMA peak was not measured ({why})"),
        ),
        (None, _) => run.unmeasured(FRACTION_OF_PEAK, "the FMA peak is the CPU's, not the GPU's"),
    }
    conclude(run, rate, dims, device);
}

/// The lesson: the chapter's workload measured alone, the yardstick of the other scenarios.
pub(super) const LESSON: LessonSpec = LessonSpec {
    source: book::TF2_CPU_GPU,
    claim: "the yardstick holds: the product matches a float64 reference and its rate is \
            steady (the median's 95% interval within ±10%)",
};

/// How far the median's interval may reach for the rate to serve as a yardstick.
const STEADY: f64 = 0.10;

pub(super) const BOOK: &[BookFigure] = &[book::TF2_CPU_PRODUCTS, book::NUMPY_PRODUCTS];

/// Decide the lesson from the check and the median's interval.
fn conclude(run: &mut RunRecord, rate: f64, shape: (usize, usize, usize), device: &str) {
    let matches = run.checks_passed();
    let reach = run
        .median_uncertainty(Timed::Matmul.name())
        .unwrap_or(f64::NAN);
    let rate_of = |f: &BookFigure| f.implied_flops().map_or(f64::NAN, |r| r / 1e9);
    let (cpu, numpy) = (&book::TF2_CPU_PRODUCTS, &book::NUMPY_PRODUCTS);
    let book = format!(
        "{}: {} for 10 × 2000², {:.0} GFLOP/s; {}: NumPy {}, {:.0} GFLOP/s with its randn (CPUs \
         not named; here {}×{}×{} on {device})",
        book::TF2_CPU_GPU.cite(),
        cpu.printed(),
        rate_of(cpu),
        book::PYTORCH_ASYNC.cite(),
        numpy.printed(),
        rate_of(numpy),
        shape.0,
        shape.1,
        shape.2,
    );
    let steady = Finding::exact(
        "the median's 95% interval's reach",
        reach,
        STEADY,
        Want::Below,
    );
    let findings = vec![
        Finding::checks("reference check", matches),
        steady.in_percent(),
    ];
    let verdict = Verdict::new(findings, format!("{rate:.1} GFLOP/s")).beside(book);
    LESSON.conclude(run, BOOK, verdict);
}

/// A fraction of the FMA peak above this is outside the physical range: the peak was read
/// low (probes and run alike read within a few percent of each other on a quiet machine).
const ABOVE_PEAK: f64 = 1.05;

/// How close `rate` GFLOP/s on `threads` threads came to the FMA peak, as a fraction, and in
/// words that quote the very peak it is a fraction of.
fn of_peak(rate: f64, threads: usize, peak: &FmaPeak) -> (f64, String) {
    let against = peak.for_threads(threads);
    let fraction = rate / against;
    let cores = threads.clamp(1, peak.cores);
    let how = if threads >= peak.cores && cores > 1 {
        format!("its {cores} cores at once")
    } else {
        format!(
            "{} per core × {cores}",
            crate::units::human_gflops(peak.per_core_gflops)
        )
    };
    let sentence = format!(
        "{} is {} of this machine's {} FMA peak on {cores} core{}: {} ({how}, measured by \
         parbench before the run).",
        crate::units::human_gflops(rate),
        human_percent(fraction),
        peak.unit.as_str(),
        if cores == 1 { "" } else { "s" },
        crate::units::human_gflops(against),
    );
    (fraction, sentence)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_explanation_quotes_one_median_two_ways() {
        // 10 products of 1000³ (2 GFLOP each) in 0.1 s: 200 GFLOP/s, 10 ms a product.
        assert_eq!(
            explain("cpu:0 (2 threads)", 0.1, 10, (1000, 1000, 1000)),
            "cpu:0 (2 threads) reaches 200.0 GFLOP/s on 1000×1000 · 1000×1000 (10.00 ms per product)."
        );
        // Non-square: 2·m·k·n per product.
        assert_eq!(
            explain("cpu:0", 2e-3, 1, (100, 200, 50)),
            "cpu:0 reaches 1.0 GFLOP/s on 100×200 · 200×50 (2.000 ms per product)."
        );
    }

    #[test]
    fn the_fraction_of_peak_is_over_the_peak_for_the_threads() {
        // All cores at once read less than twice one core (as a VM's host often gives).
        let peak = FmaPeak::of_two_cores(199.2, 354.6);
        let (fraction, sentence) = of_peak(354.6, 2, &peak);
        assert_eq!(fraction, 1.0);
        assert_eq!(
            sentence,
            "354.6 GFLOP/s is 100% of this machine's AVX-512 FMA peak on 2 cores: 354.6 GFLOP/s \
             (its 2 cores at once, measured by parbench before the run)."
        );
        let (fraction, sentence) = of_peak(99.6, 1, &peak);
        assert_eq!(fraction, 0.5);
        assert_eq!(sentence, "99.6 GFLOP/s is 50% of this machine's AVX-512 FMA peak on 1 core: 199.2 GFLOP/s (199.2 GFLOP/s per core × 1, measured by parbench before the run).");
        // The issue's run: 177.3 GFLOP/s per core, all cores at once 199.2 — the
        // sentence quotes the peak it divides by (once "139% … (177.3 GFLOP/s per core)").
        let issue = FmaPeak::of_two_cores(177.3, 199.2);
        assert_eq!(of_peak(277.0, 2, &issue).1, "277.0 GFLOP/s is 139% of this machine's AVX-512 FMA peak on 2 cores: 199.2 GFLOP/s (its 2 cores at once, measured by parbench before the run).");
        // More threads than cores: the peak of all cores.
        assert_eq!(of_peak(354.6, 8, &peak).0, 1.0);
        let above = Warning::AboveFmaPeak { fraction: 1.17 }.to_string();
        assert!(above.starts_with("the products ran at 117% of the FMA peak"));
    }
}
