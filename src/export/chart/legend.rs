//! The legend below a chart: its entries laid out in rows that wrap within the plot's width.

use super::text::{text_width, LABEL_PX};

/// The legend's entries laid out in rows within `width`: (row, x) of each.
pub(super) fn legend_layout(labels: &[String], width: f64) -> (Vec<(usize, f64)>, usize) {
    let mut at = Vec::new();
    let (mut row, mut x) = (0, 0.0);
    for l in labels {
        let w = 34.0 + text_width(l, LABEL_PX) + 20.0;
        if x > 0.0 && x + w > width {
            row += 1;
            x = 0.0;
        }
        at.push((row, x));
        x += w;
    }
    let rows = if labels.is_empty() { 0 } else { row + 1 };
    (at, rows)
}
