//! Memory estimates, checked before anything is allocated: an absurd size must be an error
//! message, not an OOM kill halfway through a run.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Counts the bytes of a device's live tensor buffers, and the most that were live at once:
/// exact, since every buffer registers when it is created and unregisters when it is freed.
#[derive(Debug, Default)]
pub struct MemTracker {
    counts: Counts,
}

/// Aligned to its own pair of cache lines, apart from the handle's reference count: each op
/// clones the handle on the pushing thread while a worker registers the op's output here, and
/// on one line the two would take it from each other on every op.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Counts {
    live: AtomicU64,
    peak: AtomicU64,
}

impl MemTracker {
    /// Register `bytes`; they count as live until the returned guard is dropped. Takes the
    /// handle by value: an op moves the one it captured into the guard, rather than paying for
    /// a clone and a drop on a count the pushing thread also writes.
    pub fn track(self: Arc<Self>, bytes: u64) -> Allocation {
        self.add(bytes);
        Allocation {
            bytes,
            tracker: self,
        }
    }

    /// Count `bytes` as live until a matching [`sub`](Self::sub): for a holder that keeps
    /// the tracker itself (a tensor's buffer), where a guard would move the tracker's
    /// reference count on every store.
    pub fn add(&self, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let now = self.counts.live.fetch_add(bytes, Ordering::AcqRel) + bytes;
        self.counts.peak.fetch_max(now, Ordering::AcqRel);
    }

    /// Stop counting `bytes` that [`add`](Self::add) counted.
    pub fn sub(&self, bytes: u64) {
        if bytes != 0 {
            self.counts.live.fetch_sub(bytes, Ordering::AcqRel);
        }
    }

    /// Bytes live now.
    pub fn live(&self) -> u64 {
        self.counts.live.load(Ordering::Acquire)
    }

    /// The most bytes live at once since the last [`reset_peak`](Self::reset_peak).
    pub fn peak(&self) -> u64 {
        self.counts.peak.load(Ordering::Acquire)
    }

    /// Start a new peak from what is live now.
    pub fn reset_peak(&self) {
        self.counts.peak.store(self.live(), Ordering::Release);
    }
}

/// A registered buffer; dropping it unregisters the bytes.
#[derive(Debug)]
pub struct Allocation {
    bytes: u64,
    tracker: Arc<MemTracker>,
}

impl Drop for Allocation {
    fn drop(&mut self) {
        self.tracker.sub(self.bytes);
    }
}

use crate::units::human_bytes;

/// Memory the OS says it can give without swapping (`MemAvailable`), if known.
pub fn available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// A workload refused before anything is allocated; `what` names it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FitError {
    #[error("{what}: the estimated memory overflows a 64-bit byte count")]
    Overflow { what: String },
    #[error(
        "{what}: needs an estimated {} but only {} of memory is available",
        human_bytes(*needed),
        human_bytes(*available)
    )]
    TooLarge {
        what: String,
        needed: u64,
        available: u64,
    },
}

/// Fail when `bytes` (already estimated by the caller; `None` when the estimate overflowed)
/// exceeds 80% of `available`, so the run would swap or be killed.
pub fn check_fits(what: &str, bytes: Option<u64>, available: Option<u64>) -> Result<(), FitError> {
    let Some(bytes) = bytes else {
        return Err(FitError::Overflow { what: what.into() });
    };
    match available {
        Some(avail) if bytes as f64 > 0.8 * avail as f64 => Err(FitError::TooLarge {
            what: what.into(),
            needed: bytes,
            available: avail,
        }),
        _ => Ok(()),
    }
}

/// Bytes of `copies` f32 tensors of `elements` each, `None` on overflow.
pub fn f32_bytes(elements: u64, copies: u64) -> Option<u64> {
    elements.checked_mul(4)?.checked_mul(copies)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimates_are_checked_against_what_is_available() {
        assert!(check_fits("x", Some(100), Some(1000)).is_ok());
        let e = check_fits("matmul 100000x100000", Some(120 << 30), Some(16 << 30)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "matmul 100000x100000: needs an estimated 120.0 GiB but only 16.0 GiB of memory is available"
        );
        assert!(check_fits("x", None, Some(1))
            .unwrap_err()
            .to_string()
            .contains("overflows"));
        assert!(
            check_fits("x", Some(1 << 40), None).is_ok(),
            "unknown availability is not an error"
        );
    }

    #[test]
    fn the_tracker_counts_live_bytes_and_their_peak() {
        let t = Arc::new(MemTracker::default());
        let a = t.clone().track(100);
        let b = t.clone().track(50);
        assert_eq!((t.live(), t.peak()), (150, 150));
        drop(a);
        assert_eq!((t.live(), t.peak()), (50, 150));
        t.reset_peak();
        assert_eq!(t.peak(), 50);
        drop(b);
        assert_eq!(t.live(), 0);
    }

    #[test]
    fn byte_counts_overflow_to_none() {
        assert_eq!(f32_bytes(10, 3), Some(120));
        assert_eq!(f32_bytes(u64::MAX / 2, 3), None);
    }

    #[test]
    fn this_machine_reports_available_memory() {
        if std::path::Path::new("/proc/meminfo").exists() {
            assert!(available_bytes().is_some_and(|b| b > 0));
        }
    }
}
