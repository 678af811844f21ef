//! `parbench ab`: two parbench executables measured side by side over a suite, in ABBA order,
//! one short process per side and pair, so a burst of drift hits both sides of a pair (see
//! `report::paired` for the decision).

use std::path::{Path, PathBuf};
use std::process::Command as Process;
use std::time::Instant;

use super::args::AbArgs;
use super::error::CliError;
use super::output::{check_output_path, stdout, write_output};
use crate::export::paired as render;
use crate::export::ComparisonFormat;
use crate::report::paired::{self, PairedEntry};
use crate::report::provenance::{AbSides, Provenance};
use crate::report::Report;
use crate::scenario::suite;

/// The suite `ab` runs when none is named: small, fast, many samples.
const DEFAULT_SUITE: &str = "scenarios/ci.toml";

pub(super) fn run_ab(args: AbArgs) -> Result<(), CliError> {
    if let Some(path) = &args.from {
        let earlier = super::ab_result::load(path)?;
        return finish(&earlier.entries, &args, earlier.settings, &earlier.sides);
    }
    let (Some(base), Some(candidate)) = (&args.base, &args.candidate) else {
        return Err(CliError::Usage(
            "ab needs a base and a candidate (or --from FILE)".into(),
        ));
    };
    if args.max_pairs < args.min_pairs {
        return Err(CliError::Usage(format!(
            "--max-pairs {} is below --min-pairs {}",
            args.max_pairs, args.min_pairs
        )));
    }
    let suite_path = args.suite.clone().unwrap_or_else(|| DEFAULT_SUITE.into());
    let text = suite::read(&suite_path)?;
    let name = suite_path.display().to_string();
    // Checked whole by this build first: a typo fails before minutes of runs.
    suite::parse(&name, &text)?;
    let entries = split_suite(&name, &text)?;
    if let Some(out) = &args.output {
        check_output_path(out)?;
    }
    let base = super::ab_build::resolve(base, args.allow_dirty)?;
    let candidate = super::ab_build::resolve(candidate, args.allow_dirty)?;
    for (side, bin) in [("base", &base), ("candidate", &candidate)] {
        check_executable(side, bin)?;
    }
    let dir = tempdir()?;
    let start = Instant::now();
    let mut results: Vec<PairedEntry> = Vec::new();
    let mut total_pairs = 0u64;
    let mut skipped: Vec<String> = Vec::new();
    let mut sides = AbSides::default();
    for (i, (label, entry_text)) in entries.iter().enumerate() {
        let entry_file = dir.path.join(format!("entry-{i}.toml"));
        std::fs::write(&entry_file, entry_text)
            .map_err(|e| CliError::Usage(format!("cannot write {}: {e}", entry_file.display())))?;
        // The budget is shared out evenly; what an entry leaves unused goes to the next ones.
        let deadline = start + args.budget.mul_f64((i + 1) as f64 / entries.len() as f64);
        let mut these: Vec<PairedEntry> = Vec::new();
        let mut pairs = 0u64;
        while pairs < args.max_pairs {
            // ABBA: A B, then B A, so neither side always runs first (warmer, or later in a drift).
            let order = if pairs.is_multiple_of(2) {
                [Side::Base, Side::Candidate]
            } else {
                [Side::Candidate, Side::Base]
            };
            let mut values = [Vec::new(), Vec::new()];
            let mut busy = [false, false];
            let mut states = [String::new(), String::new()];
            let mut refused = None;
            for side in order {
                let bin = match side {
                    Side::Base => &base,
                    Side::Candidate => &candidate,
                };
                let report = match run_side(side, bin, &entry_file, args.samples, label) {
                    Ok(report) => report,
                    // An entry one build cannot take (a parameter the base does not have yet)
                    // is reported, not fatal: the rest of the suite is still compared.
                    Err(SideError::Refused(why)) if pairs == 0 => {
                        refused = Some(why);
                        break;
                    }
                    Err(SideError::Refused(why) | SideError::Failed(why)) => {
                        return Err(CliError::Usage(why))
                    }
                };
                record_side(&mut sides, side, bin, &report, label)?;
                values[side as usize] = report.runs.iter().flat_map(paired::values_of).collect();
                busy[side as usize] = report.runs.iter().any(|r| !r.busy_reasons().is_empty());
                states[side as usize] = report
                    .runs
                    .iter()
                    .filter_map(|r| r.state.as_ref().map(ToString::to_string))
                    .collect::<Vec<_>>()
                    .join("; ");
            }
            if let Some(why) = refused {
                skipped.push(why);
                break;
            }
            paired::add_pair(&mut these, &values[0], &values[1], busy);
            pairs += 1;
            // Each side's state when either was busy: the pair's ratio may be the machine's.
            if busy.iter().any(|&b| b) {
                for side in [Side::Base, Side::Candidate] {
                    let i = side as usize;
                    let mark = if busy[i] { " (busy)" } else { "" };
                    let state = if states[i].is_empty() {
                        "no state recorded"
                    } else {
                        &states[i]
                    };
                    note!("ab: {label}: pair {pairs}: {}{mark}: {state}", side.name());
                }
            }
            let settled = these
                .iter()
                .zip(paired::decide_all(&these, args.threshold))
                .filter(|(e, _)| e.is_time)
                .all(|(_, d)| d.is_some_and(|d| d.settled));
            if pairs >= args.min_pairs && (settled || Instant::now() >= deadline) {
                break;
            }
        }
        total_pairs += pairs;
        note!(
            "ab: {label}: {pairs} pairs ({:.0} s so far)",
            start.elapsed().as_secs_f64()
        );
        results.extend(these);
    }
    let settings = serde_json::json!({
        "base": base.display().to_string(),
        "candidate": candidate.display().to_string(),
        "suite": name,
        "samples_per_process": args.samples,
        "pairs": total_pairs,
        "skipped": skipped,
        "seconds": start.elapsed().as_secs_f64(),
    });
    for why in &skipped {
        note!("ab: skipped: {why}");
    }
    finish(&results, &args, settings, &sides)
}

