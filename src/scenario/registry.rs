//! The scenarios a process knows: the chapter's, built in, then any a program embedding
//! parbench adds before its command line runs ([`add`]). A user's crate declares its own
//! [`Scenario`] and gets every command parbench has for it — `run`, `sweep`, `compare`, `ab`,
//! `history`, the exports — through the command line's `main_with_scenarios`
//! (`examples/own_scenario.rs`).

use std::sync::OnceLock;

use super::{
    allreduce, async_loop, cpu_gpu, data_parallel, deps, hybridize, matmul, memory, run_copy,
    Params, Scenario,
};

/// The chapter's scenarios, in the order `list` and `all` show them.
const BUILT_IN: &[&'static dyn Scenario] = &[
    &async_loop::AsyncLoop,
    &matmul::Matmul,
    &cpu_gpu::CpuGpu,
    &run_copy::RunCopy,
    &deps::Deps,
    &memory::Memory,
    &hybridize::Hybridize,
    &data_parallel::DataParallel,
    &allreduce::Allreduce,
];

static REGISTRY: OnceLock<Vec<&'static dyn Scenario>> = OnceLock::new();

/// Why scenarios could not be added.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RegistryError {
    #[error("scenarios are added once, before anything reads them")]
    AlreadyRead,
    #[error("a scenario named '{0}' is already known: each name must be new")]
    Duplicate(String),
    #[error("'{0}' is not a usable scenario name: use lowercase letters, digits and '-'")]
    BadName(String),
}

/// Add `extra` after the built-in scenarios, once, before anything reads the registry.
pub fn add(extra: &[&'static dyn Scenario]) -> Result<(), RegistryError> {
    let mut all = BUILT_IN.to_vec();
    for s in extra {
        let name = s.name();
        let usable = !name.is_empty()
            && !name.starts_with('-')
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !usable {
            return Err(RegistryError::BadName(name.to_string()));
        }
        if all.iter().any(|known| known.name() == name) {
            return Err(RegistryError::Duplicate(name.to_string()));
        }
        all.push(*s);
    }
    REGISTRY.set(all).map_err(|_| RegistryError::AlreadyRead)
}

/// Every scenario, in the order `list` shows them.
pub fn registry() -> &'static [&'static dyn Scenario] {
    REGISTRY.get_or_init(|| BUILT_IN.to_vec())
}

pub fn find(name: &str) -> Option<&'static dyn Scenario> {
    registry().iter().copied().find(|s| s.name() == name)
}

/// The parameters a run of scenario `name` records when none is given, in declaration order
/// (what a report written before a parameter existed is read as having run at); `None` for a
/// scenario this build does not have.
pub fn declared_defaults(name: &str) -> Option<serde_json::Map<String, serde_json::Value>> {
    let sc = find(name)?;
    Params::parse(name, sc.params(), &[])
        .ok()
        .map(|p| p.to_json())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_names_are_unique_and_findable() {
        let names: Vec<&str> = registry().iter().map(|s| s.name()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len());
        for n in names {
            assert_eq!(find(n).map(|s| s.name()), Some(n));
        }
        assert!(find("nope").is_none());
        // The unit tests share one process, whose registry is read already: a late addition
        // is refused, and a built-in name is refused before that.
        assert_eq!(
            add(&[&matmul::Matmul]),
            Err(RegistryError::Duplicate("matmul".into()))
        );
        assert_eq!(add(&[]), Err(RegistryError::AlreadyRead));
    }
}
