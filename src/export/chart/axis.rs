//! A value axis: its label and wording, tick labels thinned so none overlaps the next, and the
//! grid lines they sit on.

use std::fmt::Write;

use super::scale::Scale;
use super::text::{text, text_width, TICK_PX};

/// A value axis: its label (with the unit), linear or logarithmic, and how ticks are worded.
pub struct Axis {
    pub label: String,
    pub log: bool,
    pub format: fn(f64) -> String,
    /// The axis counts things (devices, threads): ticks only at whole numbers.
    pub counts: bool,
    /// Ticks named rather than numbered (a history's commits), thinned as any.
    pub names: Vec<(f64, String)>,
}

impl Axis {
    pub fn new(label: impl Into<String>, log: bool, format: fn(f64) -> String) -> Axis {
        Axis {
            label: label.into(),
            log,
            format,
            counts: false,
            names: Vec::new(),
        }
    }
}

/// A plain number with up to 3 significant digits (`1500`, `0.25`, `2e-7`).
pub fn plain(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let a = v.abs();
    if !(1e-3..1e6).contains(&a) {
        return format!("{v:.0e}");
    }
    let digits = (2 - a.log10().floor() as i32).max(0) as usize;
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// The ticks with their labels; zero is `0` in any unit. Ticks are round (steps of 1, 2, 2.5
/// or 5 times a power of ten), so their labels drop trailing zeros: `10 µs`, not `10.00 µs`.
pub(super) fn labelled_ticks(scale: &Scale, format: fn(f64) -> String) -> Vec<(f64, String)> {
    scale
        .ticks()
        .into_iter()
        .map(|t| {
            let label = match t {
                0.0 => "0".into(),
                t => round_label(&format(t)),
            };
            (t, label)
        })
        .collect()
}

/// `label` without the trailing zeros of its number (`100.0 ms` → `100 ms`, `2.500` → `2.5`).
fn round_label(label: &str) -> String {
    let (number, rest) = match label.find(' ') {
        Some(i) => label.split_at(i),
        None => (label, ""),
    };
    if !number.contains('.') || number.contains('e') {
        return label.to_string();
    }
    let trimmed = number.trim_end_matches('0').trim_end_matches('.');
    format!("{trimmed}{rest}")
}

/// Tick labels along a horizontal axis, every k-th so that none overlaps the next.
pub(super) fn thin_x_ticks(scale: &Scale, format: fn(f64) -> String) -> Vec<(f64, String)> {
    thin_x(scale, labelled_ticks(scale, format))
}

/// `ticks`, every k-th so that none overlaps the next.
fn thin_x(scale: &Scale, ticks: Vec<(f64, String)>) -> Vec<(f64, String)> {
    thin(ticks, |a, b| {
        let gap = scale.at(b.0) - scale.at(a.0);
        gap > (text_width(&a.1, TICK_PX) + text_width(&b.1, TICK_PX)) / 2.0 + 10.0
    })
}

/// `ticks`, every k-th for the smallest k at which each kept tick `fits` beside the next.
fn thin(ticks: Vec<(f64, String)>, fits: impl Fn(&Tick, &Tick) -> bool) -> Vec<Tick> {
    let mut k = 1;
    loop {
        let kept: Vec<Tick> = ticks.iter().step_by(k).cloned().collect();
        if kept.windows(2).all(|w| fits(&w[0], &w[1])) || kept.len() <= 2 {
            return kept;
        }
        k += 1;
    }
}

/// A tick: where, and its label.
type Tick = (f64, String);

/// Vertical grid lines from `top` to `bottom` at the x ticks (`axis`'s names, or numbers),
/// labelled under `bottom`.
pub(super) fn x_grid(out: &mut String, xs: &Scale, axis: &Axis, top: f64, bottom: f64) {
    let ticks = if axis.names.is_empty() {
        thin_x_ticks(xs, axis.format)
    } else {
        thin_x(xs, axis.names.clone())
    };
    for (t, label) in ticks {
        let x = xs.at(t);
        let _ = write!(
            out,
            "<line x1=\"{x:.1}\" y1=\"{top:.1}\" x2=\"{x:.1}\" y2=\"{bottom:.1}\" stroke=\"#dddddd\"/>"
        );
        text(out, x, bottom + 16.0, TICK_PX, "middle", &label);
    }
}

/// The y axis's ticks, thinned so labels keep a line between them.
pub(super) fn thin_y_ticks(scale: &Scale, format: fn(f64) -> String) -> Vec<(f64, String)> {
    thin(labelled_ticks(scale, format), |a, b| {
        (scale.at(a.0) - scale.at(b.0)).abs() > TICK_PX + 6.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_numbers_keep_three_significant_digits() {
        assert_eq!(plain(1500.0), "1500");
        assert_eq!(plain(0.25), "0.25");
    }

    #[test]
    fn log_ticks_from_a_microsecond_to_a_second_read_as_round_times() {
        let s = Scale::new(1e-6, 1.0, true, 0.0, 900.0);
        let labels: Vec<String> = labelled_ticks(&s, crate::units::human_time)
            .into_iter()
            .map(|t| t.1)
            .collect();
        assert_eq!(
            labels,
            ["1 µs", "10 µs", "100 µs", "1 ms", "10 ms", "100 ms", "1 s"]
        );
        assert_eq!(round_label("2.500"), "2.5");
        assert_eq!(round_label("1e-7"), "1e-7");
    }

    #[test]
    fn x_tick_labels_never_overlap() {
        let s = Scale::new(0.0, 1e9, false, 0.0, 120.0);
        let kept = thin_x_ticks(&s, plain);
        for w in kept.windows(2) {
            let gap = s.at(w[1].0) - s.at(w[0].0);
            assert!(gap > (text_width(&w[0].1, TICK_PX) + text_width(&w[1].1, TICK_PX)) / 2.0);
        }
    }
}
