//! Option values clap cannot type by itself: a threshold (`5%` or `0.05`), a number of seconds,
//! an engine mode. Each parser's error is the reason clap prints after `invalid value ...`.

use std::time::Duration;

use crate::engine::Mode;

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
    #[error(transparent)]
    Mode(#[from] crate::engine::UnknownMode),
    #[error(transparent)]
    Seconds(#[from] crate::harness::sampler::SamplingError),
}

/// `--threshold`: a percentage (`5%`) or a fraction (`0.05`), strictly between 0 and 1.
pub(super) fn parse_threshold(s: &str) -> Result<f64, ValueError> {
    let t = s.trim();
    let (number, scale) = match t.strip_suffix('%') {
        Some(n) => (n, 0.01),
        None => (t, 1.0),
    };
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

/// `--engine`: `threaded` or `naive`.
pub(super) fn parse_mode(s: &str) -> Result<Mode, ValueError> {
    Ok(Mode::from_setting(s)?)
}

/// A number of seconds (`--min-time`, `--max-time`, `ab --budget`).
pub(super) fn parse_seconds(s: &str) -> Result<Duration, ValueError> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| ValueError::NotSeconds(s.to_string()))?;
    Ok(crate::harness::sampler::seconds(v)?)
}
