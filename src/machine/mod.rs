//! The machine under the measurements: what it can do (its limits, measured by parbench
//! itself once per process) and what else it was doing while a run ran (its state), so a
//! report can say how close a figure came to the hardware and whether the machine was fit to
//! measure on.

pub mod busy;
pub mod state;

pub use busy::BusyReason;
pub use state::{Recording, RunState};
