//! A judgment as one value: a figure with its 95% interval, the bound a claim or a physical
//! limit sets, and the side the figure must lie on. Everything a reader is told about it — the
//! evidence line of a lesson, whether the lesson held, the figure that decided it, a warning
//! when a figure lies where no run can put it — is rendered from this value by the functions
//! here, so two surfaces cannot word one judgment two ways or against two bounds.
//!
//! A report keeps its findings (`findings` in the JSON): the terminal table, the HTML page
//! and the chapter's summary read them from there.

use serde::{Deserialize, Serialize};

use super::evidence::{Ratio, Side};
use super::lesson::{Decided, Held};

/// One judgment of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The figure, as the claim names it: `sync / async`, `max(a, b) / parallel`, `checks`.
    pub figure: String,
    #[serde(flatten)]
    pub measure: Measure,
    pub role: Role,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "measure", rename_all = "snake_case")]
pub enum Measure {
    /// A figure with its 95% interval (of width zero for an exact count) that must lie wholly
    /// on the side `want` of `bound`.
    Bounded {
        #[serde(with = "unmeasured_as_null")]
        value: f64,
        #[serde(with = "unmeasured_as_null::pair")]
        ci95: [f64; 2],
        bound: f64,
        want: Want,
        #[serde(default)]
        scale: Scale,
    },
    /// Checks that pass or fail (results against a reference).
    Checks { passed: bool },
}

/// The side of its bound a figure must lie on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Want {
    Above,
    Below,
}

/// A figure that could not be measured (NaN) is `null` in the JSON and NaN again when read,
/// so an unmeasured finding round-trips as the inconclusive one it is.
mod unmeasured_as_null {
    use serde::{Deserialize, Deserializer, Serializer};

    fn out(v: f64) -> Option<f64> {
        v.is_finite().then_some(v)
    }

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_some(&out(*v))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }

    pub mod pair {
        use super::*;

        pub fn serialize<S: Serializer>(v: &[f64; 2], s: S) -> Result<S::Ok, S::Error> {
            s.serialize_some(&[out(v[0]), out(v[1])])
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[f64; 2], D::Error> {
            let [lo, hi] = <[Option<f64>; 2]>::deserialize(d)?;
            Ok([lo.unwrap_or(f64::NAN), hi.unwrap_or(f64::NAN)])
        }
    }
}

/// How a bounded figure is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scale {
    /// A ratio of two like quantities: `1.20×`.
    #[default]
    Ratio,
    /// A fraction, written as a percentage: `3.2%`.
    Percent,
}

impl Scale {
    fn write(self, v: f64) -> String {
        match self {
            Scale::Ratio => format!("{v:.2}×"),
            Scale::Percent => format!("{:.1}%", v * 100.0),
        }
    }

    fn bound(self, v: f64) -> String {
        match self {
            Scale::Ratio => format!("{v}"),
            Scale::Percent => format!("{}%", v * 100.0),
        }
    }
}

/// What a finding decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// A criterion of the scenario's lesson: on the wanted side the lesson holds, on the other
    /// it does not, across the bound it is undecided.
    Criterion,
    /// A physical limit: a figure wholly on the other side is impossible for the work it
    /// measures, and is a warning (its cause: noise between rounds, a clock, a bug).
    Limit,
    /// A figure the lesson quotes beside its criteria, against its own bound; it decides
    /// nothing.
    Observation,
}

impl Finding {
    /// A criterion of the lesson: `ratio` must lie wholly on side `want` of `bound`.
    pub fn criterion(figure: &str, ratio: Ratio, bound: f64, want: Want) -> Finding {
        Finding::bounded(figure, ratio, bound, want, Role::Criterion)
    }

    /// The criterion "a is faster than b": `ratio`, b's time over a's, wholly above 1.
    pub fn faster(figure: &str, ratio: Ratio) -> Finding {
        Finding::criterion(figure, ratio, 1.0, Want::Above)
    }

    /// A figure the lesson quotes beside its criteria, deciding nothing.
    pub fn observation(figure: &str, ratio: Ratio, bound: f64, want: Want) -> Finding {
        Finding::bounded(figure, ratio, bound, want, Role::Observation)
    }

    /// A physical limit: `ratio` wholly on the side opposite `want` of `bound` is a warning.
    pub fn limit(figure: &str, ratio: Ratio, bound: f64, want: Want) -> Finding {
        Finding::bounded(figure, ratio, bound, want, Role::Limit)
    }

