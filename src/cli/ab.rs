//! `parbench ab`: two parbench executables measured side by side over a suite, in ABBA order,
//! one short process per side and pair, so a burst of drift hits both sides of a pair (see
//! `report::paired` for the decision). A command entry's sides are its `base` and `new`
//! commands instead: a pair is one process of the candidate, timing both in interleaved rounds.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command as Process;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use super::args::AbArgs;
use super::error::CliError;
use super::output::{check_output_path, stdout, write_output};
use crate::export::paired as render;
use crate::export::ComparisonFormat;
use crate::report::compare::{run_entries, Entry};
use crate::report::paired::{self, BusyPairs, PairedEntry};
use crate::report::provenance::{AbSides, Provenance};
use crate::report::Report;
use crate::scenario::suite;

/// The suite `ab` runs when none is named: small, fast, many samples.
const DEFAULT_SUITE: &str = "scenarios/ci.toml";

pub(super) fn run_ab(args: AbArgs) -> Result<(), CliError> {
    if let Some(path) = &args.from {
        let (entries, settings, sides) = super::ab_result::load(path)?;
        return finish(&entries, &args, settings, &sides);
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
    // A suite of command entries alone never runs the base: it is not resolved, nor built.
    let base = if entries.iter().any(|(_, _, s)| *s == Sides::Builds) {
        Some(super::ab_build::resolve(base, args.allow_dirty)?)
    } else {
        None
    };
    let candidate = super::ab_build::resolve(candidate, args.allow_dirty)?;
    if let Some(base) = &base {
        check_executable("base", base)?;
    }
    check_executable("candidate", &candidate)?;
    let bins = [base.as_deref(), Some(candidate.as_path())];
    // A private directory for the entries' suite files, removed when dropped.
    let dir = std::env::temp_dir().join(format!("parbench-ab-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| CliError::Usage(format!("cannot create {}: {e}", dir.display())))?;
    let dir = TempDir(dir);
    let start = Instant::now();
    // The budget's end: no pair starts that would end past it, and a side still running at it
    // is stopped, so the measuring never outlasts it by more than the stopping takes.
    let end = start + args.budget;
    let mut results: Vec<PairedEntry> = Vec::new();
    let mut total_pairs = 0u64;
    let mut skipped: Vec<String> = Vec::new();
    let mut unmeasured: Vec<String> = Vec::new();
    let mut stopped_at_budget = false;
    let mut sides = AbSides::default();
    for (i, (label, entry_text, entry_sides)) in entries.iter().enumerate() {
        if Instant::now() >= end {
            unmeasured.push(label.clone());
            continue;
        }
        let entry_file = dir.0.join(format!("entry-{i}.toml"));
        std::fs::write(&entry_file, entry_text)
            .map_err(|e| CliError::Usage(format!("cannot write {}: {e}", entry_file.display())))?;
        // The budget is shared out evenly; what an entry leaves unused goes to the next ones.
        let deadline = start + args.budget.mul_f64((i + 1) as f64 / entries.len() as f64);
        // A command entry's rounds rotate which command runs first: an even count has each
        // lead in half of them (with 5, `base` led in 3 and two copies of one grep read 8% and
        // 14% apart over 40 pairs; with 6, 0.6% and 0.5%).
        let samples = match entry_sides {
            Sides::Builds => args.samples,
            Sides::Commands => args.samples.next_multiple_of(2),
        };
        let mut these: Vec<PairedEntry> = Vec::new();
        let mut pairs = 0u64;
        let mut busy_pairs = BusyPairs::default();
        let mut not_measured = std::collections::BTreeSet::new();
        let mut refused = None;
        let mut out_of_budget = false;
        // The longest pair so far: the next one is started only if that much time is left.
        let mut longest = Duration::ZERO;
        'pairs: while pairs < args.max_pairs {
            if Instant::now() + longest > end {
                out_of_budget = true;
                break;
            }
            let began = Instant::now();
            // ABBA: A B, then B A, so neither side always runs first (warmer, or later in a drift).
            let order = if pairs.is_multiple_of(2) {
                [Side::Base, Side::Candidate]
            } else {
                [Side::Candidate, Side::Base]
            };
            let mut values = [Vec::new(), Vec::new()];
            let mut busy = [false, false];
            // A command entry's pair is one process of the candidate's, timing both commands.
            let order: &[Side] = match entry_sides {
                Sides::Builds => &order,
                Sides::Commands => &[Side::Candidate],
            };
            for &side in order {
                let Some(bin) = bins[side as usize] else {
                    continue; // the base, left unresolved where no entry runs it
                };
                let report = match run_side(side, bin, &entry_file, samples, label, end) {
                    Ok(report) => report,
                    Err(SideError::OutOfBudget) => {
                        out_of_budget = true;
                        break 'pairs;
                    }
                    // An entry one build cannot take (a parameter the base does not have yet)
                    // is reported, not fatal: the rest of the suite is still compared.
                    Err(SideError::Refused(why)) if pairs == 0 => {
                        refused = Some(why);
                        break 'pairs;
                    }
                    Err(SideError::Refused(why) | SideError::Failed(why)) => {
                        return Err(CliError::Usage(why))
                    }
                };
                record_side(&mut sides, side, bin, &report, label)?;
                not_measured.extend(report.runs.iter().flat_map(paired::not_measured));
                let is_busy = report.runs.iter().any(|r| !r.busy_reasons().is_empty());
                if *entry_sides == Sides::Commands {
                    (values, busy) = (command_pair(&report), [is_busy; 2]);
                } else {
                    values[side as usize] = report.runs.iter().flat_map(run_entries).collect();
                    busy[side as usize] = is_busy;
                }
            }
            paired::add_pair(&mut these, &values[0], &values[1], busy);
            busy_pairs.add(busy);
            pairs += 1;
            longest = longest.max(began.elapsed());
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
        // One line per entry: its pairs, the time so far, the pairs' load, why it stopped.
        let mut line = format!(
            "ab: {label}: {pairs} pairs ({:.0} s so far)",
            start.elapsed().as_secs_f64()
        );
        if let Some(busy) = busy_note(&busy_pairs) {
            line.push_str(&format!("; {busy}"));
        }
        if !not_measured.is_empty() {
            let figures: Vec<String> = not_measured.into_iter().collect();
            line.push_str(&format!("; not measured: {}", figures.join(", ")));
        }
        if let Some(why) = refused {
            line.push_str(&format!("; skipped: {why}"));
            skipped.push(why);
        }
        stopped_at_budget |= out_of_budget;
        if out_of_budget {
            line.push_str(&format!(
                "; stopped at the --budget of {} s",
                args.budget.as_secs_f64()
            ));
        }
        note!("{line}");
        results.extend(these);
    }
    if !unmeasured.is_empty() {
        note!(
            "ab: stopped at the --budget of {} s: {} of {} entries not measured ({})",
            args.budget.as_secs_f64(),
            unmeasured.len(),
            entries.len(),
            unmeasured.join(", ")
        );
    }
    let settings = serde_json::json!({
        "base": base.as_ref().map(|b| b.display().to_string()),
        "candidate": candidate.display().to_string(),
        "suite": name,
        "samples_per_process": args.samples,
        "pairs": total_pairs,
        "skipped": skipped,
        "budget_s": args.budget.as_secs_f64(),
        "stopped_at_budget": stopped_at_budget || !unmeasured.is_empty(),
        "unmeasured": unmeasured,
        "seconds": start.elapsed().as_secs_f64(),
    });
    finish(&results, &args, settings, &sides)
}

/// The pairs' load in a few words (`busy both in 30, base alone in 2 of 39 pairs`); `None`
/// when no pair had a busy side.
fn busy_note(busy: &BusyPairs) -> Option<String> {
    let parts: Vec<String> = [
        ("both", busy.both()),
        ("base alone", busy.base_alone),
        ("candidate alone", busy.candidate_alone),
    ]
    .iter()
    .filter(|(_, n)| *n > 0)
    .map(|(what, n)| format!("{what} in {n}"))
    .collect();
    (!parts.is_empty()).then(|| format!("busy {}", parts.join(", ")))
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
    slot.get_or_insert_with(|| Provenance::of(report, &bin.display().to_string()));
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
        ["base", "candidate"][self as usize]
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Sides {
    /// The base and the candidate build, each running the entry.
    Builds,
    /// A command entry's `base` and `new` commands, timed in interleaved rounds by one process
    /// of the candidate build.
    Commands,
}

/// Each `[[run]]` of a suite as a suite of its own (the text a child process reads), with a
/// label (`2: matmul`) and what its sides are.
fn split_suite(name: &str, text: &str) -> Result<Vec<(String, String, Sides)>, CliError> {
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
            let sides = command_sides(run).map_err(|why| {
                CliError::Usage(format!(
                    "{name}: entry {} {why}: ab pairs two parbench builds, or a command \
                     entry's `commands = {{ base = [...], new = [...] }}`",
                    i + 1
                ))
            })?;
            let title = run
                .get(if sides == Sides::Commands {
                    "name"
                } else {
                    "scenario"
                })
                .and_then(toml::Value::as_str)
                .unwrap_or("?");
            let mut one = toml::Table::new();
            one.insert("run".into(), toml::Value::Array(vec![run.clone()]));
            let text = toml::to_string(&one)
                .map_err(|e| CliError::Usage(format!("{name}: entry {}: {e}", i + 1)))?;
            Ok((format!("{}: {title}", i + 1), text, sides))
        })
        .collect()
}

/// An entry's sides, or why `ab` cannot pair it: one command would run alike in both builds.
fn command_sides(run: &toml::Value) -> Result<Sides, String> {
    if run.get("command").is_some() {
        return Err("times one command, which both builds would run alike".into());
    }
    let Some(commands) = run.get("commands").and_then(toml::Value::as_table) else {
        return Ok(Sides::Builds);
    };
    let mut names: Vec<&str> = commands.keys().map(String::as_str).collect();
    names.sort_unstable();
    if names == ["base", "new"] {
        Ok(Sides::Commands)
    } else {
        Err(format!("times the commands {}", names.join(", ")))
    }
}

/// A command entry's report as one pair: its `base` command's time against its `new` one's,
/// each under the entry's name (`command[…] new vs base`).
fn command_pair(report: &Report) -> [Vec<Entry>; 2] {
    let times: Vec<Entry> = report
        .runs
        .iter()
        .flat_map(run_entries)
        .filter(|e| e.is_time)
        .collect();
    ["base", "new"].map(|command| {
        let suffix = format!(" {command}");
        times
            .iter()
            .filter_map(|e| {
                let key = e.name.strip_suffix(&suffix)?;
                Some(Entry {
                    name: format!("{key} new vs base"),
                    ..e.clone()
                })
            })
            .collect()
    })
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

enum SideError {
    /// It refused the entry as bad input (exit 2): a parameter or scenario it does not know.
    Refused(String),
    /// It could not be run, failed while running, or wrote no report.
    Failed(String),
    /// It was still running when the budget ran out, and was stopped.
    OutOfBudget,
}

/// One process of one side on one suite entry: its report, unless it is still running at `end`.
fn run_side(
    side: Side,
    bin: &Path,
    entry: &Path,
    samples: u64,
    label: &str,
    end: Instant,
) -> Result<Report, SideError> {
    let samples = samples.to_string();
    let mut command = Process::new(bin);
    command
        .arg("run")
        .arg(entry)
        .args(["--json", "--quiet", "--warmup", "1", "--min-time", "0"])
        .args(["--min-samples", &samples, "--max-samples", &samples]);
    let out = output_by(command, end)
        .map_err(|e| {
            SideError::Failed(format!(
                "cannot run the {} {}: {e}",
                side.name(),
                bin.display()
            ))
        })?
        .ok_or(SideError::OutOfBudget)?;
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

/// `command`'s output, or `None` when it was still running at `end` (it is killed then).
fn output_by(mut command: Process, end: Instant) -> std::io::Result<Option<Output>> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    fn drain(pipe: Option<impl Read>) -> Vec<u8> {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        bytes
    }
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    std::thread::scope(|scope| {
        // Both pipes read as they fill, so a chatty child never blocks on a full one.
        let stdout = scope.spawn(|| drain(stdout));
        let stderr = scope.spawn(|| drain(stderr));
        let status = loop {
            let status = match child.try_wait() {
                Ok(None) if Instant::now() < end => {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
                Ok(Some(status)) => break Ok(Some(status)),
                other => other,
            };
            let _ = child.kill();
            let _ = child.wait();
            break status;
        };
        let stdout = stdout.join().unwrap_or_default();
        let stderr = stderr.join().unwrap_or_default();
        Ok(status?.map(|status| Output {
            status,
            stdout,
            stderr,
        }))
    })
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
