//! Refusing a run that `mpirun -n 2` started twice: a scenario that does not span ranks would
//! run in every rank, each writing the same output and printing the same table, and the job
//! would still exit 0. One line says what to do instead.

use super::error::CliError;
use crate::distributed::launch::job;

/// Start MPI where something planned spans ranks (`distributed`); where nothing does, refuse
/// when this process is one of several an MPI launcher started, with the usage error for
/// running `scenarios` in that job.
pub(super) fn start(distributed: bool, scenarios: &[&str], sweep: bool) -> Result<(), CliError> {
    if distributed {
        crate::distributed::init()?;
        return Ok(());
    }
    let Some(job) = job() else {
        return Ok(());
    };
    let of = match (job.rank, job.size) {
        (Some(r), Some(s)) => format!("rank {r} of {s}"),
        (Some(r), None) => format!("rank {r}"),
        (None, _) => "one rank".into(),
    };
    let mut names: Vec<&str> = Vec::new();
    for s in scenarios {
        if !names.contains(s) {
            names.push(s);
        }
    }
    let verb = if names.len() == 1 { "runs" } else { "run" };
    let what = if sweep {
        format!("sweep {}", names.join(", "))
    } else {
        names.join(", ")
    };
    let hint = if !sweep && scenarios.contains(&"data-parallel") {
        "add --backend mpi to train across the ranks, or run one process without mpirun"
    } else {
        "run one process, without mpirun"
    };
    Err(CliError::Usage(format!(
        "this process is {of} of an MPI job ({}), but {what} {verb} in one process: every rank \
         would run it and write the same output; {hint}",
        job.evidence
    )))
}
