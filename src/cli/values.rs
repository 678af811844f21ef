//! Option values clap cannot type by itself: a threshold (`5%` or `0.05`), a number of seconds,
//! a machine name. Each parser's error is the reason clap prints after `invalid value ...`.

use std::time::Duration;

/// Why an option's value was refused.
#[derive(Debug, thiserror::Error)]
pub enum ValueError {
    #[error("expected a percentage like 5% or a fraction like 0.05, got '{0}'")]
    NotAThreshold(String),
    /// `hint` is empty or a guess at what was meant (` (did you mean 5%?)`).
    #[error("the threshold must be between 0% and 100%, got '{given}'{hint}")]
    ThresholdOutOfRange { given: String, hint: String },
    #[error("expected seconds, got '{0}'")]
    NotSeconds(String),
    #[error("a machine name is 1 to 64 letters, digits, '.', '_' or '-', got '{0}'")]
    NotAMachineName(String),
    #[error("expected seconds above 0 and at most 86400, got '{0}'")]
    NotABudget(String),
    #[error(transparent)]
    Seconds(#[from] crate::harness::sampler::SamplingError),
}

/// `--threshold`: a percentage (`5%`) or a fraction (`0.05`), strictly between 0 and 1.
pub(super) fn parse_threshold(s: &str) -> Result<f64, ValueError> {
    let t = s.trim();
    let (number, scale) = t.strip_suffix('%').map_or((t, 1.0), |n| (n, 0.01));
    let v = number
        .trim()
        .parse::<f64>()
        .map(|v| v * scale)
        .map_err(|_| ValueError::NotAThreshold(s.to_string()))?;
    if !(v > 0.0 && v < 1.0) {
        // `--threshold 5` most likely meant 5%.
        let hint = if scale == 1.0 && (1.0..100.0).contains(&v) {
            format!(" (did you mean {v}%?)")
        } else {
            String::new()
        };
        return Err(ValueError::ThresholdOutOfRange {
            given: s.to_string(),
            hint,
        });
    }
    Ok(v)
}

/// `--machine`: a name a report's machine is known by (`ci-2core`, `laptop.home`).
pub(super) fn parse_machine(s: &str) -> Result<String, ValueError> {
    let ok = (1..=64).contains(&s.len())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    ok.then(|| s.to_string())
        .ok_or_else(|| ValueError::NotAMachineName(s.to_string()))
}

/// A number of seconds (`--min-time`, `--max-time`).
pub(super) fn parse_seconds(s: &str) -> Result<Duration, ValueError> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| ValueError::NotSeconds(s.to_string()))?;
    Ok(crate::harness::sampler::seconds(v)?)
}

/// `ab --budget`: seconds above 0 (a budget of none would measure nothing).
pub(super) fn parse_budget(s: &str) -> Result<Duration, ValueError> {
    match parse_seconds(s) {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) | Err(ValueError::Seconds(_)) => Err(ValueError::NotABudget(s.to_string())),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_is_a_positive_number_of_seconds() {
        assert_eq!(parse_budget("1.5").unwrap(), Duration::from_millis(1500));
        for bad in ["0", "-3", "0.0", "1e9", "nan"] {
            assert!(
                matches!(parse_budget(bad), Err(ValueError::NotABudget(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            parse_budget("soon"),
            Err(ValueError::NotSeconds(_))
        ));
    }
}
