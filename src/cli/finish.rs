//! Finishing a run's report: the JSON on stdout or in its file, the HTML page, the trace, and
//! the exit code a failed check gives.

use std::path::Path;

use super::args::CommonArgs;
use super::error::CliError;
use super::output::{is_stdout, json_on_stdout, output_name, stdout, write_output};
use crate::export;
use crate::report::Report;
use crate::scenario::RunContext;

/// Print or write the report (and the trace); a failed check is [`CliError::CheckFailed`].
pub(super) fn finish_report(
    report: &Report,
    common: &CommonArgs,
    ctx: &RunContext,
) -> Result<(), CliError> {
    if json_on_stdout(common) {
        stdout(&report.to_json())?;
    }
    let write = |path: &Path, text: &str, after: &str| {
        write_output(path, text)?;
        if !common.quiet {
            note!("wrote {}{after}", output_name(path));
        }
        Ok::<(), CliError>(())
    };
    // `-o -` is the JSON on stdout, written above, once.
    if let Some(out) = common.output.as_ref().filter(|o| !is_stdout(o)) {
        write(out, &report.to_json(), "")?;
    }
    if let Some(path) = &common.html {
        write(path, &export::html::page(report), "")?;
    }
    if let (Some(path), Some(traces)) = (&common.trace, &ctx.traces) {
        let traces = traces.lock().unwrap_or_else(|e| e.into_inner());
        let mut text = serde_json::to_string(&export::chrome_trace::chrome_trace(&traces))?;
        text.push('\n');
        let perfetto = " (open it in https://ui.perfetto.dev or chrome://tracing)";
        write(path, &text, perfetto)?;
    }
    if report.runs.iter().all(|r| r.checks_passed()) {
        Ok(())
    } else {
        Err(CliError::CheckFailed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::RunRecord;

    #[test]
    fn a_failed_check_ends_the_run_with_exit_code_1_and_says_so() {
        let mut run = RunRecord::new("s", serde_json::Map::new(), vec![]);
        run.check("identical", false, "differs");
        let report = crate::report::fixtures::report(vec![run]);
        let common = CommonArgs {
            quiet: true,
            ..CommonArgs::default()
        };
        let e = finish_report(&report, &common, &RunContext::default()).expect_err("failed");
        assert!(matches!(e, CliError::CheckFailed), "{e}");
        assert_eq!(e.exit_code(), 1);
        assert_eq!(
            e.line().as_deref(),
            Some("a correctness check failed (see the report)")
        );
    }
}
