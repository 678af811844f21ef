//! What `cpu-gpu`'s figures show, in sentences, from the medians as plain numbers.

use crate::scenario::support::Explained;
use crate::scenario::Warning;
use crate::units::{faster_or_slower, human_time};

/// Above this relative reach of a median's 95% interval, the overlap efficiency is called uncertain.
const UNCERTAIN_MEDIAN: f64 = 0.05;

/// The medians the explanation quotes, and how far each one's 95% interval reaches
/// ([`RunRecord::median_uncertainty`]), as plain numbers.
#[derive(Debug, Clone, Copy)]
pub(super) struct DeviceTimes {
    pub(super) a: f64,
    pub(super) b: f64,
    pub(super) par: f64,
    pub(super) one: f64,
    pub(super) a_uncertainty: f64,
    pub(super) b_uncertainty: f64,
    pub(super) par_uncertainty: f64,
    /// The same overlap efficiency for the same products on two plain threads, no engine (the
    /// CPU fallback only): what this machine allows.
    pub(super) ceiling: Option<f64>,
}

/// What the figures show, and the figures outside their physical range: an overlap
/// efficiency max(a, b) / parallel above 1 (and with it a parallel speed-up above 2 devices).
pub(super) fn explain(f: &DeviceTimes, device_b: &str) -> Explained {
    let (a, b, par) = (f.a, f.b, f.par);
    let overlap = a.max(b) / par;
    let mut out = Explained::default();
    out.sentences.push(format!(
        "pushed together, A ({}) and B ({}) took {} instead of a + b = {} one after the other: \
         {}, overlap efficiency max(a, b)/parallel = {overlap:.2} (1.0 is perfect overlap).",
        human_time(a),
        human_time(b),
        human_time(par),
        human_time(a + b),
        faster_or_slower((a + b) / par)
    ));
    let (slower, slower_uncertainty) = if a >= b {
        ("a-alone", f.a_uncertainty)
    } else {
        ("b-alone", f.b_uncertainty)
    };
    let spread = slower_uncertainty.max(f.par_uncertainty);
    if spread > UNCERTAIN_MEDIAN {
        out.sentences.push(format!(
            "the overlap efficiency is uncertain by about ±{:.0}%: the 95% confidence interval of the \
             {slower} or parallel median reaches that far; take more samples (--min-samples) for a firmer figure.",
            spread * 100.0
        ));
    }
    if overlap > 1.0 {
        out.sentences.push(format!(
            "an overlap efficiency above 1.0 ({overlap:.2}) does not beat perfect overlap: A and B alone were \
             measured in other rounds and ran slower there than inside the parallel variant (noise between rounds)."
        ));
        out.warnings.push(Warning::OverlapAboveOne {
            overlap,
            speedup: (a + b) / par,
        });
    }
    if let Some(c) = f.ceiling {
        out.sentences.push(format!(
            "the machine's own ceiling: the same products on two plain threads, without the \
             engine, overlap with an efficiency of {c:.2}; the engine's {overlap:.2} is {:.2} of it.",
            overlap / c
        ));
    }
    out.sentences
        .push(one_device_sentence(f.one, a + b, device_b));
    out
}