    /// A criterion on an exact figure (a count, not a sample): no interval to reach across.
    pub fn exact(figure: &str, value: f64, bound: f64, want: Want) -> Finding {
        Finding::criterion(figure, Ratio::exact(value), bound, want)
    }

    /// The same finding, its figure and bound written as percentages.
    pub fn in_percent(mut self) -> Finding {
        if let Measure::Bounded { scale, .. } = &mut self.measure {
            *scale = Scale::Percent;
        }
        self
    }

    /// A criterion that the run's checks all passed.
    pub fn checks(figure: &str, passed: bool) -> Finding {
        Finding {
            figure: figure.into(),
            measure: Measure::Checks { passed },
            role: Role::Criterion,
        }
    }

    fn bounded(figure: &str, r: Ratio, bound: f64, want: Want, role: Role) -> Finding {
        Finding {
            figure: figure.into(),
            measure: Measure::Bounded {
                value: r.value,
                ci95: [r.lo, r.hi],
                bound,
                want,
                scale: Scale::Ratio,
            },
            role,
        }
    }

    /// The figure as a ratio with its interval; `None` for checks.
    pub fn ratio(&self) -> Option<Ratio> {
        match self.measure {
            Measure::Bounded { value, ci95, .. } => Some(Ratio {
                value,
                lo: ci95[0],
                hi: ci95[1],
            }),
            Measure::Checks { .. } => None,
        }
    }

    /// Where the figure lies against its bound, within its interval.
    pub fn side(&self) -> Side {
        match self.measure {
            Measure::Bounded { bound, .. } => {
                self.ratio().map_or(Side::Unknown, |r| r.against(bound))
            }
            Measure::Checks { passed: true } => Side::Above,
            Measure::Checks { passed: false } => Side::Below,
        }
    }

    /// Whether the figure lies wholly where it must: yes on the wanted side, no on the other,
    /// inconclusive across the bound or unmeasured.
    pub fn held(&self) -> Held {
        let want = match self.measure {
            Measure::Bounded { want, .. } => want,
            Measure::Checks { .. } => Want::Above,
        };
        match (self.side(), want) {
            (Side::Above, Want::Above) | (Side::Below, Want::Below) => Held::Yes,
            (Side::Above, Want::Below) | (Side::Below, Want::Above) => Held::No,
            (Side::Within | Side::Unknown, _) => Held::Inconclusive,
        }
    }

    /// A limit's figure lies wholly where no run can put it.
    pub fn breaks_limit(&self) -> bool {
        self.role == Role::Limit && self.held() == Held::No
    }

    /// The figure, its interval and where it lies against the bound:
    /// `sync / async = 5.60×, 95% interval 5.10–6.02×: wholly above 1`. The one wording of a
    /// finding, wherever it is shown.
    pub fn evidence(&self) -> String {
        match self.measure {
            Measure::Checks { passed: true } => format!("{} passed", self.figure),
            Measure::Checks { passed: false } => format!("{} FAILED", self.figure),
            Measure::Bounded {
                value,
                ci95,
                bound,
                scale,
                ..
            } => {
                let figure = match (ci95[0] == ci95[1] && ci95[0] == value, scale) {
                    (true, _) => scale.write(value),
                    (false, Scale::Ratio) => self
                        .ratio()
                        .map_or_else(String::new, |r| r.quoted_against(bound)),
                    (false, Scale::Percent) => format!(
                        "{}, 95% interval {}–{}",
                        scale.write(value),
                        scale.write(ci95[0]),
                        scale.write(ci95[1])
                    ),
                };
                let (side, bound) = (self.side(), scale.bound(bound));
                let side = match side {
                    Side::Unknown => "not measured".to_string(),
                    Side::Within => format!("{} {bound}: indistinguishable", side_phrase(side)),
                    _ => format!("{} {bound}", side_phrase(side)),
                };
                format!("{} = {figure}: {side}", self.figure)
            }
        }
    }

