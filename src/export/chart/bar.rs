//! Bar charts: horizontal bars with whiskers, a row per category and a bar per group.

use std::fmt::Write;

use super::axis::{thin_x_ticks, x_grid, Axis};
use super::frame::{svg_doc, title_block};
use super::legend::legend_layout;
use super::scale::Scale;
use super::style::color;
use super::text::{centred, esc, text, widest, wrap, LABEL_PX, TICK_PX};

/// Size of the line under a row's bars.
const NOTE_PX: f64 = 11.5;

/// One bar: a value and its interval (whisker).
pub use crate::report::evidence::Ratio as Bar;

/// Horizontal bars, a row per category (its name on the left), a bar per group in each row
/// (one group: no legend), each with a whisker and its value written after it. On a log axis
/// (`axis.log`) bars start at the power of ten below the smallest value, so microseconds and a
/// tenth of a second both read; the caption says the scale is logarithmic.
pub struct BarChart {
    pub title: String,
    pub axis: Axis,
    pub whisker: String,
    pub groups: Vec<String>,
    pub rows: Vec<(String, Vec<Option<Bar>>)>,
    /// A line under each row's bars (what the row measures, a pitfall), or none: empty, or
    /// one per row with `""` for a row without.
    pub notes: Vec<String>,
}

impl BarChart {
    pub fn svg(&self, width: f64) -> Option<String> {
        let bars: Vec<Bar> = self
            .rows
            .iter()
            .flat_map(|r| r.1.iter().flatten().copied())
            .collect();
        let max = bars
            .iter()
            .flat_map(|b| [b.value, b.hi])
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max);
        if bars.is_empty() || max <= 0.0 {
            return None;
        }
        let least = bars
            .iter()
            .flat_map(|b| [b.value, b.lo])
            .filter(|v| v.is_finite() && *v > 0.0)
            .fold(max, f64::min);
        // Bars start at the power of ten below the smallest value on a log axis.
        let (lo, hi) = if self.axis.log {
            (10f64.powf(least.log10().floor()), max * 1.3)
        } else {
            (0.0, max * 1.04)
        };
        let mut body = String::new();
        let top = title_block(&mut body, &self.title, width);
        let names: Vec<String> = self.rows.iter().map(|r| r.0.clone()).collect();
        let left = 16.0 + widest(&names, LABEL_PX) + 10.0;
        let values: Vec<String> = bars.iter().map(|b| (self.axis.format)(b.value)).collect();
        let right = width - 16.0 - widest(&values, TICK_PX) - 10.0;
        let groups = self.groups.len().max(1);
        let bar_h = if groups == 1 { 18.0 } else { 14.0 };
        let noted = self.notes.iter().any(|n| !n.is_empty());
        let note_h = if noted { 15.0 } else { 0.0 };
        let row_h = bar_h * groups as f64 + 10.0 + note_h;
        let plot_h = row_h * self.rows.len() as f64;
        let bottom = top + plot_h;
        let (legend_at, legend_rows) = if self.groups.len() > 1 {
            legend_layout(&self.groups, right - left)
        } else {
            (Vec::new(), 0)
        };
        let height = bottom + 40.0 + 18.0 + legend_rows as f64 * 22.0 + 6.0;
        let xs = Scale::new(lo, hi, self.axis.log, left, right);
        if self.axis.log {
            body.push_str("<g class=\"log-axis\">");
            x_grid(&mut body, &xs, &self.axis, top, bottom);
            body.push_str("</g>");
        } else {
            x_grid(&mut body, &xs, &self.axis, top, bottom);
        }
        for (r, (name, row)) in self.rows.iter().enumerate() {
            let y_row = top + r as f64 * row_h + 5.0;
            text(
                &mut body,
                left - 8.0,
                y_row + (row_h - note_h) / 2.0,
                LABEL_PX,
                "end",
                name,
            );
            if let Some(note) = self.notes.get(r).filter(|n| !n.is_empty()) {
                let _ = write!(
                    body,
                    "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"{NOTE_PX}\" fill=\"#444444\" \
                     font-style=\"italic\">{}</text>",
                    left + 4.0,
                    y_row + bar_h * groups as f64 + 9.0,
                    esc(note)
                );
            }
            for (g, bar) in row.iter().enumerate() {
                let Some(b) = bar else { continue };
                let y = y_row + g as f64 * bar_h;
                let w = (xs.at(b.value) - left).max(0.5);
                let fill = group_fill(g);
                let _ = write!(
                    body,
                    "<rect x=\"{left:.1}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{:.1}\" {fill}/>",
                    y + 1.0,
                    bar_h - 2.0
                );
                let (lo, hi) = (xs.at(b.lo.max(lo)), xs.at(b.hi));
                let ym = y + bar_h / 2.0;
                let (y0, y1) = (ym - 4.0, ym + 4.0);
                let _ = write!(
                    body,
                    "<path d=\"M{lo:.1} {ym:.1}H{hi:.1}M{lo:.1} {y0:.1}V{y1:.1}M{hi:.1} {y0:.1}V{y1:.1}\" stroke=\"black\" stroke-width=\"1.5\" fill=\"none\"/>"
                );
                text(
                    &mut body,
                    hi.max(xs.at(b.value)) + 6.0,
                    ym + 4.0,
                    TICK_PX,
                    "start",
                    &(self.axis.format)(b.value),
                );
            }
        }
        let _ = write!(
            body,
            "<line x1=\"{left:.1}\" y1=\"{top:.1}\" x2=\"{left:.1}\" y2=\"{bottom:.1}\" stroke=\"#333333\"/>\
             <line x1=\"{left:.1}\" y1=\"{bottom:.1}\" x2=\"{right:.1}\" y2=\"{bottom:.1}\" stroke=\"#333333\"/>"
        );
        let decades = thin_x_ticks(&xs, self.axis.format)
            .windows(2)
            .all(|w| (w[1].0 / w[0].0 - 10.0).abs() < 1e-6);
        let scale = match (self.axis.log, decades) {
            (false, _) => "",
            (true, true) => " on a log scale: each gridline is 10× the one before",
            (true, false) => " on a log scale",
        };
        let caption = format!("{}{scale}; whiskers: {}", self.axis.label, self.whisker);
        let caption = wrap(&caption, LABEL_PX, width - 32.0);
        centred(
            &mut body,
            &caption,
            (left + right) / 2.0,
            bottom + 36.0,
            16.0,
        );
        let lines = caption.len().max(1);
        for ((g, label), (row, x)) in self.groups.iter().enumerate().zip(legend_at) {
            let y = bottom + 62.0 + (lines - 1) as f64 * 16.0 + row as f64 * 22.0;
            let x = left + x;
            let fill = group_fill(g);
            let _ = write!(
                body,
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"28\" height=\"12\" {fill}/>",
                y - 6.0
            );
            text(&mut body, x + 34.0, y + 4.5, LABEL_PX, "start", label);
        }
        let height = height + (lines - 1) as f64 * 16.0;
        Some(svg_doc(width, height, &self.title, &body))
    }
}

/// The fill of group `g`'s bars: the first solid, the others lighter and outlined, so that
/// greyscale keeps them apart.
fn group_fill(g: usize) -> String {
    let c = color(g);
    if g == 0 {
        format!("fill=\"{c}\"")
    } else {
        format!("fill=\"{c}\" fill-opacity=\"0.45\" stroke=\"{c}\"")
    }
}
