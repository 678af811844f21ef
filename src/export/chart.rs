//! Charts as SVG text, drawn by hand so that their layout is known: every label's width is
//! estimated and room is made for it (tick labels are thinned rather than overlapped, legends
//! sit below the plot and wrap, long titles wrap), and each series differs in colour, dash and
//! marker, so a chart printed in greyscale still tells its lines apart. `plot` (`svg.rs`) and
//! the HTML report (`html.rs`) draw with these.

use std::fmt::Write;

/// Series styles: colours of different lightness (Okabe–Ito and Tol's dark hues), each with
/// its own dash pattern and marker.
const STYLES: [(&str, &str, Marker); 8] = [
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
enum Marker {
    Circle,
    Square,
    Triangle,
    Diamond,
}

const FONT: &str = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\"";
const TICK_PX: f64 = 12.0;
const LABEL_PX: f64 = 13.0;
const TITLE_PX: f64 = 16.0;

/// XML-escaped text.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A generous estimate of the width of `s` at `px` in a sans-serif font: wide enough that text
/// laid out by it does not overlap in the browsers' fonts.
pub fn text_width(s: &str, px: f64) -> f64 {
    s.chars()
        .map(|c| match c {
            'i' | 'l' | 'j' | '.' | ',' | ':' | ';' | '|' | '\'' | '!' | ' ' | '(' | ')' => 0.36,
            'm' | 'w' | 'M' | 'W' | '@' | '—' | '–' => 0.92,
            c if c.is_ascii_uppercase() => 0.72,
            '×' | 'µ' => 0.64,
            _ => 0.6,
        })
        .sum::<f64>()
        * px
}

/// `text` broken into lines no wider than `width` at `px`.
pub fn wrap(text: &str, px: f64, width: f64) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let candidate = if line.is_empty() {
            word.to_string()
        } else {
            format!("{line} {word}")
        };
        if !line.is_empty() && text_width(&candidate, px) > width {
            lines.push(std::mem::replace(&mut line, word.to_string()));
        } else {
            line = candidate;
        }
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

fn open_svg(out: &mut String, width: f64, height: f64, title: &str) {
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" \
         viewBox=\"0 0 {width:.0} {height:.0}\" role=\"img\" {FONT}><title>{}</title>\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>",
        esc(title)
    );
}

/// Title lines at the top, centred; returns the height they took.
fn title_block(out: &mut String, title: &str, width: f64) -> f64 {
    let lines = wrap(title, TITLE_PX, width - 24.0);
    for (i, line) in lines.iter().enumerate() {
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"{TITLE_PX}\" font-weight=\"bold\" \
             text-anchor=\"middle\">{}</text>",
            width / 2.0,
            22.0 + i as f64 * (TITLE_PX + 4.0),
            esc(line)
        );
    }
    14.0 + lines.len() as f64 * (TITLE_PX + 4.0)
}

fn text(out: &mut String, x: f64, y: f64, px: f64, anchor: &str, s: &str) {
    let _ = write!(
        out,
        "<text x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"{px}\" text-anchor=\"{anchor}\">{}</text>",
        esc(s)
    );
}

/// A value axis: its label (with the unit), linear or logarithmic, and how ticks are worded.
pub struct Axis {
    pub label: String,
    pub log: bool,
    pub format: fn(f64) -> String,
}

