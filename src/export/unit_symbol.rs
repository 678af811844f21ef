//! The unit of an exported figure as a short symbol (`s`, `GFLOP/s`), for the CSV's `unit`
//! column and github-action-benchmark's `unit` field, where the table's words (`848.6 µs`)
//! would put a unit into the number.

use crate::report::{Better, Unit};

/// The symbol of `unit`: `s`, `B`, `GFLOP/s`, `GB/s`, `ratio`, `samples/s`, `number`, `series`.
pub fn unit_symbol(unit: Unit) -> &'static str {
    match unit {
        Unit::Seconds => "s",
        Unit::Bytes => "B",
        Unit::Gflops => "GFLOP/s",
        Unit::GbytesPerSecond => "GB/s",
        Unit::Ratio => "ratio",
        Unit::SamplesPerSecond => "samples/s",
        Unit::Number => "number",
        Unit::Series => "series",
    }
}

/// Which way a figure improves, as exports write it: `higher`, `lower`, or empty for none.
pub fn better_word(better: Better) -> &'static str {
    match better {
        Better::Higher => "higher",
        Better::Lower => "lower",
        Better::Neither => "",
    }
}
