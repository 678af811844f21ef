//! How exported numbers are written: rounded to [`DIGITS`] significant digits, as plain
//! decimals. A timer's resolution and a run's noise leave no meaning past the sixth digit, and
//! a CSV or dashboard value of `0.30000000000000004` is float noise a reader has to strip. The
//! JSON report keeps every sample and statistic unrounded; only exports round.

/// Significant digits kept in exported values.
pub const DIGITS: usize = 6;

/// `v` rounded to [`DIGITS`] significant digits; non-finite values unchanged.
pub fn round(v: f64) -> f64 {
    if !v.is_finite() || v == 0.0 {
        return v;
    }
    // Scientific notation with DIGITS - 1 decimals rounds to DIGITS significant digits
    // exactly (decimal rounding of the shortest representation); parsing it back cannot fail.
    format!("{v:.*e}", DIGITS - 1).parse().unwrap_or(v)
}

/// `v` rounded (see [`round`]) and written as a plain decimal: no exponent, no thousands
/// separators, no unit (`0.000123457`, `1234.57`); `None` for a value that is not finite.
pub fn plain(v: f64) -> Option<String> {
    // f64's `Display` never uses an exponent and writes the shortest digits that read back
    // as the same value, so a rounded value prints with at most DIGITS significant digits.
    v.is_finite().then(|| round(v).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_noise_is_rounded_away() {
        assert_eq!(plain(0.1 + 0.2).as_deref(), Some("0.3"));
        assert_eq!(plain(1234.56789).as_deref(), Some("1234.57"));
        assert_eq!(plain(0.000123456789).as_deref(), Some("0.000123457"));
        assert_eq!(plain(1.5e-9).as_deref(), Some("0.0000000015"));
        assert_eq!(plain(-2.0).as_deref(), Some("-2"));
        assert_eq!(plain(0.0).as_deref(), Some("0"));
        assert_eq!(plain(123456789.0).as_deref(), Some("123457000"));
        assert_eq!(plain(f64::NAN), None);
        assert_eq!(plain(f64::INFINITY), None);
        assert_eq!(round(0.1 + 0.2), 0.3);
    }

    #[test]
    fn a_rounded_value_is_within_half_a_unit_of_its_sixth_digit() {
        for v in [std::f64::consts::PI, 9.999995e-7, 987654.321, 1.0 / 3.0] {
            let r = round(v);
            let unit = 10f64.powf(v.abs().log10().floor() - (DIGITS as f64 - 1.0));
            assert!((r - v).abs() <= unit / 2.0 * (1.0 + 1e-9), "{v} -> {r}");
        }
    }
}
