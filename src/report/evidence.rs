//! Figures with their uncertainty, and comparisons that never claim more than the figures
//! show: a ratio of two medians carries the interval their 95% intervals allow, and a
//! comparison with a bound (1 for "faster", a ceiling, a floor) says *indistinguishable* when
//! that interval reaches across it. Explanations word their comparisons through [`Side`], so a
//! sentence reads correctly whichever side a measurement lands on.

use super::RunRecord;

/// A median with its 95% confidence interval, in the variant's unit (seconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub median: f64,
    pub lo: f64,
    pub hi: f64,
}

impl Estimate {
    /// A variant's median and interval; NaN throughout when the run has no such variant.
    pub fn of(run: &RunRecord, variant: &str) -> Estimate {
        run.variant(variant)
            .map_or(Estimate::exact(f64::NAN), |v| Estimate {
                median: v.summary.median_s,
                lo: v.summary.ci95_s[0],
                hi: v.summary.ci95_s[1],
            })
    }

    /// A figure known exactly (an interval of width zero).
    pub const fn exact(value: f64) -> Estimate {
        Estimate {
            median: value,
            lo: value,
            hi: value,
        }
    }

    /// `f` of two estimates, bound by bound (`f` grows with both): a median from their
    /// medians, an interval from their intervals.
    pub fn combined(a: Estimate, b: Estimate, f: impl Fn(f64, f64) -> f64) -> Estimate {
        Estimate {
            median: f(a.median, b.median),
            lo: f(a.lo, b.lo),
            hi: f(a.hi, b.hi),
        }
    }
}

/// A figure with its 95% interval: a ratio `a / b` with the interval the two estimates'
/// intervals allow for it ([`Ratio::of`]), or one run's value of a figure
/// ([`super::noise::Observation`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ratio {
    pub value: f64,
    pub lo: f64,
    pub hi: f64,
}

impl Ratio {
    /// A figure known exactly (a count, a derived ratio, a probe, a figure of one sample): an
    /// interval of width zero.
    pub const fn exact(value: f64) -> Ratio {
        Ratio {
            value,
            lo: value,
            hi: value,
        }
    }

    /// A sample's median with its 95% interval.
    pub fn median_of(s: &crate::harness::Summary) -> Ratio {
        let [lo, hi] = s.ci95_s;
        Ratio {
            value: s.median_s,
            lo,
            hi,
        }
    }

    /// `a / b`, from the smallest `a` over the largest `b` to the largest `a` over the
    /// smallest `b`.
    pub fn of(a: Estimate, b: Estimate) -> Ratio {
        Ratio {
            value: a.median / b.median,
            lo: a.lo / b.hi,
            hi: a.hi / b.lo,
        }
    }

    /// Where the ratio lies against `bound`: above or below only when its whole interval is.
    /// A ratio with no finite interval is [`Side::Unknown`].
    pub fn against(&self, bound: f64) -> Side {
        if !(self.lo.is_finite() && self.hi.is_finite() && self.value.is_finite()) {
            Side::Unknown
        } else if self.lo > bound {
            Side::Above
        } else if self.hi < bound {
            Side::Below
        } else {
            Side::Within
        }
    }

    /// The ratio as [`Display`](std::fmt::Display) words it, with one or two more digits
    /// where an interval wholly on one side of `bound` would print an end equal to it:
    /// `1.010×, 95% interval 1.003–1.020×: wholly above 1`, never `1.00–1.02×`.
    pub fn quoted_against(&self, bound: f64) -> String {
        let prints_bound = |d: usize| {
            let same = |x: f64| format!("{x:.d$}") == format!("{bound:.d$}");
            matches!(self.against(bound), Side::Above | Side::Below)
                && (same(self.lo) || same(self.hi))
        };
        let digits = (2..4).find(|&d| !prints_bound(d)).unwrap_or(4);
        self.quoted(digits)
    }

    fn quoted(&self, d: usize) -> String {
        format!(
            "{:.d$}×, 95% interval {:.d$}–{:.d$}×",
            self.value, self.lo, self.hi
        )
    }
}

/// The one wording of a ratio wherever it is quoted: `1.20×, 95% interval 1.10–1.31×`.
impl std::fmt::Display for Ratio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.quoted(2))
    }
}

/// Where a figure lies against a bound, within the evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Its whole interval lies above the bound.
    Above,
    /// Its whole interval lies below the bound.
    Below,
    /// Its interval reaches across the bound: indistinguishable from it here.
    Within,
    /// Not measured, or not finite.
    Unknown,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est(median: f64, lo: f64, hi: f64) -> Estimate {
        Estimate { median, lo, hi }
    }

    #[test]
    fn a_ratio_carries_the_interval_of_its_parts() {
        let r = Ratio::of(est(4.0, 3.0, 5.0), est(2.0, 1.0, 2.5));
        assert_eq!((r.value, r.lo, r.hi), (2.0, 1.2, 5.0));
        assert_eq!(r.against(1.0), Side::Above);
        assert_eq!(r.against(2.0), Side::Within);
        assert_eq!(r.against(6.0), Side::Below);
        assert_eq!(r.to_string(), "2.00×, 95% interval 1.20–5.00×");
    }

    #[test]
    fn overlapping_intervals_are_indistinguishable_not_faster() {
        // Medians 1.2× apart, but a's interval reaches below b's: no verdict.
        let r = Ratio::of(est(1.2, 0.9, 1.5), est(1.0, 0.95, 1.05));
        assert!(r.value > 1.0);
        assert_eq!(r.against(1.0), Side::Within);
        assert_eq!(
            Ratio::of(est(f64::NAN, 1.0, 1.0), est(1.0, 1.0, 1.0)).against(1.0),
            Side::Unknown
        );
    }
}
