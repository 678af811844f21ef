//! The SVG element around a chart, and its title block.

use std::fmt::Write;

use super::text::{esc, wrap, FONT, TITLE_PX};

/// The SVG document of `body`, `width` × `height` pixels on white, titled `title`.
pub(super) fn svg_doc(width: f64, height: f64, title: &str, body: &str) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" \
         viewBox=\"0 0 {width:.0} {height:.0}\" role=\"img\" {FONT}><title>{}</title>\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>{body}</svg>",
        esc(title)
    )
}

/// Title lines at the top, centred; returns the height they took.
pub(super) fn title_block(out: &mut String, title: &str, width: f64) -> f64 {
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