impl Axis {
    pub fn new(label: impl Into<String>, log: bool, format: fn(f64) -> String) -> Axis {
        Axis {
            label: label.into(),
            log,
            format,
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

/// A mapping of a data range onto pixels.
struct Scale {
    lo: f64,
    hi: f64,
    log: bool,
    p0: f64,
    p1: f64,
}

impl Scale {
    fn new(lo: f64, hi: f64, log: bool, p0: f64, p1: f64) -> Scale {
        let (lo, hi) = if log {
            (
                lo.max(f64::MIN_POSITIVE).log10(),
                hi.max(f64::MIN_POSITIVE).log10(),
            )
        } else {
            (lo, hi)
        };
        let hi = if hi > lo { hi } else { lo + 1.0 };
        Scale {
            lo,
            hi,
            log,
            p0,
            p1,
        }
    }

    fn at(&self, v: f64) -> f64 {
        let v = if self.log {
            v.max(f64::MIN_POSITIVE).log10()
        } else {
            v
        };
        self.p0 + (v - self.lo) / (self.hi - self.lo) * (self.p1 - self.p0)
    }

    /// Tick values within the range: 1-2-5 steps, or powers of ten (with 2 and 5 between
    /// them when the range spans few decades).
    fn ticks(&self) -> Vec<f64> {
        if self.log && self.hi - self.lo >= 1.0 {
            let mut out = Vec::new();
            let decades = self.hi - self.lo;
            let mults: &[f64] = if decades > 3.0 {
                &[1.0]
            } else {
                &[1.0, 2.0, 5.0]
            };
            for e in (self.lo.floor() as i32)..=(self.hi.ceil() as i32) {
                for m in mults {
                    let v = m * 10f64.powi(e);
                    let l = v.log10();
                    if l >= self.lo - 1e-9 && l <= self.hi + 1e-9 {
                        out.push(v);
                    }
                }
            }
            return out;
        }
        let (lo, hi) = if self.log {
            (10f64.powf(self.lo), 10f64.powf(self.hi))
        } else {
            (self.lo, self.hi)
        };
        let raw = (hi - lo) / 5.0;
        let mag = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 2.5, 5.0, 10.0]
            .iter()
            .map(|m| m * mag)
            .find(|s| *s >= raw)
            .unwrap_or(10.0 * mag);
        let mut v = (lo / step).ceil() * step;
        let mut out = Vec::new();
        while v <= hi + step * 1e-9 {
            out.push(if v.abs() < step * 1e-9 { 0.0 } else { v });
            v += step;
        }
        out
    }
}

/// The widest of `labels` at `px`.
fn widest<'a>(labels: impl IntoIterator<Item = &'a String>, px: f64) -> f64 {
    labels
        .into_iter()
        .map(|l| text_width(l, px))
        .fold(0.0, f64::max)
}

/// A line of a chart: its points, and optionally a band `(x, low, high)` around them.
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    pub band: Vec<(f64, f64, f64)>,
}

/// Lines against a numeric x axis, a legend below.
pub struct LineChart {
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
}

/// The legend's entries laid out in rows within `width`: (row, x) of each.
fn legend_layout(labels: &[String], width: f64) -> (Vec<(usize, f64)>, usize) {
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

fn marker(out: &mut String, m: Marker, x: f64, y: f64, color: &str) {
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
        Marker::Triangle => write!(
            out,
            "<polygon points=\"{:.1},{:.1} {:.1},{:.1} {:.1},{:.1}\" fill=\"{color}\"/>",
            x,
            y - 4.5,
            x - 4.5,
            y + 3.5,
            x + 4.5,
            y + 3.5
        ),
        Marker::Diamond => write!(
            out,
            "<polygon points=\"{:.1},{:.1} {:.1},{:.1} {:.1},{:.1} {:.1},{:.1}\" fill=\"{color}\"/>",
            x,
            y - 4.5,
            x + 4.5,
            y,
            x,
            y + 4.5,
            x - 4.5,
            y
        ),
    };
}

/// The ticks with their labels; zero is `0` in any unit.
fn labelled_ticks(scale: &Scale, format: fn(f64) -> String) -> Vec<(f64, String)> {
    scale
        .ticks()
        .into_iter()
        .map(|t| (t, if t == 0.0 { "0".into() } else { format(t) }))
        .collect()
}

/// Tick labels along a horizontal axis, every k-th so that none overlaps the next.
fn thin_x_ticks(scale: &Scale, format: fn(f64) -> String) -> Vec<(f64, String)> {
    let ticks = labelled_ticks(scale, format);
    let mut k = 1;
    loop {
        let kept: Vec<(f64, String)> = ticks.iter().step_by(k).cloned().collect();
        let fits = kept.windows(2).all(|w| {
            let gap = scale.at(w[1].0) - scale.at(w[0].0);
            gap > (text_width(&w[0].1, TICK_PX) + text_width(&w[1].1, TICK_PX)) / 2.0 + 10.0
        });
        if fits || kept.len() <= 2 {
            return kept;
        }
        k += 1;
    }
}

/// Vertical grid lines from `top` to `bottom` at the x ticks, labelled under `bottom`.
fn x_grid(out: &mut String, xs: &Scale, format: fn(f64) -> String, top: f64, bottom: f64) {
    for (t, label) in thin_x_ticks(xs, format) {
        let x = xs.at(t);
        let _ = write!(
            out,
            "<line x1=\"{x:.1}\" y1=\"{top:.1}\" x2=\"{x:.1}\" y2=\"{bottom:.1}\" stroke=\"#dddddd\"/>"
        );
        text(out, x, bottom + 16.0, TICK_PX, "middle", &label);
    }
}

