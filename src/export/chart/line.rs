//! Line charts: series of points against a numeric x axis, with an optional band each (a
//! confidence interval), and the legend below.

use std::fmt::Write;

use super::axis::{thin_y_ticks, x_grid, Axis};
use super::frame::{svg_doc, title_block};
use super::legend::legend_layout;
use super::scale::{range, Scale};
use super::style::{color, marker, STYLES};
use super::text::{centred, esc, text, widest, LABEL_PX, TICK_PX};

/// A line of a chart: its points, and optionally a band `(x, low, high)` around them.
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    pub band: Vec<(f64, f64, f64)>,
}

impl Series {
    /// A line without a band.
    pub fn line(label: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series {
            label: label.into(),
            points,
            band: Vec::new(),
        }
    }
}

/// A ring around a point measured on a busy machine.
fn ring(out: &mut String, x: f64, y: f64) {
    let _ = write!(
        out,
        "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"8\" fill=\"none\" stroke=\"#b35c00\" stroke-width=\"2\"/>"
    );
}

/// Lines against a numeric x axis, a legend below.
pub struct LineChart {
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
    /// Points measured on a busy machine: ringed over the lines, with a legend entry.
    pub marked: Vec<(f64, f64)>,
}

impl LineChart {
    /// A chart of `series` with no point ringed.
    pub fn new(title: String, x: Axis, y: Axis, series: Vec<Series>) -> LineChart {
        LineChart {
            title,
            x,
            y,
            series,
            marked: Vec::new(),
        }
    }

    /// The chart, `width` pixels wide; `None` when no series has a point to draw.
    pub fn svg(&self, width: f64) -> Option<String> {
        let xs = self.series.iter().flat_map(|s| {
            s.points
                .iter()
                .map(|p| p.0)
                .chain(s.band.iter().map(|b| b.0))
        });
        let (x0, x1) = range(xs, self.x.log, false)?;
        let ys = self.series.iter().flat_map(|s| {
            s.points
                .iter()
                .map(|p| p.1)
                .chain(s.band.iter().flat_map(|b| [b.1, b.2]))
        });
        let (y0, y1) = range(ys, self.y.log, !self.y.log)?;
        let mut body = String::new();
        let top = title_block(&mut body, &self.title, width);
        let y_probe = Scale::new(y0, y1, self.y.log, 0.0, 300.0);
        let y_labels: Vec<String> = y_probe.ticks().into_iter().map(self.y.format).collect();
        let left = 24.0 + widest(&y_labels, TICK_PX) + 12.0;
        let right = width - 24.0;
        let mut labels: Vec<String> = self.series.iter().map(|s| s.label.clone()).collect();
        if !self.marked.is_empty() {
            labels.push("measured on a busy machine".to_string());
        }
        let (legend_at, legend_rows) = legend_layout(&labels, right - left);
        let plot_h = 300.0;
        let bottom = top + plot_h;
        let height = bottom + 52.0 + legend_rows as f64 * 22.0 + 8.0;
        let xs = Scale::new(x0, x1, self.x.log, left, right).counting(self.x.counts);
        let ys = Scale::new(y0, y1, self.y.log, bottom, top);
        // Grid, ticks and axis labels.
        for (t, label) in thin_y_ticks(&ys, self.y.format) {
            let y = ys.at(t);
            let _ = write!(
                body,
                "<line x1=\"{left:.1}\" y1=\"{y:.1}\" x2=\"{right:.1}\" y2=\"{y:.1}\" stroke=\"#dddddd\"/>"
            );
            text(&mut body, left - 6.0, y + 4.0, TICK_PX, "end", &label);
        }
        x_grid(&mut body, &xs, &self.x, top, bottom);
        let _ = write!(
            body,
            "<rect x=\"{left:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{plot_h:.1}\" fill=\"none\" stroke=\"#333333\"/>",
            right - left
        );
        let x_label = std::slice::from_ref(&self.x.label);
        centred(&mut body, x_label, (left + right) / 2.0, bottom + 36.0, 0.0);
        let _ = write!(
            body,
            "<text transform=\"translate(16 {:.1}) rotate(-90)\" font-size=\"{LABEL_PX}\" text-anchor=\"middle\">{}</text>",
            (top + bottom) / 2.0,
            esc(&self.y.label)
        );
        // Bands under the lines, then the lines and their markers.
        for (i, s) in self.series.iter().enumerate() {
            if s.band.len() < 2 {
                continue;
            }
            let pts: Vec<String> = s
                .band
                .iter()
                .map(|b| (b.0, b.1))
                .chain(s.band.iter().rev().map(|b| (b.0, b.2)))
                .map(|(x, y)| format!("{:.1},{:.1}", xs.at(x), ys.at(y)))
                .collect();
            let _ = write!(
                body,
                "<polygon points=\"{}\" fill=\"{}\" fill-opacity=\"0.15\" stroke=\"none\"/>",
                pts.join(" "),
                color(i)
            );
        }
        for (i, s) in self.series.iter().enumerate() {
            let (c, dash, m) = STYLES[i % STYLES.len()];
            let pts: Vec<(f64, f64)> = s
                .points
                .iter()
                .filter(|p| p.0.is_finite() && p.1.is_finite() && (!self.y.log || p.1 > 0.0))
                .map(|p| (xs.at(p.0), ys.at(p.1)))
                .collect();
            let text_pts: Vec<String> = pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
            let _ = write!(
                body,
                "<polyline points=\"{}\" fill=\"none\" stroke=\"{c}\" stroke-width=\"2\" stroke-dasharray=\"{dash}\"/>",
                text_pts.join(" ")
            );
            if pts.len() <= 40 {
                for (x, y) in &pts {
                    marker(&mut body, m, *x, *y, c);
                }
            }
        }
        // Points measured on a busy machine, ringed over the lines.
        for &(x, y) in &self.marked {
            if x.is_finite() && y.is_finite() && (!self.y.log || y > 0.0) {
                ring(&mut body, xs.at(x), ys.at(y));
            }
        }
        // The legend, below the x label.
        for ((i, label), (row, x)) in labels.iter().enumerate().zip(legend_at) {
            let (x, y) = (left + x, bottom + 60.0 + row as f64 * 22.0);
            if i == self.series.len() {
                ring(&mut body, x + 14.0, y);
            } else {
                let (c, dash, m) = STYLES[i % STYLES.len()];
                let _ = write!(
                    body,
                    "<line x1=\"{x:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"{c}\" stroke-width=\"2\" stroke-dasharray=\"{dash}\"/>",
                    x + 28.0
                );
                marker(&mut body, m, x + 14.0, y, c);
            }
            text(&mut body, x + 34.0, y + 4.5, LABEL_PX, "start", label);
        }
        Some(svg_doc(width, height, &self.title, &body))
    }
}
