//! The machine under the measurements: what it can do (its limits, measured by parbench
//! itself once per process) and what else it was doing while a run ran (its state), so a
//! report can say how close a figure came to the hardware and whether the machine was fit to
//! measure on.
//!
//! The limits: [`limits()`] measures them once per process ([`Limits`]), from the probes of
//! [`fma`] (the f32 FMA peak on the widest vector unit), [`clock`] (a dependent `imul` chain),
//! [`memory`] (STREAM copy and triad), [`line`](mod@line) (a cache line between two cores) and
//! [`channel`] (a closure handed to another thread through a channel). The all-core probes run
//! a [`team`] of threads pinned one per CPU ([`affinity`]). The state: [`state`] records a
//! run's CPU counters and runnable tasks, and [`busy`] judges them. [`drift`] lists the limits
//! as figures whose moves `report::identity` judges against their spread.

pub mod affinity;
pub mod busy;
pub mod cache;
pub mod channel;
pub mod clock;
pub mod drift;
pub mod fma;
pub mod limits;
pub mod line;
pub mod memory;
pub mod probe;
pub mod state;
pub mod team;
pub mod thresholds;
pub mod timed;
mod words;

pub use busy::{BusyReason, LimitsMeasuredSlow};
pub use channel::ChannelHandoff;
pub use clock::Clock;
pub use fma::{FmaPeak, VectorUnit};
pub use limits::{limits, Budget, Limits};
pub use line::LineLatency;
pub use memory::{Bandwidth, StreamRate};
pub use probe::Probe;
pub use state::{Recording, RunState};
