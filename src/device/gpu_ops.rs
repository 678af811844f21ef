//! How a GPU op is issued: three ways to make each op cheaper, switched on or off with
//! `PARBENCH_GPU_OPS` so that each is measured against the plain path before it is trusted
//! (`scripts/gpu-check.sh --switch-rounds`).
//!
//! - `caching-allocator`: compute-stream buffers go back to a cache of the device's own when
//!   freed, by size class, and are reused on the same stream (PyTorch's caching allocator)
//!   instead of a `cuMemFreeAsync` and a `cuMemAllocFromPoolAsync` per op;
//! - `lazy-ready-events`: an output's ready event is recorded when a reader on another stream
//!   or on the host first needs it, not after every write;
//! - `one-bind`: the context is bound once, at the op's start; the allocation and the launch
//!   inside the op do not ask the driver again (the launch goes straight to `cuLaunchKernel`).
//!
//! The value is a comma-separated list of the switches to turn on (the others are off),
//! `none` or `all`; unset or empty, [`GpuOps::DEFAULT`] applies: the caching allocator alone.

use std::fmt;
use std::str::FromStr;

/// Which of the cheaper ways of issuing a GPU op are on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuOps {
    pub caching_allocator: bool,
    pub lazy_ready_events: bool,
    pub one_bind: bool,
}

/// One switch's name, as `PARBENCH_GPU_OPS` spells it.
const CACHING_ALLOCATOR: &str = "caching-allocator";
const LAZY_READY_EVENTS: &str = "lazy-ready-events";
const ONE_BIND: &str = "one-bind";

impl GpuOps {
    /// The environment variable that selects the switches.
    pub const ENV: &'static str = "PARBENCH_GPU_OPS";

    /// Every switch off: the plain path.
    pub const NONE: GpuOps = GpuOps {
        caching_allocator: false,
        lazy_ready_events: false,
        one_bind: false,
    };

    /// Every switch on.
    pub const ALL: GpuOps = GpuOps {
        caching_allocator: true,
        lazy_ready_events: true,
        one_bind: true,
    };

    /// What applies when `PARBENCH_GPU_OPS` is unset or empty: the switches that won their
    /// measurement. On an H200 (`results/gpu/README.md`, five interleaved rounds) the caching
    /// allocator cut the synchronous loop's op from 18.4 to 12.8 µs, winning every round by
    /// more than the spread; ready events recorded lazily and one bind per op won 2 and 1
    /// rounds of 5 on their own, so they stay off.
    pub const DEFAULT: GpuOps = GpuOps {
        caching_allocator: true,
        lazy_ready_events: false,
        one_bind: false,
    };

    /// This process's setting.
    pub fn from_env() -> Result<GpuOps, UnknownGpuOp> {
        match std::env::var(Self::ENV) {
            Ok(v) => v.parse(),
            Err(std::env::VarError::NotPresent) => Ok(Self::DEFAULT),
            Err(std::env::VarError::NotUnicode(v)) => {
                Err(UnknownGpuOp(v.to_string_lossy().into_owned()))
            }
        }
    }

    fn switches(self) -> [(&'static str, bool); 3] {
        [
            (CACHING_ALLOCATOR, self.caching_allocator),
            (LAZY_READY_EVENTS, self.lazy_ready_events),
            (ONE_BIND, self.one_bind),
        ]
    }
}

impl Default for GpuOps {
    fn default() -> GpuOps {
        GpuOps::DEFAULT
    }
}

/// A word of `PARBENCH_GPU_OPS` that names no switch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "PARBENCH_GPU_OPS names '{0}', which is no switch (expected a comma-separated list of \
     caching-allocator, lazy-ready-events and one-bind, or none, or all)"
)]
pub struct UnknownGpuOp(pub String);

impl FromStr for GpuOps {
    type Err = UnknownGpuOp;

    /// `caching-allocator,one-bind`, `none`, `all`, in any case; empty is the default.
    fn from_str(s: &str) -> Result<GpuOps, UnknownGpuOp> {
        if s.trim().is_empty() {
            return Ok(GpuOps::DEFAULT);
        }
        let mut ops = GpuOps::NONE;
        for word in s.split(',').map(str::trim) {
            match word.to_ascii_lowercase().as_str() {
                "none" => {}
                "all" => ops = GpuOps::ALL,
                CACHING_ALLOCATOR => ops.caching_allocator = true,
                LAZY_READY_EVENTS => ops.lazy_ready_events = true,
                ONE_BIND => ops.one_bind = true,
                _ => return Err(UnknownGpuOp(word.to_string())),
            }
        }
        Ok(ops)
    }
}

impl fmt::Display for GpuOps {
    /// The switches that are on, comma-separated, or `none`: a value `from_str` reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let on: Vec<&str> = self
            .switches()
            .iter()
            .filter(|(_, on)| *on)
            .map(|(name, _)| *name)
            .collect();
        if on.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&on.join(","))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_in_any_case_and_print_back() {
        let ops: GpuOps = " Caching-Allocator , one-bind".parse().unwrap();
        assert!(ops.caching_allocator && ops.one_bind && !ops.lazy_ready_events);
        assert_eq!(ops.to_string(), "caching-allocator,one-bind");
        assert_eq!(ops.to_string().parse(), Ok(ops));
        assert_eq!("none".parse(), Ok(GpuOps::NONE));
        assert_eq!("all".parse(), Ok(GpuOps::ALL));
        assert_eq!("".parse(), Ok(GpuOps::DEFAULT));
        assert_eq!(GpuOps::NONE.to_string(), "none");
        assert_eq!(
            GpuOps::ALL.to_string(),
            "caching-allocator,lazy-ready-events,one-bind"
        );
    }

    #[test]
    fn an_unknown_word_is_named_in_one_line() {
        let err = "caching-allocator,fast".parse::<GpuOps>().unwrap_err();
        assert_eq!(err, UnknownGpuOp("fast".into()));
        let text = err.to_string();
        assert!(
            text.contains("'fast'") && text.contains(GpuOps::ENV),
            "{text}"
        );
        assert!(!text.contains('\n'));
        assert!("caching-allocator,,one-bind".parse::<GpuOps>().is_err());
    }
}
