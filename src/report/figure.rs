//! What a derived figure is: its unit, and which direction is better. A run states it for each
//! figure (`RunRecord::figures`, in the JSON), so the table, the comparison and the chart read
//! the same answer; reports written before it existed get the answer from the key's name
//! ([`Figure::named`]), the one place where names are read for meaning.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::units::{grouped, human_bytes, human_time, significant};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    Seconds,
    Bytes,
    /// Billions of floating-point operations per second.
    Gflops,
    GbytesPerSecond,
    /// A ratio of two like quantities, shown as `1.23×`.
    Ratio,
    /// Samples (rows of training data) per second.
    SamplesPerSecond,
    /// A plain number (a count, a loss, an efficiency).
    Number,
    /// A list of points (a loss curve), kept in the JSON.
    Series,
}

impl Unit {
    /// `v` in this unit, for a reader (`848.6 µs`, `4.58×`).
    pub fn word(self, v: f64) -> String {
        Figure::new(self, Better::Neither).format(&Value::from(v))
    }
}

/// Which way a figure improves; only figures with a direction are judged by `compare`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    Higher,
    Lower,
    /// A description of the run (a model prediction, a bound, a count): no better or worse.
    Neither,
}

/// A derived figure's unit and direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Figure {
    pub unit: Unit,
    pub better: Better,
    /// Depth a reader asks for (`--verbose`): an engine internal or a probe of the machine
    /// that explains a result rather than states it. The JSON keeps it; the table and the
    /// HTML page fold it away by default.
    #[serde(default, skip_serializing_if = "is_false")]
    pub detail: bool,
    /// Read against the machine's limits (`fraction_of_peak`): limits measured under load
    /// make it read wrong, so `compare` marks such a figure then rather than scoring it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub against_limits: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// A derived figure a scenario records, declared once with its key in the report, its unit and
/// its direction: `const ASYNC_SPEEDUP: FigureSpec = FigureSpec::new("async_speedup",
/// Unit::Ratio, Better::Higher)`, recorded with [`RunRecord::record`](super::RunRecord::record).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FigureSpec {
    pub key: &'static str,
    pub figure: Figure,
}

impl FigureSpec {
    pub const fn new(key: &'static str, unit: Unit, better: Better) -> FigureSpec {
        FigureSpec {
            key,
            figure: Figure::new(unit, better),
        }
    }

    /// The same figure, marked as detail (see [`Figure::detail`]).
    pub const fn detail(mut self) -> FigureSpec {
        self.figure.detail = true;
        self
    }

    /// The same figure, read against the machine's limits (see [`Figure::against_limits`]).
    pub const fn against_limits(mut self) -> FigureSpec {
        self.figure.against_limits = true;
        self
    }
}

impl Figure {
    /// A ratio where lower is better: to a bound, to an ideal, or to a cheaper variant.
    pub const RATIO_LOWER_IS_BETTER: Figure = Figure::new(Unit::Ratio, Better::Lower);

    pub const fn new(unit: Unit, better: Better) -> Figure {
        Figure {
            unit,
            better,
            detail: false,
            against_limits: false,
        }
    }

    /// The figure a key names: `gflops` and `gbytes_per_s` are rates, `_s` seconds, `_bytes`
    /// bytes, `speedup` and `_ratio` ratios; speed-ups, rates and efficiencies are better
    /// higher; everything else has no direction.
    pub fn named(key: &str) -> Figure {
        // (pattern, whether it must end the key rather than appear in it, unit): the first
        // that matches decides.
        let unit = [
            ("gflops", false, Unit::Gflops),
            ("gbytes_per_s", false, Unit::GbytesPerSecond),
            ("samples_per_second", true, Unit::SamplesPerSecond),
            ("_s", true, Unit::Seconds),
            ("_bytes", true, Unit::Bytes),
            ("speedup", false, Unit::Ratio),
            ("_ratio", true, Unit::Ratio),
            ("_curve", true, Unit::Series),
        ]
        .into_iter()
        .find(|&(p, end, _)| key.ends_with(p) || (!end && key.contains(p)))
        .map_or(Unit::Number, |(_, _, unit)| unit);
        let higher = [
            "speedup",
            "gflops",
            "efficiency",
            "gbytes_per_s",
            "per_second",
        ];
        match higher.iter().any(|k| key.contains(k)) {
            true => Figure::new(unit, Better::Higher),
            false => Figure::new(unit, Better::Neither),
        }
    }

    /// The value in this figure's unit, for a reader.
    pub fn format(&self, value: &Value) -> String {
        let Some(v) = value.as_f64() else {
            return match value {
                Value::Null => "n/a".into(),
                Value::Array(points) => format!("{} points (in the JSON)", points.len()),
                other => other.to_string(),
            };
        };
        match self.unit {
            Unit::Gflops => format!("{v:.1} GFLOP/s"),
            Unit::GbytesPerSecond => format!("{v:.2} GB/s"),
            Unit::Seconds => human_time(v),
            Unit::Bytes => human_bytes(v.max(0.0) as u64),
            Unit::Ratio => format!("{v:.2}×"),
            Unit::SamplesPerSecond => format!("{} samples/s", grouped(v.max(0.0).round() as u64)),
            Unit::Number | Unit::Series if v.fract() == 0.0 && v.abs() < 1e15 => format!("{v:.0}"),
            Unit::Number | Unit::Series => significant(v),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_give_units_and_directions() {
        for (key, unit, better) in [
            ("parallel_speedup", Unit::Ratio, Better::Higher),
            ("a_gflops", Unit::Gflops, Better::Higher),
            ("overlap_efficiency", Unit::Number, Better::Higher),
            ("copy_gbytes_per_s", Unit::GbytesPerSecond, Better::Higher),
            ("t1_s", Unit::Seconds, Better::Neither),
            ("peak_bytes", Unit::Bytes, Better::Neither),
            ("sync_loss_curve", Unit::Series, Better::Neither),
        ] {
            assert_eq!(Figure::named(key), Figure::new(unit, better), "{key}");
        }
    }

    #[test]
    fn values_read_in_their_unit() {
        let f = |key: &str, v: Value| Figure::named(key).format(&v);
        assert_eq!(f("async_speedup", 3.456.into()), "3.46×");
        assert_eq!(f("t1_s", 2e-6.into()), "2.000 µs");
        assert_eq!(f("peak_bytes", 2048.0.into()), "2.0 KiB");
        assert_eq!(f("x", Value::Null), "n/a");
        assert_eq!(f("copy_gbytes_per_s", 1.5.into()), "1.50 GB/s");
        assert_eq!(f("gflops_per_thread", 35.0.into()), "35.0 GFLOP/s");
        assert_eq!(f("ops_per_pass", 12.0.into()), "12");
        assert_eq!(
            f("sync_loss_curve", serde_json::json!([1, 2])),
            "2 points (in the JSON)"
        );
    }
}
