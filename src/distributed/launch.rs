//! Whether this process is one of several started by an MPI launcher (`mpirun -n 2`), read
//! from the variables launchers set, without starting MPI: a build without the `mpi` feature
//! reads them too. A scenario that does not span ranks, run under `mpirun -n 2`, would run
//! twice, each copy writing the same output; the CLI refuses that.

/// Variables holding the job's size: OpenMPI's, PMI's (MPICH's Hydra, Slurm), MPICH's
/// ranks on this host.
const SIZE_VARS: [&str; 3] = ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MPI_LOCALNRANKS"];
/// Variables holding this process's rank: OpenMPI's, PMIx's, PMI's, MPICH's on this host.
const RANK_VARS: [&str; 4] = [
    "OMPI_COMM_WORLD_RANK",
    "PMIX_RANK",
    "PMI_RANK",
    "MPI_LOCALRANKID",
];

/// A job of several processes this one belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// The variable that told, as `NAME=value`.
    pub evidence: String,
    /// This process's rank, when a variable says.
    pub rank: Option<usize>,
    /// The job's size, when a variable says.
    pub size: Option<usize>,
}

/// The job of several processes the launcher variables `get` reads describe: `None` for a
/// process on its own (no variable, or a job of one).
pub fn job_of(get: impl Fn(&str) -> Option<String>) -> Option<Job> {
    let read = |vars: &[&'static str]| {
        vars.iter().find_map(|k| {
            let v = get(k)?;
            let n = v.trim().parse::<usize>().ok()?;
            Some((format!("{k}={}", v.trim()), n))
        })
    };
    let size = read(&SIZE_VARS);
    let rank = read(&RANK_VARS);
    let evidence = match (&size, &rank) {
        (Some((e, n)), _) if *n > 1 => e.clone(),
        (_, Some((e, r))) if *r >= 1 => e.clone(),
        _ => return None,
    };
    Some(Job {
        evidence,
        rank: rank.map(|r| r.1),
        size: size.map(|s| s.1),
    })
}

/// [`job_of`] this process's environment.
pub fn job() -> Option<Job> {
    job_of(|k| std::env::var(k).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| (*v).to_string())
        }
    }

    #[test]
    fn a_launched_job_of_two_is_found_by_any_launchers_variables() {
        let two = job_of(env(&[
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("OMPI_COMM_WORLD_RANK", "0"),
        ]))
        .expect("a job");
        assert_eq!(two.size, Some(2));
        assert_eq!(two.rank, Some(0));
        assert_eq!(two.evidence, "OMPI_COMM_WORLD_SIZE=2");
        assert!(job_of(env(&[("PMI_SIZE", "4")])).is_some());
        assert!(job_of(env(&[("MPI_LOCALNRANKS", "3")])).is_some());
        // Rank 1 of a job whose size no variable gives.
        assert_eq!(
            job_of(env(&[("PMIX_RANK", "1")])).map(|j| j.evidence),
            Some("PMIX_RANK=1".into())
        );
    }

    #[test]
    fn a_process_on_its_own_or_a_job_of_one_is_no_job() {
        assert_eq!(job_of(env(&[])), None);
        assert_eq!(
            job_of(env(&[
                ("OMPI_COMM_WORLD_SIZE", "1"),
                ("OMPI_COMM_WORLD_RANK", "0")
            ])),
            None
        );
        assert_eq!(job_of(env(&[("PMIX_RANK", "0")])), None);
        assert_eq!(job_of(env(&[("PMI_SIZE", "many")])), None);
    }
}
