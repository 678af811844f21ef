//! Mapping a data range onto pixels, linear or logarithmic, and the round tick values in it.

/// A mapping of a data range onto pixels.
pub(super) struct Scale {
    lo: f64,
    hi: f64,
    log: bool,
    p0: f64,
    p1: f64,
    /// Ticks at whole numbers only (an axis of counts).
    counts: bool,
}

impl Scale {
    /// The same scale, its linear ticks at whole numbers only.
    pub(super) fn counting(self, counts: bool) -> Scale {
        Scale { counts, ..self }
    }

    pub(super) fn new(lo: f64, hi: f64, log: bool, p0: f64, p1: f64) -> Scale {
        let (lo, hi) = if log {
            (
                lo.max(f64::MIN_POSITIVE).log10(),
                hi.max(f64::MIN_POSITIVE).log10(),
            )
        } else {
            (lo, hi)
        };
        let hi = if hi > lo { hi } else { lo + 1.0 };
        Scale {
            lo,
            hi,
            log,
            p0,
            p1,
            counts: false,
        }
    }

    pub(super) fn at(&self, v: f64) -> f64 {
        let v = if self.log {
            v.max(f64::MIN_POSITIVE).log10()
        } else {
            v
        };
        self.p0 + (v - self.lo) / (self.hi - self.lo) * (self.p1 - self.p0)
    }

    /// Tick values within the range: 1-2-5 steps, or powers of ten (with 2 and 5 between
    /// them when the range spans few decades).
    pub(super) fn ticks(&self) -> Vec<f64> {
        if self.log && self.hi - self.lo >= 1.0 {
            let mut out = Vec::new();
            let decades = self.hi - self.lo;
            let mults: &[f64] = if decades > 3.0 {
                &[1.0]
            } else {
                &[1.0, 2.0, 5.0]
            };
            for e in (self.lo.floor() as i32)..=(self.hi.ceil() as i32) {
                for m in mults {
                    // Parsed from its decimal form, so that 1e-6 is the double nearest to a
                    // millionth (10^-6 by multiplication is not) and its label reads `1 µs`.
                    let v: f64 = format!("{m}e{e}").parse().unwrap_or(m * 10f64.powi(e));
                    let l = v.log10();
                    if l >= self.lo - 1e-9 && l <= self.hi + 1e-9 {
                        out.push(v);
                    }
                }
            }
            return out;
        }
        let (lo, hi) = if self.log {
            (10f64.powf(self.lo), 10f64.powf(self.hi))
        } else {
            (self.lo, self.hi)
        };
        let raw = (hi - lo) / 5.0;
        let mag = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 2.5, 5.0, 10.0]
            .iter()
            .map(|m| m * mag)
            .find(|s| *s >= raw)
            .unwrap_or(10.0 * mag);
        // A count steps by whole numbers: at least 1, and 5 where 2.5 would be.
        let step = match self.counts {
            true if step < 1.0 => 1.0,
            true if step.fract() != 0.0 => step * 2.0,
            _ => step,
        };
        let mut v = (lo / step).ceil() * step;
        let mut out = Vec::new();
        while v <= hi + step * 1e-9 {
            out.push(if v.abs() < step * 1e-9 { 0.0 } else { v });
            v += step;
        }
        out
    }
}

/// The range of `values`, padded a little (and positive on a log axis).
pub(super) fn range(
    values: impl Iterator<Item = f64>,
    log: bool,
    from_zero: bool,
) -> Option<(f64, f64)> {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi {
        return None;
    }
    Some(if log {
        if hi <= lo {
            (lo / 2.0, hi * 2.0)
        } else {
            (lo / 1.15, hi * 1.15)
        }
    } else {
        let lo = if from_zero { lo.min(0.0) } else { lo };
        let pad = if hi > lo {
            (hi - lo) * 0.05
        } else {
            hi.abs().max(1.0) * 0.5
        };
        (
            if from_zero && lo >= 0.0 {
                0.0
            } else {
                lo - pad
            },
            hi + pad,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_ticks_whole_numbers_only() {
        // Devices 2 to 4: 2, 3, 4, never 2.5 or 3.5.
        let s = Scale::new(1.8, 4.2, false, 0.0, 100.0).counting(true);
        assert_eq!(s.ticks(), vec![2.0, 3.0, 4.0]);
        let wide = Scale::new(0.0, 14.0, false, 0.0, 100.0).counting(true);
        assert!(
            wide.ticks().iter().all(|t| t.fract() == 0.0),
            "{:?}",
            wide.ticks()
        );
    }

    #[test]
    fn ticks_are_round_and_within_the_range() {
        let s = Scale::new(0.0, 0.93, false, 0.0, 100.0);
        assert_eq!(s.ticks(), vec![0.0, 0.2, 0.4, 0.6000000000000001, 0.8]);
        let l = Scale::new(1e-6, 1e-2, true, 0.0, 100.0);
        assert_eq!(l.ticks().len(), 5, "{:?}", l.ticks());
        let narrow = Scale::new(3.0, 7.0, true, 0.0, 100.0);
        assert!(narrow.ticks().iter().all(|t| (3.0..=7.0).contains(t)));
        assert!(narrow.ticks().len() >= 2);
    }

    #[test]
    fn a_log_axis_from_a_microsecond_to_a_second_ticks_each_power_of_ten() {
        let s = Scale::new(1e-6, 1.0, true, 0.0, 600.0);
        assert_eq!(s.ticks(), vec![1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0]);
        // Evenly spaced: each decade the same number of pixels.
        let ticks = s.ticks();
        let gaps: Vec<f64> = ticks.windows(2).map(|w| s.at(w[1]) - s.at(w[0])).collect();
        assert!(gaps.iter().all(|g| (g - 100.0).abs() < 1e-9), "{gaps:?}");
    }
}
