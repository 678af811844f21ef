//! Help text clap does not write: the list of scenarios under `parbench --help` and
//! `parbench list`, wrapped with a hanging indent.

use crate::scenario;

/// The scenarios, a line (or a wrapped paragraph) each, under a heading.
pub(super) fn scenarios_help() -> String {
    let mut s = String::from("Scenarios (parbench <scenario> --help for their options):\n");
    for sc in scenario::registry() {
        s.push_str(&hanging(&format!("  {:<14} ", sc.name()), sc.about(), 96));
    }
    s.push_str("\nEnvironment:\n");
    for (name, what) in ENVIRONMENT {
        s.push_str(&hanging(&format!("  {name:<26} "), what, 96));
    }
    s
}

/// The environment variables parbench reads, as `parbench --help` lists them.
const ENVIRONMENT: [(&str, &str); 3] = [
    (
        crate::engine::Mode::ENV,
        "the engine: threaded (the default) or naive, MXNet's sequential reference",
    ),
    (
        "CUDA_VISIBLE_DEVICES",
        "the GPUs the driver shows (empty or -1: none); recorded in each report",
    ),
    (
        "PARBENCH_GPU_INJECT_FAULT",
        "1: a scenario's GPU device plants a faulting kernel when it opens, to test the fault path \
         (the run must end with exit 1 and one line)",
    ),
];

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

#[cfg(test)]
mod environment_tests {
    use super::ENVIRONMENT;

    /// The help names the variables by the names the code reads.
    #[test]
    fn the_listed_variables_are_the_ones_read() {
        let names: Vec<&str> = ENVIRONMENT.iter().map(|(n, _)| *n).collect();
        assert!(names.contains(&crate::engine::Mode::ENV));
        #[cfg(feature = "cuda")]
        assert!(names.contains(&crate::device::cuda::INJECT_FAULT_ENV));
        assert!(super::scenarios_help().contains("PARBENCH_GPU_INJECT_FAULT"));
    }
}