/// What running both workloads on one device showed, worded by the figures: `one` against
/// `sequential` = a + b measured on their own devices.
fn one_device_sentence(one: f64, sequential: f64, device: &str) -> String {
    let ratio = sequential / one;
    let verdict = if ratio < 0.95 {
        format!(
            "{} than a + b ({}): one device runs its lane's ops one after the other, and here it \
             also ran them slower than the two devices did",
            faster_or_slower(ratio),
            human_time(sequential)
        )
    } else if ratio <= 1.1 {
        format!(
            "about a + b ({}): one device runs its lane's ops one after the other, so it gains little",
            human_time(sequential)
        )
    } else {
        format!(
            "{} than a + b ({}): the device had capacity to spare when each workload ran on its own device",
            faster_or_slower(ratio),
            human_time(sequential)
        )
    };
    format!(
        "both workloads on {device} alone took {}, {verdict}.",
        human_time(one)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_one_device_sentence_follows_its_numbers() {
        let slower = one_device_sentence(2.4, 2.0, "cpu:1");
        assert!(
            slower.contains("took 2.400 s") && slower.contains("1.20× slower than a + b (2.000 s)"),
            "{slower}"
        );
        assert!(!slower.contains("gains little"), "{slower}");
        let same = one_device_sentence(2.0, 2.1, "cpu:1");
        assert!(
            same.contains("about a + b") && same.contains("gains little"),
            "{same}"
        );
        let faster = one_device_sentence(1.0, 2.0, "cuda:0");
        assert!(faster.contains("2.00× faster than a + b"), "{faster}");
    }

    fn medians(a: f64, b: f64, par: f64, one: f64) -> DeviceTimes {
        DeviceTimes {
            a,
            b,
            par,
            one,
            a_uncertainty: 0.01,
            b_uncertainty: 0.01,
            par_uncertainty: 0.01,
            ceiling: None,
        }
    }

    #[test]
    fn the_explanation_quotes_its_own_arithmetic() {
        let e = explain(&medians(2.0, 1.0, 2.5, 3.6), "cpu:1");
        let all = e.sentences.join("\n");
        // a + b = 3 s; (a + b) / parallel = 1.2; max(a, b) / parallel = 0.8.
        assert!(
            all.contains("A (2.000 s) and B (1.000 s) took 2.500 s instead of a + b = 3.000 s"),
            "{all}"
        );
        assert!(
            all.contains("1.20× faster, overlap efficiency max(a, b)/parallel = 0.80"),
            "{all}"
        );
        // one-device 0.83× of a + b (3 / 3.6): slower, and not "gains little".
        assert!(
            all.contains("took 3.600 s, 1.20× slower than a + b (3.000 s)"),
            "{all}"
        );
        assert!(!all.contains("gains little"), "{all}");
        assert!(!all.contains("uncertain"), "{all}");
        assert!(e.warnings.is_empty(), "{:?}", e.warnings);
        assert!(!all.contains("ceiling"), "{all}");
        // Beside the machine's own ceiling: 0.80 / 0.95 = 0.84 of it.
        let mut f = medians(2.0, 1.0, 2.5, 3.6);
        f.ceiling = Some(0.95);
        let all = explain(&f, "cpu:1").sentences.join("\n");
        assert!(
            all.contains("overlap with an efficiency of 0.95; the engine's 0.80 is 0.84 of it."),
            "{all}"
        );
    }

    #[test]
    fn an_efficiency_above_one_is_a_warning_with_its_cause() {
        // max(2, 1.9) / 1.87 = 1.07, (2 + 1.9) / 1.87 = 2.09.
        let e = explain(&medians(2.0, 1.9, 1.87, 3.9), "cpu:1");
        assert_eq!(e.warnings.len(), 1, "{:?}", e.warnings);
        let w = e.warnings[0].to_string();
        assert!(
            w.contains("= 1.07 is above 1.0") && w.contains("speed-up 2.09×"),
            "{w}"
        );
        assert!(
            w.contains("noise between rounds") && w.contains("--min-samples"),
            "{w}"
        );
        assert!(e.sentences.join(" ").contains("above 1.0 (1.07)"));
        // Perfect overlap exactly is in range.
        assert!(explain(&medians(2.0, 1.9, 2.0, 3.9), "cpu:1")
            .warnings
            .is_empty());
    }

    #[test]
    fn a_loose_median_is_called_uncertain() {
        let mut f = medians(2.0, 1.0, 2.5, 3.0);
        f.a_uncertainty = 0.12;
        let all = explain(&f, "cpu:1").sentences.join("\n");
        assert!(
            all.contains("uncertain by about ±12%") && all.contains("a-alone"),
            "{all}"
        );
        // The faster device's median does not decide it.
        let mut f = medians(2.0, 1.0, 2.5, 3.0);
        f.b_uncertainty = 0.12;
        assert!(!explain(&f, "cpu:1")
            .sentences
            .join("\n")
            .contains("uncertain"));
    }
}
