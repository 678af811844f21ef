//! Pages and scripts for a reader: `parbench report` (a saved report, or two compared, as one
//! HTML page), the `--html` page of a run, and `parbench completions`.

use clap::CommandFactory;

use super::args::{scenario_command, Cli, ReportArgs};
use super::error::CliError;
use super::output::{check_output_path, output_name, stdout, write_output};
use crate::export;
use crate::report::compare;
use crate::scenario;

/// `parbench report RUN.json [NEW.json] [-o FILE]`: one report's page, or two side by side.
pub(super) fn run_report(args: ReportArgs) -> Result<(), CliError> {
    let reports = &args.reports[..];
    let html = match reports {
        [one] => export::html::page(&compare::load(one)?),
        [base, new] => {
            let names = [base, new].map(|p| p.display().to_string());
            export::html_compare::comparison_page(
                &super::reports::load_comparable(base)?,
                &super::reports::load_comparable(new)?,
                [&names[0], &names[1]],
                args.threshold,
            )
        }
        _ => return Err(CliError::Usage("give one report, or two to compare".into())),
    };
    let out = args
        .output
        .unwrap_or_else(|| reports[reports.len() - 1].with_extension("html"));
    if reports.contains(&out) {
        return Err(CliError::Usage(format!(
            "the page would overwrite the report {}: choose another -o",
            out.display()
        )));
    }
    check_output_path(&out)?;
    write_output(&out, &html)?;
    note!("wrote {}", output_name(&out));
    Ok(())
}

/// The completion script for `shell`, scenarios and their options included.
pub(super) fn completions(shell: clap_complete::Shell) -> Result<(), CliError> {
    let mut cmd = Cli::command();
    for sc in scenario::registry() {
        cmd = cmd.subcommand(scenario_command(*sc));
    }
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "parbench", &mut script);
    stdout(&String::from_utf8_lossy(&script))
}
