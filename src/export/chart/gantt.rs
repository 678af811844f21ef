//! Gantt charts: the lanes of traced variants, a block per variant, each on its own time axis
//! or all on one.

use std::fmt::Write;

use super::axis::thin_x_ticks;
use super::frame::{svg_doc, title_block};
use super::scale::Scale;
use super::style::color;
use super::text::{centred, esc, text, text_width, widest, wrap, LABEL_PX, TICK_PX};

/// One traced variant in a Gantt chart: its name, what its block shows (the repeat it comes
/// from, its length; a line each, wrapped when long), and per lane the busy intervals
/// (seconds).
pub struct GanttGroup {
    pub title: String,
    pub detail: String,
    pub lanes: Vec<(String, Vec<(f64, f64)>)>,
}

/// How the blocks of a Gantt chart share time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeAxis {
    /// Each block from its first op to its last: overlap across lanes shows however short the
    /// variant, but blocks cannot be compared by length.
    PerVariant,
    /// Every block to the scale of the longest: a variant that takes as long as the longer of
    /// two others ends where that one ends (the chapter's parallel ≈ max(a, b)).
    Shared,
}

impl GanttGroup {
    /// The end of the last busy interval, seconds.
    fn end(&self) -> f64 {
        self.lanes
            .iter()
            .flat_map(|l| l.1.iter().map(|b| b.1))
            .fold(0.0, f64::max)
    }
}

/// Each block's time scale, from `left` to `right` pixels: its own length, or on a shared axis
/// the longest block's, so the same time is the same width in every block.
pub(super) fn block_scales(
    groups: &[GanttGroup],
    axis: TimeAxis,
    left: f64,
    right: f64,
) -> Vec<Scale> {
    let longest = groups.iter().map(GanttGroup::end).fold(0.0, f64::max);
    groups
        .iter()
        .map(|g| {
            let extent = match axis {
                TimeAxis::PerVariant => g.end(),
                TimeAxis::Shared => longest,
            };
            Scale::new(0.0, extent, false, left, right)
        })
        .collect()
}

/// Lane timelines of traced variants: a block per variant, a row per lane, with the time axis
/// per block or shared (`axis`). On a shared axis a dashed line marks where each block ends.
pub fn gantt(title: &str, groups: &[GanttGroup], axis: TimeAxis, width: f64) -> Option<String> {
    if groups.is_empty() || groups.iter().all(|g| g.end() <= 0.0) {
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
    let (lane_h, line_h, axis_h) = (16.0, 17.0, 30.0);
    let scales = block_scales(groups, axis, left, right);
    let mut y = top;
    // A lane keeps one colour in every block: its place among the lanes of blocks that ran.
    let ran = groups.iter().filter(|g| g.end() > 0.0);
    let lane_index = crate::export::unique(ran.flat_map(|g| g.lanes.iter().map(|l| &l.0)));
    for (g, xs) in groups.iter().zip(&scales) {
        // The variant's name in bold (wider than the estimate of plain text), then what the
        // block shows, wrapped within the plot.
        let name_w = text_width(&g.title, LABEL_PX) * 1.15 + 12.0;
        let lines: Vec<String> = g
            .detail
            .lines()
            .flat_map(|l| wrap(l, LABEL_PX, (right - left - name_w).max(120.0)))
            .collect();
        for (i, line) in lines.iter().enumerate() {
            let yl = y + 15.0 + i as f64 * line_h;
            if i == 0 {
                let _ = write!(
                    body,
                    "<text x=\"{left:.1}\" y=\"{yl:.1}\" font-size=\"{LABEL_PX}\" font-weight=\"bold\">{}</text>",
                    esc(&g.title)
                );
            }
            text(&mut body, left + name_w, yl, LABEL_PX, "start", line);
        }
        y += 6.0 + line_h * lines.len().max(1) as f64;
        let span = g.end();
        if span <= 0.0 {
            // Nothing ran on a lane in this repeat (its work is not engine ops): no axis.
            y += 10.0;
            continue;
        }
        let block_top = y;
        let block_bottom = y + lane_h * g.lanes.len() as f64;
        let ticks = thin_x_ticks(xs, crate::units::human_time);
        for (t, _) in &ticks {
            let x = xs.at(*t);
            let _ = write!(
                body,
                "<line x1=\"{x:.1}\" y1=\"{block_top:.1}\" x2=\"{x:.1}\" y2=\"{block_bottom:.1}\" stroke=\"#d0d0d0\"/>"
            );
        }
        for (lane, busy) in &g.lanes {
            let c = color(lane_index.iter().position(|l| *l == lane).unwrap_or(0));
            let _ = write!(
                body,
                "<rect x=\"{left:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#ececec\" fill-opacity=\"0.7\"/>",
                xs.at(span) - left,
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
        if axis == TimeAxis::Shared {
            let x = xs.at(span);
            let _ = write!(
                body,
                "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{y:.1}\" stroke=\"#111111\" stroke-width=\"1.5\" stroke-dasharray=\"4 3\"/>",
                block_top - 4.0
            );
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
    let caption = match axis {
        TimeAxis::PerVariant => {
            "time since the variant's first op started, each block to its own scale (dark: the \
             lane ran an op)"
        }
        TimeAxis::Shared => {
            "time since the variant's first op started, every block to the same scale (dark: \
             the lane ran an op; dashed: the repeat's last op ended)"
        }
    };
    let caption = wrap(caption, LABEL_PX, right - left);
    centred(&mut body, &caption, (left + right) / 2.0, y + 8.0, line_h);
    let height = y + 22.0 + (caption.len().max(1) - 1) as f64 * line_h;
    Some(svg_doc(width, height, title, &body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(name: &str, end: f64) -> GanttGroup {
        GanttGroup {
            title: name.into(),
            detail: String::new(),
            lanes: vec![("cpu:0".into(), vec![(0.0, end / 2.0), (end * 0.75, end)])],
        }
    }

    #[test]
    fn blocks_on_a_shared_axis_have_one_time_to_pixel_factor() {
        let groups = [
            group("a-alone", 0.8),
            group("b-alone", 0.3),
            group("parallel", 0.85),
        ];
        let px_per_ms = |s: &Scale| s.at(1e-3) - s.at(0.0);
        let shared = block_scales(&groups, TimeAxis::Shared, 100.0, 700.0);
        let first = px_per_ms(&shared[0]);
        assert!((first - 600.0 / 850.0).abs() < 1e-9, "{first}");
        assert!(shared.iter().all(|s| (px_per_ms(s) - first).abs() < 1e-12));
        // Each to its own length, they differ.
        let own = block_scales(&groups, TimeAxis::PerVariant, 100.0, 700.0);
        assert!((px_per_ms(&own[1]) - px_per_ms(&own[0])).abs() > 0.1);
        let svg = gantt("t", &groups, TimeAxis::Shared, 800.0).expect("drawn");
        roxmltree::Document::parse(&svg).expect("well-formed");
        assert_eq!(
            svg.matches("stroke-dasharray=\"4 3\"").count(),
            3,
            "an end per block"
        );
    }
}