/// The y axis's ticks, thinned so labels keep a line between them.
fn thin_y_ticks(scale: &Scale, format: fn(f64) -> String) -> Vec<(f64, String)> {
    let ticks = labelled_ticks(scale, format);
    let mut k = 1;
    loop {
        let kept: Vec<(f64, String)> = ticks.iter().step_by(k).cloned().collect();
        let fits = kept
            .windows(2)
            .all(|w| (scale.at(w[0].0) - scale.at(w[1].0)).abs() > TICK_PX + 6.0);
        if fits || kept.len() <= 2 {
            return kept;
        }
        k += 1;
    }
}

/// The range of `values`, padded a little (and positive on a log axis).
fn range(values: impl Iterator<Item = f64>, log: bool, from_zero: bool) -> Option<(f64, f64)> {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi {
        return None;
    }
    Some(if log {
        if hi <= lo {
            (lo / 2.0, hi * 2.0)
        } else {
            (lo / 1.15, hi * 1.15)
        }
    } else {
        let lo = if from_zero { lo.min(0.0) } else { lo };
        let pad = if hi > lo {
            (hi - lo) * 0.05
        } else {
            hi.abs().max(1.0) * 0.5
        };
        (
            if from_zero && lo >= 0.0 {
                0.0
            } else {
                lo - pad
            },
            hi + pad,
        )
    })
}

impl LineChart {
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
        let mut out = String::new();
        let mut body = String::new();
        let top = title_block(&mut body, &self.title, width);
        let y_probe = Scale::new(y0, y1, self.y.log, 0.0, 300.0);
        let y_labels: Vec<String> = y_probe.ticks().into_iter().map(self.y.format).collect();
        let left = 24.0 + widest(&y_labels, TICK_PX) + 12.0;
        let right = width - 24.0;
        let labels: Vec<String> = self.series.iter().map(|s| s.label.clone()).collect();
        let (legend_at, legend_rows) = legend_layout(&labels, right - left);
        let plot_h = 300.0;
        let bottom = top + plot_h;
        let height = bottom + 52.0 + legend_rows as f64 * 22.0 + 8.0;
        let xs = Scale::new(x0, x1, self.x.log, left, right);
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
        x_grid(&mut body, &xs, self.x.format, top, bottom);
        let _ = write!(
            body,
            "<rect x=\"{left:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{plot_h:.1}\" fill=\"none\" stroke=\"#333333\"/>",
            right - left
        );
        text(
            &mut body,
            (left + right) / 2.0,
            bottom + 36.0,
            LABEL_PX,
            "middle",
            &self.x.label,
        );
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
        // The legend, below the x label.
        for ((i, label), (row, x)) in labels.iter().enumerate().zip(legend_at) {
            let (c, dash, m) = STYLES[i % STYLES.len()];
            let y = bottom + 60.0 + row as f64 * 22.0;
            let x = left + x;
            let _ = write!(
                body,
                "<line x1=\"{x:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"{c}\" stroke-width=\"2\" stroke-dasharray=\"{dash}\"/>",
                x + 28.0
            );
            marker(&mut body, m, x + 14.0, y, c);
            text(&mut body, x + 34.0, y + 4.5, LABEL_PX, "start", label);
        }
        open_svg(&mut out, width, height, &self.title);
        out.push_str(&body);
        out.push_str("</svg>");
        Some(out)
    }
}

/// One bar: a value and its interval (whisker).
#[derive(Clone, Copy, Debug)]
pub struct Bar {
    pub value: f64,
    pub low: f64,
    pub high: f64,
}

