//! Text in a chart: sizes, escaping, and the estimate of a label's width that the layout makes
//! room by (nothing is measured by a browser, so the estimate errs wide).

use std::fmt::Write;

pub(super) const FONT: &str = "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\"";
pub(super) const TICK_PX: f64 = 12.0;
pub(super) const LABEL_PX: f64 = 13.0;
pub(super) const TITLE_PX: f64 = 16.0;

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

pub(super) fn text(out: &mut String, x: f64, y: f64, px: f64, anchor: &str, s: &str) {
    let _ = write!(
        out,
        "<text x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"{px}\" text-anchor=\"{anchor}\">{}</text>",
        esc(s)
    );
}

/// `lines` of a caption centred on `x`, the first at `y`, each `step` below the last.
pub(super) fn centred(out: &mut String, lines: &[String], x: f64, y: f64, step: f64) {
    for (i, line) in lines.iter().enumerate() {
        text(out, x, y + i as f64 * step, LABEL_PX, "middle", line);
    }
}

pub(super) fn widest<'a>(labels: impl IntoIterator<Item = &'a String>, px: f64) -> f64 {
    labels
        .into_iter()
        .map(|l| text_width(l, px))
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_escaped_and_wrapped() {
        assert_eq!(esc("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
        let lines = wrap("one two three four five six", 13.0, 60.0);
        assert!(lines.len() > 2, "{lines:?}");
        assert!(lines
            .iter()
            .all(|l| text_width(l, 13.0) <= 60.0 || !l.contains(' ')));
    }
}
