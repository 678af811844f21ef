//! A scenario's lesson as a claim, and whether it held on this machine: decided from the run's
//! figures within their intervals, so that figures that cannot tell the two sides apart give
//! [`Held::Inconclusive`], never a yes.

use serde::{Deserialize, Serialize};

use crate::machine::BusyReason;

/// Whether the claim held here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Held {
    /// The figures, within their intervals, show it.
    Yes,
    /// The figures, within their intervals, show the opposite.
    No,
    /// The intervals reach across the criterion, a figure is missing, or the machine was busy
    /// (whichever way the figures pointed).
    Inconclusive,
}

impl Held {
    pub fn word(self) -> &'static str {
        match self {
            Held::Yes => "yes",
            Held::No => "no",
            Held::Inconclusive => "inconclusive",
        }
    }
}

/// The figure and interval that decided a lesson, against the criterion's bound.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Decided {
    pub value: f64,
    /// The 95% interval the figure's parts allow.
    pub ci95: [f64; 2],
    /// The bound the claim sets it against.
    pub bound: f64,
}

/// A lesson of the chapter and its verdict on this run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lesson {
    /// The book's section (`§8.2`).
    pub section: String,
    /// What the chapter claims, with its criterion.
    pub claim: String,
    pub held: Held,
    /// The figures and intervals that decided it, in a sentence or two.
    pub evidence: String,
    /// The reader's figure in a few words, for the chapter's summary table.
    pub here: String,
    /// The book's comparable figure in a few words, where the section printed one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub book: Option<String>,
    /// The figure behind the verdict, where one figure decided it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided: Option<Decided>,
}

/// The one rule for a verdict on a busy machine: whatever the figures say, inconclusive.
pub fn busy_rule(held: Held, reasons: &[BusyReason]) -> Held {
    if reasons.is_empty() {
        held
    } else {
        Held::Inconclusive
    }
}

impl Lesson {
    /// A lesson decided on a busy machine says so: the figures then describe what else ran
    /// as much as the lesson — other processes can make a no of a yes and a yes of a no — so
    /// either becomes inconclusive ([`busy_rule`]).
    pub fn on_busy_machine(&mut self, reasons: &[BusyReason]) {
        if busy_rule(self.held, reasons) == self.held {
            return;
        }
        let why: Vec<String> = reasons.iter().map(ToString::to_string).collect();
        self.evidence.push_str(&format!(
            " The machine was busy ({}): these figures do not decide the lesson.",
            why.join("; ")
        ));
        self.held = Held::Inconclusive;
    }
}