    /// About how many samples a variant would decide this finding, where `n` left its interval
    /// reaching across the bound: an interval narrows as one over the square root of the
    /// samples, so with the same spread it clears the bound at `n · (reach / distance)²`, the
    /// reach being the interval's side toward the bound (an interval is often lopsided), and
    /// always more than `n`. `None` where the finding is decided, unmeasured, or its median
    /// sits on the bound.
    pub fn samples_to_decide(&self, n: usize) -> Option<usize> {
        let Measure::Bounded {
            value, ci95, bound, ..
        } = self.measure
        else {
            return None;
        };
        if self.side() != Side::Within || n == 0 {
            return None;
        }
        let reach = if value > bound {
            value - ci95[0]
        } else {
            ci95[1] - value
        };
        let distance = (value - bound).abs();
        let needed = n as f64 * (reach / distance).powi(2);
        (distance > 0.0 && needed.is_finite()).then(|| (needed.ceil() as usize).max(n + 1))
    }

    /// The figure that decided a lesson, for the JSON's `lesson.decided`.
    pub fn decided(&self) -> Option<Decided> {
        match self.measure {
            Measure::Bounded {
                value, ci95, bound, ..
            } if [value, ci95[0], ci95[1]].iter().all(|v| v.is_finite()) => {
                Some(Decided { value, ci95, bound })
            }
            _ => None,
        }
    }
}

/// The words that put a figure on its side of a bound named after them: `wholly above`,
/// `wholly below`, `reaching across`, `not measured against`.
pub fn side_phrase(side: Side) -> &'static str {
    match side {
        Side::Above => "wholly above",
        Side::Below => "wholly below",
        Side::Within => "reaching across",
        Side::Unknown => "not measured against",
    }
}

/// Several criteria that must all hold: a no if any is a no, a yes only if all are (and
/// there is at least one).
pub fn all_held(findings: &[Finding]) -> Held {
    let criteria: Vec<Held> = findings
        .iter()
        .filter(|f| f.role == Role::Criterion)
        .map(Finding::held)
        .collect();
    if criteria.contains(&Held::No) {
        Held::No
    } else if !criteria.is_empty() && criteria.iter().all(|h| *h == Held::Yes) {
        Held::Yes
    } else {
        Held::Inconclusive
    }
}

