//! Charts as SVG text, drawn by hand so that their layout is known: every label's width is
//! estimated and room is made for it (tick labels are thinned rather than overlapped, legends
//! sit below the plot and wrap, long titles wrap), and each series differs in colour, dash and
//! marker, so a chart printed in greyscale still tells its lines apart. `plot` (`svg/`) and
//! the HTML report (`html.rs`) draw with these.
//!
//! One concept per file: text sizes, escaping and width estimates (`text.rs`), the SVG element
//! and title (`frame.rs`), data-to-pixel scales and their ticks (`scale.rs`), value axes and
//! tick labels (`axis.rs`), series styles and markers (`style.rs`), the legend (`legend.rs`),
//! and the three charts: lines (`line.rs`), bars (`bar.rs`), lane timelines (`gantt.rs`).

mod axis;
mod bar;
mod frame;
mod gantt;
mod legend;
mod line;
mod scale;
mod style;
mod text;

pub use axis::{plain, Axis};
pub use bar::{Bar, BarChart};
pub use gantt::{gantt, GanttGroup, TimeAxis};
pub use line::{LineChart, Series};
pub use style::color;
pub use text::{esc, text_width, wrap};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_is_well_formed_svg_with_a_polyline_per_series() {
        let series = (0..3)
            .map(|i| Series {
                label: format!("variant {i}"),
                points: vec![(1.0, 1e-3 * (i + 1) as f64), (2.0, 2e-3), (3.0, 5e-3)],
                band: vec![(1.0, 5e-4, 2e-3), (3.0, 4e-3, 6e-3)],
            })
            .collect();
        let x = Axis::new("size", false, plain);
        let y = Axis::new("time", true, crate::units::human_time);
        let svg = LineChart::new("t <x>".into(), x, y, series)
            .svg(800.0)
            .expect("drawn");
        let doc = roxmltree::Document::parse(&svg).expect("well-formed");
        let lines = doc.descendants().filter(|n| n.has_tag_name("polyline"));
        assert_eq!(lines.count(), 3);
        assert!(svg.contains("t &lt;x&gt;"));
        let bar = Bar {
            value: 1.0,
            lo: 0.9,
            hi: 1.1,
        };
        let bars = BarChart {
            title: "bars".into(),
            axis: Axis::new("median time", false, crate::units::human_time),
            whisker: "95% CI".into(),
            groups: vec![],
            rows: vec![("a".into(), vec![Some(bar)])],
            notes: Vec::new(),
        };
        roxmltree::Document::parse(&bars.svg(600.0).unwrap()).expect("well-formed");
        let g = gantt(
            "lanes",
            &[GanttGroup {
                title: "parallel".into(),
                detail: String::new(),
                lanes: vec![
                    ("cpu:0".into(), vec![(0.0, 0.5)]),
                    ("cpu:1".into(), vec![(0.2, 1.0)]),
                ],
            }],
            TimeAxis::PerVariant,
            600.0,
        )
        .unwrap();
        roxmltree::Document::parse(&g).expect("well-formed");
        assert!(g.contains("50% busy") && g.contains("80% busy"), "{g}");
    }
}
