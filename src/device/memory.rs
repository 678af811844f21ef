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

/// What bounds the memory a run may take. A CI runner sets the last two: a container's
/// control group, or `ulimit -v`; an allocation beyond either aborts the process, so the
/// pre-run check takes the smallest of them all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// What the OS can give without swapping (`MemAvailable`).
    Available,
    /// The control group's limit (`memory.max`, cgroup v1's `memory.limit_in_bytes`) less
    /// what the group uses.
    Cgroup,
    /// The process's address-space limit (`ulimit -v`) less what it has mapped (`VmSize`).
    AddressSpace,
    GpuFree,
}

impl Bound {
    fn words(self) -> &'static str {
        match self {
            Bound::Available => "memory the OS has available (MemAvailable)",
            Bound::Cgroup => "memory the control group's limit leaves (memory.max)",
            Bound::AddressSpace => "address space the process's limit leaves (ulimit -v)",
            Bound::GpuFree => "GPU memory free",
        }
    }
}

/// Room for a workload: `bytes`, and what sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Room {
    pub bytes: u64,
    pub bound: Bound,
}

/// The host memory a run may take now: the smallest of what the OS has available, what the
/// control group's limit leaves and what the address-space limit leaves; `None` when none
/// is known.
pub fn host_room() -> Option<Room> {
    [
        (Bound::Available, proc_kib("/proc/meminfo", "MemAvailable:")),
        (Bound::Cgroup, cgroup_room()),
        (Bound::AddressSpace, address_space().map(|r| r.bytes)),
    ]
    .into_iter()
    .filter_map(|(bound, bytes)| {
        Some(Room {
            bytes: bytes?,
            bound,
        })
    })
    .min_by_key(|r| r.bytes)
}

/// [`host_room`]'s bytes.
pub fn available_bytes() -> Option<u64> {
    host_room().map(|r| r.bytes)
}

/// The value of `key` (`MemTotal:`, `VmSize:`) in the text of a `/proc` file such as
/// `meminfo` or `self/status`, in bytes: the file states kB, meaning KiB; `None` when the key
/// is missing, the value is not a number, the unit is another or the bytes overflow.
pub fn proc_bytes(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    let mut fields = line[key.len()..].split_whitespace();
    let value: u64 = fields.next()?.parse().ok()?;
    match fields.next() {
        None => Some(value),
        Some(unit) if unit.eq_ignore_ascii_case("kB") => value.checked_mul(1024),
        Some(_) => None,
    }
}

/// [`proc_bytes`] of the file at `path`.
fn proc_kib(path: &str, key: &str) -> Option<u64> {
    proc_bytes(&std::fs::read_to_string(path).ok()?, key)
}

/// The control group's limit less its use, v2 or v1, at the group's own path or at the
/// mount's root (a container sees its own group there); `None` when it sets no limit.
fn cgroup_room() -> Option<u64> {
    let groups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let read =
        |path: String| -> Option<u64> { std::fs::read_to_string(path).ok()?.trim().parse().ok() };
    for line in groups.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let files = match controllers {
            "" => ["/sys/fs/cgroup", "memory.max", "memory.current"],
            c if c.split(',').any(|c| c == "memory") => [
                "/sys/fs/cgroup/memory",
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
            ],
            _ => continue,
        };
        for dir in [format!("{}{path}", files[0]), files[0].to_string()] {
            // "max" (v2) does not parse: no limit; v1 writes its "none" as a huge number.
            if let (Some(limit), Some(used)) = (
                read(format!("{dir}/{}", files[1])),
                read(format!("{dir}/{}", files[2])),
            ) {
                if limit < 1 << 60 {
                    return Some(limit.saturating_sub(used));
                }
            }
        }
    }
    None
}

/// The room `ulimit -v` leaves: the limit less the address space already mapped; `None` when
/// unlimited. What reserves address space without using memory (a thread's stack) counts here
/// alone.
pub fn address_space() -> Option<Room> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max address space"))?;
    let soft: u64 = line.split_whitespace().nth(3)?.parse().ok()?;
    let mapped = proc_kib("/proc/self/status", "VmSize:").unwrap_or(0);
    Some(Room {
        bytes: soft.saturating_sub(mapped),
        bound: Bound::AddressSpace,
    })
}

/// A workload refused before anything is allocated; `what` names it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FitError {
    #[error("{what}: the estimated memory overflows a 64-bit byte count")]
    Overflow { what: String },
    #[error(
        "{what}: needs an estimated {}, more than 80% of the {} of {}",
        human_bytes(*needed),
        human_bytes(room.bytes),
        room.bound.words()
    )]
    TooLarge {
        what: String,
        needed: u64,
        room: Room,
    },
}

/// Fail when `bytes` (already estimated by the caller; `None` when the estimate overflowed)
/// exceeds 80% of `room`, so the run would swap, be killed or abort.
pub fn check_fits(what: &str, bytes: Option<u64>, room: Option<Room>) -> Result<(), FitError> {
    let Some(bytes) = bytes else {
        return Err(FitError::Overflow { what: what.into() });
    };
    match room {
        Some(room) if bytes as f64 > 0.8 * room.bytes as f64 => Err(FitError::TooLarge {
            what: what.into(),
            needed: bytes,
            room,
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
    fn estimates_overflow_to_none_and_are_checked_against_what_is_available() {
        let room = |bytes, bound| Some(Room { bytes, bound });
        assert!(check_fits("x", Some(100), room(1000, Bound::Available)).is_ok());
        let e = check_fits(
            "matmul 100000x100000",
            Some(120 << 30),
            room(16 << 30, Bound::Available),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "matmul 100000x100000: needs an estimated 120.0 GiB, more than 80% of the 16.0 GiB \
             of memory the OS has available (MemAvailable)"
        );
        // 80% is the rule: 13 GiB of 16 passes, 13 GiB of 16 under ulimit -v names it.
        assert!(check_fits("x", Some(12 << 30), room(16 << 30, Bound::Available)).is_ok());
        let e = check_fits("x", Some(13 << 30), room(16 << 30, Bound::AddressSpace));
        assert!(e.unwrap_err().to_string().ends_with(
            "more than 80% of the 16.0 GiB of address space the process's limit leaves \
                 (ulimit -v)"
        ));
        assert!(check_fits("x", None, room(1, Bound::Cgroup))
            .unwrap_err()
            .to_string()
            .contains("overflows"));
        assert!(
            check_fits("x", Some(1 << 40), None).is_ok(),
            "unknown availability is not an error"
        );
        assert_eq!(f32_bytes(10, 3), Some(120));
        assert_eq!(f32_bytes(u64::MAX / 2, 3), None);
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
    fn this_machine_reports_available_memory() {
        if std::path::Path::new("/proc/meminfo").exists() {
            assert!(available_bytes().is_some_and(|b| b > 0));
        }
    }
}
