//! What a run's figures show: sentences, the findings they are chosen by, and warnings, each
//! computed by a scenario's pure `explain` from its typed summary and recorded on the run in
//! one place ([`Explained::record`]).

use crate::report::finding::Finding;
use crate::report::RunRecord;
use crate::scenario::Warning;

/// What a run's figures show (sentences) and which figures lie outside their physical range
/// (warnings, each with its likely cause). Scenarios compute it from plain numbers, so tests
/// can feed synthetic medians and check every quoted number and claim.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Explained {
    pub sentences: Vec<String>,
    /// Sentences that quote detail figures (engine internals, machine probes), shown with
    /// `--verbose`.
    pub detail: Vec<String>,
    pub warnings: Vec<Warning>,
    /// The physical limits the figures were held to ([`Finding::limit`]).
    pub limits: Vec<Finding>,
}

impl Explained {
    /// Hold a figure to a physical limit: the finding is kept, and `warning` is raised exactly
    /// when the figure lies wholly beyond the limit ([`Finding::breaks_limit`]), so the
    /// warning and the finding a surface shows cannot disagree. Returns whether it broke.
    pub fn limit(&mut self, finding: Finding, warning: impl FnOnce() -> Warning) -> bool {
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

/// The likely cause of a figure outside its range when it compares medians of variants timed
/// in different rounds.
pub const BETWEEN_ROUNDS: &str =
    "likely noise between rounds: the variants are timed in different \
     rounds, and few samples leave their medians loose; raise --min-samples for firmer medians";
