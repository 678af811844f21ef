//! What a run's figures show: sentences, the findings they are chosen by, and warnings, each
//! computed by a scenario's pure `explain` from its typed summary and recorded on the run in
//! one place ([`Explained::record`]); a scenario declares its own warnings (`warnings!`).

use std::convert::Infallible;
use std::fmt::Display;

use crate::report::evidence::{Ratio, Side};
use crate::report::finding::Finding;
use crate::report::RunRecord;
use crate::units::faster_or_slower;

/// What a run's figures show (sentences) and which figures lie outside their physical range
/// (warnings, each with its likely cause). Scenarios compute it from plain numbers, so tests
/// can feed synthetic medians and check every quoted number and claim.
///
/// A warning is a value of `W`, the scenario's own `Warning` enum in its folder (`warnings!`,
/// hyperfine's `Warnings` is the model): a test asks which warning a run raised, not only how
/// it was worded, and adding one touches no shared file. A scenario that raises none keeps the
/// default, [`Infallible`].
#[derive(Debug, Clone, PartialEq)]
pub struct Explained<W = Infallible> {
    pub sentences: Vec<String>,
    /// Sentences that quote detail figures (engine internals, machine probes), shown with
    /// `--verbose`.
    pub detail: Vec<String>,
    pub warnings: Vec<W>,
    /// The physical limits the figures were held to ([`Finding::limit`]).
    pub limits: Vec<Finding>,
}

impl<W> Default for Explained<W> {
    fn default() -> Self {
        Explained {
            sentences: Vec::new(),
            detail: Vec::new(),
            warnings: Vec::new(),
            limits: Vec::new(),
        }
    }
}

impl<W: Display> Explained<W> {
    /// Hold a figure to a physical limit: the finding is kept, and `warning` is raised exactly
    /// when the figure lies wholly beyond the limit ([`Finding::breaks_limit`]), so the
    /// warning and the finding a surface shows cannot disagree. Returns whether it broke.
    pub fn limit(&mut self, finding: Finding, warning: impl FnOnce() -> W) -> bool {
        let broke = finding.breaks_limit();
        if broke {
            self.warnings.push(warning());
        }
        self.limits.push(finding);
        broke
    }

    /// Put the sentences into the run's explanation, the limits among its findings and the
    /// warnings into its notes.
    pub fn record(self, run: &mut RunRecord) {
        run.explanation.extend(self.sentences);
        run.explanation_detail.extend(self.detail);
        run.findings.extend(self.limits);
        for w in self.warnings {
            run.warn(w.to_string());
        }
    }
}

/// Declares a scenario's own `Warning` enum, in its folder: each variant with its fields and,
/// after `=>`, its wording as `write!`'s arguments in parentheses, the fields bound by value.
/// The enum derives `Debug`, `Clone` and `PartialEq`, so a test matches on which one a run
/// raised; `run_copy/explain.rs` declares three.
macro_rules! warnings {
    ($vis:vis enum $name:ident {
        $($(#[$vmeta:meta])* $variant:ident { $($field:ident: $ty:ty),* $(,)? }
            => ($($words:tt)+)),+ $(,)?
    }) => {
        #[derive(Debug, Clone, PartialEq)]
        $vis enum $name { $($(#[$vmeta])* $variant { $($field: $ty),* }),+ }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match *self {
                    $($name::$variant { $($field),* } => write!(f, $($words)+)),+
                }
            }
        }
    };
}
pub(crate) use warnings;

/// The sentence a comparison with 1 reads as, chosen by the side the ratio's interval lies on:
/// `{lead}: `, the words for that side (`[above, within, below]`) with the verdict (`1.50×
/// faster`, `1.20× slower`) where they hold `{}`, and a full stop; `{lead}: not measured.` when
/// it was not. The one wording of "faster" and "indistinguishable" a scenario's sentence gets.
pub fn compared(lead: &str, r: Ratio, [above, within, below]: [&str; 3]) -> String {
    let words = match r.against(1.0) {
        Side::Above => above,
        Side::Within => within,
        Side::Below => below,
        Side::Unknown => "not measured",
    };
    format!(
        "{lead}: {}.",
        words.replace("{}", &faster_or_slower(r.value))
    )
}

/// The likely cause of a figure outside its range when it compares medians of variants timed
/// in different rounds.
pub const BETWEEN_ROUNDS: &str =
    "likely noise between rounds: the variants are timed in different \
     rounds, and few samples leave their medians loose; raise --min-samples for firmer medians";

/// What the scenarios' explanation tests share: estimates around a median, and the check that
/// a sentence words a comparison no further than its interval allows.
#[cfg(test)]
pub(crate) mod testing {
    use crate::report::evidence::Estimate;
    use proptest::test_runner::TestCaseError;

    /// `median` with an interval reaching `below` and `above` of it, as fractions of it.
    pub(crate) fn spread(median: f64, (below, above): (f64, f64)) -> Estimate {
        Estimate {
            median,
            lo: median * (1.0 - below),
            hi: median * (1.0 + above),
        }
    }

    /// `median` with an interval reaching `reach` of it either side.
    pub(crate) fn around(median: f64, reach: f64) -> Estimate {
        spread(median, (reach, reach))
    }

    /// `sentence` says `× faster` only when `lo`–`hi` (computed by the test from the raw
    /// bounds) lies wholly above 1, `× slower` only wholly below, `indistinguishable` only
    /// across it.
    pub(crate) fn worded_within(sentence: &str, lo: f64, hi: f64) -> Result<(), TestCaseError> {
        proptest::prop_assert_eq!(sentence.contains("× faster"), lo > 1.0, "{}", sentence);
        proptest::prop_assert_eq!(sentence.contains("× slower"), hi < 1.0, "{}", sentence);
        let across = lo <= 1.0 && hi >= 1.0;
        proptest::prop_assert_eq!(
            sentence.contains("indistinguishable"),
            across,
            "{}",
            sentence
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_comparison_is_worded_by_the_side_its_interval_lies_on() {
        let r = |lo: f64, hi: f64| Ratio {
            value: (lo + hi) / 2.0,
            lo,
            hi,
        };
        let words = ["{} here", "indistinguishable here", "{}, beyond"];
        for ((lo, hi), want) in [
            ((1.2, 1.4), "a: 1.30× faster here."),
            ((0.9, 1.1), "a: indistinguishable here."),
            ((0.4, 0.6), "a: 2.00× slower, beyond."),
            ((f64::NAN, 1.0), "a: not measured."),
        ] {
            assert_eq!(compared("a", r(lo, hi), words), want);
        }
    }
}
