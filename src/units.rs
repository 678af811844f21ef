//! How figures are worded: times, byte counts and speed ratios in the units a reader expects.
//! A leaf module (it imports nothing of the crate), so scenarios, devices and outputs all word
//! their numbers alike without depending on one another.

/// `1.57× faster` for a time ratio (old / new) above 1, `1.25× slower` below it, so a sentence
/// never calls a slow-down "0.80× faster".
pub fn faster_or_slower(ratio: f64) -> String {
    if !ratio.is_finite() || ratio <= 0.0 {
        "of unknown speed".to_string()
    } else if ratio >= 1.0 {
        format!("{ratio:.2}× faster")
    } else {
        format!("{:.2}× slower", 1.0 / ratio)
    }
}

/// `1 core`, `2 cores`: a count and its noun, plural (an `s`) unless the count is one.
pub fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// Seconds in the unit that keeps 3–4 significant digits readable (`n/a` when not finite).
pub fn human_time(s: f64) -> String {
    if !s.is_finite() {
        return "n/a".into();
    }
    let (scale, unit) = [(1.0, 1.0, "s"), (1e-3, 1e3, "ms"), (1e-6, 1e6, "µs")]
        .into_iter()
        .find(|&(from, _, _)| s.abs() >= from)
        .map_or((1e9, "ns"), |(_, scale, unit)| (scale, unit));
    let v = s * scale;
    // Three decimals below 10, two below 100, one above.
    let digits = 3 - usize::from(v.abs() >= 10.0) - usize::from(v.abs() >= 100.0);
    format!("{v:.digits$} {unit}")
}

/// Human form of a byte count: `1.5 GiB`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// `v` with 3 significant digits, in plain notation from 0.001 to a million (`0.220`, `12.3`,
/// `4,570`) and in scientific notation outside it (`2.20e-5`), so a table and a sentence quoting
/// the same figure print it alike.
pub fn significant(v: f64) -> String {
    let a = v.abs();
    if !v.is_finite() {
        return "n/a".into();
    }
    if a == 0.0 {
        return "0".into();
    }
    if !(1e-3..1e6).contains(&a) {
        return format!("{v:.2e}");
    }
    let digits = (2 - a.log10().floor() as i32).max(0) as usize;
    if digits == 0 {
        let rounded = v.round();
        let sign = if rounded < 0.0 { "-" } else { "" };
        return format!("{sign}{}", grouped(rounded.abs() as u64));
    }
    format!("{v:.digits$}")
}

/// An integer with thousands separators: `233,981`.
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `v` as `word` words it, or `n/a` when it is not finite.
fn finite(v: f64, word: impl FnOnce(f64) -> String) -> String {
    if v.is_finite() {
        word(v)
    } else {
        "n/a".into()
    }
}

/// A compute rate: `187.3 GFLOP/s` (10^9 floating-point operations per second).
pub fn human_gflops(gflops: f64) -> String {
    finite(gflops, |v| format!("{v:.1} GFLOP/s"))
}

/// A bandwidth: `11.2 GB/s` (10^9 bytes per second, as STREAM counts).
pub fn human_gbytes_per_s(gbytes_per_s: f64) -> String {
    finite(gbytes_per_s, |v| format!("{v:.1} GB/s"))
}

/// A clock: `3.10 GHz`.
pub fn human_ghz(ghz: f64) -> String {
    finite(ghz, |v| format!("{v:.2} GHz"))
}

/// A fraction as a whole percentage: `0.996` → `100%`, `0.452` → `45%`.
pub fn human_percent(fraction: f64) -> String {
    // Below 1%, one significant figure more, so a small share does not read as none.
    finite(fraction * 100.0, |p| match p != 0.0 && p.abs() < 0.95 {
        true => format!("{p:.1}%"),
        false => format!("{p:.0}%"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every figure as a reader sees it: each function's inputs, then what it makes of them.
    #[test]
    fn figures_read_in_their_units() {
        // Small percentages keep a digit.
        let percents = [0.003, 0.0, 0.5, 0.0096, 0.996, 0.452].map(human_percent);
        assert_eq!(percents, ["0.3%", "0%", "50%", "1%", "100%", "45%"]);
        // One core and one rank are singular.
        let counts = [(1, "core"), (2, "core"), (0, "rank"), (1, "rank")].map(|(n, w)| count(n, w));
        assert_eq!(counts, ["1 core", "2 cores", "0 ranks", "1 rank"]);
        // Three significant digits, plain or scientific.
        let plain = [0.22, 0.2204, 1.0234, 12.34, 4567.8].map(significant);
        assert_eq!(plain, ["0.220", "0.220", "1.02", "12.3", "4,568"]);
        let more = [2.2e-5, -0.5, 0.0, f64::NAN].map(significant);
        assert_eq!(more, ["2.20e-5", "-0.500", "0", "n/a"]);
        assert_eq!(significant(23_546_198.98), "2.35e7");
        // Integers grouped by thousands.
        let thousands = [0, 999, 1000, 233_981, 23_546_198].map(grouped);
        assert_eq!(thousands, ["0", "999", "1,000", "233,981", "23,546,198"]);
        // Ratios read as faster or slower.
        let ratios = [1.5, 0.8, f64::NAN].map(faster_or_slower);
        assert_eq!(ratios, ["1.50× faster", "1.25× slower", "of unknown speed"]);
        // Times pick a readable unit, byte counts a binary one.
        let times = [1.5, 0.0123, 2.5e-7, f64::NAN].map(human_time);
        assert_eq!(times, ["1.500 s", "12.30 ms", "250.0 ns", "n/a"]);
        assert_eq!([512, 3 << 20].map(human_bytes), ["512 B", "3.0 MiB"]);
        // Rates and clocks.
        assert_eq!(human_gflops(187.34), "187.3 GFLOP/s");
        assert_eq!(human_gbytes_per_s(11.24), "11.2 GB/s");
        assert_eq!(human_ghz(3.1), "3.10 GHz");
        for f in [human_gflops, human_gbytes_per_s, human_ghz, human_percent] {
            assert_eq!(f(f64::NAN), "n/a");
        }
    }
}
