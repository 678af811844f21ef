//! The command line as a user meets it: output contracts, exit codes, and bad input.
//!
//! One test binary (`cargo test --test cli`), a module per feature; what they share is in
//! `util` and in `tests/common` (shared with the other test binaries).

#[path = "../common/mod.rs"]
mod common;
mod util;

mod ab;
mod book;
mod compare;
mod data_parallel;
mod devices;
mod export;
mod export_formats;
mod gpu_memory;
mod output;
mod plot;
mod report_html;
mod run;
mod scenarios;
mod stdout;
mod sweep;
mod usage;
