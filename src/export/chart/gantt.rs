//! Gantt charts: the lanes of traced variants, a block per variant on its own time axis.

use std::fmt::Write;

use super::axis::thin_x_ticks;
use super::frame::{open_svg, title_block};
use super::scale::Scale;
use super::style::color;
use super::text::{text, text_width, widest, LABEL_PX, TICK_PX};

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
