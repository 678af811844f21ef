//! Help text clap does not write: the list of scenarios under `parbench --help` and
//! `parbench list`, wrapped with a hanging indent.

use crate::scenario;

/// The scenarios, a line (or a wrapped paragraph) each, under a heading.
pub(super) fn scenarios_help() -> String {
    let mut s = String::from("Scenarios (parbench <scenario> --help for their options):\n");
    for sc in scenario::registry() {
        s.push_str(&hanging(&format!("  {:<14} ", sc.name()), sc.about(), 96));
    }
    s
}

/// `lead` then `text` wrapped at `width` columns, continuation lines indented under the text
/// (clap would wrap a long line back to the margin).
fn hanging(lead: &str, text: &str, width: usize) -> String {
    let indent = lead.chars().count();
    let mut out = String::from(lead);
    let mut col = indent;
    for word in text.split_whitespace() {
        let len = word.chars().count();
        if col > indent && col + 1 + len > width {
            out.push('\n');
            out.push_str(&" ".repeat(indent));
            col = indent;
        }
        if col > indent {
            out.push(' ');
            col += 1;
        }
        out.push_str(word);
        col += len;
    }
    out.push('\n');
    out
}