/// The lesson's evidence: each criterion's and observation's [`Finding::evidence`], in order.
pub fn evidence(findings: &[Finding]) -> String {
    let lines: Vec<String> = findings
        .iter()
        .filter(|f| f.role != Role::Limit)
        .map(Finding::evidence)
        .collect();
    format!("{}.", lines.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::evidence::Estimate;
    use proptest::prelude::*;

    fn r(value: f64, lo: f64, hi: f64) -> Ratio {
        Ratio { value, lo, hi }
    }

    #[test]
    fn a_finding_holds_only_wholly_on_its_side() {
        let yes = Finding::criterion("a / b", r(1.2, 1.1, 1.3), 1.0, Want::Above);
        assert_eq!(yes.held(), Held::Yes);
        assert_eq!(
            yes.evidence(),
            "a / b = 1.20×, 95% interval 1.10–1.30×: wholly above 1"
        );
        // An interval wholly above 1 whose end rounds to 1.00 is printed with the digits
        // that show it.
        let close = Finding::criterion("a / b", r(1.01, 1.003, 1.02), 1.0, Want::Above);
        assert_eq!(
            close.evidence(),
            "a / b = 1.010×, 95% interval 1.003–1.020×: wholly above 1"
        );
        let across = Finding::criterion("a / b", r(1.2, 0.9, 1.3), 1.0, Want::Above);
        assert_eq!(across.held(), Held::Inconclusive);
        assert!(across
            .evidence()
            .ends_with("reaching across 1: indistinguishable"));
        let below = Finding::criterion("a / b", r(1.1, 1.05, 1.2), 1.25, Want::Below);
        assert_eq!(below.held(), Held::Yes);
        let no = Finding::criterion("a / b", r(1.4, 1.3, 1.5), 1.25, Want::Below);
        assert_eq!(no.held(), Held::No);
        let exact = Finding::exact("peaks", 20.0, 2.0, Want::Above);
        assert_eq!(exact.evidence(), "peaks = 20.00×: wholly above 2");
        let steady = Finding::exact("reach", 0.032, 0.1, Want::Below).in_percent();
        assert_eq!(steady.evidence(), "reach = 3.2%: wholly below 10%");
        assert_eq!(steady.held(), Held::Yes);
        let nan = Finding::criterion("a / b", r(f64::NAN, 1.0, 1.0), 1.0, Want::Above);
        assert_eq!(nan.held(), Held::Inconclusive);
        assert_eq!(nan.decided(), None);
        assert_eq!(Finding::checks("checks", false).evidence(), "checks FAILED");
    }

    #[test]
    fn an_undecided_finding_says_about_how_many_samples_would_decide_it() {
        // Half-width 0.2, 0.1 from the bound: four times the samples.
        let f = Finding::criterion("a / b", r(1.1, 0.9, 1.3), 1.0, Want::Above);
        assert_eq!(f.samples_to_decide(5), Some(20));
        let decided = Finding::criterion("a / b", r(1.2, 1.1, 1.3), 1.0, Want::Above);
        assert_eq!(decided.samples_to_decide(5), None);
        let on_the_bound = Finding::criterion("a / b", r(1.0, 0.9, 1.1), 1.0, Want::Above);
        assert_eq!(on_the_bound.samples_to_decide(5), None);
        assert_eq!(f.samples_to_decide(0), None);
        // A lopsided interval: the side toward the bound decides, and never n or fewer (the
        // run that read 1.19×, 95% interval 1.00–1.31× after 10 samples once said 7).
        let lopsided = Finding::criterion("a / b", r(1.19, 0.998, 1.31), 1.0, Want::Above);
        assert_eq!(lopsided.samples_to_decide(10), Some(11));
        let far = Finding::criterion("a / b", r(1.19, 0.81, 1.31), 1.0, Want::Above);
        assert_eq!(far.samples_to_decide(10), Some(40));
    }

    #[test]
    fn limits_warn_and_do_not_decide_the_lesson() {
        let beyond = Finding::limit("max / par", r(1.07, 1.02, 1.1), 1.0, Want::Below);
        assert!(beyond.breaks_limit());
        let within = Finding::limit("max / par", r(1.02, 0.98, 1.1), 1.0, Want::Below);
        assert!(!within.breaks_limit());
        let yes = Finding::criterion("a / b", r(1.2, 1.1, 1.3), 1.0, Want::Above);
        assert_eq!(all_held(&[yes.clone(), beyond]), Held::Yes);
        assert_eq!(all_held(&[]), Held::Inconclusive);
        assert_eq!(all_held(&[yes, Finding::checks("checks", false)]), Held::No);
    }

    #[test]
    fn a_finding_reads_back_from_its_json() {
        let f = Finding::criterion("a / b", r(1.2, 1.1, 1.3), 1.0, Want::Above);
        let json = serde_json::to_value(&f).expect("json");
        assert_eq!(json["measure"], "bounded");
        assert_eq!(json["want"], "above");
        assert_eq!(json["role"], "criterion");
        let back: Finding = serde_json::from_value(json).expect("back");
        assert_eq!(back, f);
        // An unmeasured figure is null in the JSON, and reads back as unmeasured.
        let nan = Finding::criterion("a / b", r(f64::NAN, f64::NAN, 1.0), 1.0, Want::Above);
        let json = serde_json::to_value(&nan).expect("json");
        assert!(
            json["value"].is_null() && json["ci95"][0].is_null(),
            "{json}"
        );
        let back: Finding = serde_json::from_value(json).expect("back");
        assert_eq!(back.held(), Held::Inconclusive);
        assert!(back
            .ratio()
            .is_some_and(|r| r.value.is_nan() && r.hi == 1.0));
        let c = Finding::checks("checks", true);
        let back: Finding =
            serde_json::from_value(serde_json::to_value(&c).expect("json")).expect("back");
        assert_eq!(back, c);
    }

    proptest! {
        /// Two overlapping intervals never give a yes for "a is faster than b", and the
        /// evidence line names the side the verdict comes from.
        #[test]
        fn overlapping_intervals_are_never_a_yes(
            m in 0.5f64..2.0, spread_a in 0.0f64..0.5, spread_b in 0.0f64..0.5,
        ) {
            let a = Estimate { median: m, lo: m * (1.0 - spread_a), hi: m * (1.0 + spread_a) };
            let b = Estimate { median: 1.0, lo: 1.0 - spread_b, hi: 1.0 + spread_b };
            let f = Finding::criterion("a / b", Ratio::of(a, b), 1.0, Want::Above);
            let overlap = a.lo <= b.hi && b.lo <= a.hi;
            if overlap {
                prop_assert_ne!(f.held(), Held::Yes);
            }
            let words = f.evidence();
            prop_assert_eq!(f.held() == Held::Yes, words.contains("wholly above 1"), "{}", words);
            prop_assert_eq!(f.held() == Held::No, words.contains("wholly below 1"), "{}", words);
        }
    }
}