/// Horizontal bars, a row per category (its name on the left), a bar per group in each row
/// (one group: no legend), each with a whisker and its value written after it.
pub struct BarChart {
    pub title: String,
    pub axis: Axis,
    pub whisker: String,
    pub groups: Vec<String>,
    pub rows: Vec<(String, Vec<Option<Bar>>)>,
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
            .flat_map(|b| [b.value, b.high])
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max);
        if bars.is_empty() || max <= 0.0 {
            return None;
        }
        let mut body = String::new();
        let top = title_block(&mut body, &self.title, width);
        let names: Vec<String> = self.rows.iter().map(|r| r.0.clone()).collect();
        let left = 16.0 + widest(&names, LABEL_PX) + 10.0;
        let values: Vec<String> = bars.iter().map(|b| (self.axis.format)(b.value)).collect();
        let right = width - 16.0 - widest(&values, TICK_PX) - 10.0;
        let groups = self.groups.len().max(1);
        let bar_h = if groups == 1 { 18.0 } else { 14.0 };
        let row_h = bar_h * groups as f64 + 10.0;
        let plot_h = row_h * self.rows.len() as f64;
        let bottom = top + plot_h;
        let (legend_at, legend_rows) = if self.groups.len() > 1 {
            legend_layout(&self.groups, right - left)
        } else {
            (Vec::new(), 0)
        };
        let height = bottom + 40.0 + 18.0 + legend_rows as f64 * 22.0 + 6.0;
        let xs = Scale::new(0.0, max * 1.04, false, left, right);
        x_grid(&mut body, &xs, self.axis.format, top, bottom);
        for (r, (name, row)) in self.rows.iter().enumerate() {
            let y_row = top + r as f64 * row_h + 5.0;
            text(
                &mut body,
                left - 8.0,
                y_row + row_h / 2.0,
                LABEL_PX,
                "end",
                name,
            );
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
                let (lo, hi) = (xs.at(b.low.max(0.0)), xs.at(b.high));
                let ym = y + bar_h / 2.0;
                let _ = write!(
                    body,
                    "<path d=\"M{lo:.1} {ym:.1}H{hi:.1}M{lo:.1} {:.1}V{:.1}M{hi:.1} {:.1}V{:.1}\" stroke=\"black\" stroke-width=\"1.5\" fill=\"none\"/>",
                    ym - 4.0,
                    ym + 4.0,
                    ym - 4.0,
                    ym + 4.0
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
        let caption = format!("{}; whiskers: {}", self.axis.label, self.whisker);
        for (i, line) in wrap(&caption, LABEL_PX, width - 32.0).iter().enumerate() {
            text(
                &mut body,
                (left + right) / 2.0,
                bottom + 36.0 + i as f64 * 16.0,
                LABEL_PX,
                "middle",
                line,
            );
        }
        let lines = wrap(&caption, LABEL_PX, width - 32.0).len().max(1);
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
        let mut out = String::new();
        open_svg(&mut out, width, height, &self.title);
        out.push_str(&body);
        out.push_str("</svg>");
        Some(out)
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

/// One traced variant in a Gantt chart: its name and, per lane, the busy intervals (seconds).
pub struct GanttGroup {
    pub title: String,
    pub lanes: Vec<(String, Vec<(f64, f64)>)>,
}

/// Lane timelines of traced variants: a block per variant, a row per lane, each block on its
/// own time axis (from its first op to its last), so overlap across lanes shows however short
/// the variant; the block's title gives its length.
pub fn gantt(title: &str, groups: &[GanttGroup], width: f64) -> Option<String> {
    let end = |g: &GanttGroup| {
        g.lanes
            .iter()
            .flat_map(|l| l.1.iter().map(|b| b.1))
            .fold(0.0, f64::max)
    };
    if groups.is_empty() || groups.iter().all(|g| end(g) <= 0.0) {
        return None;
    }
    let mut body = String::new();
    let top = title_block(&mut body, title, width);
    let lane_names: Vec<String> = groups
        .iter()
        .flat_map(|g| g.lanes.iter().map(|l| l.0.clone()))
        .collect();
    let left = 16.0 + widest(&lane_names, TICK_PX).max(40.0) + 10.0;
    let right = width - 16.0 - text_width("100% busy", TICK_PX) - 10.0;
    let (lane_h, head_h, axis_h) = (16.0, 22.0, 30.0);
    let mut y = top;
    let mut lane_index: Vec<String> = Vec::new();
    for g in groups {
        text(&mut body, left, y + 15.0, LABEL_PX, "start", &g.title);
        y += head_h;
        if end(g) <= 0.0 {
            // Nothing ran on a lane in this repeat (its work is not engine ops): no axis.
            y += 10.0;
            continue;
        }
        let span = end(g);
        let xs = Scale::new(0.0, span, false, left, right);
        let block_top = y;
        let block_bottom = y + lane_h * g.lanes.len() as f64;
        let ticks = thin_x_ticks(&xs, crate::units::human_time);
        for (t, _) in &ticks {
            let x = xs.at(*t);
            let _ = write!(
                body,
                "<line x1=\"{x:.1}\" y1=\"{block_top:.1}\" x2=\"{x:.1}\" y2=\"{block_bottom:.1}\" stroke=\"#d0d0d0\"/>"
            );
        }
        for (lane, busy) in &g.lanes {
            let li = lane_index
                .iter()
                .position(|l| l == lane)
                .unwrap_or_else(|| {
                    lane_index.push(lane.clone());
                    lane_index.len() - 1
                });
            let c = color(li);
            let _ = write!(
                body,
                "<rect x=\"{left:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#ececec\" fill-opacity=\"0.7\"/>",
                right - left,
                lane_h - 2.0
            );
            text(&mut body, left - 8.0, y + 11.5, TICK_PX, "end", lane);
            for (a, b) in busy {
                let (xa, xb) = (xs.at(*a), xs.at(*b));
                let _ = write!(
                    body,
                    "<rect x=\"{xa:.2}\" y=\"{y:.1}\" width=\"{:.2}\" height=\"{:.1}\" fill=\"{c}\"/>",
                    (xb - xa).max(0.6),
                    lane_h - 2.0
                );
            }
            let busy_s: f64 = busy.iter().map(|(a, b)| b - a).sum();
            text(
                &mut body,
                right + 8.0,
                y + 11.5,
                TICK_PX,
                "start",
                &format!("{:.0}% busy", busy_s / span * 100.0),
            );
            y += lane_h;
        }
        let _ = write!(
            body,
            "<line x1=\"{left:.1}\" y1=\"{y:.1}\" x2=\"{right:.1}\" y2=\"{y:.1}\" stroke=\"#333333\"/>"
        );
        for (t, label) in ticks {
            text(
                &mut body,
                xs.at(t),
                y + 14.0,
                TICK_PX - 1.0,
                "middle",
                &label,
            );
        }
        y += axis_h;
    }
    text(
        &mut body,
        (left + right) / 2.0,
        y + 8.0,
        LABEL_PX,
        "middle",
        "time since the variant's first op started (one traced repeat; dark: the lane ran an op)",
    );
    let height = y + 22.0;
    let mut out = String::new();
    open_svg(&mut out, width, height, title);
    out.push_str(&body);
    out.push_str("</svg>");
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_within_the_range() {
        let s = Scale::new(0.0, 0.93, false, 0.0, 100.0);
        assert_eq!(s.ticks(), vec![0.0, 0.2, 0.4, 0.6000000000000001, 0.8]);
        let l = Scale::new(1e-6, 1e-2, true, 0.0, 100.0);
        assert_eq!(l.ticks().len(), 5, "{:?}", l.ticks());
        let narrow = Scale::new(3.0, 7.0, true, 0.0, 100.0);
        assert!(narrow.ticks().iter().all(|t| (3.0..=7.0).contains(t)));
        assert!(narrow.ticks().len() >= 2);
    }

    #[test]
    fn labels_are_escaped_and_wrapped() {
        assert_eq!(esc("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
        let lines = wrap("one two three four five six", 13.0, 60.0);
        assert!(lines.len() > 2, "{lines:?}");
        assert!(lines
            .iter()
            .all(|l| text_width(l, 13.0) <= 60.0 || !l.contains(' ')));
        assert_eq!(plain(1500.0), "1500");
        assert_eq!(plain(0.25), "0.25");
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

    #[test]
    fn a_chart_is_well_formed_svg_with_a_polyline_per_series() {
        let chart = LineChart {
            title: "t <x>".into(),
            x: Axis::new("size", false, plain),
            y: Axis::new("time", true, crate::units::human_time),
            series: (0..3)
                .map(|i| Series {
                    label: format!("variant {i}"),
                    points: vec![(1.0, 1e-3 * (i + 1) as f64), (2.0, 2e-3), (3.0, 5e-3)],
                    band: vec![(1.0, 5e-4, 2e-3), (3.0, 4e-3, 6e-3)],
                })
                .collect(),
        };
        let svg = chart.svg(800.0).expect("drawn");
        let doc = roxmltree::Document::parse(&svg).expect("well-formed");
        let lines = doc
            .descendants()
            .filter(|n| n.has_tag_name("polyline"))
            .count();
        assert_eq!(lines, 3);
        assert!(svg.contains("t &lt;x&gt;"));
        let bars = BarChart {
            title: "bars".into(),
            axis: Axis::new("median time", false, crate::units::human_time),
            whisker: "95% CI".into(),
            groups: vec![],
            rows: vec![(
                "a".into(),
                vec![Some(Bar {
                    value: 1.0,
                    low: 0.9,
                    high: 1.1,
                })],
            )],
        };
        roxmltree::Document::parse(&bars.svg(600.0).unwrap()).expect("well-formed");
        let g = gantt(
            "lanes",
            &[GanttGroup {
                title: "parallel".into(),
                lanes: vec![
                    ("cpu:0".into(), vec![(0.0, 0.5)]),
                    ("cpu:1".into(), vec![(0.2, 1.0)]),
                ],
            }],
            600.0,
        )
        .unwrap();
        roxmltree::Document::parse(&g).expect("well-formed");
        assert!(g.contains("50% busy") && g.contains("80% busy"), "{g}");
    }
}
