//! `--gpu-memory-fraction`: the share of a GPU's memory parbench's allocations may take
//! (TensorFlow's `per_process_gpu_memory_fraction`), so that a run leaves room for other
//! processes on a shared GPU, or shows what a workload needs under a tighter budget.

use std::fmt;
use std::str::FromStr;

/// A fraction in (0, 1] of a device's total memory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemoryFraction(f64);

/// Why a `--gpu-memory-fraction` value is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FractionError {
    #[error("'{0}' is not a number (expected a fraction in (0, 1], e.g. 0.5)")]
    NotANumber(String),
    #[error(
        "{0} is outside (0, 1]: the fraction of the GPU's memory must be above 0 and at most 1"
    )]
    OutOfRange(f64),
}

impl MemoryFraction {
    /// `f` when it lies in (0, 1].
    pub fn new(f: f64) -> Result<MemoryFraction, FractionError> {
        if f > 0.0 && f <= 1.0 {
            Ok(MemoryFraction(f))
        } else {
            Err(FractionError::OutOfRange(f))
        }
    }

    pub fn get(self) -> f64 {
        self.0
    }

    /// The cap in bytes on a device of `total` bytes (rounded down).
    pub fn of(self, total: u64) -> u64 {
        (total as f64 * self.0).floor() as u64
    }
}

impl FromStr for MemoryFraction {
    type Err = FractionError;

    fn from_str(s: &str) -> Result<MemoryFraction, FractionError> {
        let f: f64 = s
            .trim()
            .parse()
            .map_err(|_| FractionError::NotANumber(s.to_string()))?;
        MemoryFraction::new(f)
    }
}

impl fmt::Display for MemoryFraction {
    /// `50%`, `12.5%`: how a device description names the cap.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pct = self.0 * 100.0;
        if (pct - pct.round()).abs() < 1e-9 {
            write!(f, "{}%", pct.round())
        } else {
            write!(f, "{pct:.1}%")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fraction_lies_in_zero_to_one() {
        assert_eq!("0.5".parse::<MemoryFraction>().unwrap().get(), 0.5);
        assert_eq!("1".parse::<MemoryFraction>().unwrap().get(), 1.0);
        for bad in ["0", "1.5", "-0.1", "NaN", "inf"] {
            let value = bad.parse::<f64>().unwrap().to_bits();
            assert!(
                matches!(bad.parse::<MemoryFraction>(), Err(FractionError::OutOfRange(f)) if f.to_bits() == value),
                "{bad}"
            );
        }
        assert_eq!(
            "abc".parse::<MemoryFraction>(),
            Err(FractionError::NotANumber("abc".into()))
        );
    }

    #[test]
    fn the_cap_is_the_fraction_of_the_total_rounded_down() {
        let half = MemoryFraction::new(0.5).unwrap();
        assert_eq!(half.of(1001), 500);
        assert_eq!(
            MemoryFraction::new(1.0).unwrap().of(150_000_000_000),
            150_000_000_000
        );
        assert_eq!(half.to_string(), "50%");
        assert_eq!(MemoryFraction::new(0.125).unwrap().to_string(), "12.5%");
    }
}