/// Check a side's report of one suite entry and keep the side's provenance from its first:
/// a report holding an entry twice would pair either copy, so it ends the run.
fn record_side(
    sides: &mut AbSides,
    side: Side,
    bin: &Path,
    report: &Report,
    label: &str,
) -> Result<(), CliError> {
    let repeated = report.duplicate_entries();
    if !repeated.is_empty() {
        return Err(CliError::Usage(format!(
            "the {} reported {} more than once on suite entry {label}",
            side.name(),
            repeated.join(", ")
        )));
    }
    let slot = match side {
        Side::Base => &mut sides.base,
        Side::Candidate => &mut sides.candidate,
    };
    if slot.is_none() {
        *slot = Some(Provenance::of(report, &bin.display().to_string()));
    }
    Ok(())
}

/// Print (and write) the verdicts; exit 1 on a regression.
fn finish(
    results: &[PairedEntry],
    args: &AbArgs,
    settings: serde_json::Value,
    sides: &AbSides,
) -> Result<(), CliError> {
    let json = render::render_json(results, args.threshold, settings, sides);
    if let Some(out) = &args.output {
        write_output(out, &json)?;
    }
    stdout(&match args.format {
        ComparisonFormat::Json => json,
        other => render::render(results, args.threshold, other),
    })?;
    // A regression with a busy side still fails the gate, as in `compare`: the verdict says
    // the machine may explain it, and a rerun on a quiet machine settles it.
    match paired::regressions(results, args.threshold) {
        0 => Ok(()),
        n => Err(CliError::Regression(n)),
    }
}

#[derive(Clone, Copy)]
enum Side {
    Base = 0,
    Candidate = 1,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Base => "base",
            Side::Candidate => "candidate",
        }
    }
}

/// Each `[[run]]` of a suite as a suite of its own (the text a child process reads), with a
/// label (`2: matmul`).
fn split_suite(name: &str, text: &str) -> Result<Vec<(String, String)>, CliError> {
    let table: toml::Table = text
        .parse()
        .map_err(|e| CliError::Usage(format!("{name}: {e}")))?;
    let runs = table
        .get("run")
        .and_then(toml::Value::as_array)
        .filter(|r| !r.is_empty())
        .ok_or_else(|| CliError::Usage(format!("{name}: no [[run]] entries")))?;
    runs.iter()
        .enumerate()
        .map(|(i, run)| {
            let scenario = run
                .get("scenario")
                .and_then(toml::Value::as_str)
                .unwrap_or("?");
            let mut one = toml::Table::new();
            one.insert("run".into(), toml::Value::Array(vec![run.clone()]));
            let text = toml::to_string(&one)
                .map_err(|e| CliError::Usage(format!("{name}: entry {}: {e}", i + 1)))?;
            Ok((format!("{}: {scenario}", i + 1), text))
        })
        .collect()
}

/// Fail fast, in one line, when a side is not a parbench that runs here.
fn check_executable(side: &str, bin: &Path) -> Result<(), CliError> {
    let out = Process::new(bin)
        .arg("--version")
        .output()
        .map_err(|e| CliError::Usage(format!("cannot run the {side} {}: {e}", bin.display())))?;
    let version = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || !version.starts_with("parbench ") {
        return Err(CliError::Usage(format!(
            "the {side} {} is not a parbench executable ('--version' said '{}')",
            bin.display(),
            version.trim()
        )));
    }
    Ok(())
}

/// Why a side gave no report.
enum SideError {
    /// It refused the entry as bad input (exit 2): a parameter or scenario it does not know.
    Refused(String),
    /// It could not be run, failed while running, or wrote no report.
    Failed(String),
}

/// One process of one side on one suite entry: its report.
fn run_side(
    side: Side,
    bin: &Path,
    entry: &Path,
    samples: u64,
    label: &str,
) -> Result<Report, SideError> {
    let samples = samples.to_string();
    let out = Process::new(bin)
        .arg("run")
        .arg(entry)
        .args(["--json", "--quiet", "--warmup", "1", "--min-time", "0"])
        .args(["--min-samples", &samples, "--max-samples", &samples])
        .output()
        .map_err(|e| {
            SideError::Failed(format!(
                "cannot run the {} {}: {e}",
                side.name(),
                bin.display()
            ))
        })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr.lines().last().unwrap_or("no message");
        let why = format!(
            "the {} failed on suite entry {label} ({}): {last}",
            side.name(),
            out.status
        );
        return Err(match out.status.code() {
            Some(2) => SideError::Refused(why),
            _ => SideError::Failed(why),
        });
    }
    serde_json::from_slice(&out.stdout).map_err(|e| {
        SideError::Failed(format!(
            "the {} wrote no report for suite entry {label}: {e}",
            side.name()
        ))
    })
}

/// A private directory for the entries' suite files, removed when dropped.
struct TempDir {
    path: PathBuf,
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

fn tempdir() -> Result<TempDir, CliError> {
    let path = std::env::temp_dir().join(format!("parbench-ab-{}", std::process::id()));
    std::fs::create_dir_all(&path)
        .map_err(|e| CliError::Usage(format!("cannot create {}: {e}", path.display())))?;
    Ok(TempDir { path })
}
