//! The command line as a user meets it: output contracts, exit codes, and bad input.
//!
//! A module per feature (`cargo test --test suite cli::`); what they share is in `util` and in
//! `tests/common`.

mod util;

mod ab;
mod ab_report;
mod allreduce;
mod book;
mod command;
mod compare;
mod compare_coverage;
mod data_parallel;
mod devices;
mod duplicates;
mod export;
mod export_formats;
mod gpu_memory;
mod history;
mod journal;
mod limits;
mod mpi_launch;
mod output;
mod own_scenario;
mod plot;
mod report_html;
mod result_schemas;
mod run;
mod scenarios;
mod stdout;
mod sweep;
mod usage;
