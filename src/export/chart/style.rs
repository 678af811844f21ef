//! How series tell apart: a colour, a dash pattern and a marker each, so that a chart printed
//! in greyscale still separates its lines.

use std::fmt::Write;

/// Series styles: colours of different lightness (Okabe–Ito and Tol's dark hues), each with
/// its own dash pattern and marker.
pub(super) const STYLES: [(&str, &str, Marker); 8] = [
    ("#1f4e9c", "", Marker::Circle),
    ("#e69f00", "8 4", Marker::Square),
    ("#009e73", "2 3", Marker::Triangle),
    ("#b2182b", "10 3 2 3", Marker::Diamond),
    ("#56b4e9", "5 2", Marker::Circle),
    ("#332288", "1 2", Marker::Square),
    ("#cc79a7", "12 4", Marker::Triangle),
    ("#555555", "6 2 1 2", Marker::Diamond),
];

/// The colour of series `i` (lanes, bars of a group).
pub fn color(i: usize) -> &'static str {
    STYLES[i % STYLES.len()].0
}

#[derive(Clone, Copy)]
pub(super) enum Marker {
    Circle,
    Square,
    Triangle,
    Diamond,
}

pub(super) fn marker(out: &mut String, m: Marker, x: f64, y: f64, color: &str) {
    // A polygon of these corners, offsets from (x, y).
    let polygon = |out: &mut String, corners: &[(f64, f64)]| {
        let at = |&(dx, dy): &(f64, f64)| format!("{:.1},{:.1}", x + dx, y + dy);
        let points: Vec<String> = corners.iter().map(at).collect();
        write!(
            out,
            "<polygon points=\"{}\" fill=\"{color}\"/>",
            points.join(" ")
        )
    };
    let _ = match m {
        Marker::Circle => write!(
            out,
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3.5\" fill=\"{color}\"/>"
        ),
        Marker::Square => write!(
            out,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"7\" height=\"7\" fill=\"{color}\"/>",
            x - 3.5,
            y - 3.5
        ),
        Marker::Triangle => polygon(out, &[(0.0, -4.5), (-4.5, 3.5), (4.5, 3.5)]),
        Marker::Diamond => polygon(out, &[(0.0, -4.5), (4.5, 0.0), (0.0, 4.5), (-4.5, 0.0)]),
    };
}
